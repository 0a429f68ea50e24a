package memlimit

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/placeholder/memlimit/memhog"
	"github.com/mq-hpc/mq/internal/resource"
)

// TestHelperMemHog is not a test: the tests below run it as a child
// process (memhog).
func TestHelperMemHog(t *testing.T) { memhog.Run() }

// startGroup starts the helper in its own process group.
func startGroup(t *testing.T, mib string, extraEnv ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperMemHog$")
	cmd.Env = append(os.Environ(), append([]string{"MQ_TEST_HOG_MIB=" + mib}, extraEnv...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	return cmd
}

func TestWatchdogKillsOnlyTheGroupOver(t *testing.T) {
	for _, term := range []string{"", "ignore"} {
		t.Run("sigterm="+term, func(t *testing.T) {
			neighbour := startGroup(t, "16")
			hog := startGroup(t, "512", "MQ_TEST_HOG_TERM="+term)
			limit := 64 * resource.MiB
			w := &Watchdog{Interval: 20 * time.Millisecond, Grace: 300 * time.Millisecond}
			mw, err := w.Prepare(&syscall.SysProcAttr{}, limit)
			if err != nil {
				t.Fatal(err)
			}
			defer mw.Close()

			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			reason, killed := mw.Watch(ctx, hog.Process.Pid)
			if !killed {
				t.Fatalf("not killed before the deadline")
			}
			if !regexp.MustCompile(`^max RSS \d+(\.\d)? MiB( \(\d+ bytes\))? over its request of 64 MiB( \(67108864 bytes\))?$`).MatchString(reason) {
				t.Errorf("reason %q", reason)
			}
			err = hog.Wait()
			ws, _ := hog.ProcessState.Sys().(syscall.WaitStatus)
			want := syscall.SIGTERM
			if term == "ignore" {
				want = syscall.SIGKILL
			}
			if err == nil || !ws.Signaled() || ws.Signal() != want {
				t.Errorf("hog ended with %v; want killed by %v", err, want)
			}
			if err := neighbour.Process.Signal(syscall.Signal(0)); err != nil {
				t.Errorf("neighbour is gone: %v", err)
			}
			if rss, _ := GroupRSS("/proc", neighbour.Process.Pid); rss == 0 {
				t.Errorf("neighbour's group has no live member")
			}
		})
	}
}

func TestWatchdogStopsWithContext(t *testing.T) {
	job := startGroup(t, "8")
	w := &Watchdog{Interval: 10 * time.Millisecond}
	mw, _ := w.Prepare(nil, resource.GiB)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan bool)
	go func() {
		_, killed := mw.Watch(ctx, job.Process.Pid)
		done <- killed
	}()
	cancel()
	select {
	case killed := <-done:
		if killed {
			t.Error("killed a job under its limit")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Watch did not return when its context ended")
	}
	if err := job.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("job under its limit is gone: %v", err)
	}
}

func TestGroupRSSSumsMembers(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 30 & sleep 30 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	defer func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := groupAlive("/proc", cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if n == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("group has %d members; want 3", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	rss, err := GroupRSS("/proc", cmd.Process.Pid)
	if err != nil || rss <= 0 {
		t.Errorf("GroupRSS = %d, %v", rss, err)
	}
	if rss, _ := GroupRSS("/proc", 1<<30); rss != 0 {
		t.Errorf("RSS of a group that does not exist: %d", rss)
	}
}

func TestNewFallsBack(t *testing.T) {
	dir := t.TempDir()
	self := dir + "/cgroup"
	// cgroup v1 only, and v2 without the memory controller: the watchdog.
	for _, tc := range []struct{ cgroup, controllers string }{
		{"4:memory:/x\n", ""},
		{"0::/job\n", "cpu io"},
	} {
		os.WriteFile(self, []byte(tc.cgroup), 0o644)
		os.MkdirAll(dir+"/root/job", 0o755)
		os.WriteFile(dir+"/root/job/cgroup.controllers", []byte(tc.controllers), 0o644)
		if _, err := NewCgroup(dir+"/root", self); err == nil {
			t.Errorf("cgroup %q controllers %q: no error", tc.cgroup, tc.controllers)
		}
	}
	// New itself is not called: where it succeeds it moves
	// the calling process into a new cgroup.
}

// TestCgroupLimiterFiles checks the files the cgroup limiter writes, on a
// plain directory standing in for a cgroup v2 (the test machine has no
// writable one): the agent moved to a leaf, the memory controller
// enabled for children, a job's limit, and the kernel's OOM kill read
// back as the reason.
func TestCgroupLimiterFiles(t *testing.T) {
	dir := t.TempDir()
	self := dir + "/self"
	os.WriteFile(self, []byte("1:name=systemd:/\n0::/user/agent42\n"), 0o644)
	cg := dir + "/root/user/agent42"
	os.MkdirAll(cg, 0o755)
	os.WriteFile(cg+"/cgroup.controllers", []byte("cpu memory pids\n"), 0o644)
	c, err := NewCgroup(dir+"/root", self)
	if err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := read(cg + "/agent/cgroup.procs"); got != strconv.Itoa(os.Getpid()) {
		t.Errorf("agent leaf's cgroup.procs = %q", got)
	}
	if got := read(cg + "/cgroup.subtree_control"); got != "+memory" {
		t.Errorf("cgroup.subtree_control = %q", got)
	}

	attr := &syscall.SysProcAttr{}
	mw, err := c.Prepare(attr, 8*resource.GiB)
	if err != nil {
		t.Fatal(err)
	}
	job := mw.(*cgroupWatch).dir
	if got := read(job + "/memory.max"); got != strconv.FormatInt(8*resource.GiB, 10) {
		t.Errorf("memory.max = %q", got)
	}
	if got := read(job + "/memory.oom.group"); got != "1" {
		t.Errorf("memory.oom.group = %q", got)
	}
	if got := read(job + "/memory.swap.max"); got != "0" {
		t.Errorf("memory.swap.max = %q", got)
	}
	if !attr.UseCgroupFD || attr.CgroupFD <= 0 {
		t.Errorf("job not started in its cgroup: %+v", attr)
	}

	// The job reached its limit without the kernel killing it (memory.max
	// holds it there, reclaiming): it ends on its own, no reason given.
	os.WriteFile(job+"/memory.events", []byte("low 0\nhigh 0\nmax 3\noom 0\noom_kill 0\n"), 0o644)
	ended, stop := context.WithCancel(context.Background())
	stop()
	if reason, killed := mw.Watch(ended, 1); killed || reason != "" {
		t.Errorf("Watch with no OOM kill = %q, %v; want none", reason, killed)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	os.WriteFile(job+"/memory.events", []byte("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n"), 0o644)
	reason, killed := mw.Watch(ctx, 1)
	if !killed || reason != "memory reached its request of 8 GiB (killed by the kernel)" {
		t.Errorf("Watch = %q, %v", reason, killed)
	}
	// The job's peak is the cgroup's (none before Linux 5.19: 0).
	if p := mw.Peak(); p != 0 {
		t.Errorf("Peak without memory.peak = %d, want 0", p)
	}
	os.WriteFile(job+"/memory.peak", []byte("8589934592\n"), 0o644)
	if p := mw.Peak(); p != 8*resource.GiB {
		t.Errorf("Peak = %d, want memory.peak's %d", p, 8*resource.GiB)
	}
	// At the job's end what it left in its cgroup is killed.
	os.WriteFile(job+"/cgroup.kill", nil, 0o644)
	if !mw.(*cgroupWatch).killRest() || read(job+"/cgroup.kill") != "1" {
		t.Errorf("cgroup.kill = %q, want 1 written", read(job+"/cgroup.kill"))
	}
	for _, f := range []string{"memory.max", "memory.oom.group", "memory.swap.max", "memory.events", "memory.peak", "cgroup.kill"} {
		os.Remove(job + "/" + f) // a real cgroup's files go with it
	}
	if err := mw.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := os.Stat(job); !os.IsNotExist(err) {
		t.Errorf("job cgroup left: %v", err)
	}
}

// TestCgroupWatchSeesLateKill: the kernel killed the job between two
// looks at memory.events, and the job ended (its watch stopped) before
// the next one: the last look, at the stop, still says why it ended.
func TestCgroupWatchSeesLateKill(t *testing.T) {
	dir := t.TempDir()
	events := dir + "/memory.events"
	if err := os.WriteFile(events, []byte("low 0\nhigh 0\nmax 3\noom 0\noom_kill 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := &cgroupWatch{dir: dir, fd: -1, limit: 8 * resource.GiB, poll: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan string, 1)
	go func() {
		why, killed := w.Watch(ctx, 0)
		if !killed {
			why = ""
		}
		done <- why
	}()
	time.Sleep(10 * time.Millisecond) // let it look once (a miss only skips the late case)
	if err := os.WriteFile(events, []byte("low 0\nhigh 0\nmax 9\noom 1\noom_kill 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cancel()
	if why := <-done; why != "memory reached its request of 8 GiB (killed by the kernel)" {
		t.Errorf("Watch = %q; want the kernel's kill", why)
	}
}

// TestCgroupLimiterUndoesMove: where the memory controller cannot be
// given to children (a process, such as the CLS, lives in the agent's
// cgroup), the limiter fails and the agent is moved back where it was.
func TestCgroupLimiterUndoesMove(t *testing.T) {
	dir := t.TempDir()
	self := dir + "/self"
	os.WriteFile(self, []byte("0::/user/agent43\n"), 0o644)
	cg := dir + "/root/user/agent43"
	os.MkdirAll(cg+"/cgroup.subtree_control", 0o755) // a directory: writing it fails
	os.WriteFile(cg+"/cgroup.controllers", []byte("cpu memory pids\n"), 0o644)
	if _, err := NewCgroup(dir+"/root", self); err == nil || !strings.Contains(err.Error(), "enabling memory") {
		t.Fatalf("NewCgroup: %v; want the failure to enable memory", err)
	}
	if b, err := os.ReadFile(cg + "/cgroup.procs"); err != nil || string(b) != strconv.Itoa(os.Getpid()) {
		t.Errorf("the agent was not moved back: cgroup.procs %q, %v", b, err)
	}
}

// TestWatchdogSharesScans: the jobs a watchdog watches are sampled from
// one scan of /proc per half interval, not one each.
func TestWatchdogSharesScans(t *testing.T) {
	proc := t.TempDir()
	stat := func(pid, pgid int, rssPages int64) {
		// pid (comm) state ppid pgrp session tty tpgid flags minflt
		// cminflt majflt cmajflt utime stime cutime cstime priority nice
		// threads itrealvalue starttime vsize rss
		f := []string{"S", "1", strconv.Itoa(pgid)}
		for len(f) < 21 {
			f = append(f, "0")
		}
		f = append(f, strconv.FormatInt(rssPages, 10), "0", "0")
		os.MkdirAll(proc+"/"+strconv.Itoa(pid), 0o755)
		os.WriteFile(proc+"/"+strconv.Itoa(pid)+"/stat", []byte(strconv.Itoa(pid)+" (a job) "+strings.Join(f, " ")), 0o644)
	}
	stat(100, 100, 10)
	stat(101, 100, 5)
	stat(200, 200, 7)
	page := int64(os.Getpagesize())
	w := &Watchdog{Proc: proc}
	const every = time.Hour // the window never ends during the test
	if got := w.groupRSS(100, every); got != 15*page {
		t.Fatalf("group 100: %d bytes; want %d", got, 15*page)
	}
	os.RemoveAll(proc + "/200") // gone from /proc: a second scan would say 0
	if got := w.groupRSS(200, every); got != 7*page {
		t.Errorf("group 200: %d bytes; want %d, from the scan group 100's sample made", got, 7*page)
	}
	w.scanned = time.Time{} // the window ended
	if got := w.groupRSS(200, every); got != 0 {
		t.Errorf("group 200 after a new scan: %d bytes; want 0", got)
	}
}

// TestOverReason: a memory kill's reason says the job used more than it
// asked for, in bytes too where the rounded sizes read alike.
func TestOverReason(t *testing.T) {
	for _, tc := range []struct {
		rss, limit int64
		want       string
	}{
		{100 << 20, 64 << 20, "max RSS 100 MiB over its request of 64 MiB"},
		{3<<29 + 4096, 3 << 29, "max RSS 1.5 GiB (1610616832 bytes) over its request of 1.5 GiB (1610612736 bytes)"},
	} {
		if got := overReason(tc.rss, tc.limit); got != tc.want {
			t.Errorf("overReason(%d, %d) = %q, want %q", tc.rss, tc.limit, got, tc.want)
		}
	}
}
