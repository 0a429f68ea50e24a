package jobexec

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

// TestKillTaggedLooksAgainAtEmpty: a process whose environment reads
// empty, as one inside execve does until the kernel has set the new
// program's up, is looked at again after a pause, and killed once the
// tag shows; one empty for good costs a few pauses, and a zombie or a
// kernel thread (empty for good too) none. /proc is faked around a real
// process, so the window is the test's to open and close.
func TestKillTaggedLooksAgainAtEmpty(t *testing.T) {
	t.Parallel()
	const live, zombie, kthread = "S 1 1 1 0 -1 4194560", "Z 1 1 1 0 -1 4194560", "I 2 0 0 0 -1 2129984"
	tests := []struct {
		name       string
		stat       string
		later      string // the environment once the first pause is over
		wantKilled int
		wantPauses int
	}{
		{"mid-exec", live, "PATH=/bin\x00MQ_X=e.1\x00", 1, 1},
		{"empty for good", live, "", 0, emptyLooks},
		{"another value", live, "MQ_X=e.2\x00", 0, 1},
		{"zombie", zombie, "", 0, 0},
		{"kernel thread", kthread, "", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := startSleep(t)
			proc := t.TempDir()
			dir := filepath.Join(proc, strconv.Itoa(c.Process.Pid))
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			write := func(name, s string) {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			write("stat", fmt.Sprintf("%d (a) b)) %s 0 0 0", c.Process.Pid, tt.stat))
			write("environ", "")
			pauses := 0
			s := sweeper{proc: proc, pause: func(int) {
				if pauses++; pauses == 1 {
					write("environ", tt.later)
				}
			}}
			n := s.kill("MQ_X", func(v string) bool { return v == "e.1" })
			if pauses != tt.wantPauses {
				t.Errorf("paused %d times, want %d", pauses, tt.wantPauses)
			}
			if n != tt.wantKilled {
				t.Fatalf("killed %d, want %d", n, tt.wantKilled) // cleanup kills it
			}
			if tt.wantKilled == 0 {
				if err := c.Process.Signal(syscall.Signal(0)); err != nil {
					t.Errorf("pid %d: %v, want it left alone", c.Process.Pid, err)
				}
				return
			}
			c.Wait()
			if ws := c.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Errorf("pid %d: %v, want killed", c.Process.Pid, c.ProcessState)
			}
		})
	}
}
