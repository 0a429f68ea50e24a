//go:build e2e

package e2e

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCLSKilledDuringBulkActions SIGKILLs the CLS while it acts on tens
// of thousands of jobs at once, in batches: an mqdel of them all, a rerun
// of them all, and a purge. After each crash the CLS starts again and
// nothing is half done: every job is in the state before or after the
// action (never lost, never another), the summary counts what the listing
// lists, the command said in one line that some batches may be done and
// how to see which, and the action asked again finishes the work.
func TestCLSKilledDuringBulkActions(t *testing.T) {
	const n = 40000 // four batches of selector.Batch
	h := newHarness(t)
	h.startCLS("--local", "0")
	h.ok("mqsub", "--array", fmt.Sprintf("1-%d", n), "-H", "bulk", "true")

	// kill runs the command and kills the CLS after delay (or once the
	// command has ended), restarts it and returns what the command said.
	kill := func(delay time.Duration, name string, args ...string) result {
		t.Helper()
		done := make(chan result, 1)
		go func() {
			r, _ := runBin(90*time.Second, h.env(), h.dir, nil, name, args...)
			done <- r
		}()
		var r result
		select {
		case r = <-done:
			h.stopCLS(syscall.SIGKILL, time.Minute)
		case <-time.After(delay):
			h.stopCLS(syscall.SIGKILL, time.Minute)
			r = <-done
		}
		t.Logf("%s %s, killed after %v: %s", name, strings.Join(args, " "), delay, r)
		if r.code != 0 && strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
			t.Errorf("%s's error is more than one line: %q", name, r.stderr)
		}
		if r.code < 0 {
			t.Errorf("%s crashed: %s", name, r)
		}
		if strings.Contains(r.stderr, "connection to the CLS closed") && !strings.Contains(r.stderr, "again for the rest") {
			t.Errorf("%s, cut short, does not say what became of the jobs: %q", name, r.stderr)
		}
		h.startCLS("--local", "0")
		return r
	}
	// check lists every job and says how many are in each state, failing
	// the test for a state not in want, a summary other than the listing,
	// or a total other than total (-1: any).
	check := func(when, want string, total int) map[string]int {
		t.Helper()
		listed := map[string]int{}
		for _, j := range h.jobs("-s", allStates) {
			listed[j.State]++
		}
		summed := map[string]int{}
		for _, counts := range h.summary() {
			for s, c := range counts {
				if c != 0 {
					summed[s] += c
				}
			}
		}
		sum := 0
		for s, c := range listed {
			sum += c
			if !strings.Contains(want, s) {
				t.Errorf("%s: %d jobs in state %s, want only %s", when, c, s, want)
			}
		}
		if total >= 0 && sum != total {
			t.Errorf("%s: %d jobs listed, want %d", when, sum, total)
		}
		if !maps.Equal(listed, summed) {
			t.Errorf("%s: the summary says %v, the listing %v", when, summed, listed)
		}
		t.Logf("%s: %v", when, listed)
		return listed
	}

	for i, delay := range []time.Duration{150 * time.Millisecond, 400 * time.Millisecond} {
		kill(delay, "mqdel", "--all", "-Q")
		check(fmt.Sprintf("mqdel %d killed", i), "HX", n)
	}
	h.run("mqdel", "--all", "-Q") // exit 1 when none is left
	check("mqdel done", "X", n)

	for i, delay := range []time.Duration{150 * time.Millisecond, 600 * time.Millisecond} {
		kill(delay, "mqsub", "--rerun", "--all", "-Q")
		check(fmt.Sprintf("rerun %d killed", i), "XQ", n)
	}
	h.ok("mqsub", "--rerun", "--all", "-Q")
	check("rerun done", "Q", n)

	h.ok("mqdel", "--all", "-Q")
	kill(200*time.Millisecond, "cls", "purge", "--ended-before", "0", "--batch", "1000")
	check("purge killed", "X", -1)
	h.ok("cls", "purge", "--ended-before", "0")
	if js := h.jobs("-s", allStates); len(js) != 0 {
		ids := make([]int64, 0, 3)
		for _, j := range js[:min(3, len(js))] {
			ids = append(ids, j.ID)
		}
		t.Errorf("%d jobs listed after the purge, e.g. %v", len(js), slices.Clip(ids))
	}
}

// TestCLSKilledDuringArraySubmit SIGKILLs the CLS while it commits a job
// array with a %limit (its members, the array's row and its limit in one
// commit): after a restart the array is there whole or not at all, the
// listing shows it as one line with every member counted, and mqsub said
// which in one line.
func TestCLSKilledDuringArraySubmit(t *testing.T) {
	const n = 200000
	h := newHarness(t)
	h.startCLS("--local", "0")
	done := make(chan result, 1)
	go func() {
		r, _ := runBin(90*time.Second, h.env(), h.dir, nil, "mqsub", "--array", fmt.Sprintf("1-%d%%3", n), "arr", "true")
		done <- r
	}()
	// Kill once the commit writes (the WAL grows), or as mqsub ends.
	wal := filepath.Join(h.home, "mq.db-wal")
	var r result
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if st, err := os.Stat(wal); err == nil && st.Size() > 2<<20 {
			break
		}
		if h.cls.exited() {
			t.Fatalf("the CLS exited on its own: %s", h.cls.stderr.String())
		}
	}
	h.stopCLS(syscall.SIGKILL, time.Minute)
	r = <-done
	t.Logf("mqsub after the kill: %s", r)
	if strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
		t.Errorf("mqsub's error is more than one line: %q", r.stderr)
	}

	h.startCLS("--local", "0")
	total := 0
	for _, c := range h.summary()["default"] {
		total += c
	}
	t.Logf("after the restart the metaqueue holds %d jobs", total)
	if total != 0 && total != n {
		t.Fatalf("the metaqueue holds %d jobs; want 0 or the whole array, %d", total, n)
	}
	if r.code == 0 && total != n {
		t.Errorf("mqsub said the array was submitted, the metaqueue holds %d jobs", total)
	}
	if strings.Contains(r.stderr, "nothing was added") && total != 0 {
		t.Errorf("mqsub said nothing was added, the metaqueue holds %d jobs", total)
	}
	if total == n {
		want := fmt.Sprintf("array 1-%d%%3, %d jobs: %d Q (at most 3 executing)", n, n, n)
		if out := h.ok("mqstat"); !strings.Contains(out, want) {
			t.Errorf("mqstat after the restart, want a line with %q:\n%s", want, clip(out))
		}
	}
	// The CLS takes the next array as ever.
	h.ok("mqsub", "--array", "1-10%2", "arr2", "true")
}
