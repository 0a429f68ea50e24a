//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestFailureBlocksChain: a failing job in target A blocks B (needs A) and C
// (needs B); mqsub -b exits with the job's status; after the cause is fixed,
// mqsub --rerun runs the whole chain to Done.
func TestFailureBlocksChain(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "2")

	idB := h.submit("-p", "A", "B", "echo b > b.out")
	idC := h.submit("-p", "B", "C", "cat b.out > c.out")

	// Fails with status 3 until the file "fixed" exists.
	r := h.run("mqsub", "-b", "A", "test -e fixed || exit 3")
	if r.code != 3 {
		t.Fatalf("mqsub -b of a job exiting 3: %s; want exit 3", r)
	}
	idA, err := strconv.ParseInt(strings.TrimSpace(r.stdout), 10, 64)
	if err != nil {
		t.Fatalf("mqsub -b did not print the job id first: %q", r.stdout)
	}
	if lines := strings.Split(strings.TrimSpace(r.stderr), "\n"); len(lines) != 1 ||
		!strings.HasPrefix(r.stderr, "mqsub: ") || !strings.Contains(r.stderr, strconv.FormatInt(idA, 10)) || !strings.Contains(r.stderr, "failed") {
		t.Errorf("mqsub -b stderr = %q, want one line saying job %d failed", r.stderr, idA)
	}

	a := h.job(idA)
	if a.State != "F" || a.Exit == nil || *a.Exit != 3 {
		t.Fatalf("job A: state %s exit %v, want F exit 3", a.State, a.Exit)
	}
	b := h.waitState(idB, "B", time.Minute)
	h.waitState(idC, "B", time.Minute)
	if len(b.WaitingOn) != 1 || b.WaitingOn[0].Target != "A" || b.WaitingOn[0].Counts["F"] != 1 {
		t.Errorf("job B waiting_on = %+v, want target A with one failed job", b.WaitingOn)
	}
	if got := h.jobs("-s", "B"); len(got) != 2 || got[0].ID != idB || got[1].ID != idC {
		t.Errorf("mqstat -s B lists %+v, want jobs %d and %d", got, idB, idC)
	}
	// mqsub -b of a blocked job returns at once with exit 1.
	r = h.run("mqsub", "-b", "-p", "A", "D", "true")
	if r.code != 1 || !strings.Contains(r.stderr, "blocked") {
		t.Errorf("mqsub -b of a job blocked from the start: %s; want exit 1 saying blocked", r)
	}
	idD, _ := strconv.ParseInt(strings.TrimSpace(r.stdout), 10, 64)

	// Fix the cause, rerun: the chain unblocks by itself.
	if err := os.WriteFile(filepath.Join(h.dir, "fixed"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out := h.ok("mqsub", "--rerun", strconv.FormatInt(idA, 10))
	if strings.TrimSpace(out) != strconv.FormatInt(idA, 10) {
		t.Errorf("mqsub --rerun printed %q, want %d", out, idA)
	}
	for _, id := range []int64{idA, idB, idC, idD} {
		h.waitState(id, "D", 20*time.Second)
	}
	if got := readFile(t, filepath.Join(h.dir, "c.out")); got != "b\n" {
		t.Errorf("c.out = %q, want %q", got, "b\n")
	}
	if d := h.job(idA); d.Attempts != 2 || d.Exit == nil || *d.Exit != 0 {
		t.Errorf("job A after rerun: attempts %d exit %v; want 2 attempts, exit 0", d.Attempts, d.Exit)
	}

	// A rerun of a job that is not ended is refused.
	id := h.submit("-p", "never", "E", "true")
	r = h.run("mqsub", "--rerun", strconv.FormatInt(id, 10))
	if r.code != 1 {
		t.Errorf("mqsub --rerun of a waiting job: %s; want exit 1", r)
	}
	oneLineErr(t, "mqsub", r)
}

// TestQueueCeiling: a job running past its queue's ceiling is killed and
// ends Failed with a reason naming the ceiling.
func TestQueueCeiling(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "2")

	// The form users are told to use: queue name, then options.
	r := h.run("cls", "queue", "set", "q", "--ceiling", "1")
	if r.code != 0 {
		t.Errorf("BUG: `cls queue set q --ceiling 1` (options after the queue name) fails: %s", r)
		h.ok("cls", "queue", "set", "--ceiling", "1", "q")
	}
	list := h.ok("cls", "queue", "list")
	if !queueRow(list, "q", "1s") {
		t.Fatalf("cls queue list does not show q with ceiling 1s:\n%s", list)
	}

	// The sleep outlasts both waits below: only the ceiling ends it so soon.
	id := h.submit("-q", "q", "slow", "echo $$ > pid; sleep 300")
	h.waitState(id, "E", time.Minute)
	start := time.Now()
	d := h.waitState(id, "FD", time.Minute)
	t.Logf("ceiling job ended %v after it was seen executing", time.Since(start).Round(time.Millisecond))
	if d.State != "F" {
		t.Fatalf("job over the ceiling ended %s, want F", d.State)
	}
	if !strings.Contains(d.Reason, "ceiling") {
		t.Errorf("reason %q does not mention the ceiling", d.Reason)
	}
	if d.Exit == nil || *d.Exit == 0 {
		t.Errorf("exit %v, want a non-zero status", d.Exit)
	}
	if d.Attempts != 1 {
		t.Errorf("attempts %d, want 1 (a ceiling kill is not retried)", d.Attempts)
	}
	pid := readPid(t, filepath.Join(h.dir, "pid"))
	waitFor(t, time.Minute, func() error {
		if m := groupMembers(pid); len(m) > 0 {
			return fmt.Errorf("the killed job's process group %d still has %v", pid, m)
		}
		return nil
	})

	// Jobs in other queues are not limited.
	id2 := h.submit("free", "sleep 1.5")
	if d := h.waitState(id2, "DF", time.Minute); d.State != "D" {
		t.Errorf("job in a queue without a ceiling ended %s (%s)", d.State, d.Reason)
	}
}

// queueRow reports whether `cls queue list` output has a row for queue q
// with the given ceiling.
func queueRow(list, q, ceiling string) bool {
	for _, line := range strings.Split(list, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == q && f[1] == ceiling {
			return true
		}
	}
	return false
}

// TestRerunKeepsHistory: after `mqsub --rerun`, mqstat -j still shows how
// the earlier attempts ended (its attempt count includes them).
func TestRerunKeepsHistory(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "1")

	r := h.run("mqsub", "-b", "A", "test -e fixed || exit 3")
	if r.code != 3 {
		t.Fatalf("mqsub -b: %s; want exit 3", r)
	}
	id, _ := strconv.ParseInt(strings.TrimSpace(r.stdout), 10, 64)
	os.WriteFile(filepath.Join(h.dir, "fixed"), nil, 0o644)
	h.ok("mqsub", "--rerun", strconv.FormatInt(id, 10))
	d := h.waitState(id, "D", time.Minute)
	if d.Attempts != 2 {
		t.Fatalf("attempts %d, want 2", d.Attempts)
	}
	if len(d.History) != 1 || d.History[0].Attempt != 1 || d.History[0].Exit == nil || *d.History[0].Exit != 3 {
		t.Errorf("BUG: after a rerun, mqstat -j shows attempts %d but history %+v: the failed attempt 1 (exit 3) is gone", d.Attempts, d.History)
	}
}
