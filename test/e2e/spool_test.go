//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestClsStopKeepRunningSpool: after cls stop --keep-running no CLS
// serves the home for longer than the local placeholder's reconnect time
// (cls serve --agent-reconnect 2s). The placeholder has a slot free, so
// its request for work was waiting at the CLS: it gives up on its CLS
// but not on its job, which ends after that; it leaves the job's report
// in output/spool and exits. The next cls serve applies it as it starts:
// the job is done in its first attempt, with all its output, and the
// spool is empty.
func TestClsStopKeepRunningSpool(t *testing.T) {
	h := newHarness(t)
	c := h.startCLS("--local", "1", "--slots", "2", "--agent-reconnect", "2s")
	gate := filepath.Join(h.dir, "gate")
	cmd := `echo $$ > pid.$MQ_JOB_ID; echo start $MQ_JOB_ID; while [ ! -e gate ]; do sleep 0.1; done; echo end $MQ_JOB_ID; echo err $MQ_JOB_ID >&2`
	id := h.submit("k", cmd)
	h.waitState(id, "E", time.Minute)
	pidFile := filepath.Join(h.dir, fmt.Sprintf("pid.%d", id))
	waitFile(t, pidFile, time.Minute)
	jobPid := readPid(t, pidFile)
	agents := h.agents()
	if len(agents) != 1 {
		t.Fatalf("placeholders %v, want 1", agents)
	}
	h.ok("cls", "stop", "--keep-running")
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the CLS had not exited 30 s after cls stop --keep-running returned")
	}
	// It writes to cls.log still.
	waitFor(t, time.Minute, func() error {
		if log, _ := os.ReadFile(filepath.Join(h.home, "cls.log")); !strings.Contains(string(log), "has been unreachable for 2s") {
			return errors.New("the placeholder has not given up on its CLS")
		}
		return nil
	})
	if !alive(agents[0]) || !alive(jobPid) {
		t.Fatal("the placeholder or its job is gone after it gave up on its CLS")
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The job ends, its report reaches no CLS for 2 s more, and the
	// placeholder exits.
	waitFor(t, time.Minute, func() error {
		if alive(agents[0]) {
			return fmt.Errorf("the placeholder %d still runs (%s)", agents[0], cmdline(agents[0]))
		}
		return nil
	})
	spool := filepath.Join(h.home, "output", "spool")
	files, _ := filepath.Glob(filepath.Join(spool, "*.reports"))
	if len(files) != 1 {
		t.Fatalf("spooled %v, want one file", files)
	}
	if fi, err := os.Stat(files[0]); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("spool file: %v, %v; want mode 0600", fi, err)
	}

	h.startCLS("--local", "1")
	doneInOne(t, h, id)
	left, err := os.ReadDir(spool)
	if err != nil || len(left) != 0 {
		t.Errorf("spool after the start: %v, %v; want it empty", left, err)
	}
	log, err := os.ReadFile(filepath.Join(h.home, "cls.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"spooled the reports the CLS did not take", "applied the reports local placeholders spooled"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("cls.log does not say %q", want)
		}
	}
}
