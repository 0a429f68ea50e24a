package policy

import (
	"iter"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// net is table 6.2's WAN: 1.2 s per file plus 5,000 B/s, between any two
// different sites.
type testNet struct{ lat, rate float64 }

func (n testNet) Transfer(from, to Site, bytes int64, files int) float64 {
	if from == to {
		return 0
	}
	return float64(files)*n.lat + float64(bytes)/n.rate
}

var wan = testNet{lat: 1.2, rate: 5000}

func seq(cs ...Candidate) iter.Seq[Candidate] { return slices.Values(cs) }

// job is a candidate whose files sit at site.
func job(id int64, site Site, bytes int64, runtime, queued float64) Candidate {
	return Candidate{ID: id, QueueTime: queued, Runtime: runtime,
		Inputs: []Input{{Site: site, Bytes: bytes, Files: 1}}}
}

func TestDCChoose(t *testing.T) {
	t.Parallel()
	dc := DefaultDC(0.5)
	soon := []Arrival{{Site: 2, In: 5}, {Site: 3, In: 7}}
	tests := []struct {
		name     string
		cur      Site
		future   []Arrival
		ready    []Candidate
		dc       DC
		wantID   int64 // 0 = wait
		examined int
	}{
		{"nothing ready waits", 1, soon, nil, dc, 0, 0},
		{"local job beats an older remote one", 1, soon,
			[]Candidate{job(1, 2, 45000, 0.6, 10), job(2, 1, 45000, 0.6, 0)}, dc, 2, 2},
		{"every job remote and its host due soon: wait", 1, soon,
			[]Candidate{job(1, 2, 45000, 0.6, 0), job(2, 3, 45000, 0.6, 0)}, dc, 0, 2},
		// 25 * (1.2 + 9) = 255 s of penalty: a host due in 300 s is not worth it.
		{"data host too far away: run remote now", 1, []Arrival{{Site: 2, In: 300}},
			[]Candidate{job(1, 2, 45000, 0.6, 0)}, dc, 1, 1},
		{"data host due just inside the penalty: wait", 1, []Arrival{{Site: 2, In: 250}},
			[]Candidate{job(1, 2, 45000, 0.6, 0)}, dc, 0, 1},
		{"no prediction yet: run the oldest", 1, nil,
			[]Candidate{job(1, 2, 45000, 0.6, 0), job(2, 3, 45000, 0.6, 0)}, dc, 1, 2},
		{"external input costs the same everywhere: run", 1, soon,
			[]Candidate{job(1, -1, 550, 5, 0)}, dc, 1, 1},
		{"no inputs: longest queued first", 1, soon,
			[]Candidate{{ID: 1, QueueTime: 1}, {ID: 2, QueueTime: 3}, {ID: 3, QueueTime: 2}}, dc, 2, 3},
		{"equal priorities: first examined wins", 1, soon,
			[]Candidate{{ID: 7}, {ID: 8}}, dc, 7, 2},
		// Waited long enough: DA = 5 - 255 = -250 s = -25000 units; 0.5 s
		// latency needs 12,500 s of queue time.
		{"queue time overrides affinity", 1, soon,
			[]Candidate{job(1, 2, 45000, 0.6, 12501)}, dc, 1, 1},
		{"queue time just short of it", 1, soon,
			[]Candidate{job(1, 2, 45000, 0.6, 12499)}, dc, 0, 1},
		{"only N soonest arrivals count", 1,
			[]Arrival{{Site: 4, In: 1}, {Site: 5, In: 2}, {Site: 2, In: 3}},
			[]Candidate{job(1, 2, 45000, 0.6, 0)}, DC{N: 2, Penalty: 25, MaxExamined: 128, PlaceholderLatency: 0.5}, 1, 1},
		{"the third arrival counts with N=3", 1,
			[]Arrival{{Site: 4, In: 1}, {Site: 5, In: 2}, {Site: 2, In: 3}},
			[]Candidate{job(1, 2, 45000, 0.6, 0)}, DC{N: 3, Penalty: 25, MaxExamined: 128, PlaceholderLatency: 0.5}, 0, 1},
		{"MaxExamined stops the walk", 1, soon,
			[]Candidate{job(1, 2, 45000, 0.6, 0), job(2, 2, 45000, 0.6, 0), job(3, 1, 45000, 0.6, 0)},
			DC{N: 32, Penalty: 25, MaxExamined: 2, PlaceholderLatency: 0.5}, 0, 2},
		{"penalty 0 ignores data", 1, soon,
			[]Candidate{job(1, 2, 45000, 0.6, 0), job(2, 1, 45000, 0.6, 0)},
			DC{N: 32, Penalty: 0, MaxExamined: 128, PlaceholderLatency: 0.5}, 1, 2},
		{"a job split across sites goes where most of it is", 1, []Arrival{{Site: 2, In: 1}, {Site: 3, In: 1}},
			[]Candidate{{ID: 1, Inputs: []Input{{Site: 2, Bytes: 1000, Files: 1}, {Site: 3, Bytes: 90000, Files: 1}}}}, dc, 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.dc.Choose(Snapshot{Current: tc.cur, Future: tc.future, Ready: seq(tc.ready...), Net: wan})
			got := int64(0)
			if !d.Wait {
				got = d.Job.ID
			}
			if got != tc.wantID || d.Examined != tc.examined {
				t.Fatalf("chose %d (wait=%v, priority %.1f, examined %d), want %d examined %d",
					got, d.Wait, d.Priority, d.Examined, tc.wantID, tc.examined)
			}
			if d.Wait && len(tc.ready) > 0 && d.Priority >= 0 {
				t.Fatalf("waited with a best priority of %v", d.Priority)
			}
		})
	}
}

func TestDCPriorityFormula(t *testing.T) {
	t.Parallel()
	// Worked by hand: current site 1; job's 16 files (720,000 B) at site 2.
	// cost(cur) = 0 + 25*(16*1.2 + 144) + 9.6 = 4089.6
	// site 2 due in 40 s: cost = 40 + 0 + 9.6 = 49.6; site 3 in 10 s: 10 + 4080 + 9.6.
	// DA = 49.6 - 4089.6 = -4040 s = -404,000 units; queue 101 s / 0.5 = 202.
	c := Candidate{ID: 9, QueueTime: 101, Runtime: 9.6, Inputs: []Input{{Site: 2, Bytes: 720000, Files: 16}}}
	d := DefaultDC(0.5).Choose(Snapshot{Current: 1, Future: []Arrival{{Site: 3, In: 10}, {Site: 2, In: 40}},
		Ready: seq(c), Net: wan})
	if want := -404000.0 + 202; math.Abs(d.Priority-want) > 1e-6 || !d.Wait {
		t.Fatalf("priority %v wait %v, want %v and wait", d.Priority, d.Wait, want)
	}
	// Seconds as the cost unit: -4040 + 202.
	sec := DefaultDC(0.5)
	sec.CostUnit = 1
	if d := sec.Choose(Snapshot{Current: 1, Future: []Arrival{{Site: 3, In: 10}, {Site: 2, In: 40}},
		Ready: seq(c), Net: wan}); math.Abs(d.Priority-(-4040+202)) > 1e-9 {
		t.Fatalf("priority in seconds %v", d.Priority)
	}
}

// TestDCNoStarvation: a job that keeps being held back for its data host is
// dispatched once its queue time reaches the bound in the DC comment, and
// not before.
func TestDCNoStarvation(t *testing.T) {
	t.Parallel()
	dc := DefaultDC(1.3 / 2)
	future := []Arrival{{Site: 2, In: 0}} // its data host is always "due now"
	c := job(1, 2, 85000, 0.7, 0)
	da := -25 * (1.2 + 85000/5000.0) // seconds
	bound := -da / dc.CostUnit * dc.PlaceholderLatency
	var dispatchedAt float64 = -1
	for q := 0.0; q < 2*bound; q += 1 {
		c.QueueTime = q
		d := dc.Choose(Snapshot{Current: 1, Future: future, Ready: seq(c), Net: wan})
		if !d.Wait {
			dispatchedAt = q
			break
		}
	}
	if dispatchedAt < 0 || dispatchedAt < bound-1 || dispatchedAt > bound+1 {
		t.Fatalf("dispatched at queue time %v, bound %v", dispatchedAt, bound)
	}
}

// naive computes Data_Affinity_R_C straight from the thesis's equations.
func naive(d DC, c Candidate, cur Site, future []Arrival, net Network, holds func(int32, Candidate) bool) float64 {
	f := slices.Clone(future)
	slices.SortStableFunc(f, func(a, b Arrival) int {
		switch {
		case a.In < b.In:
			return -1
		case a.In > b.In:
			return 1
		}
		return 0
	})
	if len(f) > d.N {
		f = f[:d.N]
	}
	if holds != nil {
		f = slices.DeleteFunc(f, func(a Arrival) bool { return !holds(a.Class, c) })
	}
	if len(f) == 0 {
		return 0
	}
	cost := func(arr float64, s Site) float64 {
		var t float64
		for _, in := range c.Inputs {
			t += net.Transfer(in.Site, s, in.Bytes, in.Files)
		}
		return arr + d.Penalty*t + c.Runtime
	}
	m := math.Inf(1)
	for _, a := range f {
		m = min(m, cost(a.In, a.Site))
	}
	return m - cost(0, cur)
}

// TestDCMatchesEquations checks the shortcut in upcoming against the plain
// minimum over all N arrivals, on random snapshots.
func TestDCMatchesEquations(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 2000; iter++ {
		d := DC{N: 1 + rng.IntN(40), Penalty: rng.Float64() * 50, MaxExamined: 128, PlaceholderLatency: 0.5, CostUnit: 0.01}
		nsites := 1 + rng.IntN(6)
		var future []Arrival
		for i := rng.IntN(50); i > 0; i-- {
			future = append(future, Arrival{Site: Site(rng.IntN(nsites)), In: float64(rng.IntN(30)), Class: int32(rng.IntN(3))})
		}
		var c Candidate
		for i := rng.IntN(4); i > 0; i-- {
			c.Inputs = append(c.Inputs, Input{Site: Site(rng.IntN(nsites+1) - 1), Bytes: rng.Int64N(100000), Files: 1 + rng.IntN(3)})
		}
		c.Runtime = rng.Float64() * 10
		cur := Site(rng.IntN(nsites))
		// Half the snapshots say which classes hold the job (class 0
		// holds every job, a job of size k fits classes >= k).
		var holds func(int32, Candidate) bool
		if iter%2 == 1 {
			c.ID = int64(rng.IntN(3))
			holds = func(class int32, c Candidate) bool { return int64(class) >= c.ID || class == 0 }
		}
		want := naive(d, c, cur, future, wan, holds)
		got := d.relativeCost(c, cur, wan, holds, d.upcoming(future, holds != nil))
		if math.Abs(got-want) > 1e-6*max(1, math.Abs(want)) {
			t.Fatalf("iter %d: relative cost %v, equations give %v (cand %+v cur %d future %v N %d)",
				iter, got, want, c, cur, future, d.N)
		}
	}
}

// TestDCHolds: DC does not hold a job back for arrivals that cannot run it
// (Snapshot.Holds): a wide job whose input sits where only small
// placeholders arrive goes to the asking placeholder, which holds it,
// instead of waiting out DC's starvation bound.
func TestDCHolds(t *testing.T) {
	t.Parallel()
	wide := job(7, 2, 1<<20, 10, 0)
	small := []Arrival{{Site: 2, In: 1, Class: 1}}
	tests := []struct {
		name     string
		future   []Arrival
		holds    func(int32, Candidate) bool
		wantWait bool
	}{
		{"no classes: waits for the placeholder at its data", small, nil, true},
		{"that placeholder cannot hold it: taken here", small, func(class int32, _ Candidate) bool { return class != 1 }, false},
		{"it can: waits", small, func(int32, Candidate) bool { return true }, true},
		{"one that can arrives there too: waits", append(slices.Clone(small), Arrival{Site: 2, In: 3, Class: 2}),
			func(class int32, _ Candidate) bool { return class != 1 }, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := DefaultDC(0.5).Choose(Snapshot{Current: 1, Future: tc.future, Ready: seq(wide), Net: wan, Holds: tc.holds})
			if d.Wait != tc.wantWait {
				t.Fatalf("Wait = %v (priority %v), want %v", d.Wait, d.Priority, tc.wantWait)
			}
		})
	}
}

func TestDCDoesNotReorderFuture(t *testing.T) {
	t.Parallel()
	future := make([]Arrival, 40)
	for i := range future {
		future[i] = Arrival{Site: Site(i), In: float64(40 - i)}
	}
	before := slices.Clone(future)
	DefaultDC(0.5).Choose(Snapshot{Current: 1, Future: future, Ready: seq(job(1, 2, 1, 1, 0)), Net: wan})
	if !slices.Equal(before, future) {
		t.Fatal("Choose reordered the caller's arrivals")
	}
}

// BenchmarkDCDecision100k is one decision for a placeholder with 100,000
// ready jobs, each with 16 input files at one of 32 hosts, and 31 other
// placeholders predicted. Target: <= 1 ms; at most 128 jobs are examined.
func BenchmarkDCDecision100k(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	ready := make([]Candidate, 100000)
	for i := range ready {
		ready[i] = Candidate{ID: int64(i + 1), QueueTime: float64(100000 - i), Runtime: 10,
			Inputs: []Input{{Site: Site(rng.IntN(32)), Bytes: 720000, Files: 16}}}
	}
	var future []Arrival
	for s := 1; s < 32; s++ {
		future = append(future, Arrival{Site: Site(s), In: rng.Float64() * 60})
	}
	dc := DefaultDC(0.65)
	b.ReportAllocs()
	for b.Loop() {
		d := dc.Choose(Snapshot{Current: 0, Future: future, Ready: slices.Values(ready), Net: wan})
		if d.Examined != 128 {
			b.Fatalf("examined %d", d.Examined)
		}
	}
}

// BenchmarkFCFSHeap100k is the baseline for BenchmarkDCDecision100k: what
// an FCFS dispatch costs the live CLS today, one Pop and one Push on a heap
// of 100,000 ready jobs.
func BenchmarkFCFSHeap100k(b *testing.B) {
	h := NewHeap(FCFS{})
	for i := range 100000 {
		h.Push(Ready{ID: int64(i + 1)})
	}
	next := int64(100001)
	for b.Loop() {
		h.Pop()
		h.Push(Ready{ID: next})
		next++
	}
}
