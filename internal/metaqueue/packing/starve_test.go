package packing

import (
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/resource"
)

// fill gives placeholder ph (cores free) jobs of one core from id on, all
// started, and returns the next free id.
func fill(t *testing.T, p *Packing, ph int64, cores int, id int64, now time.Time) int64 {
	t.Helper()
	p.Begin(now, ph, cores)
	for range cores {
		if !p.FitsNow(id, ph) {
			t.Fatalf("1-core job %d does not fit placeholder %d", id, ph)
		}
		if _, ok := p.Start(Run{id, 1}, ph); !ok {
			t.Fatalf("start of %d refused", id)
		}
		id++
	}
	return id
}

// A starving wide job reserves one placeholder, not every one it asks
// of; the reservation ends when it starts, wherever it starts; only the
// first job of a decision that cannot fit now waits for the placeholder.
func TestStarvationReservesOne(t *testing.T) {
	p := New()
	p.StarveAfter = time.Minute
	for ph := int64(1); ph <= 2; ph++ {
		if err := p.Placeholder(ph, resource.Capacity{CPUs: 4}); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Unix(1000, 0)
	next := fill(t, p, 1, 4, 1, t0)
	next = fill(t, p, 2, 4, next, t0)
	const wide, wide2 = 100, 101
	p.Job(wide, resource.Request{CPUs: 4}, resource.Category{})
	p.Job(wide2, resource.Request{CPUs: 4}, resource.Category{})
	small := next
	late := t0.Add(2 * time.Minute)

	// The first decision: wide is the first that cannot fit, so it waits
	// (from t0); wide2 behind it does not start a wait.
	p.Begin(t0, 1, 1)
	if p.FitsNow(wide, 1) || p.FitsNow(wide2, 1) {
		t.Fatal("a 4-core job fits a full placeholder")
	}
	if _, ok := p.since[wide2]; ok {
		t.Error("the second wide job started a wait behind the first")
	}
	// Past the bound, placeholder 1 is reserved for wide; 2 is not.
	p.Begin(late, 1, 1)
	p.FitsNow(wide, 1)
	p.Begin(late, 2, 1)
	p.FitsNow(wide, 2)
	if p.holds[1] != wide {
		t.Fatalf("holds %v, want placeholder 1 reserved for job %d", p.holds, wide)
	}
	if _, held := p.holds[2]; held {
		t.Fatalf("holds %v: a second placeholder drains for the same job", p.holds)
	}
	// A core frees on each: placeholder 1 keeps it, 2 takes a small job.
	p.Stop(Run{1, 1})
	p.Stop(Run{5, 1})
	p.Job(small, resource.Request{CPUs: 1}, resource.Category{})
	p.Begin(late, 1, 1)
	if p.FitsNow(small, 1) {
		t.Error("the reserved placeholder took a small job")
	}
	p.Begin(late, 2, 1)
	if !p.FitsNow(small, 2) {
		t.Error("the unreserved placeholder refused a small job")
	}
	// wide starts on placeholder 2 once it empties: placeholder 1 is free
	// of its reservation at once.
	for id := int64(6); id <= 8; id++ {
		p.Stop(Run{id, 1})
	}
	p.Begin(late, 2, 4)
	if !p.FitsNow(wide, 2) {
		t.Fatal("the wide job does not fit an empty placeholder")
	}
	if _, ok := p.Start(Run{wide, 1}, 2); !ok {
		t.Fatal("start refused")
	}
	if len(p.holds) != 0 {
		t.Errorf("holds %v after the wide job started elsewhere", p.holds)
	}
	p.Begin(late, 1, 1)
	if !p.FitsNow(small, 1) {
		t.Error("placeholder 1 still refuses small jobs after the wide one started elsewhere")
	}
}

// The bound follows the runs that ended: StarveRuns times their recent
// mean, within [MinStarveAfter, DefaultStarveAfter]; before any ended,
// how long the first attempt has run, in the same range;
// DefaultStarveAfter before any started; a set StarveAfter wins.
func TestStarveBoundFollowsRuns(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  time.Duration
		runs []time.Duration
		// running: an attempt started that long before the decision.
		running time.Duration
		want    time.Duration
	}{
		{"none yet", 0, nil, 0, DefaultStarveAfter},
		{"none ended, first running 3s", 0, nil, 3 * time.Second, 3 * time.Second},
		{"none ended, first running 10ms", 0, nil, 10 * time.Millisecond, MinStarveAfter},
		{"none ended, first running an hour", 0, nil, time.Hour, DefaultStarveAfter},
		{"ended runs win over the running", 0, []time.Duration{2 * time.Second}, time.Hour, 2 * StarveRuns * time.Second},
		{"seconds", 0, []time.Duration{2 * time.Second, 2 * time.Second}, 0, 2 * StarveRuns * time.Second},
		{"milliseconds", 0, []time.Duration{time.Millisecond}, 0, MinStarveAfter},
		{"hours", 0, []time.Duration{time.Hour}, 0, DefaultStarveAfter},
		{"zero runs ignored", 0, []time.Duration{0, -time.Second}, 0, DefaultStarveAfter},
		{"set", 10 * time.Second, []time.Duration{time.Hour}, 0, 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := New()
			p.StarveAfter = tc.set
			for _, d := range tc.runs {
				p.Ran(d)
			}
			if tc.running > 0 {
				t0 := time.Unix(1_000_000, 0)
				if err := p.Placeholder(1, resource.Capacity{CPUs: 4}); err != nil {
					t.Fatal(err)
				}
				p.Begin(t0, 1, 1)
				if _, ok := p.Start(Run{Job: 7, Attempt: 1}, 1); !ok {
					t.Fatal("a 1-core job did not start on a free 4-core placeholder")
				}
				p.Begin(t0.Add(tc.running), 1, 1)
			}
			if got := p.starveAfter(); got != tc.want {
				t.Errorf("bound %v, want %v", got, tc.want)
			}
		})
	}
}
