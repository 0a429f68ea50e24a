//go:build e2e

package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestOutputCommand: mqstat --output prints a job's stdout (--stderr its
// stderr) from the latest attempt; a job that has not run has none.
func TestOutputCommand(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "1")
	id := h.submit("t", "echo out-$MQ_JOB_ID; echo err-$MQ_ATTEMPT >&2")
	h.waitState(id, "D", 10*time.Second)
	if got := h.ok("mqstat", "--output", strconv.FormatInt(id, 10)); got != "out-"+strconv.FormatInt(id, 10)+"\n" {
		t.Errorf("--output printed %q", got)
	}
	if got := h.ok("mqstat", "--output", strconv.FormatInt(id, 10), "--stderr"); got != "err-1\n" {
		t.Errorf("--output --stderr printed %q", got)
	}
	waiting := h.submit("-p", "nothing-yet", "w", "true")
	r := h.run("mqstat", "--output", strconv.FormatInt(waiting, 10))
	if r.code != 1 || !strings.Contains(r.stderr, "has no output yet") {
		t.Errorf("--output of a job that has not run: %s", r)
	}
	if r := h.run("mqstat", "--stderr"); r.code != 2 {
		t.Errorf("--stderr without --output: %s", r)
	}
}
