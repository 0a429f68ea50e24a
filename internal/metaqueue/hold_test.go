package metaqueue

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// TestHoldRelease walks the held state's transitions: each case builds a
// graph, holds or releases, and checks the states, that memory and storage
// agree (check), and what a placeholder is given.
func TestHoldRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hold := func(e *env, ids ...int64) {
		e.t.Helper()
		r, err := e.s.Hold(ctx, protocol.Select{IDs: ids, Atomic: true})
		if err != nil || len(r.Errors) != 0 || !slices.Equal(r.IDs, ids) {
			e.t.Fatalf("Hold(%v) = %+v, %v", ids, r, err)
		}
	}
	release := func(e *env, ids ...int64) {
		e.t.Helper()
		r, err := e.s.Release(ctx, protocol.Select{IDs: ids, Atomic: true})
		if err != nil || len(r.Errors) != 0 || !slices.Equal(r.IDs, ids) {
			e.t.Fatalf("Release(%v) = %+v, %v", ids, r, err)
		}
	}
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, e *env)
	}{
		{"a held queued job is never dispatched; released, it is", func(t *testing.T, e *env) {
			a := e.submit1("a", "a")
			hold(e, a)
			e.mustBe(a, job.Held)
			ph := e.register("s")
			if as := e.next(ph, 4); len(as) != 0 {
				t.Fatalf("a held job was dispatched: %v", ids(as))
			}
			release(e, a)
			e.mustBe(a, job.Queued)
			if as := e.next(ph, 4); !slices.Equal(ids(as), []int64{a}) {
				t.Fatalf("released job not dispatched: %v", ids(as))
			}
		}},
		{"a held waiting job stays held when its prerequisite ends; released, it is queued", func(t *testing.T, e *env) {
			a := e.submit1("a", "a")
			b := e.submit1("b", "b", "a")
			hold(e, b)
			ph := e.register("s")
			as := e.next(ph, 4)
			if !slices.Equal(ids(as), []int64{a}) {
				t.Fatalf("dispatched %v", ids(as))
			}
			e.report(ph, ok(as[0]))
			e.mustBe(b, job.Held)
			release(e, b)
			e.mustBe(b, job.Queued)
		}},
		{"released while its prerequisite runs, a job waits", func(t *testing.T, e *env) {
			e.submit1("a", "a")
			b := e.submit1("b", "b", "a")
			hold(e, b)
			release(e, b)
			e.mustBe(b, job.Waiting)
		}},
		{"released after its prerequisite failed, a job is blocked", func(t *testing.T, e *env) {
			a := e.submit(protocol.JobSpec{Queue: "once", Target: "a", Command: "a"})[0]
			one := 1
			if _, err := e.s.SetQueue(ctx, protocol.QueueSet{Name: "once", MaxAttempts: &one}); err != nil {
				t.Fatal(err)
			}
			b := e.submit1("b", "b", "a")
			hold(e, b)
			ph := e.register("s")
			as := e.next(ph, 4)
			if !slices.Equal(ids(as), []int64{a}) {
				t.Fatalf("dispatched %v", ids(as))
			}
			e.report(ph, exit(as[0], 1))
			e.mustBe(a, job.Failed)
			e.mustBe(b, job.Held)
			release(e, b)
			e.mustBe(b, job.Blocked)
		}},
		{"a held prerequisite keeps its dependents waiting", func(t *testing.T, e *env) {
			a := e.submit1("a", "a")
			b := e.submit1("b", "b", "a")
			hold(e, a)
			e.mustBe(b, job.Waiting)
			ph := e.register("s")
			if as := e.next(ph, 4); len(as) != 0 {
				t.Fatalf("dispatched %v", ids(as))
			}
			release(e, a)
			as := e.next(ph, 4)
			if !slices.Equal(ids(as), []int64{a}) {
				t.Fatalf("dispatched %v", ids(as))
			}
			e.report(ph, ok(as[0]))
			e.mustBe(b, job.Queued)
		}},
		{"a held job can be deleted, and its dependents are blocked", func(t *testing.T, e *env) {
			a := e.submit1("a", "a")
			b := e.submit1("b", "b", "a")
			hold(e, a)
			r, err := e.s.Delete(ctx, protocol.Select{IDs: []int64{a}, Atomic: true})
			if err != nil || !slices.Equal(r.IDs, []int64{a}) {
				t.Fatalf("Delete = %+v, %v", r, err)
			}
			e.mustBe(a, job.Deleted)
			e.mustBe(b, job.Blocked)
			// Rerun brings it back unheld.
			if _, err := e.s.Rerun(ctx, protocol.Select{IDs: []int64{a}}); err != nil {
				t.Fatal(err)
			}
			e.mustBe(a, job.Queued)
			// A selection deletes held jobs too.
			c := e.submit(protocol.JobSpec{Target: "c", Command: "c", Hold: true})[0]
			r, err = e.s.Delete(ctx, protocol.Select{States: "H", Atomic: true})
			if err != nil || !slices.Equal(r.IDs, []int64{c}) {
				t.Fatalf("Delete -s H = %+v, %v", r, err)
			}
			e.mustBe(c, job.Deleted)
		}},
		{"a held job stays held across a restart", func(t *testing.T, e *env) {
			a := e.submit1("a", "a")
			b := e.submit1("b", "b", "a")
			hold(e, a)
			e.reopen()
			e.mustBe(a, job.Held)
			e.mustBe(b, job.Waiting)
			e.check()
			ph := e.register("s")
			if as := e.next(ph, 4); len(as) != 0 {
				t.Fatalf("dispatched %v after a restart", ids(as))
			}
			release(e, a)
			if as := e.next(ph, 4); !slices.Equal(ids(as), []int64{a}) {
				t.Fatalf("dispatched %v", ids(as))
			}
		}},
		{"submitted held, by one spec or in bulk", func(t *testing.T, e *env) {
			held := e.submit(protocol.JobSpec{Target: "a", Command: "a", Hold: true})[0]
			e.mustBe(held, job.Held)
			dep := e.submit1("b", "b", "a")
			e.mustBe(dep, job.Waiting)
			specs := make([]protocol.JobSpec, 5)
			for i := range specs {
				specs[i] = protocol.JobSpec{Target: fmt.Sprintf("m%d", i), Command: "m", Hold: i%2 == 0}
			}
			first := bulkSubmit(t, e, specs)
			for i := range specs {
				want := job.Queued
				if i%2 == 0 {
					want = job.Held
				}
				e.mustBe(first+int64(i), want)
			}
			if n := e.summary()[protocol.DefaultQueue]["H"]; n != 4 {
				t.Fatalf("summary counts %d held, want 4", n)
			}
			if js := e.stat(protocol.Stat{States: "H"}); len(js) != 4 {
				t.Fatalf("stat -s H lists %d jobs, want 4", len(js))
			}
		}},
		{"a held job holds its bundle back; released, the bundle goes whole", func(t *testing.T, e *env) {
			b := e.submitReq(bundleOf("x", "y", "z"))
			hold(e, b[1])
			ph := e.register("s")
			if as := e.next(ph, 4); len(as) != 0 {
				t.Fatalf("dispatched %v while a job of the bundle is held", ids(as))
			}
			release(e, b[1])
			if as := e.next(ph, 4); !slices.Equal(ids(as), b) {
				t.Fatalf("dispatched %v, want the whole bundle %v", ids(as), b)
			}
		}},
		{"hold and release refuse jobs they cannot take, all or none, naming each", func(t *testing.T, e *env) {
			a := e.submit1("a", "a")
			q := e.submit1("q", "q")
			ph := e.register("s")
			if as := e.next(ph, 1); !slices.Equal(ids(as), []int64{a}) {
				t.Fatalf("dispatched %v", ids(as))
			}
			r, err := e.s.Hold(ctx, protocol.Select{IDs: []int64{q, a, 99}, Atomic: true})
			if err != nil {
				t.Fatal(err)
			}
			want := []string{fmt.Sprintf("job %d is executing; only waiting or queued jobs can be held", a), "job 99 does not exist"}
			if len(r.IDs) != 0 || !slices.Equal(r.Errors, want) {
				t.Fatalf("Hold = %+v, want errors %q", r, want)
			}
			e.mustBe(q, job.Queued)
			r, err = e.s.Release(ctx, protocol.Select{IDs: []int64{q}, Atomic: true})
			if err != nil || len(r.IDs) != 0 || len(r.Errors) != 1 || !strings.Contains(r.Errors[0], "only held jobs can be released") {
				t.Fatalf("Release of a queued job = %+v, %v", r, err)
			}
			e.mustBe(q, job.Queued)
			// By selector: only the states the action takes are selected.
			r, err = e.s.Hold(ctx, protocol.Select{All: true, Atomic: true})
			if err != nil || !slices.Equal(r.IDs, []int64{q}) {
				t.Fatalf("Hold --all = %+v, %v", r, err)
			}
			r, err = e.s.Release(ctx, protocol.Select{Target: "q", Atomic: true})
			if err != nil || !slices.Equal(r.IDs, []int64{q}) {
				t.Fatalf("Release -t q = %+v, %v", r, err)
			}
			if _, err := e.s.Hold(ctx, protocol.Select{States: "E", Atomic: true}); !protocol.IsCode(err, protocol.CodeBadRequest) {
				t.Fatalf("Hold -s E: %v, want bad_request", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			tc.run(t, e)
			e.check()
		})
	}
}

// bulkSubmit submits specs through the bulk path and returns the first id.
func bulkSubmit(t *testing.T, e *env, specs []protocol.JobSpec) int64 {
	t.Helper()
	b, err := e.s.NewBulk()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Add(1, specs); err != nil {
		t.Fatal(err)
	}
	first, err := b.Commit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return first
}

// TestPriorityOrders checks that a job's priority is the first key of
// every ordered policy, the policy's own order after it, and that it
// survives a restart.
func TestPriorityOrders(t *testing.T) {
	t.Parallel()
	type job struct {
		est  float64
		prio int
	}
	for _, tc := range []struct {
		policy string
		jobs   []job
		want   []int // indexes into jobs, in dispatch order
	}{
		{"fcfs", []job{{0, 0}, {0, 5}, {0, -3}, {0, 5}}, []int{1, 3, 0, 2}},
		{"sjf", []job{{10, 0}, {100, 1}, {5, 0}, {50, 1}}, []int{3, 1, 2, 0}},
		{"cp", []job{{10, 0}, {1, 2}, {100, 0}}, []int{1, 2, 0}},
		{"wqr", []job{{0, -1}, {0, 0}}, []int{1, 0}},
		{"sa", []job{{0, 0}, {0, 1}}, []int{1, 0}},
		{"xsufferage", []job{{5, 0}, {50, 1}}, []int{1, 0}},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			pol := tc.policy
			if _, err := e.s.SetQueue(context.Background(), protocol.QueueSet{Name: "p", Policy: &pol}); err != nil {
				t.Fatal(err)
			}
			var got []int64
			var specs []protocol.JobSpec
			for i, j := range tc.jobs {
				specs = append(specs, protocol.JobSpec{Queue: "p", Target: fmt.Sprintf("t%d", i), Command: "x", Est: j.est, Priority: j.prio})
			}
			idsIn := e.submit(specs...)
			e.reopen() // priorities are stored, not only in memory
			ph := e.register("s")
			for range tc.jobs {
				as := e.next(ph, 1)
				if len(as) != 1 {
					t.Fatalf("next gave %v", ids(as))
				}
				got = append(got, as[0].ID)
				e.report(ph, ok(as[0]))
			}
			var want []int64
			for _, i := range tc.want {
				want = append(want, idsIn[i])
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s dispatched %v, want %v", tc.policy, got, want)
			}
			if p := e.job(idsIn[tc.want[0]]).Priority; p != tc.jobs[tc.want[0]].prio {
				t.Fatalf("job shows priority %d, want %d", p, tc.jobs[tc.want[0]].prio)
			}
			e.check()
		})
	}
}

// TestPriorityBounds: a priority outside -1024..1023 is refused whole.
func TestPriorityBounds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, p := range []int{1024, -1025, 1e9} {
		_, err := e.s.Submit(context.Background(), []protocol.JobSpec{{Target: "a", Command: "a"}, {Target: "b", Command: "b", Priority: p}})
		if !protocol.IsCode(err, protocol.CodeBadRequest) || !strings.Contains(err.Error(), "priority must be -1024..1023") {
			t.Fatalf("priority %d: %v", p, err)
		}
	}
	if js := e.stat(protocol.Stat{States: "WQHEDFBX"}); len(js) != 0 {
		t.Fatalf("a refused submit added %d jobs", len(js))
	}
}

// TestPriorityPlanned: among the jobs a plan gives a site, a higher
// priority goes first, the plan's order after it.
func TestPriorityPlanned(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.submit(spec("t", "true"), spec("t", "true"), protocol.JobSpec{Target: "t", Command: "true", Priority: 3})
	pl := policy.Plan{Site: map[int64]string{id[0]: "a", id[1]: "a", id[2]: "a"}, Order: []int64{id[0], id[1], id[2]}}
	if _, err := e.s.Plans().Set(context.Background(), "heft", pl); err != nil {
		t.Fatal(err)
	}
	a := e.register("a")
	var got []int64
	for range id {
		as := e.next(a, 1)
		if len(as) != 1 {
			t.Fatalf("next gave %v", ids(as))
		}
		got = append(got, as[0].ID)
		e.report(a, ok(as[0]))
	}
	if want := []int64{id[2], id[0], id[1]}; !slices.Equal(got, want) {
		t.Fatalf("planned jobs ran %v, want %v", got, want)
	}
}

// TestPriorityDC: DC chooses among the highest priority present, though
// an older job of a lower priority would win on queue time alone.
func TestPriorityDC(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dc := "dc"
	if _, err := e.s.SetQueue(context.Background(), protocol.QueueSet{Name: "d", Policy: &dc}); err != nil {
		t.Fatal(err)
	}
	old := e.submit(protocol.JobSpec{Queue: "d", Target: "old", Command: "x"})[0]
	e.clock.Advance(time.Hour)
	high := e.submit(protocol.JobSpec{Queue: "d", Target: "high", Command: "x", Priority: 1})[0]
	ph := e.register("s")
	var got []int64
	for range 2 {
		as := e.next(ph, 1)
		if len(as) != 1 {
			t.Fatalf("next gave %v", ids(as))
		}
		got = append(got, as[0].ID)
		e.report(ph, ok(as[0]))
	}
	if want := []int64{high, old}; !slices.Equal(got, want) {
		t.Fatalf("dc ran %v, want %v", got, want)
	}
}

// TestPriorityKeptOnRerun: a rerun job keeps its priority (an ended job's
// is only stored, not in memory).
func TestPriorityKeptOnRerun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.submit(protocol.JobSpec{Target: "a", Command: "a"}, protocol.JobSpec{Target: "b", Command: "b", Priority: 5})
	ph := e.register("s")
	for _, a := range e.next(ph, 2) {
		e.report(ph, ok(a))
	}
	if _, err := e.s.Rerun(context.Background(), protocol.Select{IDs: id, Atomic: true}); err != nil {
		t.Fatal(err)
	}
	if as := e.next(ph, 1); !slices.Equal(ids(as), []int64{id[1]}) {
		t.Fatalf("after a rerun next gave %v, want the priority 5 job %d", ids(as), id[1])
	}
	e.check()
}
