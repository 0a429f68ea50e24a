package metaqueue

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/packing"
	"github.com/mq-hpc/mq/internal/metaqueue/plans"
	"github.com/mq-hpc/mq/internal/wire"
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
	if !e.s.Resources().KeepsResources() {
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
// (A full placeholder that asks again is fetching ahead: TestFetchAhead.)
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

// TestMemoryRetryOnce: an attempt killed over its memory runs once more at
// twice the memory without using an attempt (the queue allows one); killed
// again, the job fails with that reason.
func TestMemoryRetryOnce(t *testing.T) {
	e := newEnv(t)
	id := e.submit(asks("a", protocol.Resources{CPUs: 1, Mem: 4 * gib}))[0]
	ph := e.registerSized("s", protocol.Capacity{CPUs: 4, Mem: 16 * gib})
	killed := func(a protocol.Assignment) protocol.Report {
		x := -9
		return protocol.Report{ID: a.ID, Attempt: a.Attempt, Exit: x, Reason: protocol.MemoryReason("max RSS 5 GiB over its request of 4 GiB")}
	}
	got := e.next(ph, 4)
	if len(got) != 1 || got[0].Grant == nil || got[0].Grant.Mem != 4*gib {
		t.Fatalf("first attempt: %+v", got)
	}
	again := e.next(ph, 4, killed(got[0]))
	if len(again) != 1 || again[0].ID != id || again[0].Grant == nil || again[0].Grant.Mem != 8*gib {
		t.Fatalf("after a kill over memory: %+v, want the job again with 8 GiB", again)
	}
	if d := e.job(id); d.Resources.Mem != 8*gib || len(d.History) != 1 {
		t.Errorf("while retried: request %s, %d attempts in the history", d.Resources.Describe(), len(d.History))
	}
	e.report(ph, killed(again[0]))
	e.mustBe(id, job.Failed)
	if d := e.job(id); !protocol.IsMemoryReason(d.Reason) {
		t.Errorf("failed with reason %q, want the memory reason", d.Reason)
	}
	if f := e.free(ph); f.Mem != 16*gib {
		t.Errorf("free after the job failed: %v", f)
	}
}

// TestAutoMemLearned: jobs asking for --mem auto first take the whole
// placeholder's memory; once five of their category finished, the next
// asks what they used (plus headroom), and so after a restart too; one
// killed over the learned size runs again with more.
func TestAutoMemLearned(t *testing.T) {
	e := newEnv(t)
	var jobs []int64
	for range 8 {
		jobs = append(jobs, e.submit(asks("t", protocol.Resources{MemAuto: true}))[0])
	}
	c := protocol.Capacity{CPUs: 1, Mem: 16 * gib}
	ph := e.registerSized("s", c)
	var reports []protocol.Report
	for i := range 5 {
		got := e.next(ph, 1, reports...)
		if len(got) != 1 || got[0].ID != jobs[i] || got[0].Grant == nil || got[0].Grant.Mem != 16*gib {
			t.Fatalf("job %d of the category: %+v, want it with the whole 16 GiB", i, got)
		}
		r := ok(got[0])
		r.Started = e.clock.Now()
		r.Finished = r.Started.Add(10 * time.Second)
		r.Usage = protocol.Usage{CPUUser: 9, MaxRSS: gib}
		reports = []protocol.Report{r}
	}
	got := e.next(ph, 1, reports...)
	if len(got) != 1 || got[0].Grant == nil || got[0].Grant.Mem >= 2*gib || got[0].Grant.Mem < gib {
		t.Fatalf("the sixth job: %+v, want about 1.2 GiB learned", got)
	}
	learned := got[0].Grant.Mem
	// mqstat -j shows what the running attempt was given: the size learned.
	if d := e.job(got[0].ID); d.Granted == nil || d.Granted.Mem != learned || d.Resources.Describe() != "mem=auto" {
		t.Errorf("the sixth job's detail: resources %q, granted %+v; want mem=auto granted %d bytes", d.Resources.Describe(), d.Granted, learned)
	}
	e.report(ph, ok(got[0]))
	if d := e.job(got[0].ID); d.Granted != nil {
		t.Errorf("an ended job shows granted %+v", d.Granted)
	}
	e.reopen()
	ph = e.registerSized("s", c)
	got = e.next(ph, 1)
	if len(got) != 1 || got[0].Grant == nil || got[0].Grant.Mem != learned {
		t.Fatalf("after a restart: %+v, want %d bytes learned from the stored attempts", got, learned)
	}

	// mq's guess was too small for this one: killed over its memory, it
	// runs again at twice the guess, then with the whole placeholder, and
	// fails only when that is not enough.
	id := got[0].ID
	killed := func(a protocol.Assignment) protocol.Report {
		return protocol.Report{ID: a.ID, Attempt: a.Attempt, Exit: -9, Reason: protocol.MemoryReason("max RSS over its request")}
	}
	for _, want := range []int64{2 * learned, 16 * gib} {
		got = e.next(ph, 1, killed(got[0]))
		if len(got) != 1 || got[0].ID != id || got[0].Grant == nil || got[0].Grant.Mem != want {
			t.Fatalf("after a kill over memory: %+v, want job %d again with %d bytes", got, id, want)
		}
	}
	e.report(ph, killed(got[0]))
	e.mustBe(id, job.Failed)
}

// TestUnholdableWaits: a job asking for more than any placeholder or site
// holds is warned of at submit and says why in its details, and waits; a
// site declared big enough later ends the warning.
func TestUnholdableWaits(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ph := e.registerSized("s", protocol.Capacity{CPUs: 8, GPUs: 2, GPUIDs: []string{"0", "1"}})
	jobs := e.submit(asks("big", protocol.Resources{GPUs: 4}), asks("big", protocol.Resources{GPUs: 4}), asks("small", protocol.Resources{GPUs: 1}))
	w, err := e.s.Resources().Unholdable(ctx, jobs[0], len(jobs))
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("jobs %d-%d wait: needs 4 GPUs; the largest placeholder or site holds 2 (a site that holds it may be added)", jobs[0], jobs[1])
	if len(w) != 1 || w[0] != want {
		t.Errorf("warnings %q, want [%q]", w, want)
	}
	if got := e.job(jobs[0]).Unfit; got != "needs 4 GPUs; the largest placeholder or site holds 2" {
		t.Errorf("mqstat -j says %q", got)
	}
	if got := e.job(jobs[2]).Unfit; got != "" {
		t.Errorf("a job that fits says %q", got)
	}
	if got := e.next(ph, 8); len(got) != 1 || got[0].ID != jobs[2] {
		t.Fatalf("dispatched %v, want only the 1-GPU job", ids(got))
	}
	if d := e.job(jobs[2]); d.Granted == nil || d.Granted.GPUs != 1 || len(d.Granted.GPUIDs) != 1 {
		t.Errorf("the running 1-GPU job's detail: granted %+v, want one GPU named", d.Granted)
	}
	e.mustBe(jobs[0], job.Queued)
	if err := e.s.AddSite(ctx, protocol.SiteSpec{Name: "gpus", Type: "local", Slots: 16, GPUs: 4}); err != nil {
		t.Fatal(err)
	}
	if got := e.job(jobs[0]).Unfit; got != "" {
		t.Errorf("with a site of 4 GPUs: %q", got)
	}
	e.reopen()
	if w, _ := e.s.Resources().Unholdable(ctx, jobs[0], 2); len(w) != 0 {
		t.Errorf("after reopen, with the site loaded: %q", w)
	}
}

// TestCopyGrants: a copy of a running job takes its request on its own
// placeholder (not sent where it does not fit), and every attempt gives
// its grant back when one wins: the loser's killed, the winner's done.
func TestCopyGrants(t *testing.T) {
	e := newEnv(t)
	e.setQueue("b", "wqr", -1)
	js := asks("t", protocol.Resources{CPUs: 3})
	js.Queue, js.Cwd = "b", "/w"
	e.submit(js)
	c := protocol.Capacity{CPUs: 4}
	ph1, small, ph2 := e.registerSized("s1", c), e.registerSized("s2", protocol.Capacity{CPUs: 2}), e.registerSized("s3", c)
	first := e.next(ph1, 4)
	if len(first) != 1 {
		t.Fatalf("first: %v", ids(first))
	}
	if got := e.next(small, 2); len(got) != 0 {
		t.Fatalf("a 2-core placeholder got a copy of a 3-core job: %+v", got)
	}
	cp := e.next(ph2, 4)
	if len(cp) != 1 || cp[0].Grant == nil || cp[0].Grant.CPUs != 3 {
		t.Fatalf("copy: %+v, want one with a 3-core grant", cp)
	}
	if f := e.free(ph2); f.CPUs != 1 {
		t.Fatalf("the copy's placeholder has %d cores free, want 1", f.CPUs)
	}
	e.report(ph2, ok(cp[0]))
	for _, ph := range []int64{ph1, ph2} {
		if f := e.free(ph); f.CPUs != 4 {
			t.Errorf("placeholder %d after the copy won: %d cores free, want 4", ph, f.CPUs)
		}
	}
}

// TestStarvationBoundedThroughStore: a 4-core job behind an endless
// stream of 1-core jobs on a 4-core placeholder (one small job ending
// every 2 s, the placeholder asking for one job each time) starts within
// the starvation bound plus the small jobs' drain, not never. The bound
// follows the runs that ended: each small job runs 8 s.
func TestStarvationBoundedThroughStore(t *testing.T) {
	e := newEnv(t)
	var small []int64
	for i := range 4 {
		small = append(small, e.submit1(fmt.Sprint("s", i), "true"))
	}
	ph := e.registerSized("s", protocol.Capacity{CPUs: 4})
	running := e.next(ph, 4)
	if len(running) != 4 {
		t.Fatalf("first: %v", ids(running))
	}
	big := e.submit(asks("big", protocol.Resources{CPUs: 4}))[0]
	submitted := e.clock.Now()
	bound := max(packing.StarveRuns*8*time.Second, packing.MinStarveAfter)
	for i := 0; ; i++ {
		if d := e.clock.Now().Sub(submitted); d > bound+time.Minute {
			t.Fatalf("the 4-core job still waits after %v", d)
		}
		e.submit1(fmt.Sprint("more", i), "true") // the stream never dries up
		e.clock.Advance(2 * time.Second)
		var got []protocol.Assignment
		if len(running) > 0 {
			got = e.next(ph, 1, ok(running[0]))
			running = append(running[1:], got...)
		} else {
			got = e.next(ph, 1) // drained for the reservation
			running = got
		}
		if len(got) == 1 && got[0].ID == big {
			if d := e.clock.Now().Sub(submitted); d < bound {
				t.Errorf("the 4-core job started after %v, before the bound: it could not have fitted", d)
			}
			return
		}
	}
}

// TestBundleGrantHeld: a bundle of jobs asking 2 cores runs its jobs in
// turn in its first job's grant, which the pool keeps until the last of
// them ends, not only while the first runs.
func TestBundleGrantHeld(t *testing.T) {
	e := newEnv(t)
	req := protocol.Submit{Bundle: true}
	for i := range 3 {
		req.Jobs = append(req.Jobs, asks(fmt.Sprint("b", i), protocol.Resources{CPUs: 2}))
	}
	e.submitReq(req)
	ph := e.registerSized("s", protocol.Capacity{CPUs: 4})
	got := e.next(ph, 4)
	if len(got) != 3 || got[0].Grant == nil || got[0].Grant.CPUs != 2 {
		t.Fatalf("the bundle: %+v", got)
	}
	for i, a := range got {
		if f := e.free(ph); f.CPUs != 2 {
			t.Fatalf("with %d of the bundle's jobs ended: %d cores free, want 2", i, f.CPUs)
		}
		e.report(ph, ok(a))
	}
	if f := e.free(ph); f.CPUs != 4 {
		t.Errorf("after the bundle: %d cores free, want 4", f.CPUs)
	}
}

// TestBundleGrantHoldsEveryJob: a bundle runs its jobs in turn in one
// grant, taken for whichever of them dispatch picks, so each asks for the
// most any of them asks (a pipeline's 1-core step before its 4-core one):
// the bundle goes only to a placeholder that holds its largest job, with
// that grant. Before, its 1-core job fitted a 2-core placeholder and took
// the 4-core one along without a grant.
func TestBundleGrantHoldsEveryJob(t *testing.T) {
	e := newEnv(t)
	const gib = 1 << 30
	req := protocol.Submit{Bundle: true, Jobs: []protocol.JobSpec{
		asks("prep", protocol.Resources{}),
		asks("sim", protocol.Resources{CPUs: 4, Named: map[string]int{"lic": 1}}),
		asks("post", protocol.Resources{Mem: 8 * gib}),
	}}
	bundle := e.submitReq(req)
	small := e.registerSized("small", protocol.Capacity{CPUs: 2, Mem: 16 * gib, Named: map[string]int{"lic": 1}})
	if got := e.next(small, 2); len(got) != 0 {
		t.Fatalf("a 2-core placeholder got %v of a bundle whose job asks 4 cores", ids(got))
	}
	big := e.registerSized("big", protocol.Capacity{CPUs: 8, Mem: 16 * gib, Named: map[string]int{"lic": 1}})
	got := e.next(big, 8)
	if len(got) != 3 || got[0].ID != bundle[0] {
		t.Fatalf("the 8-core placeholder got %v, want the bundle %v", ids(got), bundle)
	}
	if g := got[0].Grant; g == nil || g.CPUs != 4 || g.Mem != 8*gib || g.Named["lic"] != 1 {
		t.Fatalf("the bundle's grant: %+v; want 4 cores, 8 GiB and lic=1", g)
	}
	for _, id := range bundle {
		if d := e.job(id); d.Resources.CPUs != 4 || d.Resources.Mem != 8*gib || d.Resources.Named["lic"] != 1 {
			t.Errorf("job %d of the bundle asks for %+v; want the bundle's whole request", id, d.Resources)
		}
	}
}

func TestBundleEnvelopeBounded(t *testing.T) {
	e := newEnv(t)
	a, b := map[string]int{}, map[string]int{}
	for i := range protocol.MaxNamed {
		a[fmt.Sprint("a", i)], b[fmt.Sprint("b", i)] = 1, 1
	}
	_, err := e.s.SubmitRequest(context.Background(), protocol.Submit{Bundle: true, Jobs: []protocol.JobSpec{
		asks("x", protocol.Resources{Named: a}), asks("y", protocol.Resources{Named: b})}})
	if !protocol.IsCode(err, protocol.CodeBadRequest) || !strings.Contains(fmt.Sprint(err), "64 named resources together") {
		t.Fatalf("a bundle asking %d names together: %v; want refused", 2*protocol.MaxNamed, err)
	}
	e.check()
}

// TestPackingKeepsRules: jobs of several cores still meet walltime fit
// and an array's %LIMIT: on a 16-core placeholder with 100 s left, a
// 4-core job expected to take 500 s is not given, one of 50 s is; of an
// array of 2-core members capped at 2, two run however many cores are
// free, and a third once one ends.
func TestPackingKeepsRules(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	long := asks("long", protocol.Resources{CPUs: 4})
	long.Est = 500
	short := asks("short", protocol.Resources{CPUs: 4})
	short.Est = 50
	jobs := e.submit(long, short)

	b, err := e.s.NewBulk()
	if err != nil {
		t.Fatal(err)
	}
	var members []protocol.JobSpec
	for i := range 6 {
		m := asks("arr", protocol.Resources{CPUs: 2})
		m.Command = fmt.Sprintf("member %d", i)
		members = append(members, m)
	}
	if err := b.Add(1, members); err != nil {
		t.Fatal(err)
	}
	if err := b.Array("1-6%2", 2); err != nil {
		t.Fatal(err)
	}
	first, err := b.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}

	ph := e.registerSized("s", protocol.Capacity{CPUs: 16})
	got := e.nextWalltime(ph, 16, 100)
	var arr []protocol.Assignment
	gotShort := false
	for _, a := range got {
		switch {
		case a.ID == jobs[0]:
			t.Errorf("the 4-core job of 500 s was given to a placeholder with 100 s left")
		case a.ID == jobs[1]:
			gotShort = true
		case a.ID >= first && a.ID < first+6:
			arr = append(arr, a)
		}
	}
	if !gotShort || len(arr) != 2 {
		t.Fatalf("dispatched %v: want the 50 s job and 2 array members", ids(got))
	}
	if n := e.executingIn(first, first+5); n != 2 {
		t.Errorf("%d array members executing, want 2", n)
	}
	if f := e.free(ph); f.CPUs != 16-4-2*2 {
		t.Errorf("free cores %d, want 8", f.CPUs)
	}
	e.mustBe(jobs[0], job.Queued)
	more := e.nextWalltime(ph, 8, 100)
	if len(more) != 0 {
		t.Fatalf("with the array at its limit: dispatched %v", ids(more))
	}
	more = e.next(ph, 10, ok(arr[0]))
	var again []int64
	for _, a := range more {
		if a.ID >= first && a.ID < first+6 {
			again = append(again, a.ID)
		}
	}
	if len(again) != 1 {
		t.Errorf("after a member ended: array members %v given, want one", again)
	}
}

// TestPlanJobsCores: a planning problem's jobs hold as many slots as
// they ask for cores (a queue's default counting), so that a plan's job
// of 4 cores occupies 4 slots in the planners' model; a job that asks
// for nothing, or for a learned size, holds one.
func TestPlanJobsCores(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.s.SetQueue(ctx, protocol.QueueSet{Name: "two", Defaults: &protocol.Resources{CPUs: 2}}); err != nil {
		t.Fatal(err)
	}
	deflt := spec("w", "true")
	deflt.Queue = "two"
	ids := e.submit(asks("w", protocol.Resources{CPUs: 4, Mem: gib}), spec("w", "true"), asks("w", protocol.Resources{CPUsAuto: true}), deflt)
	want := map[int64]int{ids[0]: 4, ids[1]: 1, ids[2]: 1, ids[3]: 2}
	est := func(int64, string, float64) map[string]float64 { return map[string]float64{"a": 1} }
	jobs, err := plans.Problem(ctx, e.s.ReadDB(), "w", est)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != len(want) {
		t.Fatalf("%d jobs in the problem, want %d", len(jobs), len(want))
	}
	for _, j := range jobs {
		if j.Slots != want[j.ID] {
			t.Errorf("job %d holds %d slots, want %d", j.ID, j.Slots, want[j.ID])
		}
	}
}
