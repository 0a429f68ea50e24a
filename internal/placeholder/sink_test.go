package placeholder

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// TestOutputHeldOpen: a job that leaves a process outside its process
// group holding its stdout is reported once its own process has ended,
// with what it wrote (in its stream or its file). The process left behind
// is found by the attempt's variable it inherited and killed, so the
// output ends whole; one that dropped its environment (env -i) cannot be
// found so, and the output is cut there, saying so, and the process loses
// the pipe and dies at its next write. Either way no drain is left writing
// on unseen for ever.
func TestOutputHeldOpen(t *testing.T) {
	t.Parallel()
	setsid, err := exec.LookPath("setsid")
	if err != nil {
		t.Skip("no setsid to leave a process outside the job's group")
	}
	for _, tc := range []struct {
		name     string
		streams  bool
		env      string // what runs the left process, after setsid
		wantLost string // "" for an output ended whole
	}{
		{"files", false, "", ""},
		{"streams", true, "", ""},
		{"files, environment dropped", false, "env -i PATH=/usr/bin:/bin", "stdout: cut at the job's end"},
		{"streams, environment dropped", true, "env -i PATH=/usr/bin:/bin", "stdout: cut at the job's end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var a *Agent
			var out string
			if tc.streams {
				a, out = streamAgent(t, 0)
			} else {
				a = runner(t, "")
			}
			pidFile := filepath.Join(t.TempDir(), "pid")
			// The job waits for the pid: a process not yet out of the
			// group would die with it.
			cmd := fmt.Sprintf(`%s %s sh -c 'echo $$ >%s.new && mv %[3]s.new %[3]s; while :; do echo left; sleep 0.1; done' &
				until test -e %[3]s; do sleep 0.01; done; echo hi`, setsid, tc.env, pidFile)
			start := time.Now()
			rep := a.run(context.Background(), protocol.Assignment{ID: 1, Attempt: 1, Command: cmd, Target: "t"})
			pid := readPid(t, pidFile)
			t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
			if d := time.Since(start); d > time.Minute {
				t.Errorf("reported after %v", d)
			}
			if rep.Exit != 0 || rep.Reason != "" {
				t.Errorf("exit %d reason %q, want 0 and none", rep.Exit, rep.Reason)
			}
			if (tc.wantLost == "") != (rep.OutputLost == "") || !strings.Contains(rep.OutputLost, tc.wantLost) {
				t.Errorf("output lost %q, want %q", rep.OutputLost, tc.wantLost)
			}
			var got string
			if tc.streams {
				var ok bool
				if got, ok = readStreamed(t, out, rep, "stdout"); !ok {
					t.Errorf("stdout not reported: %+v", rep.Streamed)
				}
			} else {
				path, _ := job.OutputPaths(a.cfg.OutDir, 1, 1)
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				got = string(b)
			}
			if !strings.Contains(got, "hi\n") {
				t.Errorf("stdout %q, want the job's hi", got)
			}
			waitUntil(t, time.Minute, func() error {
				if alive(pid) {
					return fmt.Errorf("the process left by the job (pid %d) still runs", pid)
				}
				return nil
			})
		})
	}
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	var pid int
	waitUntil(t, time.Minute, func() error {
		b, err := os.ReadFile(path)
		if err == nil {
			pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		return err
	})
	return pid
}

// alive says whether pid runs: it exists and is no zombie waiting for a
// reaper.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) == 0 || f[0] != "Z"
}
