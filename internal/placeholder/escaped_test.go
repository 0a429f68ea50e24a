package placeholder

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// TestKillReachesEscaped: a job killed (here at its time limit, as mqdel
// kills) takes with it the processes it left outside its process group
// with their output elsewhere, found by the attempt's variable; a process
// of another attempt's is left alone.
func TestKillReachesEscaped(t *testing.T) {
	t.Parallel()
	setsid, err := exec.LookPath("setsid")
	if err != nil {
		t.Skip("no setsid to leave a process outside the job's group")
	}
	a := runner(t, "")
	dir := t.TempDir()
	// Another attempt's process: the same variable, another value.
	other := exec.Command("sleep", "300")
	other.Env = []string{attemptVar + "=" + a.attemptID(41, 1)}
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })
	pidFile := filepath.Join(dir, "pid")
	cmd := fmt.Sprintf(`%s sh -c 'echo $$ >%s.new && mv %[2]s.new %[2]s; exec sleep 300' </dev/null >/dev/null 2>&1 &
		until test -e %[2]s; do sleep 0.01; done; sleep 60`, setsid, pidFile)
	rep := a.run(context.Background(), protocol.Assignment{ID: 40, Attempt: 1, Command: cmd, Target: "t", Env: []string{"MQ_TIME_LIMIT=0.5"}})
	pid := readPid(t, pidFile)
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	if rep.Reason == "" {
		t.Errorf("exit %d, no reason: want the time limit's kill", rep.Exit)
	}
	waitUntil(t, time.Minute, func() error {
		if alive(pid) {
			return fmt.Errorf("the process the killed job left (pid %d) still runs", pid)
		}
		return nil
	})
	if !alive(other.Process.Pid) {
		t.Errorf("another attempt's process was killed")
	}
}

// TestEndReachesEscaped: a job that ends on its own, well or not, takes
// with it the processes it left outside its process group with their
// output elsewhere, as a batch system's job end does; a process of
// another attempt's is left alone.
func TestEndReachesEscaped(t *testing.T) {
	t.Parallel()
	setsid, err := exec.LookPath("setsid")
	if err != nil {
		t.Skip("no setsid to leave a process outside the job's group")
	}
	for _, exit := range []int{0, 3} {
		t.Run(fmt.Sprint("exit", exit), func(t *testing.T) {
			t.Parallel()
			a := runner(t, "")
			other := exec.Command("sleep", "300")
			other.Env = []string{attemptVar + "=" + a.attemptID(41, 1)}
			if err := other.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { other.Process.Kill(); other.Wait() })
			pidFile := filepath.Join(t.TempDir(), "pid")
			cmd := fmt.Sprintf(`%s sh -c 'echo $$ >%s.new && mv %[2]s.new %[2]s; exec sleep 300' </dev/null >/dev/null 2>&1 &
				until test -e %[2]s; do sleep 0.01; done; exit %d`, setsid, pidFile, exit)
			rep := a.run(context.Background(), protocol.Assignment{ID: 40, Attempt: 1, Command: cmd, Target: "t"})
			pid := readPid(t, pidFile)
			t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
			if rep.Exit != exit || rep.Reason != "" || rep.OutputLost != "" {
				t.Errorf("exit %d, reason %q, lost %q: want exit %d and nothing else", rep.Exit, rep.Reason, rep.OutputLost, exit)
			}
			waitUntil(t, time.Minute, func() error {
				if alive(pid) {
					return fmt.Errorf("the process the ended job left (pid %d) still runs", pid)
				}
				return nil
			})
			if !alive(other.Process.Pid) {
				t.Errorf("another attempt's process was killed")
			}
		})
	}
}
