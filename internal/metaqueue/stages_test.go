package metaqueue

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/dc"

	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/protocol"
)

// LP provisioning's view of a pipeline: every queue with work is a stage,
// costed or not, in the order its jobs feed each other (not the order the
// queues were made in), with its waiting jobs, the bytes its ended jobs
// wrote, its measured runtimes and the sites' links; the caps the plan
// sets hold an uncosted queue at a site too, and survive nothing but the
// next plan.
func TestStageQueues(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	// parse is made first: only the feeds may put blast before it.
	for _, q := range []string{"parse", "idle", "blast"} {
		if _, err := e.s.SetQueue(ctx, protocol.QueueSet{Name: q}); err != nil {
			t.Fatal(err)
		}
	}
	var specs []protocol.JobSpec
	for i := range 3 {
		b := spec(fmt.Sprintf("b%d", i), "blast")
		b.Queue, b.Outputs = "blast", []protocol.File{file(fmt.Sprintf("/data/hits%d", i), 1000)}
		p := spec(fmt.Sprintf("p%d", i), "parse", fmt.Sprintf("b%d", i))
		p.Queue = "parse"
		specs = append(specs, b, p)
	}
	e.submit(specs...)
	qs, links, err := e.s.Planners().StageQueues(ctx, []string{"local", "far"})
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 2 || qs[0].Queue != "blast" || qs[1].Queue != "parse" {
		t.Fatalf("stages %+v: want blast then parse (idle has no jobs)", qs)
	}
	if qs[0].Ready != 3 || qs[1].Waiting != 3 || qs[1].Ready != 0 || !qs[0].FeedsNext || qs[1].FeedsNext {
		t.Errorf("counts: blast %+v, parse %+v", qs[0], qs[1])
	}
	if links["local"] != dc.DefaultLocalLink.Bandwidth || links["far"] != dc.DefaultSiteLink.Bandwidth {
		t.Errorf("links %v: want the defaults", links)
	}

	// A blast job starts before any plan; then the plan caps parse at
	// local to 0 and blast to 1: an uncosted queue is held to it, and the
	// job already running counts.
	ph := e.register("local")
	got := e.next(ph, 1)
	if len(got) != 1 {
		t.Fatalf("got %v: one blast job", ids(got))
	}
	if err := e.s.Planners().SetEconPlan(ctx, "blast", map[string]int{"local": 1}, 0); err != nil {
		t.Fatal(err)
	}
	if err := e.s.Planners().SetEconPlan(ctx, "parse", map[string]int{"local": 0}, 0); err != nil {
		t.Fatal(err)
	}
	if more := e.next(ph, 4); len(more) != 0 {
		t.Fatalf("got %v: blast's cap (1) is taken by the job that started before it", ids(more))
	}
	e.report(ph, ok(got[0]))
	qs, _, err = e.s.Planners().StageQueues(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if qs[0].Out != 1000 {
		t.Errorf("blast after one job: %+v; want 1000 bytes written a job", qs[0])
	}
	if _, measured := qs[0].PerJob["local"]; !measured {
		t.Errorf("blast's runtime at local not measured: %+v", qs[0].PerJob)
	}
	if qs[1].Ready != 1 {
		t.Fatalf("parse %+v: one ready", qs[1])
	}
	// parse's cap at local is 0: its ready job waits; blast's next runs.
	got = e.next(ph, 4)
	if len(got) != 1 || e.job(got[0].ID).Queue != "blast" {
		t.Fatalf("got %v: only blast's next job may run here", ids(got))
	}
	e.report(ph, ok(got[0]))
	if err := e.s.Planners().SetEconPlan(ctx, "parse", nil, 0); err != nil {
		t.Fatal(err)
	}
	got = e.next(ph, 4)
	if len(got) != 3 {
		t.Fatalf("got %v: parse's cap gone, its 2 ready jobs run, and blast's last", ids(got))
	}
	// After a restart, the feeds are known again from the stored jobs.
	e.reopen()
	qs, _, err = e.s.Planners().StageQueues(ctx, nil)
	if err != nil || len(qs) != 2 || qs[0].Queue != "blast" || qs[1].Queue != "parse" {
		t.Fatalf("after a restart: %+v, %v; want blast then parse", qs, err)
	}
}

// What LP provisioning measured of an uncosted queue (its runtimes per
// site while capped, the bytes its Done jobs wrote) survives restarts:
// a reopened store gives the same measures, and adds to them.
func TestStageMeasuresSurviveRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	var specs []protocol.JobSpec
	for i := range 5 {
		s := spec(fmt.Sprintf("s%d", i), "stage")
		s.Queue, s.Outputs = "stage", []protocol.File{file(fmt.Sprintf("/data/s%d", i), int64(1000*(i+1)))}
		specs = append(specs, s)
	}
	e.submit(specs...)
	local, far := e.register("local"), e.register("far")
	capped := func() {
		t.Helper()
		if err := e.s.Planners().SetEconPlan(ctx, "stage", map[string]int{"local": 4, "far": 4}, 0); err != nil {
			t.Fatal(err)
		}
	}
	// run runs one job at ph for secs seconds.
	run := func(ph int64, secs float64) {
		t.Helper()
		got := e.next(ph, 1)
		if len(got) != 1 {
			t.Fatalf("got %v: one job", ids(got))
		}
		r := ok(got[0])
		r.Started = e.clock.Now()
		r.Finished = r.Started.Add(time.Duration(secs * float64(time.Second)))
		e.report(ph, r)
	}
	measures := func() policy.EconQueue {
		t.Helper()
		qs, _, err := e.s.Planners().StageQueues(ctx, nil)
		if err != nil || len(qs) != 1 {
			t.Fatalf("stages %+v, %v", qs, err)
		}
		return qs[0]
	}
	same := func(when string, a, b policy.EconQueue) {
		t.Helper()
		if !maps.Equal(a.PerJob, b.PerJob) || a.Out != b.Out || a.Est != b.Est {
			t.Errorf("%s: per job %v, %g bytes, est %g; before %v, %g bytes, est %g", when, b.PerJob, b.Out, b.Est, a.PerJob, a.Out, a.Est)
		}
	}
	capped()
	run(local, 10)
	run(local, 20)
	run(far, 5)
	before := measures()
	if want := map[string]float64{"local": 15, "far": 5}; !maps.Equal(before.PerJob, want) || before.Out != 2000 {
		t.Fatalf("measured %v, %g bytes a job; want %v, 2000", before.PerJob, before.Out, want)
	}
	e.reopen()
	same("after a restart", before, measures())
	// More is measured after it, and kept through the next.
	capped()
	local = e.register("local")
	run(local, 30)
	before = measures()
	if before.PerJob["local"] != 20 || before.Out != 2500 {
		t.Fatalf("measured %v, %g bytes a job; want local 20, 2500", before.PerJob, before.Out)
	}
	e.reopen()
	same("after a second restart", before, measures())
}
