// Package memlimit enforces jobs' memory requests on a placeholder's
// host: a cgroup v2 of the job's own where the agent may make one, else a
// watchdog of the job's process group's resident memory.
package memlimit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mq-hpc/mq/internal/resource"
	"golang.org/x/sys/unix"
)

// A Limiter enforces jobs' memory requests.
type Limiter interface {
	// Prepare readies a limit of limit bytes for a job about to start;
	// it may change attr, the job's SysProcAttr, so the process starts
	// already limited.
	Prepare(attr *syscall.SysProcAttr, limit int64) (Watch, error)
}

// A Watch enforces one job's limit.
type Watch interface {
	// Watch watches the started job's process group until ctx ends or
	// the group goes over its limit. In the second case it kills the
	// group and returns why, and true: "max RSS 9.1 GiB over its
	// request of 8 GiB" from the watchdog, "memory reached its request
	// of 8 GiB (killed by the kernel)" from a cgroup.
	Watch(ctx context.Context, pgid int) (reason string, killed bool)
	// Peak is the most memory the job's processes held at once, as far
	// as the watch saw (0: not known); read it after Watch returned, and
	// before Close. The job's rusage knows only its largest process, and
	// none killed unreaped.
	Peak() int64
	// Close releases what Prepare took; call it after the job was reaped.
	Close() error
}

// New returns the cgroup v2 limiter when the agent may create
// child cgroups with the memory controller, else the RSS watchdog, and
// says which.
func New() (Limiter, string) {
	c, err := NewCgroup("/sys/fs/cgroup", "/proc/self/cgroup")
	if err != nil {
		return &Watchdog{}, "RSS watchdog (" + err.Error() + ")"
	}
	return c, "cgroup v2 " + c.dir
}

func overReason(rss, limit int64) string {
	r, l := resource.FormatMem(rss), resource.FormatMem(limit)
	if r == l { // rounded alike: the bytes say which is more
		r, l = fmt.Sprintf("%s (%d bytes)", r, rss), fmt.Sprintf("%s (%d bytes)", l, limit)
	}
	return fmt.Sprintf("max RSS %s over its request of %s", r, l)
}

// A Watchdog samples the resident memory of a job's process group and
// kills the group when the sum goes over the limit. One scan of /proc
// serves every job it watches within half an interval: a placeholder
// running many jobs reads each process's stat once a sample, not once
// per job.
type Watchdog struct {
	Interval time.Duration // between samples; default 250ms
	Grace    time.Duration // between SIGTERM and SIGKILL; default 5s
	Proc     string        // procfs; default "/proc"

	mu      sync.Mutex
	scanned time.Time
	rss     map[int]int64 // bytes by process group, as of scanned
}

// groupRSS is the resident memory of process group pgid, from a scan of
// /proc at most half an interval old.
func (w *Watchdog) groupRSS(pgid int, every time.Duration) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.rss == nil || time.Since(w.scanned) >= every/2 {
		w.rss, w.scanned = allGroupsRSS(w.proc()), time.Now()
	}
	return w.rss[pgid]
}

// allGroupsRSS sums the resident memory of live processes by process
// group.
func allGroupsRSS(proc string) map[int]int64 {
	m := map[int]int64{}
	page := int64(os.Getpagesize())
	eachProc(proc, func(pgid int, _ byte, rssPages int64) { m[pgid] += rssPages * page })
	return m
}

func (w *Watchdog) Prepare(_ *syscall.SysProcAttr, limit int64) (Watch, error) {
	return &rssWatch{w: w, limit: limit}, nil
}

type rssWatch struct {
	w     *Watchdog
	limit int64
	peak  atomic.Int64
}

func (r *rssWatch) Close() error { return nil }

func (r *rssWatch) Peak() int64 { return r.peak.Load() }

func (r *rssWatch) Watch(ctx context.Context, pgid int) (string, bool) {
	every := cmpOr(r.w.Interval, 250*time.Millisecond)
	tick := time.NewTicker(every)
	defer tick.Stop()
	var peak int64
	for {
		peak = max(peak, r.w.groupRSS(pgid, every))
		r.peak.Store(peak)
		if peak > r.limit {
			killGroup(ctx, r.w.proc(), pgid, cmpOr(r.w.Grace, 5*time.Second), every)
			return overReason(peak, r.limit), true
		}
		select {
		case <-ctx.Done():
			return "", false
		case <-tick.C:
		}
	}
}

func (w *Watchdog) proc() string { return cmpOr(w.Proc, "/proc") }

// killGroup sends SIGTERM to the group and SIGKILL after grace if any
// member is still alive.
func killGroup(ctx context.Context, proc string, pgid int, grace, every time.Duration) {
	syscall.Kill(-pgid, syscall.SIGTERM)
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	tick := time.NewTicker(min(every, grace))
	defer tick.Stop()
	for {
		if n, _ := groupAlive(proc, pgid); n == 0 {
			return
		}
		select {
		case <-deadline.C:
			syscall.Kill(-pgid, syscall.SIGKILL)
			return
		case <-ctx.Done():
			syscall.Kill(-pgid, syscall.SIGKILL)
			return
		case <-tick.C:
		}
	}
}

// GroupRSS returns the summed resident memory, in bytes, of the live
// members of process group pgid, from each /proc/PID/stat.
func GroupRSS(proc string, pgid int) (int64, error) {
	var sum int64
	err := eachMember(proc, pgid, func(state byte, rssPages int64) {
		sum += rssPages
	})
	return sum * int64(os.Getpagesize()), err
}

func groupAlive(proc string, pgid int) (int, error) {
	n := 0
	err := eachMember(proc, pgid, func(byte, int64) { n++ })
	return n, err
}

// eachMember calls f for each process of group pgid that is not a zombie.
func eachMember(proc string, pgid int, f func(state byte, rssPages int64)) error {
	return eachProc(proc, func(g int, state byte, rssPages int64) {
		if g == pgid {
			f(state, rssPages)
		}
	})
}

// eachProc calls f for each process that is not a zombie, with its
// process group.
func eachProc(proc string, f func(pgid int, state byte, rssPages int64)) error {
	ents, err := os.ReadDir(proc)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if c := e.Name()[0]; c < '0' || c > '9' {
			continue
		}
		b, err := os.ReadFile(filepath.Join(proc, e.Name(), "stat"))
		if err != nil {
			continue // gone
		}
		// pid (comm) state ppid pgrp ... : comm may hold spaces and
		// parentheses, so fields are counted after the last ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(b[i+1:]))
		if len(fields) < 22 {
			continue
		}
		g, err := strconv.Atoi(fields[2])
		if err != nil {
			continue
		}
		state := fields[0][0]
		if state == 'Z' || state == 'X' {
			continue
		}
		rss, _ := strconv.ParseInt(fields[21], 10, 64)
		f(g, state, rss)
	}
	return nil
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// A Cgroup starts each limited job in a child cgroup v2 of the
// agent's own, with memory.max set to the request, swap off and
// memory.oom.group set, so the kernel kills the job's processes, all of
// them, when it goes over. The agent must have moved itself out of its
// cgroup first (a cgroup v2 with children may hold no processes), which
// NewCgroup does: it moves the agent into a leaf "agent" child.
type Cgroup struct {
	dir  string
	Poll time.Duration // memory.events is read this often; default 250ms
}

// NewCgroup checks that the agent's cgroup v2 (found from
// selfCgroup under root) is writable and offers the memory controller,
// and sets it up for job children. Any failure leaves the agent where it
// was and is an error: use the Watchdog.
func NewCgroup(root, selfCgroup string) (*Cgroup, error) {
	b, err := os.ReadFile(selfCgroup)
	if err != nil {
		return nil, err
	}
	rel := ""
	found := false
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			rel, found = p, true
		}
	}
	if !found {
		return nil, errors.New("no cgroup v2")
	}
	dir := filepath.Join(root, filepath.Clean("/"+rel))
	ctrl, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return nil, fmt.Errorf("no cgroup v2 at %s", dir)
	}
	if !strings.Contains(" "+string(bytes.TrimSpace(ctrl))+" ", " memory ") {
		return nil, fmt.Errorf("cgroup %s has no memory controller", dir)
	}
	if err := unix.Access(dir, unix.W_OK); err != nil {
		return nil, fmt.Errorf("cgroup %s not writable", dir)
	}
	leaf := filepath.Join(dir, "agent")
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		os.Remove(leaf)
		return nil, fmt.Errorf("moving the agent to %s: %w", leaf, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+memory"), 0); err != nil {
		// Typically EBUSY: another process (the CLS, for its local
		// placeholders) lives in dir, and a cgroup with processes may
		// not give its children controllers. Back where it was.
		os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0)
		os.Remove(leaf) // fails, harmlessly, while other agents share it
		return nil, fmt.Errorf("enabling memory in %s: %w", dir, err)
	}
	return &Cgroup{dir: dir}, nil
}

func (c *Cgroup) Prepare(attr *syscall.SysProcAttr, limit int64) (Watch, error) {
	dir, err := os.MkdirTemp(c.dir, "job-")
	if err != nil {
		return nil, err
	}
	set := func(file, val string) error {
		return os.WriteFile(filepath.Join(dir, file), []byte(val), 0)
	}
	if err := set("memory.max", strconv.FormatInt(limit, 10)); err != nil {
		os.Remove(dir)
		return nil, err
	}
	set("memory.swap.max", "0") // absent without swap accounting
	set("memory.oom.group", "1")
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		os.Remove(dir)
		return nil, err
	}
	attr.UseCgroupFD, attr.CgroupFD = true, fd
	return &cgroupWatch{dir: dir, fd: fd, limit: limit, poll: cmpOr(c.Poll, 250*time.Millisecond)}, nil
}

type cgroupWatch struct {
	dir   string
	fd    int
	limit int64
	poll  time.Duration
}

func (w *cgroupWatch) Watch(ctx context.Context, pgid int) (string, bool) {
	tick := time.NewTicker(w.poll)
	defer tick.Stop()
	for {
		if w.oomKills() > 0 {
			// The kernel held the job at its limit, so there is no
			// figure over it to give.
			return fmt.Sprintf("memory reached its request of %s (killed by the kernel)", resource.FormatMem(w.limit)), true
		}
		select {
		case <-ctx.Done():
			// The job has ended (or the agent stops): if the kernel
			// killed it since the last look, that is why it ended.
			if w.oomKills() > 0 {
				return fmt.Sprintf("memory reached its request of %s (killed by the kernel)", resource.FormatMem(w.limit)), true
			}
			return "", false
		case <-tick.C:
		}
	}
}

func (w *cgroupWatch) oomKills() int {
	b, _ := os.ReadFile(filepath.Join(w.dir, "memory.events"))
	for _, line := range strings.Split(string(b), "\n") {
		if n, ok := strings.CutPrefix(line, "oom_kill "); ok {
			k, _ := strconv.Atoi(n)
			return k
		}
	}
	return 0
}

// Peak reads the cgroup's memory.peak (Linux 5.19 and later; 0 before).
func (w *cgroupWatch) Peak() int64 {
	b, err := os.ReadFile(filepath.Join(w.dir, "memory.peak"))
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

func (w *cgroupWatch) Close() error {
	unix.Close(w.fd)
	if !w.killRest() {
		return os.Remove(w.dir)
	}
	// SIGKILL is sent; the cgroup empties as the processes exit.
	var err error
	for range 20 {
		if err = os.Remove(w.dir); !errors.Is(err, unix.EBUSY) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}

// killRest kills what the job left in its cgroup (processes that escaped
// its process group) with cgroup.kill (Linux 5.14 and later), and says
// whether it could.
func (w *cgroupWatch) killRest() bool {
	f, err := os.OpenFile(filepath.Join(w.dir, "cgroup.kill"), os.O_WRONLY, 0)
	if err != nil {
		return false
	}
	_, err = f.WriteString("1")
	return f.Close() == nil && err == nil
}
