package dag

import (
	"testing"

	"github.com/mq-hpc/mq/job"
)

func (f *fx) hold(id int64) {
	f.t.Helper()
	ch, err := f.g.Hold(id)
	if err != nil {
		f.t.Fatalf("Hold(%d): %v", id, err)
	}
	f.apply("Hold", ch)
	f.check()
}

// TestAfterAnyReadiness: an after-any prerequisite waits for every job of
// its target to end in any state (Blocked included) and never blocks.
func TestAfterAnyReadiness(t *testing.T) {
	t.Parallel()
	after := func(f *fx, target string, afterAny ...string) int64 { return f.addAny(target, nil, afterAny) }
	runReadiness(t, []readiness{
		{"target without jobs waits", func(f *fx) (int64, job.State) { return after(f, "c", "a"), job.Waiting }},
		{"target queued", func(f *fx) (int64, job.State) { f.add("a"); return after(f, "c", "a"), job.Waiting }},
		{"target executing", func(f *fx) (int64, job.State) {
			f.set(f.add("a"), job.Executing)
			return after(f, "c", "a"), job.Waiting
		}},
		{"target held", func(f *fx) (int64, job.State) {
			f.hold(f.add("a"))
			return after(f, "c", "a"), job.Waiting
		}},
		{"target done", func(f *fx) (int64, job.State) {
			f.run(f.add("a"), job.Done)
			return after(f, "c", "a"), job.Queued
		}},
		{"target failed", func(f *fx) (int64, job.State) {
			f.run(f.add("a"), job.Failed)
			return after(f, "c", "a"), job.Queued
		}},
		{"target deleted", func(f *fx) (int64, job.State) {
			f.set(f.add("a"), job.Deleted)
			return after(f, "c", "a"), job.Queued
		}},
		{"target blocked counts as ended", func(f *fx) (int64, job.State) {
			f.run(f.add("a"), job.Failed)
			f.mustBe(f.add("b", "a"), job.Blocked)
			return after(f, "c", "b"), job.Queued
		}},
		{"target done, failed and running", func(f *fx) (int64, job.State) {
			f.run(f.add("a"), job.Done)
			f.run(f.add("a"), job.Failed)
			f.set(f.add("a"), job.Executing)
			return after(f, "c", "a"), job.Waiting
		}},
		{"after-ok failed still blocks", func(f *fx) (int64, job.State) {
			f.run(f.add("a"), job.Failed)
			f.run(f.add("b"), job.Failed)
			return f.addAny("c", []string{"a"}, []string{"b"}), job.Blocked
		}},
		{"after-ok incomplete waits", func(f *fx) (int64, job.State) {
			f.add("a")
			f.run(f.add("b"), job.Failed)
			return f.addAny("c", []string{"a"}, []string{"b"}), job.Waiting
		}},
		{"same target after-ok and after-any", func(f *fx) (int64, job.State) {
			f.run(f.add("a"), job.Failed)
			return f.addAny("c", []string{"a"}, []string{"a"}), job.Blocked
		}},
	})
}

// TestAfterAnyTransitions: dependents are re-evaluated when a target ends
// without its complete or bad status flipping, and when it reopens.
func TestAfterAnyTransitions(t *testing.T) {
	t.Parallel()
	runScenarios(t, []scenario{
		{"ends in each state in turn", func(f *fx) {
			a1, a2, a3 := f.add("a"), f.add("a"), f.add("a")
			c := f.addAny("c", nil, []string{"a"})
			f.run(a1, job.Failed) // a is bad from here on
			f.mustBe(c, job.Waiting)
			f.set(a2, job.Deleted)
			f.mustBe(c, job.Waiting)
			f.run(a3, job.Done) // only "ended" flips
			f.mustBe(c, job.Queued)
		}},
		{"new job in the target reopens it", func(f *fx) {
			f.run(f.add("a"), job.Failed)
			c := f.addAny("c", nil, []string{"a"})
			f.mustBe(c, job.Queued)
			f.add("a")
			f.mustBe(c, job.Waiting)
		}},
		{"cleanup and after-ok dependent of a failure", func(f *fx) {
			a := f.add("a")
			clean := f.addAny("clean", nil, []string{"a"})
			next := f.add("next", "a")
			f.run(a, job.Failed)
			f.mustBe(clean, job.Queued)
			f.mustBe(next, job.Blocked)
			f.run(clean, job.Done)
		}},
		{"rerun of the failed prerequisite after the after-any job ran", func(f *fx) {
			a := f.add("a")
			clean := f.addAny("clean", nil, []string{"a"})
			next := f.add("next", "a")
			f.run(a, job.Failed)
			f.run(clean, job.Done)
			f.revive(a)
			f.mustBe(a, job.Queued)
			f.mustBe(clean, job.Done) // it ran; a rerun does not undo it
			f.mustBe(next, job.Waiting)
			f.run(a, job.Done)
			f.mustBe(next, job.Queued)
		}},
		{"rerun of the failed prerequisite before the after-any job ran", func(f *fx) {
			a := f.add("a")
			clean := f.addAny("clean", nil, []string{"a"})
			f.run(a, job.Failed)
			f.mustBe(clean, job.Queued)
			f.revive(a)
			f.mustBe(clean, job.Waiting)
			f.run(a, job.Done)
			f.mustBe(clean, job.Queued)
		}},
		{"blocked target unblocked by a rerun", func(f *fx) {
			a := f.add("a")
			b := f.add("b", "a")
			c := f.addAny("c", nil, []string{"b"})
			f.run(a, job.Failed)
			f.mustBe(b, job.Blocked)
			f.mustBe(c, job.Queued)
			f.revive(a)
			f.mustBe(b, job.Waiting)
			f.mustBe(c, job.Waiting)
		}},
		{"rerun of the after-any job itself", func(f *fx) {
			a := f.add("a")
			clean := f.addAny("clean", nil, []string{"a"})
			f.run(a, job.Failed)
			f.run(clean, job.Failed)
			f.revive(clean)
			f.mustBe(clean, job.Queued)
		}},
	})
}

// TestAfterAnyInterning: lists that differ only in which half a target is
// in are different lists, and both halves come back as given.
func TestAfterAnyInterning(t *testing.T) {
	t.Parallel()
	g := New()
	a, b := g.AddTarget("a"), g.AddTarget("b")
	g.AddJob(1, Node{Target: g.AddTarget("x"), Prereqs: []TargetID{a, b}})
	g.AddJob(2, Node{Target: g.AddTarget("y"), Prereqs: []TargetID{a}, AfterAny: []TargetID{b}})
	g.AddJob(3, Node{Target: g.AddTarget("z"), AfterAny: []TargetID{a, b}})
	g.AddJob(4, Node{Target: g.AddTarget("w"), AfterAny: []TargetID{a}})
	for _, tc := range []struct {
		id      int64
		ok, any []TargetID
	}{
		{1, []TargetID{a, b}, nil},
		{2, []TargetID{a}, []TargetID{b}},
		{3, nil, []TargetID{a, b}},
		{4, nil, []TargetID{a}},
	} {
		n, _ := g.Node(tc.id)
		if len(n.Prereqs) != len(tc.ok) || len(n.AfterAny) != len(tc.any) ||
			(len(tc.ok) > 0 && n.Prereqs[0] != tc.ok[0]) || (len(tc.any) > 0 && n.AfterAny[0] != tc.any[0]) {
			t.Errorf("job %d: prereqs %v after-any %v, want %v, %v", tc.id, n.Prereqs, n.AfterAny, tc.ok, tc.any)
		}
		if cap(n.Prereqs) != len(n.Prereqs) {
			t.Errorf("job %d: after-ok list has spare capacity %d: an append would overwrite the after-any half", tc.id, cap(n.Prereqs))
		}
	}
}
