package driver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestEndedJobOutlivesEndedContext: a job that ended before its context
// did is reported as it ended, every time, by Cmd.Wait, WaitForOne and
// WaitForAll, and its result is collected, not left behind; a wait cannot
// delete a job that has already ended.
func TestEndedJobOutlivesEndedContext(t *testing.T) {
	t.Parallel()
	for _, m := range modes()[:2] {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			d := m.start(t, Config{Dir: t.TempDir()})
			bg, stop := context.WithTimeout(context.Background(), 2*time.Minute)
			defer stop()
			ended, cancel := context.WithCancel(bg)
			cancel()
			// Each round would pass by luck with probability 1/2 at most.
			for i := 0; i < 20; i++ {
				ctx, cancel := context.WithCancel(bg)
				c := d.CommandContext(ctx, "true")
				if err := c.Start(); err != nil {
					t.Fatal(err)
				}
				waitUntil(t, func() bool { return d.Pending() == 0 })
				cancel()
				if err := c.Wait(); err != nil || c.Result.Exit != 0 {
					t.Fatalf("round %d: Wait after the job ended, then its context: %v (%+v)", i, err, c.Result)
				}

				k, err := d.Exec(bg, "exit 3")
				if err != nil {
					t.Fatal(err)
				}
				waitUntil(t, func() bool { return d.Pending() == 0 })
				if res, err := d.WaitForOne(ended, k); err != nil || res.Exit != 3 {
					t.Fatalf("round %d: WaitForOne with an ended context on an ended job: %+v, %v", i, res, err)
				}

				if _, err := d.Exec(bg, "true"); err != nil {
					t.Fatal(err)
				}
				waitUntil(t, func() bool { return d.Pending() == 0 })
				if rs, err := d.WaitForAll(ended); err != nil || len(rs) != 1 {
					t.Fatalf("round %d: WaitForAll with an ended context on ended jobs: %+v, %v", i, rs, err)
				}
			}
			if rs, err := d.WaitForAll(bg); len(rs) != 0 {
				t.Errorf("results left uncollected: %+v, %v", rs, err)
			}
		})
	}
}

// TestStartWithEndedContext: as exec.Cmd.Start does, Start with a context
// that has already ended returns its error and issues no job.
func TestStartWithEndedContext(t *testing.T) {
	t.Parallel()
	d := startLocal(t, Config{Dir: t.TempDir()})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := 0; i < 20; i++ {
		c := d.CommandContext(ctx, "true")
		if err := c.Start(); !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: Start with a cancelled context: %v", i, err)
		}
		if n := d.Pending(); n != 0 {
			t.Fatalf("round %d: %d jobs issued with a cancelled context", i, n)
		}
	}
}

// TestOutputAfterRun: as exec.Cmd.Output does, Output of a Cmd already
// run is an error and returns no output (not the earlier run's).
func TestOutputAfterRun(t *testing.T) {
	t.Parallel()
	d := startLocal(t, Config{Dir: t.TempDir()})
	c := d.Command("echo", "once")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	if out, err := c.Output(); !errors.Is(err, ErrCmdStarted) || out != nil {
		t.Errorf("Output after Run: %q, %v", out, err)
	}
}

// TestCouldNotStart: a job whose directory is missing fails as it does
// through a placeholder, in both modes: exit status 127, and an error
// that names the directory (os/exec says "chdir DIR: ...").
func TestCouldNotStart(t *testing.T) {
	t.Parallel()
	for _, m := range modes()[:2] {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			d := m.start(t, Config{Dir: t.TempDir()})
			missing := filepath.Join(t.TempDir(), "missing")
			c := d.Command("pwd")
			c.Dir = missing
			err := c.Run()
			var ee *ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 127 || !strings.Contains(err.Error(), "working directory "+missing+": no such file") {
				t.Errorf("Run in a missing directory: %T %v", err, err)
			}
		})
	}
}

// TestCmdWaitCancelledNamesJob: a Cmd whose context ends while its job
// runs at the CLS returns a *JobError that names the job's metaqueue id,
// so the user can find it (mqstat -j) as for any other job error.
func TestCmdWaitCancelledNamesJob(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := startCLSDriver(t, newTestCLS(t, 1, 1), Config{Dir: dir})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := d.CommandContext(ctx, "sh", "-c", "touch running && exec sleep 120")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { // running: submitted, so it has an id
		_, err := os.Stat(filepath.Join(dir, "running"))
		return err == nil
	})
	cancel()
	err := c.Wait()
	var je *JobError
	if !errors.As(err, &je) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Wait: %v", err)
	}
	if je.ID == 0 || strings.Contains(je.Error(), "key") {
		t.Errorf("cancelled Wait's error names no job id: %v (%+v)", err, je)
	}
}

// TestOutputTooLargeOfFailedJob: Output of a job that wrote more than
// MaxOutput and then failed reports both: the exit status (errors.As finds
// the *ExitError) and that the output was cut short.
func TestOutputTooLargeOfFailedJob(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 64 MiB")
	}
	t.Parallel()
	d := startLocal(t, Config{Dir: t.TempDir()})
	for _, combined := range []bool{false, true} {
		c := d.Command("sh", "-c", fmt.Sprintf("head -c %d /dev/zero; exit 3", MaxOutput+1))
		var err error
		if combined {
			_, err = c.CombinedOutput()
		} else {
			_, err = c.Output()
		}
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Result.Exit != 3 || !errors.Is(err, ErrOutputTooLarge) {
			t.Errorf("combined=%v: Output of a failed job over MaxOutput: %v", combined, err)
		}
	}
}
