package site

import (
	"context"
	"io/fs"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mq-hpc/mq/internal/site/batch"
	"github.com/mq-hpc/mq/protocol"
)

// Processes is a local site: placeholders are agent processes on this
// machine, children of the CLS. They start at once, so they are never
// queued.
type Processes struct {
	// Command returns a placeholder's command line.
	Command func() *exec.Cmd
	// Exited, if set, is told the pid of a placeholder that ended, so its
	// jobs are requeued at once.
	Exited func(pid int)
	// Orphans, if set, returns the pids of this site's placeholders that
	// an earlier CLS started and that still run (agents finishing their
	// jobs after it was killed). They hold their cores, memory and GPUs
	// until they end, so List counts them: the site starts no more than
	// its --max beside them.
	Orphans func() []int

	mu    sync.Mutex
	procs map[int]*exec.Cmd
	wg    sync.WaitGroup
	left  bool // Leave was called: exits are no longer told
}

var _ Site = (*Processes)(nil)

// Retarget makes placeholders started from now on run as next's do
// (cls site set changed their slots, walltime or idle timeout); the
// running ones go on, still watched here. It reports whether next is a
// local site too.
func (p *Processes) Retarget(next Site) bool {
	n, ok := next.(*Processes)
	if !ok {
		return false
	}
	p.mu.Lock()
	p.Command = n.Command
	p.mu.Unlock()
	return true
}

// Submit starts n placeholder processes.
func (p *Processes) Submit(_ context.Context, n int) ([]string, error) {
	var ids []string
	p.mu.Lock()
	command := p.Command
	p.mu.Unlock()
	for range n {
		cmd := command()
		// A session of its own, not just a process group: when the CLS
		// dies, a group left in the CLS's session without a parent there
		// is sent SIGHUP by the kernel if a member is stopped (SIGSTOP),
		// and the placeholder must outlive its CLS (Leave) even then.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			return ids, err
		}
		pid := cmd.Process.Pid
		p.mu.Lock()
		if p.procs == nil {
			p.procs = map[int]*exec.Cmd{}
		}
		p.procs[pid] = cmd
		p.mu.Unlock()
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			cmd.Wait()
			p.mu.Lock()
			delete(p.procs, pid)
			left := p.left
			p.mu.Unlock()
			if p.Exited != nil && !left {
				p.Exited(pid)
			}
		}()
		ids = append(ids, strconv.Itoa(pid))
	}
	return ids, nil
}

// List returns the placeholders alive, all running: its own and the
// orphans.
func (p *Processes) List(context.Context) ([]batch.Placeholder, error) {
	var orphans []int
	if p.Orphans != nil {
		orphans = p.Orphans()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var ps []batch.Placeholder
	for pid := range p.procs {
		ps = append(ps, batch.Placeholder{ID: strconv.Itoa(pid), State: batch.Running})
	}
	for _, pid := range orphans {
		if _, ok := p.procs[pid]; !ok {
			ps = append(ps, batch.Placeholder{ID: strconv.Itoa(pid), State: batch.Running})
		}
	}
	return ps, nil
}

// AgentOrphans returns what Processes.Orphans asks for: the pids of the
// processes in proc (a /proc) of user uid that run a local placeholder
// of site name writing to out, as the CLS starts them (their command line
// holds "agent", "--site NAME" and "--out OUT"). Only a CLS before this
// one leaves such agents, so proc is scanned whole once, at the first
// call; later calls look again only at the pids found then, keeping those
// that still run the agent. Another user's process is never counted,
// whatever its command line says.
func AgentOrphans(proc fs.FS, uid int, name, out string) func() []int {
	var (
		mu      sync.Mutex
		pids    []int
		scanned bool
	)
	return func() []int {
		mu.Lock()
		defer mu.Unlock()
		if !scanned {
			scanned = true
			ents, err := fs.ReadDir(proc, ".")
			if err != nil {
				return nil
			}
			for _, e := range ents {
				if pid, err := strconv.Atoi(e.Name()); err == nil {
					pids = append(pids, pid)
				}
			}
		}
		pids = slices.DeleteFunc(pids, func(pid int) bool { return !isAgent(proc, pid, uid, name, out) })
		return slices.Clone(pids)
	}
}

// isAgent says whether process pid in proc is user uid's local
// placeholder of site name writing to out.
func isAgent(proc fs.FS, pid, uid int, name, out string) bool {
	dir := strconv.Itoa(pid)
	fi, err := fs.Stat(proc, dir)
	if err != nil {
		return false // gone meanwhile
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != uid {
		return false
	}
	b, err := fs.ReadFile(proc, dir+"/cmdline")
	if err != nil {
		return false
	}
	args := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
	return len(args) > 1 && args[1] == "agent" && flagValue(args, "--site") == name && flagValue(args, "--out") == out
}

// flagValue is the argument after flag in args ("" when absent).
func flagValue(args []string, flag string) string {
	if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// Cancel stops placeholders, its own children with protocol.CLSStopSignal
// and orphans with SIGTERM: they kill their jobs and report them
// interrupted (requeued). Orphans are signalled by pid, found again first,
// so a pid reused since List is left alone.
func (p *Processes) Cancel(_ context.Context, ids []string) error {
	var orphans []int
	if p.Orphans != nil {
		orphans = p.Orphans()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range ids {
		pid, _ := strconv.Atoi(id)
		if c, ok := p.procs[pid]; ok {
			c.Process.Signal(protocol.CLSStopSignal)
		} else if slices.Contains(orphans, pid) {
			syscall.Kill(pid, syscall.SIGTERM)
		}
	}
	return nil
}

// Close stops every placeholder and waits (up to 5 s, then kills). They
// are sent protocol.CLSStopSignal, not SIGTERM: the CLS is stopping, and
// the jobs they stop run again without the attempt counted.
func (p *Processes) Close() error {
	p.mu.Lock()
	for _, c := range p.procs {
		c.Process.Signal(protocol.CLSStopSignal)
	}
	p.mu.Unlock()
	done := make(chan struct{})
	go func() {
		p.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		p.mu.Lock()
		for _, c := range p.procs {
			c.Process.Kill()
		}
		p.mu.Unlock()
		<-done
	}
	return nil
}

// Leave lets the placeholders run on without this site: they are not
// signalled, and their exits are no longer told (the CLS that would requeue
// their jobs is stopping). Each runs in a session of its own (so even a
// stopped one is sent no SIGHUP), writes to a file (not a pipe through
// the CLS) and reads nothing, so the CLS's exit does not end it: it
// finishes its jobs, takes no more (--orphan-exit) and reports them to the
// next CLS on this home, as after the CLS is killed (cls stop
// --keep-running).
func (p *Processes) Leave() {
	p.mu.Lock()
	p.left = true
	p.mu.Unlock()
}
