package jobexec

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// startSleep starts sleep 300 with env, killed at cleanup, and returns
// once its environment can be read in /proc: cmd.Start returns when the
// exec has begun, and until the kernel has set the new program's
// environment up /proc/PID/environ reads empty (on a loaded machine the
// window was long enough for a sweep to miss the process).
func startSleep(t *testing.T, env ...string) *exec.Cmd {
	t.Helper()
	c := exec.Command("sleep", "300")
	c.Env = env
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	environ := fmt.Sprintf("/proc/%d/environ", c.Process.Pid)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		if b, err := os.ReadFile(environ); err == nil && len(b) > 0 {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s stayed empty for a minute", environ)
		}
	}
}

// TestKillEscaped: the processes whose environment holds the pair are
// killed, wherever the pair stands in it; others, with another value or
// the value in another variable, are not.
func TestKillEscaped(t *testing.T) {
	t.Parallel()
	start := func(env ...string) *exec.Cmd { return startSleep(t, env...) }
	// A value of this run's own: KillEscaped looks at every process of the
	// machine, and another run of this test (-count, a CI job beside) has
	// its own to find.
	v := fmt.Sprintf("a%d-%p.1", os.Getpid(), t)
	first := start("MQ_T="+v, "PATH=/bin")
	last := start("PATH=/bin", "MQ_T="+v)
	other := start("MQ_T=" + v + "2")
	elsewhere := start("MQ_U="+v, "X=MQ_T="+v)
	if n := KillEscaped("/proc", "MQ_T", v); n != 2 {
		t.Errorf("killed %d, want 2", n)
	}
	for _, c := range []*exec.Cmd{first, last} {
		if err := c.Wait(); err == nil || c.ProcessState.Sys() == nil {
			t.Errorf("pid %d: %v, want killed", c.Process.Pid, err)
		}
	}
	for _, c := range []*exec.Cmd{other, elsewhere} {
		if err := c.Process.Signal(syscall.Signal(0)); err != nil {
			t.Errorf("pid %d: %v, want it left alone", c.Process.Pid, err)
		}
	}
}

// TestKillTagged: one pass kills the processes of every value matched,
// and only those.
func TestKillTagged(t *testing.T) {
	t.Parallel()
	start := func(env ...string) *exec.Cmd { return startSleep(t, env...) }
	a, b := start("MQ_V=b.1"), start("PATH=/bin", "MQ_V=b.2", "HOME=/")
	left := start("MQ_V=b.3")
	want := map[string]bool{"b.1": true, "b.2": true}
	if n := KillTagged("/proc", "MQ_V", func(v string) bool { return want[v] }); n != 2 {
		t.Errorf("killed %d, want 2", n)
	}
	for _, c := range []*exec.Cmd{a, b} {
		if err := c.Wait(); err == nil {
			t.Errorf("pid %d: %v, want killed", c.Process.Pid, err)
		}
	}
	if err := left.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("pid %d: %v, want it left alone", left.Process.Pid, err)
	}
}

// BenchmarkKillTaggedNone is one sweep that finds nothing: what a
// placeholder pays at most once a second while jobs end.
func BenchmarkKillTaggedNone(b *testing.B) {
	for b.Loop() {
		KillTagged("/proc", "MQ_BENCH_NONE", func(string) bool { return false })
	}
}

// TestKillTaggedCountsOnce: a process killed is counted once, however
// long it takes to exit (its parent here does not reap it: a zombie's
// environment may still be read for a moment).
func TestKillTaggedCountsOnce(t *testing.T) {
	t.Parallel()
	for range 20 {
		c := startSleep(t, "MQ_W=once")
		n := KillTagged("/proc", "MQ_W", func(v string) bool { return v == "once" })
		if n != 1 {
			t.Fatalf("killed %d, want 1", n)
		}
		c.Wait()
	}
}
