//go:build e2e

package e2e

import (
	"strings"
	"testing"
)

// TestArrayOverflowAndDeleteMany: mqsub --array spanning all of int64 is
// refused at once (it once overflowed past the member limit and spooled
// for ever), and mqdel of an array of more members than a reply lists
// deletes them all and says so (it once replied "frame exceeds 4194304
// bytes").
func TestArrayOverflowAndDeleteMany(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "0")
	r := h.run("mqsub", "--array", "0-9223372036854775807", "t", "true")
	if r.code != 2 || !strings.Contains(r.stderr, "the limit is 10000000") {
		t.Fatalf("mqsub --array 0-9223372036854775807: %s", r)
	}
	const n = 150_000 // above the 100,000 ids a reply lists
	r = h.run("mqsub", "--array", "1-150000", "arr", "true")
	ids := strings.Fields(r.stdout)
	if r.code != 0 || len(ids) != n {
		t.Fatalf("mqsub --array 1-%d: exit %d, %d ids, stderr %q", n, r.code, len(ids), r.stderr)
	}
	rng := ids[0] + "-" + ids[n-1]
	r = h.run("mqdel", rng)
	if r.code != 0 || strings.Count(r.stdout, "\n") != 100_000 || r.stderr != "mqdel: deleted 50000 more jobs, not listed (150000 in all)\n" {
		t.Fatalf("mqdel %s: exit %d, %d lines, stderr %q", rng, r.code, strings.Count(r.stdout, "\n"), r.stderr)
	}
	if left := h.jobs("-t", "arr", "-s", "WQEB"); len(left) != 0 {
		t.Fatalf("%d members left after mqdel", len(left))
	}
}
