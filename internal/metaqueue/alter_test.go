package metaqueue

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// alterIDs changes jobs ids (all or none) with the values in a, and fails
// unless every one was changed.
func (e *env) alterIDs(a protocol.Alter, ids ...int64) {
	e.t.Helper()
	a.Select = protocol.Select{IDs: ids, Atomic: true}
	r, err := e.s.Alter(context.Background(), a)
	if err != nil || len(r.Errors) != 0 || !slices.Equal(r.IDs, ids) {
		e.t.Fatalf("Alter(%v) = %+v, %v", ids, r, err)
	}
}

func floatp(f float64) *float64 { return &f }

// limitOf is the time limit an assignment's environment carries.
func limitOf(a protocol.Assignment) float64 { return protocol.TimeLimit(a.Env) }

// TestAlter changes each value of jobs in each state mqalter takes, and
// checks the job shows it, keeps its state, is dispatched by it, and
// keeps it across a reopen; memory and storage agree after each (check).
func TestAlter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, e *env)
	}{
		{"a raised priority is picked first", func(t *testing.T, e *env) {
			id := e.submit(spec("a", "a"), spec("b", "b"), spec("c", "c"))
			e.alterIDs(protocol.Alter{Priority: intp(5)}, id[2])
			e.mustBe(id[2], job.Queued)
			if p := e.job(id[2]).Priority; p != 5 {
				t.Fatalf("job shows priority %d, want 5", p)
			}
			ph := e.register("s")
			if as := e.next(ph, 1); !slices.Equal(ids(as), []int64{id[2]}) {
				t.Fatalf("dispatched %v, want the raised job %d first", ids(as), id[2])
			}
		}},
		{"a lowered priority goes last: its old heap entry is passed over", func(t *testing.T, e *env) {
			id := e.submit(protocol.JobSpec{Target: "a", Command: "a", Priority: 7}, spec("b", "b"))
			e.alterIDs(protocol.Alter{Priority: intp(-1)}, id[0])
			if p := e.job(id[0]).Priority; p != -1 {
				t.Fatalf("job shows priority %d, want -1", p)
			}
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
			if want := []int64{id[1], id[0]}; !slices.Equal(got, want) {
				t.Fatalf("dispatched %v, want %v", got, want)
			}
			if as := e.next(ph, 4); len(as) != 0 {
				t.Fatalf("a stale heap entry dispatched %v again", ids(as))
			}
		}},
		{"a lowered priority lets an equal job go first", func(t *testing.T, e *env) {
			id := e.submit(protocol.JobSpec{Target: "a", Command: "a", Priority: 7}, protocol.JobSpec{Target: "b", Command: "b", Priority: 3})
			e.alterIDs(protocol.Alter{Priority: intp(1)}, id[0])
			ph := e.register("s")
			if as := e.next(ph, 1); !slices.Equal(ids(as), []int64{id[1]}) {
				t.Fatalf("dispatched %v, want %d (priority 3 over the lowered 1)", ids(as), id[1])
			}
		}},
		{"a longer estimate no longer fits a placeholder's walltime", func(t *testing.T, e *env) {
			a := e.submit(protocol.JobSpec{Target: "a", Command: "a", Est: 60})[0]
			e.alterIDs(protocol.Alter{Est: floatp(7200)}, a)
			if est := e.job(a).Est; est != 7200 {
				t.Fatalf("job shows estimate %g, want 7200", est)
			}
			ph := e.register("s")
			if as := e.nextWalltime(ph, 1, 3600); len(as) != 0 {
				t.Fatalf("a job of 2h went to a placeholder with 1h left: %v", ids(as))
			}
			if as := e.nextWalltime(ph, 1, 3*3600); !slices.Equal(ids(as), []int64{a}) {
				t.Fatalf("dispatched %v with 3h left", ids(as))
			}
		}},
		{"a longer estimate ranks a job later in an sjf queue: its old heap entry is passed over", func(t *testing.T, e *env) {
			sjf := "sjf"
			if _, err := e.s.SetQueue(context.Background(), protocol.QueueSet{Name: "s", Policy: &sjf}); err != nil {
				t.Fatal(err)
			}
			id := e.submit(protocol.JobSpec{Queue: "s", Target: "a", Command: "a", Est: 10}, protocol.JobSpec{Queue: "s", Target: "b", Command: "b", Est: 100})
			e.alterIDs(protocol.Alter{Est: floatp(1000)}, id[0])
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
			if want := []int64{id[1], id[0]}; !slices.Equal(got, want) {
				t.Fatalf("sjf dispatched %v, want %v (the 100 s job before the one now 1000 s)", got, want)
			}
			if as := e.next(ph, 4); len(as) != 0 {
				t.Fatalf("a stale heap entry dispatched %v again", ids(as))
			}
		}},
		{"an estimate of 0 is unknown again", func(t *testing.T, e *env) {
			a := e.submit(protocol.JobSpec{Target: "a", Command: "a", Est: 60})[0]
			e.alterIDs(protocol.Alter{Est: floatp(0)}, a)
			if est := e.job(a).Est; est != 0 {
				t.Fatalf("job shows estimate %g, want none", est)
			}
		}},
		{"an estimate made unknown (0) in an sjf queue ranks last, as a fresh submission's: its old heap entry is passed over", func(t *testing.T, e *env) {
			e.setPolicy("q", "sjf")
			e.submit(qspec("a", 5), qspec("b", 100), qspec("c", 50))
			e.alterIDs(protocol.Alter{Est: floatp(0)}, 1)
			if got, want := e.drain(e.register("s")), []string{"c", "b", "a"}; !slices.Equal(got, want) {
				t.Fatalf("sjf ran %v, want %v (a unknown, so last)", got, want)
			}
		}},
		{"a time limit is the job's, and its estimate when it had none", func(t *testing.T, e *env) {
			id := e.submit(spec("none", "x"), protocol.JobSpec{Target: "own", Command: "x", Est: 100, Time: 50},
				protocol.JobSpec{Target: "derived", Command: "x", Time: 50}, protocol.JobSpec{Target: "both", Command: "x", Time: 50})
			e.alterIDs(protocol.Alter{Time: 600}, id[:3]...)
			e.alterIDs(protocol.Alter{Time: 600, Est: floatp(30)}, id[3])
			for i, want := range []float64{600, 100, 600, 30} {
				d := e.job(id[i])
				if d.TimeLimit != 600 || d.Est != want {
					t.Errorf("job %d (%s): time limit %g, estimate %g; want 600, %g", id[i], d.Target, d.TimeLimit, d.Est, want)
				}
			}
			ph := e.register("s")
			as := e.next(ph, 4)
			if len(as) != 4 {
				t.Fatalf("dispatched %v", ids(as))
			}
			for _, a := range as {
				if limitOf(a) != 600 {
					t.Errorf("job %d runs with limit %g (env %q), want 600", a.ID, limitOf(a), a.Env)
				}
			}
		}},
		{"memory raised past every placeholder: the job cannot run, and says why; lowered, it runs", func(t *testing.T, e *env) {
			a := e.submit(protocol.JobSpec{Target: "a", Command: "a", Resources: protocol.Resources{Mem: 4 * gib, CPUs: 2}})[0]
			ph := e.registerSized("s", protocol.Capacity{CPUs: 4, Mem: 8 * gib})
			e.alterIDs(protocol.Alter{Resources: protocol.Resources{Mem: 16 * gib}}, a)
			d := e.job(a)
			if d.Mem != 16*gib || d.CPUs != 2 {
				t.Fatalf("job shows %s, want cpus=2 (kept) and 16 GiB", d.Resources.Describe())
			}
			if as := e.next(ph, 4); len(as) != 0 {
				t.Fatalf("a job asking 16 GiB went to an 8 GiB placeholder: %v", ids(as))
			}
			if why := e.job(a).Unfit; !strings.Contains(why, "16") {
				t.Fatalf("cannot run: %q, want the 16 GiB it needs named", why)
			}
			e.alterIDs(protocol.Alter{Resources: protocol.Resources{Mem: 2 * gib}}, a)
			as := e.next(ph, 4)
			if !slices.Equal(ids(as), []int64{a}) {
				t.Fatalf("dispatched %v", ids(as))
			}
			if g := as[0].Grant; g == nil || g.Mem != 2*gib || g.CPUs != 2 {
				t.Fatalf("granted %+v, want 2 cores and 2 GiB", g)
			}
		}},
		{"cores and gpus, auto or counted", func(t *testing.T, e *env) {
			a := e.submit(spec("a", "a"))[0]
			e.alterIDs(protocol.Alter{Resources: protocol.Resources{CPUsAuto: true, GPUs: 2, MemAuto: true}}, a)
			r := e.job(a).Resources
			if !r.CPUsAuto || r.GPUs != 2 || !r.MemAuto {
				t.Fatalf("job shows %s", r.Describe())
			}
			e.alterIDs(protocol.Alter{Resources: protocol.Resources{CPUs: 3}}, a)
			if r := e.job(a).Resources; r.CPUs != 3 || r.CPUsAuto || r.GPUs != 2 || !r.MemAuto {
				t.Fatalf("job shows %s, want cpus=3 and the rest kept", r.Describe())
			}
		}},
		{"gpus and named amounts: set, replaced, dropped; the job then fits", func(t *testing.T, e *env) {
			a := e.submit(protocol.JobSpec{Target: "a", Command: "a", Resources: protocol.Resources{GPUs: 1, Named: map[string]int{"lic": 2, "scratch": 5}}})[0]
			ph := e.registerSized("s", protocol.Capacity{CPUs: 4, Named: map[string]int{"lic": 1}})
			if as := e.next(ph, 4); len(as) != 0 {
				t.Fatalf("a job asking a GPU went to a placeholder without one: %v", ids(as))
			}
			e.alterIDs(protocol.Alter{Resources: protocol.Resources{Named: map[string]int{"lic": 1, "fpga": 3}}, Drop: []string{protocol.DropGPUs, "scratch"}}, a)
			if r := e.job(a).Resources; r.Describe() != "fpga=3 lic=1" {
				t.Fatalf("job shows %q, want fpga=3 lic=1", r.Describe())
			}
			e.alterIDs(protocol.Alter{Drop: []string{"fpga", "nosuch"}}, a)
			if r := e.job(a).Resources; r.Describe() != "lic=1" {
				t.Fatalf("job shows %q, want lic=1", r.Describe())
			}
			as := e.next(ph, 4)
			if !slices.Equal(ids(as), []int64{a}) || as[0].Grant == nil || as[0].Grant.Named["lic"] != 1 || len(as[0].Grant.GPUIDs) != 0 {
				t.Fatalf("dispatched %+v, want %d granted lic=1 and no GPU", as, a)
			}
		}},
		{"dropping the last request leaves a job that asks for nothing", func(t *testing.T, e *env) {
			a := e.submit(protocol.JobSpec{Target: "a", Command: "a", Resources: protocol.Resources{GPUs: 2, Named: map[string]int{"lic": 1}}})[0]
			e.alterIDs(protocol.Alter{Drop: []string{"lic", protocol.DropGPUs}}, a)
			if r := e.job(a).Resources; r.Asks() {
				t.Fatalf("job still asks %q", r.Describe())
			}
			e.reopen()
			if r := e.job(a).Resources; r.Asks() {
				t.Fatalf("after a reopen job asks %q", r.Describe())
			}
			ph := e.register("s")
			if as := e.next(ph, 1); !slices.Equal(ids(as), []int64{a}) {
				t.Fatalf("dispatched %v to a placeholder of slots", ids(as))
			}
		}},
		{"named amounts past a request's bound are refused, job by job, nothing of it changed", func(t *testing.T, e *env) {
			full := map[string]int{}
			for i := range protocol.MaxNamed {
				full[fmt.Sprintf("r%d", i)] = 1
			}
			id := e.submit(protocol.JobSpec{Target: "a", Command: "a", Resources: protocol.Resources{Named: full}}, spec("a", "a"))
			more := protocol.Alter{Priority: intp(3), Resources: protocol.Resources{Named: map[string]int{"extra": 1}}}
			more.Select = protocol.Select{IDs: id, Atomic: true}
			r, err := e.s.Alter(context.Background(), more)
			want := fmt.Sprintf("job %d would ask for %d named resources; at most %d", id[0], protocol.MaxNamed+1, protocol.MaxNamed)
			if err != nil || len(r.IDs) != 0 || len(r.Errors) != 1 || !strings.HasPrefix(r.Errors[0], want) {
				t.Fatalf("atomic Alter = %+v, %v; want nothing changed and %q", r, err, want)
			}
			more.Select = protocol.Select{Target: "a"}
			if r, err = e.s.Alter(context.Background(), more); err != nil || !slices.Equal(r.IDs, id[1:]) || len(r.Errors) != 1 {
				t.Fatalf("Alter -t a = %+v, %v; want job %d changed, %d refused", r, err, id[1], id[0])
			}
			if d := e.job(id[0]); d.Priority != 0 || len(d.Named) != protocol.MaxNamed {
				t.Fatalf("the refused job changed: priority %d, %d names", d.Priority, len(d.Named))
			}
			more.Drop = []string{"r0"}
			e.alterIDs(more, id[0])
			if d := e.job(id[0]); d.Priority != 3 || len(d.Named) != protocol.MaxNamed || d.Named["extra"] != 1 {
				t.Fatalf("with one dropped the job shows priority %d, %s", d.Priority, d.Resources.Describe())
			}
		}},
		{"a bundle's member changed: the bundle still goes whole, in order, the member with its new values", func(t *testing.T, e *env) {
			loose := e.submit1("l", "loose")
			b := e.submitReq(bundleOf("b1", "b2", "b3"))
			e.alterIDs(protocol.Alter{Priority: intp(5), Time: 90}, b[1])
			ph := e.register("s")
			as := e.next(ph, 1) // one slot: the raised member's bundle before the loose job
			if !slices.Equal(ids(as), b) {
				t.Fatalf("dispatched %v, want the bundle %v whole (not %d)", ids(as), b, loose)
			}
			if limitOf(as[1]) != 90 || limitOf(as[0]) != 0 {
				t.Fatalf("limits %g, %g; want the changed member's 90 alone", limitOf(as[0]), limitOf(as[1]))
			}
		}},
		{"a bundle's member's request is not changed alone: the bundle runs in one grant", func(t *testing.T, e *env) {
			b := e.submitReq(bundleOf("b1", "b2"))
			for _, a := range []protocol.Alter{{Resources: protocol.Resources{CPUs: 4}}, {Drop: []string{"gpus"}}} {
				a.Select = protocol.Select{IDs: []int64{b[1]}}
				r, err := e.s.Alter(context.Background(), a)
				want := fmt.Sprintf("job %d runs in bundle %d's one grant", b[1], b[0])
				if err != nil || len(r.IDs) != 0 || len(r.Errors) != 1 || !strings.HasPrefix(r.Errors[0], want) {
					t.Fatalf("Alter %+v of a bundle's member = %+v, %v; want refused: %s", a, r, err, want)
				}
			}
			e.alterIDs(protocol.Alter{Priority: intp(5)}, b[1]) // what is the job's own still changes
			if d := e.job(b[1]); d.Resources.Asks() || d.Priority != 5 {
				t.Fatalf("the member asks for %s, priority %d", d.Resources.Describe(), d.Priority)
			}
		}},
		{"a held job stays held; released, it runs with its new values", func(t *testing.T, e *env) {
			a := e.submit(protocol.JobSpec{Target: "a", Command: "a", Hold: true})[0]
			e.alterIDs(protocol.Alter{Time: 90, Priority: intp(2)}, a)
			e.mustBe(a, job.Held)
			ph := e.register("s")
			if as := e.next(ph, 4); len(as) != 0 {
				t.Fatalf("a held job was dispatched: %v", ids(as))
			}
			if _, err := e.s.Release(context.Background(), protocol.Select{IDs: []int64{a}, Atomic: true}); err != nil {
				t.Fatal(err)
			}
			as := e.next(ph, 4)
			if !slices.Equal(ids(as), []int64{a}) || limitOf(as[0]) != 90 {
				t.Fatalf("dispatched %v (limit %v), want %d with 90 s", ids(as), as, a)
			}
		}},
		{"a waiting job stays waiting, then runs with its new values", func(t *testing.T, e *env) {
			a := e.submit1("a", "a")
			b := e.submit1("b", "b", "a")
			e.alterIDs(protocol.Alter{Time: 45}, b)
			e.mustBe(b, job.Waiting)
			ph := e.register("s")
			as := e.next(ph, 4)
			if !slices.Equal(ids(as), []int64{a}) {
				t.Fatalf("dispatched %v", ids(as))
			}
			e.report(ph, ok(as[0]))
			e.mustBe(b, job.Queued)
			if as := e.next(ph, 4); !slices.Equal(ids(as), []int64{b}) || limitOf(as[0]) != 45 {
				t.Fatalf("dispatched %v, want %d with limit 45", ids(as), b)
			}
		}},
		{"the new values outlive a reopen", func(t *testing.T, e *env) {
			id := e.submit(spec("a", "a"), protocol.JobSpec{Target: "b", Command: "b", Resources: protocol.Resources{Mem: gib}})
			e.alterIDs(protocol.Alter{Priority: intp(9), Time: 120, Resources: protocol.Resources{Mem: 3 * gib, CPUs: 2}}, id[1])
			e.reopen()
			d := e.job(id[1])
			if d.Priority != 9 || d.TimeLimit != 120 || d.Est != 120 || d.Mem != 3*gib || d.CPUs != 2 || d.State != "Q" {
				t.Fatalf("after a reopen job shows %+v", d.JobInfo)
			}
			ph := e.registerSized("s", protocol.Capacity{CPUs: 4, Mem: 8 * gib})
			as := e.next(ph, 1)
			if !slices.Equal(ids(as), []int64{id[1]}) || limitOf(as[0]) != 120 || as[0].Grant == nil || as[0].Grant.Mem != 3*gib {
				t.Fatalf("after a reopen dispatched %v, want %d first with 120 s and 3 GiB", as, id[1])
			}
		}},
		{"jobs started or ended are refused, all or none, one line each", func(t *testing.T, e *env) {
			id := e.submit(spec("r", "r"), spec("d", "d"), spec("q", "q"))
			ph := e.register("s")
			as := e.next(ph, 2)
			e.report(ph, ok(as[1]))
			r, err := e.s.Alter(context.Background(), protocol.Alter{Select: protocol.Select{IDs: []int64{id[2], id[0], id[1], 99}, Atomic: true}, Priority: intp(4)})
			if err != nil {
				t.Fatal(err)
			}
			want := []string{
				fmt.Sprintf("job %d is executing; only jobs not started (waiting, queued or held) can be changed", id[0]),
				fmt.Sprintf("job %d has already ended (done)", id[1]),
				"job 99 does not exist",
			}
			if len(r.IDs) != 0 || !slices.Equal(r.Errors, want) {
				t.Fatalf("Alter = %+v, want errors %q", r, want)
			}
			if p := e.job(id[2]).Priority; p != 0 {
				t.Fatalf("a refused request changed job %d: priority %d", id[2], p)
			}
			// A selection takes the jobs not started and passes over the others.
			r, err = e.s.Alter(context.Background(), protocol.Alter{Select: protocol.Select{First: id[0], Last: id[2]}, Priority: intp(4)})
			if err != nil || !slices.Equal(r.IDs, []int64{id[2]}) || len(r.Errors) != 0 {
				t.Fatalf("Alter of the range = %+v, %v", r, err)
			}
			if _, err := e.s.Alter(context.Background(), protocol.Alter{Select: protocol.Select{States: "E"}, Priority: intp(4)}); !protocol.IsCode(err, protocol.CodeBadRequest) {
				t.Fatalf("Alter -s E: %v, want bad_request", err)
			}
		}},
		{"a blocked job is refused", func(t *testing.T, e *env) {
			a := e.submit1("a", "a")
			b := e.submit1("b", "b", "a")
			if _, err := e.s.Delete(context.Background(), protocol.Select{IDs: []int64{a}, Atomic: true}); err != nil {
				t.Fatal(err)
			}
			r, err := e.s.Alter(context.Background(), protocol.Alter{Select: protocol.Select{IDs: []int64{b}, Atomic: true}, Time: 5})
			if err != nil || len(r.Errors) != 1 || !strings.Contains(r.Errors[0], "is blocked; only jobs not started") {
				t.Fatalf("Alter of a blocked job = %+v, %v", r, err)
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

// TestAlterRefusesBadValues: the store refuses, whole and with
// bad_request, what mqalter's flags would, whoever sends it.
func TestAlterRefusesBadValues(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.submit1("a", "a")
	sel := protocol.Select{IDs: []int64{a}, Atomic: true}
	for _, tc := range []struct {
		alter protocol.Alter
		want  string
	}{
		{protocol.Alter{}, "nothing to change"},
		{protocol.Alter{Priority: intp(1024)}, "priority must be -1024..1023"},
		{protocol.Alter{Priority: intp(-2000)}, "priority must be -1024..1023"},
		{protocol.Alter{Time: -1}, "time limit -1 must be more than 0"},
		{protocol.Alter{Time: 2e9}, "time limit"},
		{protocol.Alter{Est: floatp(-5)}, "estimate must be"},
		{protocol.Alter{Resources: protocol.Resources{CPUs: -2}}, "cpus -2"},
		{protocol.Alter{Resources: protocol.Resources{CPUs: 2, CPUsAuto: true}}, "a count or auto"},
		{protocol.Alter{Resources: protocol.Resources{Mem: protocol.MaxMem + 1}}, "memory"},
		{protocol.Alter{Resources: protocol.Resources{GPUs: protocol.MaxGPUs + 1}}, "gpus"},
		{protocol.Alter{Resources: protocol.Resources{Named: map[string]int{"9lives": 1}}}, "not a name"},
		{protocol.Alter{Resources: protocol.Resources{Named: map[string]int{"lic": 0}}}, "lic=0: must be at least 1"},
		{protocol.Alter{Resources: protocol.Resources{Named: map[string]int{"gpus": 1}}}, "own key"},
		{protocol.Alter{Resources: protocol.Resources{GPUs: 2}, Drop: []string{protocol.DropGPUs}}, "gpus: give a count or 0, not both"},
		{protocol.Alter{Resources: protocol.Resources{Named: map[string]int{"lic": 2}}, Drop: []string{"lic"}}, "lic: give an amount or 0, not both"},
		{protocol.Alter{Drop: []string{"lic", "lic"}}, "dropped twice"},
		{protocol.Alter{Drop: []string{"mem"}}, "own key"},
		{protocol.Alter{Drop: []string{"a b"}}, "not a name"},
		{protocol.Alter{Drop: make([]string, protocol.MaxNamed+2)}, "at most"},
	} {
		tc.alter.Select = sel
		_, err := e.s.Alter(context.Background(), tc.alter)
		if !protocol.IsCode(err, protocol.CodeBadRequest) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Alter(%+v): %v, want bad_request saying %q", tc.alter, err, tc.want)
		}
	}
	d := e.job(a)
	if d.Priority != 0 || d.Est != 0 || d.TimeLimit != 0 || d.Resources.Asks() {
		t.Fatalf("a refused request changed the job: %+v", d.JobInfo)
	}
	e.check()
}

// TestAlterFailureRollsBack: an error in the middle of a batch (here a
// job's stored environment that does not decode) rolls the whole batch
// back: the jobs changed before it lose their change, and none is left
// held by the change.
func TestAlterFailureRollsBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.submit(spec("a", "a"), spec("b", "b"))
	e.downgrade(fmt.Sprintf("INSERT INTO job_env (job_id, env) VALUES (%d, 'not json')", id[1]))
	_, err := e.s.Alter(context.Background(), protocol.Alter{Select: protocol.Select{IDs: id, Atomic: true}, Priority: intp(4), Time: 60})
	if err == nil {
		t.Fatal("Alter over a job whose environment does not decode succeeded")
	}
	for _, j := range id {
		e.mustBe(j, job.Queued)
		if d := e.job(j); d.Priority != 0 || d.TimeLimit != 0 || d.Est != 0 {
			t.Errorf("job %d kept part of a failed change: %+v", j, d.JobInfo)
		}
	}
	e.check()
	// Job a, changed and released before the failure, runs (b's broken
	// environment would fail its own dispatch).
	ph := e.register("s")
	if as := e.next(ph, 1); !slices.Equal(ids(as), id[:1]) {
		t.Fatalf("after a failed change dispatched %v, want %d", ids(as), id[0])
	}
}

// TestAlterEstimateReranksCP: a new estimate moves the b-levels of its
// chain in a cp queue, up or down, whatever the altered job's state or
// queue: the jobs then go in the order a fresh submission with the new
// estimates gives (each case chosen so that it differs from the old one's).
func TestAlterEstimateReranksCP(t *testing.T) {
	t.Parallel()
	// a -> b (b needs a), x alone, c -> d, in cp queue q; f is fcfs.
	base := func() []protocol.JobSpec {
		return []protocol.JobSpec{qspec("a", 1), qspec("b", 100, "a"), qspec("x", 10), qspec("c", 5), qspec("d", 20, "c")}
	}
	for _, tc := range []struct {
		name   string
		change func(js []protocol.JobSpec) // what the specs are made, as is
		alter  map[string]float64          // target -> new estimate
	}{
		{"a dependent's estimate lowered: its chain's head goes after others", nil, map[string]float64{"b": 1}},
		{"a dependent's estimate raised: its chain's head goes first", nil, map[string]float64{"d": 500}},
		{"made unknown again (0)", nil, map[string]float64{"b": 0}},
		{"raised from unknown", func(js []protocol.JobSpec) { js[4].Est = 0 }, map[string]float64{"d": 1000}},
		{"a ready job's own estimate lowered, another's raised", nil, map[string]float64{"a": 0.5, "x": 200}},
		{"a held dependent's estimate lowered", func(js []protocol.JobSpec) { js[1].Hold = true }, map[string]float64{"b": 2}},
		{"a dependent in an fcfs queue ranks the cp queue's head", func(js []protocol.JobSpec) { js[1].Queue = "f" }, map[string]float64{"b": 3}},
		{"several at once, up and down", nil, map[string]float64{"b": 1, "d": 1, "x": 1, "c": 50}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// run submits the jobs, with the new estimates (fresh) or the
			// old ones, altered after (alter), and returns the order they ran.
			run := func(fresh, alter bool) []string {
				e := newEnv(t)
				e.setPolicy("q", "cp")
				e.setPolicy("f", "fcfs")
				js := base()
				if tc.change != nil {
					tc.change(js)
				}
				for i := range js {
					if est, ok := tc.alter[js[i].Target]; ok && fresh {
						js[i].Est = est
					}
				}
				e.submit(js...)
				for target, est := range tc.alter {
					if !alter {
						break
					}
					r, err := e.s.Alter(context.Background(), protocol.Alter{Select: protocol.Select{Target: target}, Est: floatp(est)})
					if err != nil || r.Acted() != 1 {
						t.Fatalf("Alter -t %s --est %g = %+v, %v", target, est, r, err)
					}
				}
				order := e.drain(e.register("s"))
				e.check()
				return order
			}
			old, fresh, got := run(false, false), run(true, false), run(false, true)
			if slices.Equal(old, fresh) {
				t.Fatalf("the case shows nothing: old and new estimates both run %v", old)
			}
			if !slices.Equal(got, fresh) {
				t.Fatalf("after mqalter --est ran %v; a fresh submission with those estimates runs %v (the old estimates ran %v)", got, fresh, old)
			}
		})
	}
}
