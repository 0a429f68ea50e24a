package packing

import (
	"slices"
	"testing"

	"github.com/mq-hpc/mq/internal/resource"
)

// needs is how long each job is expected to take (none: unknown).
type needs map[int64]float64

func (n needs) Need(id int64) float64 { return n[id] }

// noNeed says every job's time is unknown.
var noNeed = needs{}

// A job expected to take longer than any placeholder or site can run is
// said to wait, and why, with the longest there is; one that fits, of
// unknown length, or with nothing known yet (or one placeholder without
// a limit, now or gone) is not.
func TestTooLong(t *testing.T) {
	p := New()
	if got := p.TooLong(7200); got != "" {
		t.Errorf("nothing known: %q", got)
	}
	p.siteWalltime("short", 570)
	p.siteWalltime("long", 3420)
	const why = "expected to take 2h0m0s; the longest a placeholder or site runs a job is 57m0s (site long: its --walltime less a margin to report)"
	for _, tc := range []struct {
		need float64
		want string
	}{
		{0, ""},
		{600, ""},
		{3420, ""},
		{7200, why},
	} {
		if got := p.TooLong(tc.need); got != tc.want {
			t.Errorf("TooLong(%g) = %q, want %q", tc.need, got, tc.want)
		}
	}
	p.PlaceholderWalltime(1, 5000)
	if got := p.TooLong(7200); got != "expected to take 2h0m0s; the longest a placeholder or site runs a job is 1h23m20s (a placeholder's --walltime)" {
		t.Errorf("with a longer placeholder: %q", got)
	}
	p.PlaceholderGone(1)
	p.SiteGone("long")
	if got := p.TooLong(7200); got != "expected to take 2h0m0s; the longest a placeholder or site runs a job is 1h23m20s (a placeholder's --walltime)" {
		t.Errorf("the placeholder gone, the long site removed: %q", got)
	}
	p.PlaceholderWalltime(2, 0)
	if got := p.TooLong(1e6); got != "" {
		t.Errorf("a placeholder without a limit: %q", got)
	}
	p.PlaceholderGone(2)
	if got := p.TooLong(1e6); got != "" {
		t.Errorf("a placeholder without a limit, gone: %q", got)
	}
}

// The submit warnings and a job's detail say it too, after what a
// request cannot get (its first reason); a job that asks for nothing is
// warned of as well.
func TestUnholdablesTooLong(t *testing.T) {
	p := New()
	p.siteWalltime("s", 570)
	if err := p.Placeholder(1, resource.Capacity{CPUs: 4}); err != nil {
		t.Fatal(err)
	}
	p.Job(2, resource.Request{CPUs: 8}, resource.Category{})
	need := needs{1: 600, 2: 600, 3: 600, 4: 60}
	got := p.Unholdables(1, 4, need)
	want := []string{
		"2 jobs from 1 to 3 wait: expected to take 10m0s; the longest a placeholder or site runs a job is 9m30s (site s: its --walltime less a margin to report) (a site that holds it may be added)",
		"job 2 waits: needs 8 cores; the largest placeholder or site holds 4 (a site that holds it may be added)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Unholdables = %q\nwant %q", got, want)
	}
	if why, _ := p.Fit(4, 0, need); why != "" {
		t.Errorf("Fit of a job that fits: %q", why)
	}
	if why, _ := p.Fit(3, 0, need); why != "expected to take 10m0s; the longest a placeholder or site runs a job is 9m30s (site s: its --walltime less a margin to report)" {
		t.Errorf("Fit of a job too long: %q", why)
	}
}

// BenchmarkUnholdablesTooLong: the submit warnings of a 100,000-member
// array too long for every one of 512 placeholders registered (one op).
// The longest walltime is looked up once a submission, not once a job.
func BenchmarkUnholdablesTooLong(b *testing.B) {
	p := New()
	for ph := int64(1); ph <= 512; ph++ {
		p.PlaceholderWalltime(ph, 3420)
	}
	const n = 100_000
	need := make(needs, n)
	for id := int64(1); id <= n; id++ {
		need[id] = 7200
	}
	b.ResetTimer()
	for b.Loop() {
		if got := p.Unholdables(1, n, need); len(got) != 1 {
			b.Fatalf("%q", got)
		}
	}
}
