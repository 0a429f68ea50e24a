package dag

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/job"
)

// fx drives a Graph the way the metaqueue does and keeps its own record of
// every job (terminal ones included), updated only from the Changes the
// graph returns. check compares that record with the graph and with a
// from-scratch oracle of the rules in the package comment.
type fx struct {
	t     testing.TB
	g     *Graph
	next  int64
	jobs  map[int64]*fxJob
	order []int64
}

type fxJob struct {
	target  TargetID
	prereqs []TargetID
	any     []TargetID // after-any prerequisites
	est     float32
	queue   int32
	state   job.State
}

func newFx(t testing.TB) *fx {
	return &fx{t: t, g: New(), next: 1, jobs: map[int64]*fxJob{}}
}

// tid returns a target's id, creating it on first use (as targetFor does).
func (f *fx) tid(name string) TargetID {
	if id, ok := f.g.Lookup(name); ok {
		return id
	}
	want := f.g.NextTargetID()
	id := f.g.AddTarget(name)
	if id != want {
		f.t.Fatalf("AddTarget(%s) = %d, NextTargetID said %d", name, id, want)
	}
	return id
}

func (f *fx) apply(what string, ch []Change) {
	f.t.Helper()
	for _, c := range ch {
		j := f.jobs[c.ID]
		if j == nil {
			f.t.Fatalf("%s: change for unknown job %d", what, c.ID)
		}
		if c.From != j.state {
			f.t.Fatalf("%s: change %d %s->%s but job was %q", what, c.ID, c.From, c.To, j.state)
		}
		if c.From == c.To {
			f.t.Fatalf("%s: no-op change %+v", what, c)
		}
		if c.Target != j.target || c.Queue != j.queue || c.Est != j.est {
			f.t.Fatalf("%s: change %+v carries wrong job facts (want target %d queue %d est %v)", what, c, j.target, j.queue, j.est)
		}
		j.state = c.To
	}
}

// add submits a job to target with prereq target names; returns its id.
func (f *fx) add(target string, prereqs ...string) int64 {
	f.t.Helper()
	return f.addAny(target, prereqs, nil)
}

// addAny submits a job to target with after-ok and after-any prerequisite
// target names; returns its id.
func (f *fx) addAny(target string, prereqs, afterAny []string) int64 {
	f.t.Helper()
	t := f.tid(target)
	var ps, as []TargetID
	for _, p := range prereqs {
		ps = append(ps, f.tid(p))
	}
	for _, p := range afterAny {
		as = append(as, f.tid(p))
	}
	f.g.AddEdges(t, ps)
	f.g.AddEdges(t, as)
	id := f.next
	f.next++
	j := &fxJob{target: t, prereqs: ps, any: as, est: float32(id), queue: int32(id % 3)}
	f.jobs[id] = j
	f.order = append(f.order, id)
	ch := f.g.AddJob(id, Node{Target: t, Queue: j.queue, Est: j.est, State: job.Done /* ignored */, Prereqs: ps, AfterAny: as})
	if len(ch) == 0 || ch[0].ID != id || ch[0].From != 0 {
		f.t.Fatalf("AddJob(%d): first change must be the new job with From 0, got %+v", id, ch)
	}
	f.apply(fmt.Sprintf("AddJob(%d)", id), ch)
	f.check()
	return id
}

func (f *fx) set(id int64, to job.State) {
	f.t.Helper()
	ch, err := f.g.Set(id, to)
	if err != nil {
		f.t.Fatalf("Set(%d, %s): %v", id, to, err)
	}
	if len(ch) == 0 || ch[0].ID != id || ch[0].To != to {
		f.t.Fatalf("Set(%d, %s): first change must be the job's own, got %+v", id, to, ch)
	}
	f.apply(fmt.Sprintf("Set(%d,%s)", id, to), ch)
	f.check()
}

// run dispatches a Queued job and ends it in state end.
func (f *fx) run(id int64, end job.State) {
	f.t.Helper()
	f.mustBe(id, job.Queued)
	f.set(id, job.Executing)
	f.set(id, end)
}

func (f *fx) requeue(id int64) {
	f.t.Helper()
	ch, err := f.g.Requeue(id)
	if err != nil {
		f.t.Fatalf("Requeue(%d): %v", id, err)
	}
	f.apply(fmt.Sprintf("Requeue(%d)", id), ch)
	f.check()
}

func (f *fx) revive(id int64) {
	f.t.Helper()
	j := f.jobs[id]
	ch, err := f.g.Revive(id, Node{Target: j.target, Queue: j.queue, Est: j.est, Prereqs: j.prereqs, AfterAny: j.any}, j.state)
	if err != nil {
		f.t.Fatalf("Revive(%d): %v", id, err)
	}
	if len(ch) == 0 || ch[0].ID != id || ch[0].From != j.state {
		f.t.Fatalf("Revive(%d): first change must be the job's own, got %+v", id, ch)
	}
	f.apply(fmt.Sprintf("Revive(%d)", id), ch)
	f.check()
}

func (f *fx) state(id int64) job.State { return f.jobs[id].state }

func (f *fx) mustBe(id int64, want job.State) {
	f.t.Helper()
	if got := f.state(id); got != want {
		f.t.Fatalf("job %d is %s, want %s", id, got, want)
	}
}

type fxCounts struct{ total, done, bad map[TargetID]int }

func (f *fx) counts() fxCounts {
	c := fxCounts{map[TargetID]int{}, map[TargetID]int{}, map[TargetID]int{}}
	for _, j := range f.jobs {
		c.total[j.target]++
		if j.state == job.Done {
			c.done[j.target]++
		}
		if j.state.Bad() {
			c.bad[j.target]++
		}
	}
	return c
}

// oracle computes, from every job's current state, what the package rules
// say a pending job's state must be.
func (c fxCounts) oracle(prereqs, afterAny []TargetID) job.State {
	s := job.Queued
	for _, p := range prereqs {
		if c.bad[p] > 0 {
			return job.Blocked
		}
		if c.total[p] == 0 || c.done[p] != c.total[p] {
			s = job.Waiting
		}
	}
	for _, p := range afterAny {
		if c.total[p] == 0 || c.done[p]+c.bad[p] != c.total[p] {
			s = job.Waiting
		}
	}
	return s
}

// check verifies the graph against the record and the oracle.
func (f *fx) check() {
	f.t.Helper()
	c := f.counts()
	live := 0
	for id, j := range f.jobs {
		gj, ok := f.g.Node(id)
		if want := j.state; f.g.State(id) != want && !(want.Terminal() && f.g.State(id) == 0) {
			f.t.Fatalf("State(%d) = %q, want %s", id, f.g.State(id), want)
		}
		if j.state.Terminal() {
			if ok {
				f.t.Fatalf("terminal job %d (%s) is still live in the graph as %s", id, j.state, gj.State)
			}
			continue
		}
		live++
		if !ok {
			f.t.Fatalf("job %d (%s) is not live in the graph", id, j.state)
		}
		if gj.State != j.state {
			f.t.Fatalf("job %d: graph says %s, changes said %s", id, gj.State, j.state)
		}
		if j.state.Pending() {
			if !slices.Equal(gj.Prereqs, j.prereqs) || !slices.Equal(gj.AfterAny, j.any) {
				f.t.Fatalf("job %d: graph lists prereqs %v after-any %v, want %v, %v", id, gj.Prereqs, gj.AfterAny, j.prereqs, j.any)
			}
			if want := c.oracle(j.prereqs, j.any); want != j.state {
				f.t.Fatalf("job %d (target %s, prereqs %v) is %s, rules say %s", id, f.g.Name(j.target), f.names(j.prereqs), j.state, want)
			}
		}
	}
	if f.g.Live() != live {
		f.t.Fatalf("Live() = %d, want %d", f.g.Live(), live)
	}
	for t := TargetID(1); t < f.g.NextTargetID(); t++ {
		total, done, bad := c.total[t], c.done[t], c.bad[t]
		gt, gd, gb := f.g.Counts(t)
		if gt != total || gd != done || gb != bad {
			f.t.Fatalf("Counts(%s) = %d,%d,%d, want %d,%d,%d", f.g.Name(t), gt, gd, gb, total, done, bad)
		}
		if cp := f.g.Complete(t); cp != (total > 0 && done == total) {
			f.t.Fatalf("Complete(%s) = %v with total %d done %d", f.g.Name(t), cp, total, done)
		}
	}
}

func (f *fx) names(ts []TargetID) []string {
	var out []string
	for _, t := range ts {
		out = append(out, f.g.Name(t))
	}
	return out
}

// readiness is a named graph, built on a fresh fixture, and the state one
// of its jobs must be in.
type readiness struct {
	name string
	// setup builds the graph and returns the job under test and its
	// expected state.
	setup func(f *fx) (int64, job.State)
}

func runReadiness(t *testing.T, tests []readiness) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFx(t)
			id, want := tc.setup(f)
			f.mustBe(id, want)
		})
	}
}

func TestReadiness(t *testing.T) {
	t.Parallel()
	runReadiness(t, []readiness{
		{"no prereqs", func(f *fx) (int64, job.State) { return f.add("a"), job.Queued }},
		{"prereq target without jobs", func(f *fx) (int64, job.State) { return f.add("b", "a"), job.Waiting }},
		{"prereq queued", func(f *fx) (int64, job.State) { f.add("a"); return f.add("b", "a"), job.Waiting }},
		{"prereq executing", func(f *fx) (int64, job.State) {
			a := f.add("a")
			f.set(a, job.Executing)
			return f.add("b", "a"), job.Waiting
		}},
		{"prereq done", func(f *fx) (int64, job.State) {
			f.run(f.add("a"), job.Done)
			return f.add("b", "a"), job.Queued
		}},
		{"prereq partly done", func(f *fx) (int64, job.State) {
			f.run(f.add("a"), job.Done)
			f.add("a")
			return f.add("b", "a"), job.Waiting
		}},
		{"prereq failed", func(f *fx) (int64, job.State) {
			f.run(f.add("a"), job.Failed)
			return f.add("b", "a"), job.Blocked
		}},
		{"prereq failed and another incomplete", func(f *fx) (int64, job.State) {
			f.add("c")
			f.run(f.add("a"), job.Failed)
			return f.add("b", "c", "a"), job.Blocked
		}},
		{"prereq deleted", func(f *fx) (int64, job.State) {
			f.set(f.add("a"), job.Deleted)
			return f.add("b", "a"), job.Blocked
		}},
		{"prereq deleted while waiting", func(f *fx) (int64, job.State) {
			f.set(f.add("a", "z"), job.Deleted)
			return f.add("b", "a"), job.Blocked
		}},
		{"prereq target blocked", func(f *fx) (int64, job.State) {
			f.run(f.add("a"), job.Failed)
			f.add("b", "a")
			return f.add("c", "b"), job.Blocked
		}},
		{"two prereqs both done", func(f *fx) (int64, job.State) {
			f.run(f.add("a"), job.Done)
			f.run(f.add("b"), job.Done)
			return f.add("c", "a", "b"), job.Queued
		}},
		{"two prereqs one done", func(f *fx) (int64, job.State) {
			f.run(f.add("a"), job.Done)
			f.add("b")
			return f.add("c", "a", "b"), job.Waiting
		}},
		{"same prereq twice", func(f *fx) (int64, job.State) {
			f.run(f.add("a"), job.Done)
			return f.add("c", "a", "a"), job.Queued
		}},
	})
}

// scenario is a named sequence of graph operations and the checks between
// them, run on a fresh fixture.
type scenario struct {
	name string
	run  func(f *fx)
}

func runScenarios(t *testing.T, tests []scenario) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(newFx(t))
		})
	}
}

// TestLateTargets: a job naming a target that has no jobs yet waits for
// it, and follows the target's status once its jobs arrive.
func TestLateTargets(t *testing.T) {
	t.Parallel()
	runScenarios(t, []scenario{
		{"prerequisite arriving late", func(f *fx) {
			b := f.add("B", "A") // A has no jobs yet
			f.mustBe(b, job.Waiting)
			if f.g.Complete(f.tid("A")) {
				f.t.Fatal("a target with no jobs must not be complete")
			}
			a1 := f.add("A")
			f.mustBe(b, job.Waiting)
			a2 := f.add("A")
			f.run(a1, job.Done)
			f.mustBe(b, job.Waiting) // a2 still to run
			f.set(a2, job.Executing)
			f.mustBe(b, job.Waiting)
			f.set(a2, job.Done)
			f.mustBe(b, job.Queued)
		}},
		{"two late targets in a chain", func(f *fx) {
			c := f.add("C", "B")
			b := f.add("B", "A")
			f.mustBe(c, job.Waiting)
			f.mustBe(b, job.Waiting)
			a := f.add("A")
			f.run(a, job.Done)
			f.mustBe(b, job.Queued)
			f.mustBe(c, job.Waiting)
			f.run(b, job.Done)
			f.mustBe(c, job.Queued)
		}},
		{"blocked job added late blocks waiting dependents", func(f *fx) {
			l := f.add("T3", "T2") // T2 has no jobs
			f.mustBe(l, job.Waiting)
			f.run(f.add("T1"), job.Failed)
			k := f.add("T2", "T1")
			f.mustBe(k, job.Blocked)
			f.mustBe(l, job.Blocked)
		}},
	})
}

func TestFailureBlocksTransitively(t *testing.T) {
	t.Parallel()
	for _, end := range []job.State{job.Failed, job.Deleted} {
		t.Run(end.Name(), func(t *testing.T) {
			t.Parallel()
			f := newFx(t)
			a := f.add("T1")
			a2 := f.add("T1")
			b1 := f.add("T2", "T1")
			b2 := f.add("T2", "T1")
			c := f.add("T3", "T2")
			d := f.add("T4", "T3", "X") // X never gets jobs
			other := f.add("U", "X")
			f.run(a2, job.Done)
			f.mustBe(b1, job.Waiting)
			f.set(a, job.Executing)
			f.set(a, end)
			for _, id := range []int64{b1, b2, c, d} {
				f.mustBe(id, job.Blocked)
			}
			f.mustBe(other, job.Waiting)
			// A job added later to a blocked chain is blocked at once, and
			// so are its own late dependents.
			e := f.add("T5", "T4")
			f.mustBe(e, job.Blocked)
			if _, _, bad := f.g.Counts(f.tid("T2")); bad != 2 {
				t.Fatalf("T2 bad count = %d, want 2 (both jobs blocked)", bad)
			}
		})
	}
}

// TestRevive: a revived job takes the state the rules give it, and its
// target's dependents follow.
func TestRevive(t *testing.T) {
	t.Parallel()
	unblocksChain := func(end job.State) func(f *fx) {
		return func(f *fx) {
			a := f.add("T1")
			b := f.add("T2", "T1")
			c := f.add("T3", "T2")
			f.set(a, job.Executing)
			f.set(a, end)
			f.mustBe(b, job.Blocked)
			f.mustBe(c, job.Blocked)
			f.revive(a)
			f.mustBe(a, job.Queued)
			f.mustBe(b, job.Waiting)
			f.mustBe(c, job.Waiting)
			f.run(a, job.Done)
			f.mustBe(b, job.Queued)
			f.run(b, job.Done)
			f.mustBe(c, job.Queued)
		}
	}
	runScenarios(t, []scenario{
		{"unblocks chain after " + job.Failed.Name(), unblocksChain(job.Failed)},
		{"unblocks chain after " + job.Deleted.Name(), unblocksChain(job.Deleted)},
		{"one of two failures", func(f *fx) {
			a1, a2 := f.add("T1"), f.add("T1")
			b := f.add("T2", "T1")
			f.run(a1, job.Failed)
			f.run(a2, job.Failed)
			f.revive(a1)
			f.mustBe(b, job.Blocked) // a2 still failed
			f.revive(a2)
			f.mustBe(b, job.Waiting)
		}},
		{"done reopens target", func(f *fx) {
			a := f.add("T1")
			f.run(a, job.Done)
			b := f.add("T2", "T1")
			f.mustBe(b, job.Queued)
			f.revive(a)
			f.mustBe(a, job.Queued)
			f.mustBe(b, job.Waiting)
		}},
		{"waits on its own prereqs", func(f *fx) {
			a := f.add("T1")
			f.run(a, job.Done)
			b := f.add("T2", "T1")
			f.run(b, job.Failed)
			f.revive(a) // T1 incomplete again
			f.revive(b)
			f.mustBe(b, job.Waiting)
			f.run(a, job.Failed)
			f.mustBe(b, job.Blocked)
		}},
	})
}

func TestReopenedTarget(t *testing.T) {
	t.Parallel()
	f := newFx(t)
	a := f.add("T1")
	f.run(a, job.Done)
	q := f.add("T2", "T1") // Queued
	e := f.add("T2", "T1") // will be Executing
	d := f.add("T2", "T1") // will be Done
	f.set(e, job.Executing)
	f.run(d, job.Done)
	next := f.add("T3", "T2")
	f.mustBe(next, job.Waiting)

	a2 := f.add("T1") // re-opens T1
	f.mustBe(q, job.Waiting)
	f.mustBe(e, job.Executing)
	f.mustBe(d, job.Done)
	f.mustBe(next, job.Waiting)

	f.run(a2, job.Done)
	f.mustBe(q, job.Queued)
	// The executing job was dispatched under the old status; requeueing it
	// re-derives from the current one.
	f.requeue(e)
	f.mustBe(e, job.Queued)
}

func TestRequeue(t *testing.T) {
	t.Parallel()
	f := newFx(t)
	a := f.add("T1")
	f.run(a, job.Done)
	b := f.add("T2", "T1")
	f.set(b, job.Executing)
	f.requeue(b)
	f.mustBe(b, job.Queued)

	// Prerequisite re-opened while b ran: requeue makes it Waiting.
	f.set(b, job.Executing)
	a2 := f.add("T1")
	f.requeue(b)
	f.mustBe(b, job.Waiting)
	f.run(a2, job.Done)
	f.mustBe(b, job.Queued)

	// Prerequisite failed while b ran: requeue makes it Blocked.
	f.set(b, job.Executing)
	f.run(f.add("T1"), job.Failed)
	f.requeue(b)
	f.mustBe(b, job.Blocked)

	// Requeue of a non-executing job is an error and changes nothing.
	for _, id := range []int64{b, a, 999} {
		if ch, err := f.g.Requeue(id); err == nil {
			t.Fatalf("Requeue(%d) of a non-executing job succeeded: %+v", id, ch)
		}
	}
	f.check()
}

func TestRequeueManyTimesThenUnblock(t *testing.T) {
	t.Parallel()
	// A job requeued many times is listed again each time; it must still be
	// re-evaluated exactly as the rules say when its prerequisite flips.
	f := newFx(t)
	a := f.add("T1")
	b := f.add("T2", "T1")
	f.set(a, job.Executing)
	for i := 0; i < 50; i++ {
		f.requeue(a)
		f.set(a, job.Executing)
	}
	f.set(a, job.Done)
	f.mustBe(b, job.Queued)
	for i := 0; i < 50; i++ {
		f.set(b, job.Executing)
		f.requeue(b)
	}
	f.revive(a)
	f.mustBe(b, job.Waiting)
}

func TestSetErrors(t *testing.T) {
	t.Parallel()
	f := newFx(t)
	a := f.add("T1")
	for _, s := range []job.State{job.Waiting, job.Queued, job.Blocked} {
		if _, err := f.g.Set(a, s); err == nil {
			t.Errorf("Set(%s) of a derived state succeeded", s)
		}
	}
	if _, err := f.g.Set(12345, job.Done); err == nil {
		t.Error("Set of an unknown job succeeded")
	}
	f.run(a, job.Done)
	if _, err := f.g.Set(a, job.Failed); err == nil {
		t.Error("Set of a terminal job succeeded")
	}
	f.check()
}

func TestReviveErrors(t *testing.T) {
	t.Parallel()
	f := newFx(t)
	a := f.add("T1")
	if _, err := f.g.Revive(a, Node{Target: f.tid("T1")}, job.Failed); err == nil {
		t.Error("Revive of a live job succeeded")
	}
	for _, from := range []job.State{job.Waiting, job.Queued, job.Executing, job.Blocked} {
		if _, err := f.g.Revive(777, Node{Target: f.tid("T1")}, from); err == nil {
			t.Errorf("Revive from %s succeeded", from)
		}
		if _, ok := f.g.Node(777); ok {
			t.Fatalf("failed Revive from %s left the job live", from)
		}
	}
	f.check()
}

func TestDeleteOfPendingJobs(t *testing.T) {
	t.Parallel()
	f := newFx(t)
	w := f.add("T1", "Z")
	q := f.add("T1")
	dep := f.add("T2", "T1")
	f.set(q, job.Deleted)
	f.mustBe(dep, job.Blocked)
	f.set(w, job.Deleted)
	f.mustBe(dep, job.Blocked)
	f.revive(q)
	f.mustBe(dep, job.Blocked) // w still deleted
	f.revive(w)
	f.mustBe(w, job.Waiting)
	f.mustBe(dep, job.Waiting)
	// Deleting a blocked job keeps its target bad.
	f.run(f.add("Z"), job.Failed)
	f.mustBe(w, job.Blocked)
	f.set(w, job.Deleted)
	f.mustBe(dep, job.Blocked)
}

func TestCounts(t *testing.T) {
	t.Parallel()
	f := newFx(t)
	a1, a2, a3, a4 := f.add("T"), f.add("T"), f.add("T"), f.add("T")
	f.run(a1, job.Done)
	f.run(a2, job.Failed)
	f.set(a3, job.Deleted)
	f.set(a4, job.Executing)
	total, done, bad := f.g.Counts(f.tid("T"))
	if total != 4 || done != 1 || bad != 2 {
		t.Fatalf("Counts = %d,%d,%d, want 4,1,2", total, done, bad)
	}
	if f.g.Live() != 1 {
		t.Fatalf("Live = %d, want 1", f.g.Live())
	}
	empty := f.tid("E")
	if total, done, bad := f.g.Counts(empty); total+done+bad != 0 {
		t.Fatalf("Counts of an empty target = %d,%d,%d", total, done, bad)
	}
}

func TestLookupAndLoadTarget(t *testing.T) {
	t.Parallel()
	g := New()
	if _, ok := g.Lookup("x"); ok {
		t.Fatal("Lookup found a target in an empty graph")
	}
	if g.NextTargetID() != 1 {
		t.Fatalf("ids must start at 1, NextTargetID = %d", g.NextTargetID())
	}
	g.LoadTarget(5, "five")
	g.LoadTarget(2, "two")
	if id, ok := g.Lookup("five"); !ok || id != 5 || g.Name(5) != "five" {
		t.Fatalf("Lookup(five) = %d,%v", id, ok)
	}
	if g.NextTargetID() != 6 {
		t.Fatalf("NextTargetID after loading id 5 = %d, want 6", g.NextTargetID())
	}
	if id := g.AddTarget("six"); id != 6 {
		t.Fatalf("AddTarget after load = %d, want 6", id)
	}
}

// validCycle checks that a FindCycle answer is a real cycle over the given
// edges: "a -> b -> ... -> a", every step an edge.
func validCycle(t *testing.T, path string, edges map[string][]string) {
	t.Helper()
	parts := strings.Split(path, " -> ")
	if len(parts) < 2 || parts[0] != parts[len(parts)-1] {
		t.Fatalf("cycle %q does not return to its start", path)
	}
	for i := 0; i+1 < len(parts); i++ {
		if !slices.Contains(edges[parts[i]], parts[i+1]) {
			t.Fatalf("cycle %q: %s -> %s is not an edge", path, parts[i], parts[i+1])
		}
	}
}

func TestFindCycle(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		existing map[string][]string // edges already in the graph
		add      map[string][]string
		cycle    bool
	}{
		{"empty", nil, map[string][]string{}, false},
		{"self", nil, map[string][]string{"a": {"a"}}, true},
		{"two-cycle in new edges", nil, map[string][]string{"a": {"b"}, "b": {"a"}}, true},
		{"chain", nil, map[string][]string{"a": {"b"}, "b": {"c"}, "c": {"d"}}, false},
		{"diamond", nil, map[string][]string{"a": {"b", "c"}, "b": {"d"}, "c": {"d"}}, false},
		{"diamond over existing", map[string][]string{"b": {"d"}, "c": {"d"}}, map[string][]string{"a": {"b", "c"}}, false},
		{"wide diamond ladder", nil, map[string][]string{
			"a": {"b1", "b2", "b3"}, "b1": {"c"}, "b2": {"c"}, "b3": {"c"}, "c": {"d1", "d2"}, "d1": {"e"}, "d2": {"e"},
		}, false},
		{"two-cycle through existing edge", map[string][]string{"b": {"a"}}, map[string][]string{"a": {"b"}}, true},
		{"long cycle through existing edges", map[string][]string{"b": {"c"}, "c": {"d"}, "d": {"e"}},
			map[string][]string{"e": {"f"}, "f": {"b"}, "a": {"b"}}, true},
		{"long cycle closed by one new edge", map[string][]string{"a": {"b"}, "b": {"c"}, "c": {"d"}, "d": {"e"}},
			map[string][]string{"e": {"a"}}, true},
		{"existing only, new edge elsewhere", map[string][]string{"a": {"b"}, "b": {"c"}},
			map[string][]string{"x": {"a"}}, false},
		{"new edge into a prerequisite", map[string][]string{"a": {"b"}, "b": {"c"}},
			map[string][]string{"c": {"x"}}, false},
		{"new edge parallel to existing path", map[string][]string{"a": {"b"}, "b": {"c"}},
			map[string][]string{"a": {"c"}}, false},
		{"cycle not reachable from first key", nil,
			map[string][]string{"z": {"y"}, "p": {"q"}, "q": {"r"}, "r": {"p"}}, true},
		{"unknown targets only", nil, map[string][]string{"new1": {"new2"}, "new2": {"new3"}}, false},
		// Targets needing nothing are skipped, not coloured: a cycle next
		// to them is still found.
		{"pipelines", nil, map[string][]string{"b1": {"a1"}, "b2": {"a2"}, "b3": {"a3"}}, false},
		{"self beside sinks", nil, map[string][]string{"a": {"s1", "a", "s2"}}, true},
		{"cycle behind a sink", nil, map[string][]string{"a": {"s", "b"}, "b": {"s", "a"}}, true},
		{"cycle through an existing edge behind a sink", map[string][]string{"b": {"s", "a"}},
			map[string][]string{"a": {"s", "b"}}, true},
		{"root needing only existing sinks", map[string][]string{"x": {"s"}}, map[string][]string{"a": {"s", "t"}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := New()
			id := func(n string) TargetID {
				if i, ok := g.Lookup(n); ok {
					return i
				}
				return g.AddTarget(n)
			}
			all := map[string][]string{}
			for n, ps := range tc.existing {
				var ids []TargetID
				for _, p := range ps {
					ids = append(ids, id(p))
				}
				g.AddEdges(id(n), ids)
				all[n] = append(all[n], ps...)
			}
			for n, ps := range tc.add {
				all[n] = append(all[n], ps...)
			}
			// Map order varies; ask several times.
			for i := 0; i < 20; i++ {
				c := g.FindCycle(tc.add)
				if (c != "") != tc.cycle {
					t.Fatalf("FindCycle = %q, want cycle %v", c, tc.cycle)
				}
				if c != "" {
					validCycle(t, c, all)
				}
			}
		})
	}
}

func TestFindCycleDoesNotChangeGraph(t *testing.T) {
	t.Parallel()
	g := New()
	a, b := g.AddTarget("a"), g.AddTarget("b")
	g.AddEdges(a, []TargetID{b})
	if c := g.FindCycle(map[string][]string{"b": {"a"}}); c == "" {
		t.Fatal("cycle not found")
	}
	// The rejected edge must not have been recorded.
	if c := g.FindCycle(map[string][]string{"c": {"b"}}); c != "" {
		t.Fatalf("rejected edge left behind: %q", c)
	}
}

func TestAddEdgesDeduplicates(t *testing.T) {
	t.Parallel()
	g := New()
	a, b, c := g.AddTarget("a"), g.AddTarget("b"), g.AddTarget("c")
	g.AddEdges(a, []TargetID{b, b, c})
	g.AddEdges(a, []TargetID{c, b})
	if got := g.Prereqs(a); !slices.Equal(got, []TargetID{b, c}) {
		t.Fatalf("prereqs = %v, want [b c]", got)
	}
}

func TestFindCycleDeepChain(t *testing.T) {
	t.Parallel()
	// A long existing chain must be walked without blowing the stack and
	// a closing edge found.
	g := New()
	const n = 20000
	prev := g.AddTarget("t0")
	for i := 1; i < n; i++ {
		cur := g.AddTarget(fmt.Sprintf("t%d", i))
		g.AddEdges(cur, []TargetID{prev})
		prev = cur
	}
	if c := g.FindCycle(map[string][]string{"t0": {fmt.Sprintf("t%d", n-1)}}); c == "" {
		t.Fatal("cycle through a long chain not found")
	}
	if c := g.FindCycle(map[string][]string{"new": {fmt.Sprintf("t%d", n-1)}}); c != "" {
		t.Fatalf("false cycle %q", c)
	}
}

// TestFindCycleLongChain: a cycle closed at the far end of a chain of
// 200,000 new targets is found without recursion and named in one
// readable line (ends kept, middle counted).
func TestFindCycleLongChain(t *testing.T) {
	t.Parallel()
	const n = 200000
	edges := make(map[string][]string, n)
	for i := 1; i < n; i++ {
		edges[fmt.Sprintf("t%d", i)] = []string{fmt.Sprintf("t%d", i-1)}
	}
	g := New()
	if c := g.FindCycle(edges); c != "" {
		t.Fatalf("false cycle in a chain: %.200q", c)
	}
	edges["t0"] = []string{fmt.Sprintf("t%d", n-1)}
	c := g.FindCycle(edges)
	if c == "" {
		t.Fatal("cycle through a long chain of new targets not found")
	}
	if len(c) > 400 || !strings.Contains(c, "more) ->") {
		t.Fatalf("cycle named in %d bytes: %.400q", len(c), c)
	}
	words := strings.Split(c, " -> ")
	if words[0] != words[len(words)-1] {
		t.Fatalf("cycle %q does not close", c)
	}
	if !strings.Contains(c, fmt.Sprintf("(%d more)", n+1-20)) { // n targets, the first twice
		t.Fatalf("cycle %q does not count the %d targets left out", c, n+1-20)
	}
}

// TestAddEdgesManyPrereqs: a target fed by many pipelines keeps each
// prerequisite once, past the point where a set takes over from scanning.
func TestAddEdgesManyPrereqs(t *testing.T) {
	t.Parallel()
	g := New()
	b := g.AddTarget("b")
	var as []TargetID
	for i := 0; i < 100; i++ {
		as = append(as, g.AddTarget(fmt.Sprintf("a%d", i)))
	}
	for _, a := range as {
		g.AddEdges(b, []TargetID{a, a})
	}
	g.AddEdges(b, as) // all again
	if got := g.Prereqs(b); !slices.Equal(got, as) {
		t.Fatalf("prereqs = %v, want each of the 100 once in order", got)
	}
}

// snapshot rebuilds a graph as the metaqueue loads one: targets, edges,
// terminal jobs as counts (or one by one), live jobs with stored states.
func (f *fx) load(oneByOne bool, corrupt func(id int64, s job.State) job.State) *Graph {
	g := New()
	for id := TargetID(1); id < f.g.NextTargetID(); id++ {
		g.LoadTarget(id, f.g.Name(id))
	}
	type key struct {
		t TargetID
		s job.State
	}
	counts := map[key]int{}
	for _, id := range f.order {
		j := f.jobs[id]
		g.AddEdges(j.target, j.prereqs)
		if j.state.Terminal() && !oneByOne {
			counts[key{j.target, j.state}]++
			continue
		}
		s := j.state
		if corrupt != nil && s.Pending() {
			s = corrupt(id, s)
		}
		g.LoadJob(id, Node{Target: j.target, Queue: j.queue, Est: j.est, State: s, Prereqs: j.prereqs})
	}
	for k, n := range counts {
		g.LoadCounts(k.t, k.s, n)
	}
	return g
}

// buildMixed makes a graph with jobs in every state.
func buildMixed(t testing.TB) *fx {
	f := newFx(t)
	a := f.add("A")
	f.run(a, job.Done)
	f.run(f.add("A"), job.Done)
	f.add("B", "A")                       // Q
	f.set(f.add("B", "A"), job.Executing) // E
	f.run(f.add("B", "A"), job.Done)
	f.add("C", "B")                // W
	f.run(f.add("F"), job.Failed)  // F
	f.add("G", "F")                // B
	f.add("H", "G")                // B (transitively)
	f.set(f.add("X"), job.Deleted) // X
	f.add("Y", "X", "A")           // B
	f.add("Late", "Nobody")        // W, target with no jobs
	f.run(f.add("Done2", "A"), job.Done)
	f.add("Z", "Done2") // Q
	return f
}

func TestReconcileAfterLoadAgrees(t *testing.T) {
	t.Parallel()
	for _, oneByOne := range []bool{false, true} {
		t.Run(fmt.Sprintf("oneByOne=%v", oneByOne), func(t *testing.T) {
			t.Parallel()
			f := buildMixed(t)
			g := f.load(oneByOne, nil)
			if ch := g.Reconcile(); len(ch) != 0 {
				t.Fatalf("oneByOne=%v: Reconcile of a consistent load changed %+v", oneByOne, ch)
			}
			for id, j := range f.jobs {
				gj, ok := g.Node(id)
				if ok != !j.state.Terminal() || (ok && gj.State != j.state) {
					t.Fatalf("loaded job %d: %v %s, want %s", id, ok, gj.State, j.state)
				}
			}
			for tid := TargetID(1); tid < f.g.NextTargetID(); tid++ {
				a1, a2, a3 := f.g.Counts(tid)
				b1, b2, b3 := g.Counts(tid)
				if a1 != b1 || a2 != b2 || a3 != b3 {
					t.Fatalf("target %s counts after load %d,%d,%d, want %d,%d,%d", f.g.Name(tid), b1, b2, b3, a1, a2, a3)
				}
			}
			// The loaded graph keeps working: finish the failed chain's cause.
			f.g = g
			f.check()
		})
	}
}

func TestReconcileFixesDisagreement(t *testing.T) {
	t.Parallel()
	f := buildMixed(t)
	want := map[int64]job.State{}
	for id, j := range f.jobs {
		want[id] = j.state
	}
	// Store every pending job with a wrong state.
	wrong := func(id int64, s job.State) job.State {
		switch s {
		case job.Waiting:
			return job.Queued
		case job.Queued:
			return job.Blocked
		default:
			return job.Waiting
		}
	}
	g := f.load(false, wrong)
	for id, j := range f.jobs {
		if j.state.Pending() {
			j.state = wrong(id, j.state)
		}
	}
	f.g = g
	f.apply("Reconcile", g.Reconcile())
	for id, s := range want {
		if f.jobs[id].state != s {
			t.Errorf("after Reconcile job %d is %s, want %s", id, f.jobs[id].state, s)
		}
	}
	f.check()
	if ch := g.Reconcile(); len(ch) != 0 {
		t.Fatalf("second Reconcile changed %+v", ch)
	}
}

func TestReconcileThenCascade(t *testing.T) {
	t.Parallel()
	// After a load, status flips must still reach dependents: Reconcile
	// must leave each target's last-seen status right.
	f := newFx(t)
	a := f.add("A")
	f.set(a, job.Executing)
	b := f.add("B", "A")
	c := f.add("C", "B")
	f.g = f.load(false, nil)
	f.apply("Reconcile", f.g.Reconcile())
	f.set(a, job.Failed)
	f.mustBe(b, job.Blocked)
	f.mustBe(c, job.Blocked)
	f.revive(a)
	f.run(a, job.Done)
	f.mustBe(b, job.Queued)
}

// TestRandomOps drives the graph with random operations and checks every
// invariant after each one.
func TestRandomOps(t *testing.T) {
	t.Parallel()
	seeds := 200
	if testing.Short() {
		seeds = 30
	}
	for seed := 0; seed < seeds; seed++ {
		ops := make([]byte, 300)
		x := uint64(seed)*0x9E3779B97F4A7C15 + 1
		for i := range ops {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			ops[i] = byte(x)
		}
		runOps(t, ops)
	}
}

// runOps interprets bytes as graph operations. Targets t0..t7 may only
// depend on lower-numbered ones, so the graph stays acyclic.
func runOps(t testing.TB, ops []byte) {
	f := newFx(t)
	const nt = 8
	name := func(i byte) string { return fmt.Sprintf("t%d", i%nt) }
	pick := func(b byte, want func(job.State) bool) (int64, bool) {
		var c []int64
		for _, id := range f.order {
			if want(f.jobs[id].state) {
				c = append(c, id)
			}
		}
		if len(c) == 0 {
			return 0, false
		}
		return c[int(b)%len(c)], true
	}
	for i := 0; i+2 < len(ops); i += 3 {
		op, a, b := ops[i]%8, ops[i+1], ops[i+2]
		switch op {
		case 0, 1: // add a job with up to two lower prereqs
			ti := a % nt
			var ps []string
			if ti > 0 && b&1 == 1 {
				ps = append(ps, name(b%ti))
			}
			if ti > 0 && b&2 == 2 {
				ps = append(ps, name((b>>2)%ti))
			}
			f.add(name(ti), ps...)
		case 2: // dispatch
			if id, ok := pick(a, func(s job.State) bool { return s == job.Queued }); ok {
				f.set(id, job.Executing)
			}
		case 3: // finish
			if id, ok := pick(a, func(s job.State) bool { return s == job.Executing }); ok {
				f.set(id, []job.State{job.Done, job.Done, job.Failed}[b%3])
			}
		case 4: // delete a live job
			if id, ok := pick(a, func(s job.State) bool { return !s.Terminal() }); ok {
				f.set(id, job.Deleted)
			}
		case 5: // requeue
			if id, ok := pick(a, func(s job.State) bool { return s == job.Executing }); ok {
				f.requeue(id)
			}
		case 6: // rerun
			if id, ok := pick(a, job.State.Terminal); ok {
				f.revive(id)
			}
		case 7: // reload from "storage" and reconcile
			f.g = f.load(b&1 == 1, nil)
			if ch := f.g.Reconcile(); len(ch) != 0 {
				t.Fatalf("Reconcile after a consistent reload changed %+v", ch)
			}
			f.check()
		}
	}
}

func FuzzGraph(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 1, 1, 2, 0, 0, 3, 0, 2, 6, 0, 0})
	f.Add([]byte{0, 1, 3, 0, 2, 1, 0, 0, 0, 2, 0, 0, 3, 0, 0, 7, 0, 1, 4, 0, 0, 6, 0, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 600 {
			ops = ops[:600]
		}
		runOps(t, ops)
	})
}

func TestFindCycleDiamondLadderIsLinear(t *testing.T) {
	t.Parallel()
	// 60 stacked diamonds have 2^60 paths: a search that revisits finished
	// targets would never end.
	g := New()
	id := func(n string) TargetID {
		if i, ok := g.Lookup(n); ok {
			return i
		}
		return g.AddTarget(n)
	}
	const levels = 60
	for i := 0; i < levels; i++ {
		top, l, r, bot := fmt.Sprintf("m%d", i), fmt.Sprintf("l%d", i), fmt.Sprintf("r%d", i), fmt.Sprintf("m%d", i+1)
		g.AddEdges(id(top), []TargetID{id(l), id(r)})
		g.AddEdges(id(l), []TargetID{id(bot)})
		g.AddEdges(id(r), []TargetID{id(bot)})
	}
	done := make(chan string, 1)
	go func() { done <- g.FindCycle(map[string][]string{"new": {"m0"}}) }()
	select {
	case c := <-done:
		if c != "" {
			t.Fatalf("false cycle %q", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("FindCycle over a diamond ladder did not finish: it revisits targets")
	}
	if c := g.FindCycle(map[string][]string{fmt.Sprintf("m%d", levels): {"m0"}}); c == "" {
		t.Fatal("cycle through the ladder not found")
	}
}

func TestIDsAcrossPages(t *testing.T) {
	t.Parallel()
	// Live jobs may be stored by id in pages: ids on page edges, far apart,
	// and pages emptied and refilled must all behave the same.
	f := newFx(t)
	var ids []int64
	for _, start := range []int64{1, 4094, 8191, 1 << 20, 3<<20 + 4095} {
		f.next = start
		ids = append(ids, f.add("A"), f.add("B", "A"), f.add("C", "B", "A"))
	}
	// Each pass runs what is queued now: the A jobs, then B, then C.
	for range 3 {
		for _, id := range ids {
			if f.state(id) == job.Queued {
				f.run(id, job.Done)
			}
		}
	}
	for _, id := range ids {
		f.mustBe(id, job.Done)
	}
	if f.g.Live() != 0 {
		t.Fatalf("Live = %d after every job ended", f.g.Live())
	}
	// Refill emptied pages through Revive, then fail one to block the rest.
	for _, id := range ids {
		f.revive(id)
	}
	a := ids[len(ids)-3]
	f.run(a, job.Failed)
	for _, id := range ids {
		if f.jobs[id].target != f.tid("A") {
			f.mustBe(id, job.Blocked)
		}
	}
	f.revive(a)
	f.check()
}

func TestSharedPrereqListsStayIntact(t *testing.T) {
	t.Parallel()
	// Many jobs with the same prerequisite list, ending and returning in
	// turn: each must keep seeing its own prerequisites.
	f := newFx(t)
	var same, other []int64
	for i := 0; i < 20; i++ {
		same = append(same, f.add("X", "P", "Q"))
		other = append(other, f.add("Y", "Q", "P"))
	}
	for _, id := range same[:10] {
		f.set(id, job.Deleted)
	}
	p := f.add("P")
	q := f.add("Q")
	f.run(p, job.Done)
	f.run(q, job.Done)
	for _, id := range same[10:] {
		f.mustBe(id, job.Queued)
	}
	for _, id := range same[:10] {
		f.revive(id)
		f.mustBe(id, job.Queued)
	}
	f.revive(q)
	for _, id := range append(append([]int64{}, same...), other...) {
		f.mustBe(id, job.Waiting)
		gj, _ := f.g.Node(id)
		if len(gj.Prereqs) != 2 {
			t.Fatalf("job %d prereqs %v", id, gj.Prereqs)
		}
	}
}
