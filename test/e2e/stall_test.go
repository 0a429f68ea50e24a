//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCLSStalled SIGSTOPs the CLS for six times its lease while its
// placeholders run jobs, some of which end meanwhile, and SIGCONTs it. A
// stalled CLS is not a lost placeholder: every job ends Done on its first
// attempt, having run once, and a job running across the stall is neither
// killed nor rerun. The stall is also longer than an agent waits for a
// report's reply before it used to give up on it.
func TestCLSStalled(t *testing.T) {
	const lease = 2 * time.Second
	const stall = 6 * lease
	h := newHarness(t)
	h.startCLS("--local", "2", "--slots", "3", "--lease", lease.String())
	waitFor(t, 20*time.Second, func() error {
		if n := len(h.agents()); n != 2 {
			return fmt.Errorf("%d cls agent children of the CLS, want 2", n)
		}
		return nil
	})

	// Each job notes its attempt when it starts and waits for its gate.
	cmd := `echo $MQ_ATTEMPT >> ran.$MQ_TARGET; while [ ! -e $GATE ]; do sleep 0.05; done; touch ended.$MQ_TARGET`
	targets := []string{"s1", "s2", "s3", "s4"}
	ids := map[string]int64{}
	for _, tg := range targets {
		ids[tg] = h.submit(tg, "GATE=release1; "+cmd)
	}
	ids["across"] = h.submit("across", "GATE=release2; "+cmd)
	for tg, id := range ids {
		h.waitState(id, "E", 30*time.Second)
		waitFile(t, filepath.Join(h.dir, "ran."+tg), 30*time.Second)
	}

	pid := h.cls.pid()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
	waitFor(t, time.Minute, func() error {
		if st, ok := readStat(pid); !ok || st.state != 'T' {
			return fmt.Errorf("cls %d is in state %q, not stopped", pid, st.state)
		}
		return nil
	})
	// The first four jobs end while the CLS is stopped; their agents
	// report to a CLS that does not answer.
	if err := os.WriteFile(filepath.Join(h.dir, "release1"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tg := range targets {
		waitFile0(t, filepath.Join(h.dir, "ended."+tg), 30*time.Second)
	}
	if since := time.Since(stopped); since < stall {
		time.Sleep(stall - since) // the stall itself, not a wait for a condition
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	t.Logf("cls stopped for %v (lease %v)", time.Since(stopped).Round(time.Millisecond), lease)

	for _, tg := range targets {
		h.waitState(ids[tg], "DFQ", 60*time.Second)
	}
	// The job running across the stall still runs on its first attempt.
	if d := h.job(ids["across"]); d.State != "E" || d.Attempts != 1 {
		t.Errorf("job across the stall is %s on attempt %d, want E on attempt 1", d.State, d.Attempts)
	}
	if err := os.WriteFile(filepath.Join(h.dir, "release2"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The CLS saw its own stall; no agent gave up on a report.
	log := readFile(t, filepath.Join(h.home, "cls.log"))
	if !strings.Contains(log, "the CLS did not run for a while") {
		t.Errorf("cls.log does not note the stall")
	}
	if strings.Contains(log, "could not report") {
		t.Errorf("an agent gave up on a report")
	}
	for tg, id := range ids {
		d := h.waitState(id, "DF", 60*time.Second)
		if d.State != "D" || d.Attempts != 1 || len(d.History) != 0 {
			t.Errorf("job %s ended %s on attempt %d, history %+v; want D on attempt 1, no history", tg, d.State, d.Attempts, d.History)
		}
		if got := readFile(t, filepath.Join(h.dir, "ran."+tg)); got != "1\n" {
			t.Errorf("job %s ran as attempts %q, want once, as attempt 1", tg, got)
		}
	}
}

// waitFile0 waits until path exists (it may be empty).
func waitFile0(t *testing.T, path string, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, func() error {
		_, err := os.Stat(path)
		return err
	})
}
