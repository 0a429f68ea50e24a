//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/filelock"
)

// TestClsStop: cls stop stops the CLS serving MQ_HOME and returns only
// once it has let go of the home, so a new cls serve starts at once, and
// the job its local placeholder ran runs again there. Without a CLS, or
// with one that does not stop in --timeout, it says so in one line and
// exits 1.
func TestClsStop(t *testing.T) {
	h := newHarness(t)
	r := h.run("cls", "stop")
	if r.code != 1 || !strings.Contains(r.stderr, "no CLS is serving "+h.home) {
		t.Errorf("cls stop with no CLS: %s; want exit 1, no CLS is serving", r)
	}
	oneLineErr(t, "cls", r)

	c := h.startCLS("--local", "1")
	id := h.submit("long", "sleep 600")
	h.waitState(id, "E", time.Minute)
	r = h.run("cls", "stop")
	if want := fmt.Sprintf("cls: stopped the CLS (pid %d) serving %s\n", c.pid(), h.home); r.code != 0 || r.stdout != want {
		t.Fatalf("cls stop: %s; want exit 0 and %q", r, want)
	}
	// It has let go of the home: the lock a CLS holds to its last step is
	// free, and its exit follows at once.
	f, err := os.Open(filepath.Join(h.home, "cls.lock"))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Errorf("cls stop returned while the CLS still held MQ_HOME's lock: %v", err)
	}
	filelock.Close(f)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the CLS had not exited 30 s after cls stop returned")
	}
	h.startCLS("--local", "1")
	if d := h.waitState(id, "E", time.Minute); d.Attempts < 2 {
		t.Errorf("job %d after the restart: %d attempts, want it running again", id, d.Attempts)
	}

	// A CLS that cannot stop (stopped itself, SIGSTOP): cls stop gives up
	// at its --timeout and says so; the CLS stops once it runs again.
	c = h.cls
	if err := syscall.Kill(c.pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	r = h.run("cls", "stop", "--timeout", "2s")
	syscall.Kill(c.pid(), syscall.SIGCONT)
	if r.code != 1 || !strings.Contains(r.stderr, fmt.Sprintf("the CLS (pid %d) has not stopped after 2s", c.pid())) {
		t.Errorf("cls stop of a stopped CLS: %s; want exit 1 and why", r)
	}
	oneLineErr(t, "cls", r)
	select {
	case <-c.done:
	case <-time.After(time.Minute):
		t.Fatal("the CLS did not stop after SIGCONT: the SIGTERM was lost")
	}
}

// TestClsStopKeepRunning: cls stop --keep-running stops the CLS but not
// its local placeholders: the jobs they run go on while no CLS serves the
// home (one placeholder has a slot free, so a poll of its was waiting at
// the CLS), they report to the next cls serve, and every job ends done in
// its first attempt with all its output. The placeholders take no new
// job meanwhile and exit once their own are done.
func TestClsStopKeepRunning(t *testing.T) {
	h := newHarness(t)
	c := h.startCLS("--local", "2", "--slots", "2")
	gate := filepath.Join(h.dir, "gate")
	cmd := `echo $$ > pid.$MQ_JOB_ID; echo start $MQ_JOB_ID; while [ ! -e gate ]; do sleep 0.1; done; echo end $MQ_JOB_ID; echo err $MQ_JOB_ID >&2`
	ids := []int64{h.submit("k", cmd), h.submit("k", cmd), h.submit("k", cmd)}
	var jobPids []int
	for _, id := range ids {
		h.waitState(id, "E", time.Minute)
		pidFile := filepath.Join(h.dir, fmt.Sprintf("pid.%d", id))
		waitFile(t, pidFile, time.Minute)
		jobPids = append(jobPids, readPid(t, pidFile))
	}
	agents := h.agents()
	if len(agents) != 2 {
		t.Fatalf("placeholders %v, want 2", agents)
	}

	r := h.run("cls", "stop", "--keep-running")
	if want := fmt.Sprintf("cls: stopped the CLS (pid %d) serving %s; its local placeholders run on and report to the next cls serve\n", c.pid(), h.home); r.code != 0 || r.stdout != want {
		t.Fatalf("cls stop --keep-running: %s; want exit 0 and %q", r, want)
	}
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the CLS had not exited 30 s after cls stop --keep-running returned")
	}
	if code := c.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("cls serve exited %d after cls stop --keep-running, want 0", code)
	}
	for _, p := range append(agents, jobPids...) {
		if !alive(p) {
			t.Errorf("process %d is gone after cls stop --keep-running; want the placeholders and their jobs running", p)
		}
	}

	h.startCLS("--local", "2", "--slots", "2")
	// A job submitted now goes to the new CLS's own placeholders, once the
	// kept ones, which take no new jobs, have exited: never to them.
	late := h.submit("late", `echo $PPID > ppid.late`)
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		doneInOne(t, h, id)
	}
	// Their jobs done, the kept placeholders exit (the new CLS's own take
	// their place).
	waitFor(t, time.Minute, func() error {
		for _, p := range agents {
			if alive(p) {
				return fmt.Errorf("kept placeholder %d still runs (%s)", p, cmdline(p))
			}
		}
		return nil
	})
	if d := h.waitState(late, "DF", time.Minute); d.State != "D" {
		t.Fatalf("the job submitted after the restart ended %s: %s", d.State, d.Reason)
	}
	if ppid := readPid(t, filepath.Join(h.dir, "ppid.late")); slices.Contains(agents, ppid) {
		t.Errorf("kept placeholder %d took a new job", ppid)
	}
}

// TestClsStopNotCounted: a job the CLS's stop interrupted on a local
// placeholder runs again after the restart even on its last attempt
// (a queue of max-attempts 1): stopping the CLS is not the job's doing,
// so that attempt is recorded, said, and not counted.
func TestClsStopNotCounted(t *testing.T) {
	h := newHarness(t)
	c := h.startCLS("--local", "1")
	h.ok("cls", "queue", "set", "once", "--max-attempts", "1")
	id := h.submit("-q", "once", "long", "echo $MQ_ATTEMPT >> attempts; sleep 600")
	h.waitState(id, "E", time.Minute)
	h.ok("cls", "stop")
	// cls stop returns once the CLS let go of the home; its exit follows.
	select {
	case <-c.done:
	case <-time.After(time.Minute):
		t.Fatal("the CLS had not exited a minute after cls stop returned")
	}
	h.startCLS("--local", "1")
	d := h.waitState(id, "EF", time.Minute)
	if d.State != "E" || d.Attempts != 2 {
		t.Fatalf("job %d after the restart: %s in %d attempts (%s); want it running again, attempt 2", id, d.State, d.Attempts, d.Reason)
	}
	if len(d.History) != 1 || d.History[0].Reason != "interrupted: the CLS stopped its placeholder" {
		t.Errorf("history %+v; want attempt 1 stopped by the CLS", d.History)
	}
}

// doneInOne checks that job id, which printed "start ID", "end ID" and
// "err ID" on stderr, ends D in its first attempt with that output.
func doneInOne(t *testing.T, h *harness, id int64) {
	t.Helper()
	d := h.waitState(id, "DF", time.Minute)
	if d.State != "D" || d.Attempts != 1 || len(d.History) != 0 {
		t.Errorf("job %d ended %s in %d attempts (history %+v); want D in 1", id, d.State, d.Attempts, d.History)
	}
	if out, want := h.ok("mqstat", "--output", fmt.Sprint(id)), fmt.Sprintf("start %d\nend %d\n", id, id); out != want {
		t.Errorf("job %d output %q, want %q", id, out, want)
	}
	if out, want := h.ok("mqstat", "--output", fmt.Sprint(id), "--stderr"), fmt.Sprintf("err %d\n", id); out != want {
		t.Errorf("job %d stderr %q, want %q", id, out, want)
	}
}
