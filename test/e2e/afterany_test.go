//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A failing job's after-any cleanup runs, as the guide writes it, while
// its after-ok dependent is blocked; mqstat -j says how the target ended.
func TestAfterAnyCleanup(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "1")
	work := h.submit("work", "exit 1")
	tidy := h.submit("--after-any", "work", "tidy", "echo tidied")
	report := h.submit("-p", "work", "report", "echo reported")
	h.waitState(work, "F", time.Minute)
	h.waitState(report, "B", time.Minute)
	h.waitState(tidy, "D", time.Minute)
	if out := h.ok("mqstat", "--output", fmt.Sprint(tidy)); strings.TrimSpace(out) != "tidied" {
		t.Errorf("the cleanup's output %q", out)
	}
	if out := h.ok("mqstat", "-j", fmt.Sprint(tidy)); !strings.Contains(out, "after any") || !strings.Contains(out, "ended (1 job: 1 failed)") {
		t.Errorf("mqstat -j does not show the after-any target's end:\n%s", out)
	}
	if r := h.run("mqsub", "--dependency=afterany:"+fmt.Sprint(work), "t", "true"); r.code != 2 || !strings.Contains(r.stderr, "--after-any TARGET") {
		t.Errorf("sbatch's --dependency: %s", r)
	}
}
