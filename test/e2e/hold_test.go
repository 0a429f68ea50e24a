//go:build e2e

package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestHoldRelease: a job submitted held (mqsub -H) shows H and does not
// run, its dependent waits; mqhold refuses a job that cannot be held and
// changes nothing; mqrls releases the held job, which runs to D, and its
// dependent after it.
func TestHoldRelease(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "2")

	id := h.submit("-H", "--priority", "3", "A", "echo held-ran > a.out")
	dep := h.submit("-p", "A", "B", "echo dep-ran > b.out")
	sid := strconv.FormatInt(id, 10)

	d := h.waitState(id, "H", 20*time.Second)
	if d.State != "H" {
		t.Fatalf("job %d is %s, want H", id, d.State)
	}
	h.waitState(dep, "W", 20*time.Second)
	if out := h.ok("mqstat", "-s", "H"); !strings.Contains(out, sid) {
		t.Fatalf("mqstat -s H does not list job %d:\n%s", id, out)
	}
	if out := h.ok("mqstat", "-j", sid); !strings.Contains(out, "mqrls "+sid) || !strings.Contains(out, "priority:") {
		t.Fatalf("mqstat -j %d:\n%s", id, out)
	}
	if n := h.summary()["default"]["H"]; n != 1 {
		t.Fatalf("summary counts %d held, want 1", n)
	}

	// The held job and a waiting one cannot be released: nothing is, and
	// both are named.
	r := h.run("mqrls", sid, strconv.FormatInt(dep, 10))
	if r.code != 1 || !strings.Contains(r.stderr, "nothing released") || !strings.Contains(r.stderr, "job "+strconv.FormatInt(dep, 10)+" is waiting") {
		t.Fatalf("mqrls of a held and a waiting job: %s", r)
	}
	if got := h.job(id).State; got != "H" {
		t.Fatalf("a refused mqrls changed job %d to %s", id, got)
	}
	if r := h.run("mqsub", "--priority", "1e9", "C", "true"); r.code != 2 || strings.Count(r.stderr, "\n") != 1 {
		t.Fatalf("mqsub --priority 1e9: %s", r)
	}

	if out := h.ok("mqrls", sid); out != "released job "+sid+"\n" {
		t.Fatalf("mqrls printed %q", out)
	}
	h.waitState(id, "D", 60*time.Second)
	h.waitState(dep, "D", 60*time.Second)

	// Hold a waiting job by target, then release it after its
	// prerequisite ended: it runs.
	gate := h.submit("-H", "G", "true")
	w := h.submit("-p", "G", "W", "true")
	h.waitState(w, "W", 20*time.Second)
	if out := h.ok("mqhold", "-t", "W"); !strings.Contains(out, "held job "+strconv.FormatInt(w, 10)) {
		t.Fatalf("mqhold -t W printed %q", out)
	}
	h.ok("mqrls", strconv.FormatInt(gate, 10), "-Q")
	h.waitState(gate, "D", 60*time.Second)
	if got := h.job(w).State; got != "H" {
		t.Fatalf("held job %d became %s when its prerequisite ended", w, got)
	}
	h.ok("mqrls", strconv.FormatInt(w, 10))
	h.waitState(w, "D", 60*time.Second)
}
