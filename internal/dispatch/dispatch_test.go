package dispatch_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/internal/dispatch"
	"github.com/mq-hpc/mq/internal/policy"
)

// The two picks run their checks in one order: the choosing chain is the
// ordered chain less the checks a chooser does without, and the checks
// that hold a job come before those that set one aside.
func TestFeasibilityChainsAgree(t *testing.T) {
	ordered := dispatch.Ordered.Checks()
	i := 0
	for _, f := range dispatch.Choosing.Checks() {
		for i < len(ordered) && ordered[i] != f {
			i++
		}
		if i == len(ordered) {
			t.Fatalf("choosing check %v is not in the ordered chain, or out of its order", f)
		}
	}
	var names []string
	for _, f := range ordered {
		names = append(names, f.String())
	}
	if got := strings.Join(names, " "); got != "heldByArray parkedInfeasible fitsWalltime fitsResources keptForPlan withinBudget inputsHere" {
		t.Errorf("ordered chain %s", got)
	}
	asideSeen := false
	for _, c := range dispatch.All.Checks() {
		if c.Holds() && asideSeen {
			t.Errorf("%v holds a job but runs after a check that sets one aside", c)
		}
		asideSeen = asideSeen || !c.Holds()
	}
}

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name  string
		chain dispatch.Chain
		job   Job
		want  dispatch.Verdict
		err   bool
	}{
		{"nothing refuses", dispatch.Ordered, Job{}, dispatch.Feasible, false},
		{"array at its limit holds", dispatch.Ordered, Job{Refuse: 1 << dispatch.HeldByArray}, dispatch.Held, false},
		{"deadline parks", dispatch.Ordered, Job{Refuse: 1 << dispatch.ParkedInfeasible}, dispatch.Held, false},
		{"too long sets aside", dispatch.Ordered, Job{Refuse: 1 << dispatch.FitsWalltime}, dispatch.Aside, false},
		{"plan sets aside", dispatch.Ordered, Job{Refuse: 1 << dispatch.KeptForPlan}, dispatch.Aside, false},
		{"budget sets aside", dispatch.Ordered, Job{Refuse: 1 << dispatch.WithinBudget}, dispatch.Aside, false},
		{"inputs elsewhere set aside", dispatch.Ordered, Job{Refuse: 1 << dispatch.InputsHere}, dispatch.Aside, false},
		{"holding check first", dispatch.Ordered, Job{Refuse: 1<<dispatch.WithinBudget | 1<<dispatch.HeldByArray}, dispatch.Held, false},
		{"not in the chain", dispatch.Choosing, Job{Refuse: 1<<dispatch.KeptForPlan | 1<<dispatch.InputsHere | 1<<dispatch.ParkedInfeasible}, dispatch.Feasible, false},
		{"an error sets aside", dispatch.Ordered, Job{Fail: 1 << dispatch.InputsHere}, dispatch.Aside, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &Harness{Jobs: map[int64]*Job{1: &tc.job}}
			v, err := dispatch.Run(h, tc.chain, policy.Ready{ID: 1})
			if v != tc.want || (err != nil) != tc.err {
				t.Errorf("got %v, %v; want %v, error %v", v, err, tc.want, tc.err)
			}
		})
	}
}

// hold and aside build a Job refused by one check.
func hold() *Job  { return &Job{Refuse: 1 << dispatch.HeldByArray} }
func aside() *Job { return &Job{Refuse: 1 << dispatch.FitsWalltime} }

// An ordered queue's pick: the first job in order the chain lets go,
// within the window; set-aside jobs go back, held and stale ones not.
func TestFirst(t *testing.T) {
	many := func(n int, mk func() *Job) map[int64]*Job {
		jobs := map[int64]*Job{}
		for id := range int64(n) {
			jobs[id+1] = mk()
		}
		return jobs
	}
	for _, tc := range []struct {
		name   string
		n      int
		jobs   map[int64]*Job
		want   int64 // 0: none
		err    bool
		remain []int64 // the heap after, in order
	}{
		{"empty", 0, nil, 0, false, nil},
		{"the first", 3, nil, 1, false, []int64{2, 3}},
		{"stale skipped and dropped", 3, map[int64]*Job{1: {Stale: true}}, 2, false, []int64{3}},
		{"held dropped", 3, map[int64]*Job{1: hold(), 2: hold()}, 3, false, nil},
		{"aside back", 3, map[int64]*Job{1: aside(), 2: aside()}, 3, false, []int64{1, 2}},
		{"none fits", 2, map[int64]*Job{1: aside(), 2: aside()}, 0, false, []int64{1, 2}},
		{"window of aside jobs", policy.Window + 1, many(policy.Window, aside), 0, false, nil},
		{"held ones do not count", policy.Window + 1, many(policy.Window, hold), policy.Window + 1, false, nil},
		{"stale ones do not count", policy.Window + 1, many(policy.Window, func() *Job { return &Job{Stale: true} }), policy.Window + 1, false, nil},
		{"error: back and told", 3, map[int64]*Job{1: aside(), 2: {Fail: 1 << dispatch.InputsHere}}, 0, true, []int64{1, 2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := heap(tc.n)
			h := &Harness{Jobs: tc.jobs}
			r, ok, err := dispatch.First(h, q, dispatch.Ordered, &dispatch.Scratch{})
			if got := map[bool]int64{true: r.ID}[ok]; got != tc.want || (err != nil) != tc.err {
				t.Fatalf("got %d (%v), %v; want %d, error %v", r.ID, ok, err, tc.want, tc.err)
			}
			if tc.err && !errors.Is(err, errCheck) {
				t.Errorf("error %v, not the check's", err)
			}
			rest := drain(q)
			if tc.name == "window of aside jobs" {
				// The window's jobs went back; the one past it was not looked at.
				if len(rest) != policy.Window+1 {
					t.Errorf("heap after: %d jobs, want %d", len(rest), policy.Window+1)
				}
				return
			}
			if !slices.Equal(rest, tc.remain) {
				t.Errorf("heap after: %v, want %v", rest, tc.remain)
			}
		})
	}
}

// A choosing queue's look: take sees the jobs the chain lets go, in
// order; what it keeps and what was set aside go back, all but the one
// chosen.
func TestExamine(t *testing.T) {
	q := heap(6)
	h := &Harness{Jobs: map[int64]*Job{1: hold(), 2: aside(), 3: {Stale: true}, 6: {Refuse: 1 << dispatch.KeptForPlan}}}
	var took []int64
	popped, err := dispatch.Examine(h, q, dispatch.Choosing, nil, func(r policy.Ready) (bool, error) {
		took = append(took, r.ID)
		return r.ID != 5, nil // 5 is dropped (a bundle held back)
	})
	if err != nil {
		t.Fatal(err)
	}
	// 6's plan is not a choosing queue's check.
	if want := []int64{4, 5, 6}; !slices.Equal(took, want) {
		t.Errorf("take saw %v, want %v", took, want)
	}
	ids := func(rs []policy.Ready) (out []int64) {
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	if want := []int64{2, 4, 6}; !slices.Equal(ids(popped), want) {
		t.Errorf("popped %v, want %v", ids(popped), want)
	}
	dispatch.Restore(q, popped, 4)
	if got, want := drain(q), []int64{2, 6}; !slices.Equal(got, want) {
		t.Errorf("heap after choosing 4: %v, want %v", got, want)
	}
	q = heap(2)
	popped, _ = dispatch.Examine(h, q, dispatch.Choosing, popped[:0], func(policy.Ready) (bool, error) { return true, nil })
	dispatch.Restore(q, popped, 0)
	if got, want := drain(q), []int64{2}; !slices.Equal(got, want) {
		t.Errorf("heap after a wait: %v, want %v (1 is held)", got, want)
	}
	_, err = dispatch.Examine(&Harness{}, heap(2), dispatch.Choosing, nil, func(policy.Ready) (bool, error) { return false, errCheck })
	if !errors.Is(err, errCheck) {
		t.Errorf("take's error: %v", err)
	}
}

// Inputs are asked for at the placeholder's place for no more jobs than
// it has free slots (no free slot counts as one); a job already marked
// keeps going.
func TestMayStage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		marked bool
		here   int // jobs marked here already
		free   int
		want   bool
	}{
		{"none marked", false, 0, 1, true},
		{"no free slot counts as one", false, 0, 0, true},
		{"as many marked as free slots", false, 2, 2, false},
		{"fewer marked than free slots", false, 1, 2, true},
		{"one marked, no free slot", false, 1, 0, false},
		{"marked keeps going", true, 3, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := dispatch.MayStage(tc.marked, tc.here, tc.free); got != tc.want {
				t.Errorf("MayStage(%v, %d, %d) = %v, want %v", tc.marked, tc.here, tc.free, got, tc.want)
			}
		})
	}
}

// A choice whose inputs are elsewhere is staged here and the placeholder
// gets the chooser's choice among those whose inputs are here, or waits;
// patience gives the oldest job anyway.
func TestChoose(t *testing.T) {
	cands := func(ids ...int64) []policy.Candidate {
		var cs []policy.Candidate
		for _, id := range ids {
			cs = append(cs, policy.Candidate{ID: id, QueueTime: float64(100 - id)})
		}
		return cs
	}
	for _, tc := range []struct {
		name     string
		jobs     map[int64]*Job
		never    []int64 // what the chooser will not take
		patience float64
		want     int64 // 0: wait
		staged   int64 // the first choice, staged; 0: none
	}{
		{"inputs here", nil, nil, 0, 1, 0},
		{"staged, another here", map[int64]*Job{1: {Absent: true}}, nil, 0, 2, 1},
		{"staged, none other here", map[int64]*Job{1: {Absent: true}, 2: {Absent: true}, 3: {Absent: true}}, nil, 0, 0, 1},
		{"chooser waits", nil, []int64{1, 2, 3}, 0, 0, 0},
		{"patience: the oldest", nil, []int64{1, 2, 3}, 50, 1, 0},
		{"patience not yet", nil, []int64{1, 2, 3}, 1000, 0, 0},
		{"patience: not without its inputs", map[int64]*Job{1: {Absent: true}}, []int64{1, 2, 3}, 50, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &Harness{Jobs: tc.jobs}
			c, err := dispatch.Choose(chooser{tc.never}, policy.Snapshot{}, cands(1, 2, 3), h, tc.patience)
			if err != nil {
				t.Fatal(err)
			}
			got := map[bool]int64{false: c.Job.ID}[c.Wait]
			staged := map[bool]int64{true: c.Staging.Job.ID}[c.Staged]
			if got != tc.want || staged != tc.staged {
				t.Errorf("got %d, staged %d; want %d, staged %d", got, staged, tc.want, tc.staged)
			}
			if tc.staged != 0 && !slices.Equal(h.Asked, []int64{tc.staged}) {
				t.Errorf("asked for %v, want %d", h.Asked, tc.staged)
			}
		})
	}
}

// Patience is for choosers without a queue-time term of their own.
func TestPatience(t *testing.T) {
	for _, p := range policy.All() {
		if p.Kind != policy.Choosing {
			continue
		}
		got := dispatch.Patience(p)
		if want := map[bool]float64{true: 0, false: dispatch.ChoosePatience.Seconds()}[p.NewDC != nil]; got != want {
			t.Errorf("%s: patience %g, want %g", p.Name, got, want)
		}
	}
}

// TestFits: a job's estimate, else its queue's ceiling, is measured
// against the walltime left; no walltime takes anything.
func TestFits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		est               float32
		ceiling, walltime float64
		want              bool
	}{
		{10, 0, 0, true}, {10, 0, 10, true}, {10, 0, 9, false},
		{0, 30, 60, true}, {0, 90, 60, false}, {0, 0, 60, true},
		{20, 90, 60, true}, // the estimate wins over the ceiling
	} {
		if got := dispatch.Fits(tc.est, tc.ceiling, tc.walltime); got != tc.want {
			t.Errorf("Fits(est %g, ceiling %g, walltime %g) = %v, want %v", tc.est, tc.ceiling, tc.walltime, got, tc.want)
		}
	}
}

// Skip is the chain of the checks marked idle, whatever their place.
func TestSkip(t *testing.T) {
	none := [...]bool{dispatch.InputsHere: false} // the last check sizes the array
	if got := dispatch.Skip(none); got != 0 {
		t.Errorf("nothing idle: %v", got.Checks())
	}
	two := dispatch.Skip([...]bool{dispatch.HeldByArray: true, dispatch.InputsHere: true})
	if want := dispatch.Chain(1<<dispatch.HeldByArray | 1<<dispatch.InputsHere); two != want {
		t.Errorf("two idle: %v, want %v", two.Checks(), want.Checks())
	}
	all := none
	for i := range all {
		all[i] = true
	}
	if got := dispatch.Skip(all); got != dispatch.All || dispatch.Ordered&^got != 0 {
		t.Errorf("every check idle: %v", got.Checks())
	}
}
