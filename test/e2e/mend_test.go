//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A job that failed for its command is mended in place, as the guide
// writes it: mqsub --rerun ID --command CMD runs the new command as the
// same job, its blocked dependent runs after it, and mqstat -j shows the
// command the failed attempt ran.
func TestMendFailedJob(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "1")
	f := h.submit("align", "echo wrong; exit 3")
	dep := h.submit("-p", "align", "count", "echo counted")
	h.waitState(f, "F", time.Minute)
	h.waitState(dep, "B", time.Minute)
	if r := h.run("mqsub", "--rerun", fmt.Sprint(f), "--command", "echo mended"); r.code != 0 || strings.TrimSpace(r.stdout) != fmt.Sprint(f) {
		t.Fatalf("mqsub --rerun --command: %s", r)
	}
	h.waitState(dep, "D", time.Minute)
	if d := h.waitState(f, "D", time.Minute); d.Command != "echo mended" {
		t.Errorf("the mended job's command: %q", d.Command)
	}
	if out := h.ok("mqstat", "--output", fmt.Sprint(f)); strings.TrimSpace(out) != "mended" {
		t.Errorf("the mended job's output %q", out)
	}
	if out := h.ok("mqstat", "-j", fmt.Sprint(f)); !strings.Contains(out, "it ran: echo wrong; exit 3") {
		t.Errorf("mqstat -j does not show the command the failed attempt ran:\n%s", out)
	}
	if r := h.run("mqsub", "--rerun", fmt.Sprint(f), fmt.Sprint(dep), "--command", "true"); r.code != 2 || !strings.Contains(r.stderr, "--command reruns one job") {
		t.Errorf("two jobs with --command: %s", r)
	}
}
