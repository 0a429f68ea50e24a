package metaqueue

import (
	"context"
	"fmt"
	"testing"

	"github.com/mq-hpc/mq/internal/resource/wire"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// gib is a GiB in bytes.
const gib = 1 << 30

func asks(target string, r protocol.Resources) protocol.JobSpec {
	js := spec(target, "true")
	js.Resources = r
	return js
}

// TestRequestsKept: a job's request is stored with its queue's defaults
// applied (its own values winning), shown in listings and details, kept
// across a reopen and through a bulk submission; a job that asks for
// nothing has none.
func TestRequestsKept(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.s.SetQueue(ctx, protocol.QueueSet{Name: "big", Defaults: &protocol.Resources{CPUs: 2, Mem: 4 * gib}}); err != nil {
		t.Fatal(err)
	}
	own := asks("a", protocol.Resources{CPUs: 8, GPUs: 1})
	own.Queue = "big"
	plain := spec("b", "true")
	deflt := spec("c", "true")
	deflt.Queue = "big"
	ids := e.submit(own, plain, deflt)

	b, err := e.s.NewBulk()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Add(1, []protocol.JobSpec{asks("d", protocol.Resources{CPUs: 3, Named: map[string]int{"licence": 2}})}); err != nil {
		t.Fatal(err)
	}
	first, err := b.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]string{
		ids[0]: "cpus=8 mem=4 GiB gpus=1",
		ids[1]: "",
		ids[2]: "cpus=2 mem=4 GiB",
		first:  "cpus=3 licence=2",
	}
	check := func(when string) {
		t.Helper()
		for id, w := range want {
			if got := e.job(id).Resources.Describe(); got != w {
				t.Errorf("%s: job %d's request = %q, want %q", when, id, got, w)
			}
		}
		for _, ji := range e.stat(protocol.Stat{}) {
			if got := ji.Resources.Describe(); got != want[ji.ID] {
				t.Errorf("%s: listing: job %d's request = %q, want %q", when, ji.ID, got, want[ji.ID])
			}
		}
	}
	check("submitted")
	e.reopen()
	check("reopened")
	if !e.s.KeepsResources() {
		t.Error("the store does not say it keeps requests: the server warns they are dropped")
	}
	if r := e.s.pack.Request(ids[0]); r.CPUs != 8 || r.Mem != 4*gib || r.GPUs != 1 {
		t.Errorf("after reopen packing has job %d's request as %+v", ids[0], r)
	}
}

// registerSized registers a placeholder of site that says it holds c.
func (e *env) registerSized(site string, c protocol.Capacity) int64 {
	e.t.Helper()
	r, err := e.s.Register(context.Background(), protocol.Register{Site: site, Host: "h-" + site, PID: 42, Slots: c.CPUs, OutDir: "/out/" + site, Capacity: &c})
	if err != nil {
		e.t.Fatalf("Register: %v", err)
	}
	return r.ID
}

// free is what placeholder ph has free, as packing counts it.
func (e *env) free(ph int64) protocol.Capacity {
	e.t.Helper()
	var c protocol.Capacity
	if err := e.s.do(context.Background(), func() error {
		f, ok := e.s.pack.Free(ph)
		if !ok {
			return fmt.Errorf("placeholder %d has no pool", ph)
		}
		c = *wire.Capacity(f)
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
	return c
}

// TestPackedDispatch: a 16-core placeholder asking for 16 jobs runs one
// 8-core job beside eight 1-core jobs and not a ninth, which runs once
// the 8-core job ends; the 8-core job's assignment carries its grant.
func TestPackedDispatch(t *testing.T) {
	e := newEnv(t)
	big := e.submit(asks("big", protocol.Resources{CPUs: 8, Mem: 30 * gib}))[0]
	var small []int64
	for i := range 9 {
		small = append(small, e.submit1(fmt.Sprint("s", i), "true"))
	}
	ph := e.registerSized("s", protocol.Capacity{CPUs: 16, Mem: 64 * gib})
	got := e.next(ph, 16)
	if len(got) != 9 {
		t.Fatalf("%d jobs dispatched (%v), want the 8-core one and eight 1-core ones", len(got), ids(got))
	}
	var bigA protocol.Assignment
	for _, a := range got {
		if a.ID == big {
			bigA = a
		} else if a.Grant != nil {
			t.Errorf("1-core job %d was sent a grant %v", a.ID, a.Grant)
		}
	}
	if bigA.ID == 0 {
		t.Fatalf("the 8-core job was not dispatched: %v", ids(got))
	}
	if g := bigA.Grant; g == nil || g.CPUs != 8 || g.Mem != 30*gib {
		t.Fatalf("the 8-core job's grant = %v, want 8 cores and 30 GiB", g)
	}
	e.mustBe(small[8], job.Queued)
	if again := e.next(ph, 16); len(again) != 0 {
		t.Fatalf("a full placeholder was given %v", ids(again))
	}
	if f := e.free(ph); f.CPUs != 0 || f.Mem != 34*gib {
		t.Errorf("free with everything running: %v", f)
	}
	later := e.next(ph, 16, ok(bigA))
	if len(later) != 1 || later[0].ID != small[8] {
		t.Fatalf("after the 8-core job ended: %v, want the ninth 1-core job", ids(later))
	}
	if f := e.free(ph); f.CPUs != 7 || f.Mem != 64*gib {
		t.Errorf("free after the 8-core job ended: %v", f)
	}
}

// TestGrantsReturned: every way an attempt stops gives its grant back.
func TestGrantsReturned(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		stop func(e *env, ph int64, a protocol.Assignment)
	}{
		{"done", func(e *env, ph int64, a protocol.Assignment) { e.report(ph, ok(a)) }},
		{"failed", func(e *env, ph int64, a protocol.Assignment) { e.report(ph, exit(a, 3)) }},
		{"requeued", func(e *env, ph int64, a protocol.Assignment) {
			e.report(ph, protocol.Report{ID: a.ID, Attempt: a.Attempt, Reason: protocol.ReasonInterrupted})
		}},
		{"returned", func(e *env, ph int64, a protocol.Assignment) {
			e.report(ph, protocol.Report{ID: a.ID, Attempt: a.Attempt, Reason: protocol.ReasonReturned})
		}},
		{"lease lost", func(e *env, ph int64, a protocol.Assignment) { e.expireLeases(a.ID) }},
		{"deleted", func(e *env, ph int64, a protocol.Assignment) {
			if _, err := e.s.Delete(ctx, protocol.Select{IDs: []int64{a.ID}}); err != nil {
				e.t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.submit(asks("a", protocol.Resources{CPUs: 3, GPUs: 1}))
			ph := e.registerSized("s", protocol.Capacity{CPUs: 4, GPUs: 2, GPUIDs: []string{"0", "1"}})
			got := e.next(ph, 4)
			if len(got) != 1 || got[0].Grant == nil || len(got[0].Grant.GPUIDs) != 1 {
				t.Fatalf("dispatched %+v", got)
			}
			if f := e.free(ph); f.CPUs != 1 || len(f.GPUIDs) != 1 {
				t.Fatalf("free while it runs: %v", f)
			}
			tc.stop(e, ph, got[0])
			if f := e.free(ph); f.CPUs != 4 || len(f.GPUIDs) != 2 {
				t.Errorf("free after the attempt stopped: %v, want everything", f)
			}
		})
	}
}

// TestGrantRetakenAfterRestart: after a CLS restart, a placeholder that
// registers again with attempts running holds their amounts again.
func TestGrantRetakenAfterRestart(t *testing.T) {
	e := newEnv(t)
	e.submit(asks("a", protocol.Resources{CPUs: 3}))
	c := protocol.Capacity{CPUs: 4}
	ph := e.registerSized("s", c)
	got := e.next(ph, 4)
	if len(got) != 1 {
		t.Fatalf("dispatched %v", ids(got))
	}
	e.reopen()
	two := e.submit(asks("b", protocol.Resources{CPUs: 2}))[0]
	r, err := e.s.Register(context.Background(), protocol.Register{ID: ph, Site: "s", Host: "h-s", PID: 42, Slots: 4, OutDir: "/out/s", Capacity: &c})
	if err != nil || r.ID != ph {
		t.Fatalf("Register again: %+v, %v", r, err)
	}
	if f := e.free(ph); f.CPUs != 1 {
		t.Fatalf("free after the restart: %d cores, want 1 (3 held by the running attempt)", f.CPUs)
	}
	if more := e.next(ph, 4); len(more) != 0 {
		t.Fatalf("a 2-core job started beside the 3-core one after a restart: %v", ids(more))
	}
	if more := e.next(ph, 4, ok(got[0])); len(more) != 1 || more[0].ID != two {
		t.Fatalf("after the 3-core job ended: %v", ids(more))
	}
}
