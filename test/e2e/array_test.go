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

// TestArrayLimit: mqsub --array 1-6%2 runs at most 2 members at once with
// free slots to spare (a job submitted after them runs meanwhile), starts
// the next as one ends, and mqstat shows the array as one line, lists its
// members with --array, and names it in -j; --json stays per job.
func TestArrayLimit(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "4")
	// Each member marks its start, then waits for its gate.
	r := h.run("mqsub", "--array", "1-6%2", "arr", `touch started-{}; while [ ! -e gate-{} ]; do sleep 0.05; done`)
	ids := strings.Fields(r.stdout)
	if r.code != 0 || len(ids) != 6 {
		t.Fatalf("mqsub --array 1-6%%2: %s", r)
	}
	member := func(i int) int64 { id, _ := strconv.ParseInt(ids[i-1], 10, 64); return id }
	started := func() (n int) {
		for i := 1; i <= 6; i++ {
			if _, err := os.Stat(filepath.Join(h.dir, fmt.Sprintf("started-%d", i))); err == nil {
				n++
			}
		}
		return n
	}
	// A job after the array is dispatched past the held members.
	solo := h.submit("solo", "true")
	h.waitState(solo, "D", 60*time.Second)
	if n := started(); n > 2 {
		t.Fatalf("%d members started; the cap is 2", n)
	}

	done := 0
	gated := map[int]bool{}
	for done < 6 {
		want := min(6, done+2)
		waitFor(t, 60*time.Second, func() error {
			if n := started(); n > done+2 {
				t.Fatalf("%d members started with %d done; the cap is 2", n, done)
			} else if n != want {
				return fmt.Errorf("%d members started with %d done, want %d", n, done, want)
			}
			return nil
		})
		if n := len(h.jobs("-s", "E", "-t", "arr")); n != want-done {
			t.Fatalf("%d members executing with %d done, want %d", n, done, want-done)
		}
		// End one that started.
		for i := 1; i <= 6; i++ {
			if _, err := os.Stat(filepath.Join(h.dir, fmt.Sprintf("started-%d", i))); err == nil && !gated[i] {
				gated[i] = true
				os.WriteFile(filepath.Join(h.dir, fmt.Sprintf("gate-%d", i)), nil, 0o644)
				h.waitState(member(i), "D", 60*time.Second)
				done++
				break
			}
		}
	}

	// One line for the array in the listing, none per member.
	out := h.ok("mqstat")
	line := fmt.Sprintf("%d-%d ", member(1), member(6))
	if !strings.Contains(out, line) || !strings.Contains(out, "array 1-6%2, 6 jobs: 6 D (at most 2 executing)") {
		t.Fatalf("mqstat does not show the array as one line:\n%s", out)
	}
	for i := 1; i <= 6; i++ {
		if strings.Contains(out, "\n"+ids[i-1]+" ") {
			t.Fatalf("mqstat lists member %d on its own line:\n%s", i, out)
		}
	}
	if !strings.Contains(out, fmt.Sprintf("\n%d ", solo)) {
		t.Fatalf("mqstat does not list job %d:\n%s", solo, out)
	}
	// --array lists the members; -j names the array; --json is per job.
	out = h.ok("mqstat", "--array", ids[3])
	if n := strings.Count(out, "\n"); n != 7 {
		t.Fatalf("mqstat --array %s: %d lines, want a header and 6:\n%s", ids[3], n, out)
	}
	if out = h.ok("mqstat", "-j", ids[3]); !strings.Contains(out, fmt.Sprintf("jobs %d-%d, array 1-6%%2", member(1), member(6))) {
		t.Fatalf("mqstat -j %s does not name its array:\n%s", ids[3], out)
	}
	if n := len(h.jobs("-t", "arr")); n != 6 {
		t.Fatalf("mqstat --json lists %d members, want 6", n)
	}
	if r = h.run("mqstat", "--array", strconv.FormatInt(solo, 10)); r.code != 1 || !strings.Contains(r.stderr, "in no job array") {
		t.Fatalf("mqstat --array on a job in no array: %s", r)
	}
}
