package dc

import (
	"slices"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/dispatch"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/job"
)

// world lets every ready job go (a dispatch.World).
type world struct{}

func (world) Current(policy.Ready) bool                         { return true }
func (world) Allows(dispatch.Check, policy.Ready) (bool, error) { return true, nil }

// pool is a Pool over plain maps: every job on its own, inputs present
// where here says, nothing asked for.
type pool struct {
	skip   map[int64]bool // not candidates, put back
	here   map[int64]bool // inputs at the placeholder's place
	asked  []int64        // InputsAt asked for these
	parked []policy.Arrival
}

func (p *pool) Members(id int64) ([]int64, bool, bool) {
	if p.skip[id] {
		return nil, false, true
	}
	return []int64{id}, true, true
}
func (p *pool) LocalBytes(int64) int64            { return 0 }
func (p *pool) Estimate() (string, float64)       { return "t", 10 }
func (p *pool) Parked() ([]policy.Arrival, error) { return p.parked, nil }
func (p *pool) Present(string) bool               { return false }
func (p *pool) InputsPresent(id int64) bool       { return p.here[id] }
func (p *pool) InputsAt(id int64) (bool, error) {
	p.asked = append(p.asked, id)
	return p.here[id], nil
}

type fixedNet struct{}

func (fixedNet) Transfer(from, to policy.Site, bytes int64, files int) float64 {
	if from == to {
		return 0
	}
	return float64(files) + float64(bytes)/1e6
}

// TestPick: the chooser gets the jobs the pool makes candidates; the one
// chosen leaves the queue and the others go back; with no candidate the
// placeholder does not wait; a choice whose inputs are elsewhere is staged
// and another one taken.
func TestPick(t *testing.T) {
	dcPol, err := policy.Lookup("dc")
	if err != nil {
		t.Fatal(err)
	}
	sa, err := policy.Lookup("sa")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		pol    policy.Info
		jobs   []int64
		pool   *pool
		want   int64
		waited bool
		staged bool
		left   []int64
	}{
		{"empty queue", dcPol, nil, &pool{}, 0, false, false, nil},
		{"none a candidate", dcPol, []int64{1, 2}, &pool{skip: map[int64]bool{1: true, 2: true}}, 0, false, false, []int64{1, 2}},
		// Site 1 is B, where a placeholder is parked asking too.
		{"the data here wins", dcPol, []int64{1, 2, 3}, &pool{here: map[int64]bool{1: true, 2: true, 3: true}, parked: []policy.Arrival{{Site: 1}}}, 2, false, false, []int64{1, 3}},
		{"the data there waits", dcPol, []int64{1, 3}, &pool{here: map[int64]bool{1: true, 3: true}, parked: []policy.Arrival{{Site: 1}}}, 0, true, false, []int64{1, 3}},
		{"staged, none here: waits", dcPol, []int64{2}, &pool{}, 0, true, true, []int64{2}},
		{"sa: the inputs here", sa, []int64{1, 2}, &pool{here: map[int64]bool{1: true, 2: true}}, 1, false, false, []int64{2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newState()
			d.Count(1, 0)
			cur, far := d.At("A", ""), d.At("B", "")
			// Job 2's input is here, 1's and 3's far: DC keeps the data put.
			d.Locate("/in2", Loc{At: cur, Size: 1e9})
			d.Locate("/far", Loc{At: far, Size: 1e9})
			d.AddJob(1, &Files{In: []File{{"/far", -1, true}}})
			d.AddJob(2, &Files{In: []File{{"/in2", -1, true}}})
			d.AddJob(3, &Files{In: []File{{"/far", -1, true}}})
			q := policy.NewHeap(tc.pol.Order)
			for _, id := range tc.jobs {
				d.BecameReady(id, job.Waiting, t0)
				q.Push(policy.Ready{ID: id})
			}
			g := d.Gen()
			a := Asking{Placeholder: 7, Cur: cur, Latency: 0.1, Now: t0.Add(time.Second)}
			got, err := d.Pick(world{}, q, dispatch.Choosing, tc.pol, a, fixedNet{}, tc.pool)
			if err != nil {
				t.Fatal(err)
			}
			if got.ID != tc.want || got.Waited != tc.waited || got.Staged != tc.staged {
				t.Fatalf("picked %+v, want job %d, waited %v, staged %v", got, tc.want, tc.waited, tc.staged)
			}
			if want := map[bool]int64{true: 1}[tc.waited]; d.Waits() != want {
				t.Errorf("%d waits counted, want %d", d.Waits(), want)
			}
			if tc.staged && (got.Staging.Job.ID == 0 || !slices.Contains(tc.pool.asked, got.Staging.Job.ID)) {
				t.Errorf("staged %+v, but its inputs were not asked for (%v)", got.Staging, tc.pool.asked)
			}
			if (got.ID != 0) != (d.Gen() != g) {
				t.Errorf("a job taken moves the generation (before %d, after %d)", g, d.Gen())
			}
			var left []int64
			for {
				r, ok := q.Pop()
				if !ok {
					break
				}
				left = append(left, r.ID)
			}
			slices.Sort(left)
			if !slices.Equal(left, tc.left) {
				t.Errorf("left on the queue %v, want %v", left, tc.left)
			}
		})
	}
}

// shapes: placeholder 9 is too small for any job that asks; the others
// hold every job.
type shapes struct{ asks bool }

func (s shapes) AnyAsks() bool { return s.asks }
func (shapes) Class(ph int64) int32 {
	if ph == 9 {
		return 1
	}
	return 2
}
func (shapes) HoldsClass(class int32, _ int64) bool { return class != 1 }

// TestPickShapes: a job whose data is where only a placeholder too small
// for it is parked is not held back for that one (Asking.Shapes): the
// asking placeholder takes it. With every placeholder holding it, or no
// job asking for resources, DC waits for the one at its data.
func TestPickShapes(t *testing.T) {
	dcPol, err := policy.Lookup("dc")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		parked int64
		shapes dispatch.Shapes
		want   int64
	}{
		{"no shapes: waits", 9, nil, 0},
		{"no job asks: waits", 9, shapes{false}, 0},
		{"the one there is too small: taken here", 9, shapes{true}, 1},
		{"the one there holds it: waits", 8, shapes{true}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newState()
			d.Count(1, 0)
			cur, far := d.At("A", ""), d.At("B", "")
			d.Locate("/far", Loc{At: far, Size: 1e9})
			d.AddJob(1, &Files{In: []File{{"/far", -1, true}}})
			d.BecameReady(1, job.Waiting, t0)
			q := policy.NewHeap(dcPol.Order)
			q.Push(policy.Ready{ID: 1})
			p := &pool{here: map[int64]bool{1: true}, parked: []policy.Arrival{{Site: far, Placeholder: tc.parked}}}
			a := Asking{Placeholder: 7, Cur: cur, Latency: 0.1, Now: t0.Add(time.Second), Shapes: tc.shapes}
			got, err := d.Pick(world{}, q, dispatch.Choosing, dcPol, a, fixedNet{}, p)
			if err != nil {
				t.Fatal(err)
			}
			if got.ID != tc.want || got.Waited != (tc.want == 0) {
				t.Fatalf("picked %+v, want job %d", got, tc.want)
			}
		})
	}
}
