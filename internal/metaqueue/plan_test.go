package metaqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/catalog"

	"github.com/mq-hpc/mq/internal/metaqueue/plans"
	"github.com/mq-hpc/mq/internal/plan"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// TestPlanFollowed: a placeholder at a job's planned site gets it first;
// one elsewhere leaves it while the planned site asks for work, and takes
// it (a deviation) once it has waited plans.Patience. Plans survive a
// restart and show in the job's detail.
func TestPlanFollowed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.submit(spec("t", "true"), spec("t", "true"), spec("t", "true"), spec("t", "true"))
	pl := policy.Plan{
		Site:  map[int64]string{id[0]: "b", id[1]: "b", id[2]: "a", id[3]: "a"},
		Order: []int64{id[2], id[0], id[3], id[1]},
	}
	n, err := e.s.Plans().Set(context.Background(), "heft", pl)
	if err != nil || n != 4 {
		t.Fatalf("SetPlan = %d, %v", n, err)
	}
	e.reopen() // plans are kept
	a := e.register("a")
	b := e.register("b")
	gotB := e.next(b, 1)
	if got := ids(gotB); !slices.Equal(got, []int64{id[0]}) {
		t.Fatalf("b got %v, want its first planned job %d", got, id[0])
	}
	// b asked a moment ago: a gets its own planned jobs, in plan order,
	// and leaves b's.
	gotA := e.next(a, 4)
	if got := ids(gotA); !slices.Equal(got, []int64{id[2], id[3]}) {
		t.Fatalf("a got %v, want %v (its plan, not b's job)", got, []int64{id[2], id[3]})
	}
	e.report(b, ok(gotB[0]))
	e.report(a, ok(gotA[0]), ok(gotA[1]))
	e.clock.Advance(plans.Patience + time.Second)
	if got := ids(e.next(a, 4)); !slices.Equal(got, []int64{id[1]}) {
		t.Fatalf("after b's patience ran out, a got %v, want %d", got, id[1])
	}
	d := e.job(id[1])
	if d.Plan == nil || d.Plan.Site != "b" || d.Plan.Planner != "heft" || d.Plan.Seq != 3 {
		t.Fatalf("job detail plan %+v", d.Plan)
	}
	if n, err := e.s.Plans().Clear(context.Background()); err != nil || n != 4 {
		t.Fatalf("ClearPlans = %d, %v", n, err)
	}
}

// TestPlanWithoutSitePlaceholders: a plan naming a site whose placeholders
// never ask does not hold work back.
func TestPlanWithoutSitePlaceholders(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.register("a")
	id := e.submit(spec("t", "true"), spec("t", "true"))
	if _, err := e.s.Plans().Set(context.Background(), "minmin", policy.Plan{
		Site: map[int64]string{id[0]: "gone", id[1]: "a"}, Order: []int64{id[0], id[1]},
	}); err != nil {
		t.Fatal(err)
	}
	if got := ids(e.next(a, 2)); !slices.Equal(got, []int64{id[1], id[0]}) {
		t.Fatalf("a got %v, want its planned job and then the other", got)
	}
}

// TestPlanJobs: the problem of a target covers its jobs and those of the
// targets it needs, not yet ended, with jobs as prerequisites and the
// declared files.
func TestPlanJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ph := e.register("a")
	done := e.submit1("old", "true")
	for _, as := range [][]protocol.Assignment{e.next(ph, 1)} {
		e.report(ph, ok(as[0]))
	}
	e.mustBe(done, job.Done)
	x := e.submit(protocol.JobSpec{Target: "x", Command: "true", Cwd: "/tmp", Outputs: []protocol.File{{Path: "x.dat"}}, Prereqs: []string{"old"}})[0]
	y := e.submit(protocol.JobSpec{Target: "y", Command: "true", Cwd: "/tmp", Inputs: []protocol.File{{Path: "x.dat"}, {Path: "raw.dat"}}, Prereqs: []string{"x"}, Est: 5})[0]
	est := func(_ int64, _ string, declared float64) map[string]float64 {
		if declared == 0 {
			declared = 60
		}
		return map[string]float64{"a": declared, "b": declared}
	}
	jobs, err := plans.Problem(context.Background(), e.s.ReadDB(), "y", est)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 {
		t.Fatalf("%d jobs, want x's and y's: %+v", len(jobs), jobs)
	}
	byID := map[int64]policy.PlanJob{}
	for _, j := range jobs {
		byID[j.ID] = j
	}
	jx, jy := byID[x], byID[y]
	if jx.Est["b"] != 60 || jy.Est["a"] != 5 || len(jx.Prereqs) != 0 || !slices.Equal(jy.Prereqs, []int64{x}) {
		t.Fatalf("x %+v, y %+v", jx, jy)
	}
	if len(jx.Outputs) != 1 || jx.Outputs[0].Path != "/tmp/x.dat" || len(jy.Inputs) != 2 {
		t.Fatalf("files: x %+v, y %+v", jx, jy)
	}
	if _, err := plans.Problem(context.Background(), e.s.ReadDB(), "nosuch", est); err == nil {
		t.Fatal("a target without jobs was planned")
	}
}

// TestRuntimeSamples: jobs that ended well give their command, site and
// elapsed time; failed and unfinished ones give nothing.
func TestRuntimeSamples(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	a, b := e.registerAt("sa", "ha"), e.registerAt("sb", "hb")
	e.submit(spec("t", "/bin/sim 1"), spec("t", "/bin/sim 2"), spec("t", "false"), spec("t", "sleep 9"))
	start := e.clock.Now()
	for i, ph := range []int64{a, b} {
		as := e.next(ph, 1)[0]
		e.report(ph, protocol.Report{ID: as.ID, Attempt: as.Attempt, Started: start, Finished: start.Add(time.Duration(i+1) * 1500 * time.Millisecond)})
	}
	as := e.next(a, 1)[0]
	e.report(a, protocol.Report{ID: as.ID, Attempt: as.Attempt, Exit: 1, Started: start, Finished: start.Add(time.Second)})
	e.next(b, 1) // running: no sample
	got := map[string]float64{}
	if err := plans.RuntimeSamples(ctx, e.s.ReadDB(), 100, func(command, site string, elapsed float64) {
		got[command+"@"+site] = elapsed
	}); err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"/bin/sim 1@sa": 1.5, "/bin/sim 2@sb": 3}
	if !maps.Equal(got, want) {
		t.Fatalf("samples %v, want %v", got, want)
	}
	got = map[string]float64{}
	if err := plans.RuntimeSamples(ctx, e.s.ReadDB(), 1, func(command, site string, elapsed float64) { got[command] = elapsed }); err != nil || len(got) != 1 {
		t.Fatalf("limit 1: %v, %v", got, err)
	}
}

// TestPlanKeepsFiles: a plan that keeps a job's output at another site
// than where the job ran has the stager copy it there when the job ends
// (once, accounted to the producer); a file kept where it was written,
// or a plan cleared, moves nothing; the file sites survive a restart.
func TestPlanKeepsFiles(t *testing.T) {
	t.Parallel()
	e, st := newStagingEnv(t)
	ctx := context.Background()
	out, here := protocol.File{Path: "/w/o1", Rel: true}, protocol.File{Path: "/w/o2", Rel: true}
	p := e.submit(withFiles("p", "x", nil, []protocol.File{out, here}))[0]
	q := e.submit(withFiles("q", "y", nil, []protocol.File{{Path: "/w/o3", Rel: true}}))[0]
	if _, err := e.s.Plans().Set(ctx, "aeh-etaa", policy.Plan{
		Site:     map[int64]string{p: "siteA", q: "siteA"},
		FileSite: map[string]string{out.Path: "siteB", here.Path: "siteA", "/w/o3": "siteB"},
		Order:    []int64{p, q},
	}); err != nil {
		t.Fatal(err)
	}
	e.reopen()
	a := e.registerAt("siteA", "a1")
	got := e.next(a, 1)
	if len(got) != 1 || got[0].ID != p {
		t.Fatalf("siteA got %v, want %d", ids(got), p)
	}
	rep := ok(got[0])
	rep.Outputs = []protocol.FileSum{{Path: out.Path, Size: 77, SHA256: sumA}, {Path: here.Path, Size: 5, SHA256: sumA}}
	e.report(a, rep)
	reqs := st.requests()
	if len(reqs) != 1 || reqs[0].Path != out.Path || reqs[0].To != (catalog.Place{Site: "siteB"}) ||
		!slices.Equal(reqs[0].From, []catalog.Place{{Site: "siteA"}}) || reqs[0].Job != p {
		t.Fatalf("requests %+v; want /w/o1 from siteA to siteB for job %d", reqs, p)
	}
	e.staged(reqs[0], reqs[0].From[0], nil, false)
	d := e.job(p)
	if len(d.Outputs[0].Replicas) != 2 {
		t.Fatalf("o1's replicas %+v, want siteA's and siteB's", d.Outputs[0].Replicas)
	}
	if _, err := e.s.Plans().Clear(ctx); err != nil {
		t.Fatal(err)
	}
	got = e.next(a, 1)
	if len(got) != 1 || got[0].ID != q {
		t.Fatalf("siteA got %v, want %d", ids(got), q)
	}
	rep = ok(got[0])
	rep.Outputs = []protocol.FileSum{{Path: "/w/o3", Size: 1, SHA256: sumA}}
	e.report(a, rep)
	if n := len(st.requests()); n != 1 {
		t.Fatalf("%d requests after the plan was cleared, want still 1", n)
	}
}

// TestPlanShowTimeline: a plan recorded with its timeline shows per site
// its jobs in predicted start order (bounded by the limit, the rest
// counted), busy time and utilisation, and where they ran; a second plan
// takes the jobs not ended over, and the first keeps the ended one.
func TestPlanShowTimeline(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	id := e.submit(spec("t1", "true"), spec("t2", "true"), spec("t3", "true"))
	pl := policy.Plan{Site: map[int64]string{id[0]: "a", id[1]: "a", id[2]: "b"}, Order: []int64{id[0], id[2], id[1]}, Makespan: 10, Moved: 5}
	rec := plans.Record{Target: "t3", Planner: "heft", Sites: []policy.PlanSite{{Name: "a", Slots: 1}, {Name: "b", Slots: 2}},
		Timeline: []plan.Scheduled{{ID: id[0], Site: "a", Slot: 0, Start: 0, End: 4}, {ID: id[2], Site: "b", Slot: 1, Start: 1, End: 10}, {ID: id[1], Site: "a", Slot: 0, Start: 4, End: 8}}}
	if n, err := e.s.Plans().Record(ctx, rec, pl); err != nil || n != 3 {
		t.Fatalf("RecordPlan = %d, %v", n, err)
	}
	a := e.register("a")
	got := e.next(a, 1)
	e.report(a, ok(got[0]))
	r, err := plans.Show(ctx, e.s.ReadDB(), 1)
	if err != nil || len(r.Plans) != 1 {
		t.Fatalf("PlanShow = %+v, %v", r, err)
	}
	p := r.Plans[0]
	if p.Target != "t3" || p.Planner != "heft" || p.MakespanS != 10 || p.MovedBytes != 5 || p.Jobs != 3 || len(p.Sites) != 2 {
		t.Fatalf("plan %+v", p)
	}
	want := []protocol.PlanSiteTimeline{
		{Site: "a", Slots: 1, Jobs: 2, BusyS: 8, Util: 0.8, Ended: 1, RanHere: 1, More: 1,
			Timeline: []protocol.PlanSlot{{ID: id[0], Target: "t1", Slot: 0, StartS: 0, EndS: 4, State: "D", RanAt: "a"}}},
		{Site: "b", Slots: 2, Jobs: 1, BusyS: 9, Util: 0.45,
			Timeline: []protocol.PlanSlot{{ID: id[2], Target: "t3", Slot: 1, StartS: 1, EndS: 10, State: "Q"}}},
	}
	if !reflect.DeepEqual(p.Sites, want) {
		t.Fatalf("sites %+v\nwant %+v", p.Sites, want)
	}
	pl.Order = []int64{id[1], id[2]}
	if _, err := e.s.Plans().Record(ctx, plans.Record{Target: "t3", Planner: "minmin"}, pl); err != nil {
		t.Fatal(err)
	}
	if r, err := plans.Show(ctx, e.s.ReadDB(), 0); err != nil || len(r.Plans) != 2 || r.Plans[0].Jobs != 1 || r.Plans[1].Planner != "minmin" || r.Plans[1].Jobs != 2 {
		t.Fatalf("after planning again: %+v, %v", r.Plans, err)
	}
}

// TestPlanShowBounded: however many jobs a plan has and however many
// plans are in force, a reply fits a frame: the newest MaxPlansShown
// plans (the older counted) and timelines cut at PlanShowBytes, the cut
// jobs counted in More.
func TestPlanShowBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	const n = 20_000
	long := strings.Repeat("x", 200)
	var specs []protocol.JobSpec
	for i := range n {
		specs = append(specs, spec(fmt.Sprintf("%s%d", long, i), "true"))
	}
	id := e.submit(specs...)
	var small []protocol.JobSpec
	for range protocol.MaxPlansShown + 2 {
		small = append(small, spec("o", "true"))
	}
	for _, j := range e.submit(small...) { // older plans, of a job each
		one := policy.Plan{Site: map[int64]string{j: "a"}, Order: []int64{j}, Makespan: 1}
		if _, err := e.s.Plans().Record(ctx, plans.Record{Target: "o", Planner: "minmin"}, one); err != nil {
			t.Fatal(err)
		}
	}
	pl := policy.Plan{Site: map[int64]string{}, Makespan: n}
	rec := plans.Record{Target: "all", Planner: "heft", Sites: []policy.PlanSite{{Name: "a", Slots: 1}}}
	for i, j := range id {
		pl.Site[j] = "a"
		pl.Order = append(pl.Order, j)
		rec.Timeline = append(rec.Timeline, plan.Scheduled{ID: j, Site: "a", Start: float64(i), End: float64(i + 1)})
	}
	if _, err := e.s.Plans().Record(ctx, rec, pl); err != nil {
		t.Fatal(err)
	}
	r, err := plans.Show(ctx, e.s.ReadDB(), protocol.MaxPlanShowLimit)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(r)
	if len(b) > protocol.PlanShowBytes+64<<10 || len(b) > protocol.MaxFrame/2 {
		t.Fatalf("reply of %d bytes", len(b))
	}
	if len(r.Plans) != protocol.MaxPlansShown || r.Older != 3 || r.Plans[len(r.Plans)-1].Jobs != n {
		t.Fatalf("%d plans shown, %d older; want the newest %d (the big one last) and 3", len(r.Plans), r.Older, protocol.MaxPlansShown)
	}
	listed, more := 0, 0
	for _, p := range r.Plans {
		for _, s := range p.Sites {
			listed += len(s.Timeline)
			more += s.More
		}
	}
	if listed == 0 || more == 0 {
		t.Fatalf("%d jobs listed, %d counted: want the reply full and the rest counted", listed, more)
	}
}

// TestPlanPatienceCountsPlannedWait: a job the plan queues at its site
// behind another for longer than plans.Patience stays for that site while
// the site is alive and the job is within plans.Patience of its predicted
// wait; past that, another site takes it. (With plans.Patience alone the
// job went to the other site as soon as it had been ready for 30 s.)
func TestPlanPatienceCountsPlannedWait(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	id := e.submit(spec("y", "true"), spec("x", "true"))
	pl := policy.Plan{Site: map[int64]string{id[0]: "b", id[1]: "b"}, Order: []int64{id[0], id[1]}, Makespan: 110}
	rec := plans.Record{Target: "x", Planner: "heft", Sites: []policy.PlanSite{{Name: "a", Slots: 1}, {Name: "b", Slots: 1}},
		Timeline: []plan.Scheduled{{ID: id[0], Site: "b", Start: 0, End: 100}, {ID: id[1], Site: "b", Start: 100, End: 110}}}
	if _, err := e.s.Plans().Record(ctx, rec, pl); err != nil {
		t.Fatal(err)
	}
	e.reopen() // the predicted wait is kept
	a := e.register("a")
	b := e.register("b")
	gotB := e.next(b, 1)
	if got := ids(gotB); !slices.Equal(got, []int64{id[0]}) {
		t.Fatalf("b got %v, want %d", got, id[0])
	}
	// b runs y all along, heartbeating (which keeps its lease and says b
	// is alive).
	wait := func(d time.Duration) {
		for ; d > 0; d -= testLease / 4 {
			e.advance(min(d, testLease/4))
			e.heartbeat(b, []protocol.JobRef{refOf(gotB[0])})
		}
	}
	for _, after := range []time.Duration{0, plans.Patience + 10*time.Second, 80 * time.Second} { // 0, 40 and 120 s after ready
		wait(after)
		if got := ids(e.next(a, 1)); len(got) != 0 {
			t.Fatalf("%s on, a got %v; b is alive and the plan has x wait 100 s for it", after, got)
		}
	}
	wait(plans.Patience)
	if got := ids(e.next(a, 1)); !slices.Equal(got, []int64{id[1]}) {
		t.Fatalf("past the predicted wait and plans.Patience, a got %v, want %d", got, id[1])
	}
}

// TestPlanShowUntimed: jobs planned before timelines were stored (their
// job_plans rows belong to no plan, as migration 17 leaves them) are
// counted as Untimed beside the per-site counts, in no plan's timeline.
func TestPlanShowUntimed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	id := e.submit(spec("u1", "true"), spec("u2", "true"))
	pl := policy.Plan{Site: map[int64]string{id[0]: "a", id[1]: "a"}, Order: []int64{id[0], id[1]}}
	if _, err := e.s.Plans().Set(ctx, "heft", pl); err != nil {
		t.Fatal(err)
	}
	if r, err := plans.Show(ctx, e.s.ReadDB(), 0); err != nil || r.Untimed != 0 || len(r.Plans) != 1 {
		t.Fatalf("PlanShow = %+v, %v; want one plan, none untimed", r, err)
	}
	// As a database from before migration 17 has them.
	for _, q := range []string{"UPDATE job_plans SET plan_id = NULL, start_s = NULL, end_s = NULL, ready_s = NULL, slot = NULL", "DELETE FROM plans", "DELETE FROM plan_sites"} {
		if _, err := e.s.w.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	r, err := plans.Show(ctx, e.s.ReadDB(), 0)
	if err != nil || r.Untimed != 2 || len(r.Plans) != 0 || len(r.Sites) != 1 || r.Sites[0].Jobs != 2 {
		t.Fatalf("PlanShow = %+v, %v; want 2 untimed jobs counted at site a, no plan", r, err)
	}
}

// TestPlanRefusedWritesNothing: a plan that orders a job it places
// nowhere, or has no planner's name, is a bad request that leaves no plan,
// no planned job and no planned file behind, in the database or in what
// dispatch follows.
func TestPlanRefusedWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	id := e.submit(spec("r", "true"), spec("r", "true"))
	for _, tc := range []struct {
		name    string
		planner string
		pl      policy.Plan
	}{
		{"placed nowhere", "heft", policy.Plan{Site: map[int64]string{id[0]: "b"}, Order: []int64{id[0], id[1]}, FileSite: map[string]string{"/f": "b"}}},
		{"no planner", "", policy.Plan{Site: map[int64]string{id[0]: "b"}, Order: []int64{id[0]}}},
	} {
		_, err := e.s.Plans().Record(ctx, plans.Record{Target: "r", Planner: tc.planner}, tc.pl)
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != protocol.CodeBadRequest {
			t.Fatalf("%s: RecordPlan = %v, want a bad request", tc.name, err)
		}
		r, err := plans.Show(ctx, e.s.ReadDB(), 0)
		if err != nil || len(r.Plans) != 0 || len(r.Sites) != 0 || r.Untimed != 0 {
			t.Fatalf("%s: PlanShow = %+v, %v; want no plan", tc.name, r, err)
		}
		var files int
		if err := e.s.rdb.QueryRowContext(ctx, "SELECT count(*) FROM plan_files").Scan(&files); err != nil || files != 0 {
			t.Fatalf("%s: %d planned files, %v", tc.name, files, err)
		}
	}
	// Nothing holds job 0 for site b, alive as it is: a takes both,
	// oldest first.
	b := e.register("b")
	e.heartbeat(b, nil)
	a := e.register("a")
	if got := ids(e.next(a, 2)); !slices.Equal(got, []int64{id[0], id[1]}) {
		t.Fatalf("a got %v, want both jobs", got)
	}
}
