//go:build e2e

package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestQueueDeadlineBudget: cls queue set --deadline --budget and cls site
// add --price are stored, shown by cls queue list and cls site list, and
// survive a CLS restart.
func TestQueueDeadlineBudget(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startCLS("--local", "0")
	out := h.ok("cls", "queue", "set", "eq", "--deadline", "2030-01-02T03:04:05Z", "--budget", "5000")
	if !strings.Contains(out, "2030-01-02T03:04:05Z") || !strings.Contains(out, "5000") {
		t.Fatalf("cls queue set:\n%s", out)
	}
	h.ok("cls", "site", "add", "priced", "--type", "local", "--max", "1", "--price", "2.5")
	h.stopCLS(syscall.SIGTERM, 10*time.Second)
	h.startCLS("--local", "0")
	if list := h.ok("cls", "queue", "list"); !strings.Contains(list, "2030-01-02T03:04:05Z") || !strings.Contains(list, "5000") {
		t.Fatalf("after a restart, cls queue list:\n%s", list)
	}
	if list := h.ok("cls", "site", "list"); !strings.Contains(list, "2.5 per core-hour") {
		t.Fatalf("after a restart, cls site list:\n%s", list)
	}
	if out := h.ok("cls", "queue", "set", "eq", "--deadline", "none", "--budget", "0"); strings.Contains(out, "2030") || strings.Contains(out, "5000") {
		t.Fatalf("clearing:\n%s", out)
	}
}
