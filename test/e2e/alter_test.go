//go:build e2e

package e2e

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAlter drives the mqalter binary as a user would: held jobs get a
// new time limit, priority and memory, which mqstat -j shows and a CLS
// killed with SIGKILL keeps; released, one runs with its new limit, the
// other, asking more memory than the site's placeholder holds, waits
// saying why until mqalter lowers it. Ended jobs and bad values are
// refused with one line, nothing changed.
func TestAlter(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startCLS("--local", "0")
	h.ok("cls", "site", "add", "m", "--type", "local", "--max", "1", "--cpus", "2", "--mem", "1G", "--idle", "30s")

	a := h.submit("-H", "--mem", "100M", "A", `echo "$MQ_TIME_LIMIT" > a.out`)
	big := h.submit("-H", "--mem", "100M", "B", "true")
	sa, sbig := strconv.FormatInt(a, 10), strconv.FormatInt(big, 10)
	if out := h.ok("mqalter", "--time", "90", "--priority", "5", sa); out != "changed job "+sa+"\n" {
		t.Fatalf("mqalter printed %q", out)
	}
	if out := h.ok("mqalter", sbig, "--mem", "4G", "-Q"); out != "" {
		t.Fatalf("mqalter -Q printed %q", out)
	}
	// mqstat -j shows the new values, before and after a SIGKILL of the CLS.
	for round := range 2 {
		out := h.ok("mqstat", "-j", sa)
		for _, want := range []string{"state:", "H (held)", "priority:", " 5\n", "estimate:", "time limit:", "90s", "mem=100 MiB"} {
			if !strings.Contains(out, want) {
				t.Fatalf("round %d: mqstat -j %d lacks %q:\n%s", round, a, want, out)
			}
		}
		if out := h.ok("mqstat", "-j", sbig); !strings.Contains(out, "mem=4 GiB") {
			t.Fatalf("round %d: mqstat -j %d:\n%s", round, big, out)
		}
		if round == 0 {
			h.stopCLS(syscall.SIGKILL, 10*time.Second)
			h.startCLS("--local", "0")
		}
	}

	h.ok("mqrls", sa, sbig)
	if d := h.waitState(a, "DF", 2*time.Minute); d.State != "D" {
		t.Fatalf("job %d ended %s: %s", a, d.State, d.Reason)
	}
	waitFile(t, filepath.Join(h.dir, "a.out"), 30*time.Second)
	if got := strings.TrimSpace(readFile(t, filepath.Join(h.dir, "a.out"))); got != "90" {
		t.Fatalf("the job ran with MQ_TIME_LIMIT=%q, want 90", got)
	}
	waitFor(t, time.Minute, func() error {
		if out := h.ok("mqstat", "-j", sbig); !strings.Contains(out, "cannot run:") {
			return fmt.Errorf("job %d does not say why it cannot run:\n%s", big, out)
		}
		return nil
	})
	if d := h.job(big); d.State != "Q" {
		t.Fatalf("job %d asking 4 GiB of a 1 GiB site is %s, want Q", big, d.State)
	}

	// Refusals: an ended job (all or none), a bad value (usage, exit 2).
	r := h.run("mqalter", "--priority", "1", sa, sbig)
	if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "nothing changed: job "+sa+" has already ended (done)") {
		t.Fatalf("mqalter of a done and a queued job: %s", r)
	}
	for _, bad := range [][]string{{"--priority", "5000"}, {"--mem", "8X"}, {"--time", "0"}, {"-c", "0"}, {}} {
		r := h.run("mqalter", append(bad, sbig)...)
		if r.code != 2 || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("mqalter %v: %s", bad, r)
		}
	}
	if out := h.ok("mqstat", "-j", sbig); strings.Contains(out, "priority:") {
		t.Fatalf("a refused mqalter changed job %d:\n%s", big, out)
	}

	h.ok("mqalter", "--mem", "200M", "-t", "B")
	if d := h.waitState(big, "DF", 2*time.Minute); d.State != "D" {
		t.Fatalf("job %d ended %s: %s", big, d.State, d.Reason)
	}
}
