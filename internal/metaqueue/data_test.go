package metaqueue

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/catalog"
	"github.com/mq-hpc/mq/internal/metaqueue/dc"

	"github.com/mq-hpc/mq/internal/dispatch"
	"github.com/mq-hpc/mq/internal/metaqueue/schema"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

func sz(n int64) *int64 { return &n }

// withFiles is a job spec declaring inputs and outputs ("path" or
// "path:size" is not parsed here: sizes are given separately).
func withFiles(target, command string, in, out []protocol.File) protocol.JobSpec {
	js := spec(target, command)
	js.Queue, js.Inputs, js.Outputs = "dq", in, out
	return js
}

func file(path string, size int64) protocol.File { return protocol.File{Path: path, Size: sz(size)} }

func (e *env) registerAt(site, host string) int64 {
	e.t.Helper()
	r, err := e.s.Register(context.Background(), protocol.Register{Site: site, Host: host, PID: 1, Slots: 1, OutDir: "/out"})
	if err != nil {
		e.t.Fatal(err)
	}
	return r.ID
}

func (e *env) setPolicy(q, pol string) {
	e.t.Helper()
	if _, err := e.s.SetQueue(context.Background(), protocol.QueueSet{Name: q, Policy: &pol}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) dcWaits() int64 {
	var n int64
	e.s.do(context.Background(), func() error { n = e.s.data.Waits(); return nil })
	return n
}

// TestJobFilesStoredAndShown: declared files are kept in order with their
// sizes, survive a restart and a bulk spool, and the job details name where
// a Done job produced its outputs.
func TestJobFilesStoredAndShown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.submit(withFiles("p", "produce", []protocol.File{{Path: "/in/b"}, file("/in/a", 7)},
		[]protocol.File{file("/out/x", 1<<20), {Path: "/out/y"}}))[0]
	ph := e.registerAt("siteA", "h1")
	got := e.next(ph, 1)
	if len(got) != 1 || got[0].ID != id {
		t.Fatalf("got %v", ids(got))
	}
	e.report(ph, ok(got[0]))
	e.reopen()
	d := e.job(id)
	if len(d.Inputs) != 2 || d.Inputs[0].Path != "/in/b" || d.Inputs[0].Size != nil || *d.Inputs[1].Size != 7 || d.Inputs[0].Site != "" {
		t.Fatalf("inputs %+v", d.Inputs)
	}
	if len(d.Outputs) != 2 || *d.Outputs[0].Size != 1<<20 || d.Outputs[0].Site != "siteA" || d.Outputs[0].Host != "" ||
		d.Outputs[0].Job != id || d.Outputs[1].Site != "siteA" {
		t.Fatalf("outputs %+v", d.Outputs)
	}
	// The local site is located per host.
	c := e.submit(withFiles("c", "consume", []protocol.File{{Path: "/out/x"}}, []protocol.File{{Path: "/out/y"}}))[0]
	lp := e.registerAt(catalog.LocalSite, "cls-host")
	got = e.next(lp, 1)
	e.report(lp, ok(got[0]))
	if d := e.job(c); d.Inputs[0].Site != "siteA" || d.Outputs[0].Site != catalog.LocalSite || d.Outputs[0].Host != "cls-host" || d.Outputs[0].Job != c {
		t.Fatalf("consumer %+v %+v", d.Inputs, d.Outputs)
	}
	// A failed job produces nothing.
	ph = e.registerAt("siteA", "h1")
	f := e.submit(withFiles("f", "fail", nil, []protocol.File{{Path: "/out/x"}}))[0]
	got = e.next(ph, 1)
	e.report(ph, exit(got[0], 1))
	e.mustBe(f, job.Failed)
	if d := e.job(f); d.Outputs[0].Job != id {
		t.Fatalf("a failed job moved /out/x: %+v", d.Outputs[0])
	}

	// Bulk submissions carry files through the spool.
	b, err := e.s.NewBulk()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Add(1, []protocol.JobSpec{withFiles("bulk", "x", []protocol.File{file("/b/in", 0), {Path: "/b/in2"}}, []protocol.File{file("/b/out", 3)})}); err != nil {
		t.Fatal(err)
	}
	first, err := b.Commit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	d = e.job(first)
	if len(d.Inputs) != 2 || *d.Inputs[0].Size != 0 || d.Inputs[1].Size != nil || len(d.Outputs) != 1 || *d.Outputs[0].Size != 3 {
		t.Fatalf("bulk job files %+v %+v", d.Inputs, d.Outputs)
	}
	e.check()
}

// migratedFrom submits a job, makes the database what version v left by
// running stmts on it (the last sets the version), reopens it, and checks
// the job is still Queued; it returns the job.
func (e *env) migratedFrom(v int, stmts ...string) int64 {
	e.t.Helper()
	id := e.submit1("t", "old job")
	e.downgrade(append(stmts, fmt.Sprintf("UPDATE meta SET value = '%d' WHERE key = 'schema'", v))...)
	e.mustBe(id, job.Queued)
	return id
}

// schemaIsCurrent checks the version the store recorded after migrating.
func (e *env) schemaIsCurrent() {
	e.t.Helper()
	var v string
	db := openRaw(e.t, e.opt.Path)
	defer db.Close()
	if err := db.QueryRow("SELECT value FROM meta WHERE key = 'schema'").Scan(&v); err != nil || v != strconv.Itoa(schema.Version()) {
		e.t.Fatalf("schema version %q, %v", v, err)
	}
}

// TestMigrateFrom2: a version 2 database gains the file tables, and its
// jobs keep running.
func TestMigrateFrom2(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.migratedFrom(2, "DROP TABLE job_files", "DROP TABLE files", "DROP TABLE replicas", "DROP TABLE transfers")
	n := e.submit(withFiles("n", "new", []protocol.File{file("/a", 1)}, []protocol.File{{Path: "/b"}}))[0]
	ph := e.register("p")
	got := e.next(ph, 2)
	e.report(ph, ok(got[0]), ok(got[1]))
	if d := e.job(n); len(d.Inputs) != 1 || d.Outputs[0].Site != "p" {
		t.Fatalf("after migration: %+v %+v", d.Inputs, d.Outputs)
	}
	e.schemaIsCurrent()
	e.check()
}

// TestMigrateFrom3: a version 3 database gains the record of lost output;
// its jobs keep running, and a loss reported afterwards is shown.
func TestMigrateFrom3(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.migratedFrom(3, "DROP TABLE output_lost")
	ph := e.register("p")
	got := e.next(ph, 1)
	r := ok(got[0])
	r.OutputLost = "stdout: write: no space left on device"
	e.report(ph, r)
	e.mustBe(id, job.Done)
	if d := e.job(id); d.OutputLost != r.OutputLost {
		t.Fatalf("output_lost %q after migration, want %q", d.OutputLost, r.OutputLost)
	}
	e.schemaIsCurrent()
	e.check()
}

// produceAt runs a job writing path (size bytes) on placeholder ph, so the
// file is located at ph's site.
func (e *env) produceAt(ph int64, path string, size int64) {
	e.t.Helper()
	id := e.submit(withFiles("prod", "produce "+path, nil, []protocol.File{file(path, size)}))[0]
	got := e.next(ph, 1)
	if len(got) != 1 || got[0].ID != id {
		e.t.Fatalf("producer: got %v, want %d", ids(got), id)
	}
	e.report(ph, ok(got[0]))
}

// hourLease keeps A predicted while the clock jumps.
func hourLease(o *Options) { o.Lease = time.Hour }

// linkedAt is hourLease with A's and B's links configured at bandwidth
// bytes/s (latency 0.1 s).
func linkedAt(bandwidth float64) func(*Options) {
	return func(o *Options) {
		hourLease(o)
		o.Links = map[string]dc.Link{"A": {Latency: 0.1, Bandwidth: bandwidth}, "B": {Latency: 0.1, Bandwidth: bandwidth}}
	}
}

// dcTwoSites is a store (mod applied to its options, if not nil) whose
// queue "dq" uses policy pol, with placeholder a at site A and b at B.
func dcTwoSites(t *testing.T, pol string, mod func(*Options)) (e *env, a, b int64) {
	t.Helper()
	e = newEnvWith(t, mod)
	e.setPolicy("dq", pol)
	return e, e.registerAt("A", "ha"), e.registerAt("B", "hb")
}

// dcNeeds submits to queue dq a job reading /d/name.
func (e *env) dcNeeds(name string) int64 {
	e.t.Helper()
	return e.submit(withFiles("c", "needs "+name, []protocol.File{{Path: "/d/" + name}}, nil))[0]
}

// dcWaitsPast waits until the policy has told placeholders to wait more
// than n times in all, failing with msg once deadline has passed.
func (e *env) dcWaitsPast(n int64, deadline time.Time, msg string) {
	e.t.Helper()
	for e.dcWaits() <= n {
		if time.Now().After(deadline) {
			e.t.Fatal(msg)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// dcHeld fails if B's parked poll done has been answered (why says why
// it should not be), and checks that job id is still Queued.
func (e *env) dcHeld(done <-chan []protocol.Assignment, id int64, why string) {
	e.t.Helper()
	select {
	case got := <-done:
		e.t.Fatalf("B got %v %s", ids(got), why)
	default:
	}
	e.mustBe(id, job.Queued)
}

// dcReceives waits up to within for B's parked poll done to bring job id
// alone, failing with msg if it does not come.
func (e *env) dcReceives(done <-chan []protocol.Assignment, id int64, within time.Duration, msg string) {
	e.t.Helper()
	select {
	case got := <-done:
		if len(got) != 1 || got[0].ID != id {
			e.t.Fatalf("B got %v, want %d", ids(got), id)
		}
	case <-time.After(within):
		e.t.Fatalf("%s (%d waits)", msg, e.dcWaits())
	}
}

// siteGets asks for one job on ph's behalf and fails unless it gets job
// want alone; who names the placeholder in the message.
func (e *env) siteGets(ph, want int64, who string) {
	e.t.Helper()
	if got := e.next(ph, 1); len(got) != 1 || got[0].ID != want {
		e.t.Fatalf("%s got %v, want job %d", who, ids(got), want)
	}
}

// siteGetsNothing asks for one job on ph's behalf and fails with msg if
// it gets any.
func (e *env) siteGetsNothing(ph int64, msg string) {
	e.t.Helper()
	if got := e.next(ph, 1); len(got) != 0 {
		e.t.Fatalf("%s: got %v", msg, ids(got))
	}
}

// TestDCAffinity: in a dc queue a job whose input was produced at site A
// goes to the placeholder at A rather than the one at B, whichever asks
// first, while both ask.
func TestDCAffinity(t *testing.T) {
	t.Parallel()
	for _, bFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("B first %v", bFirst), func(t *testing.T) {
			t.Parallel()
			e, a, b := dcTwoSites(t, "dc", nil)
			e.produceAt(a, "/d/x", 100<<20)
			e.produceAt(b, "/d/y", 100<<20)
			ctx := context.Background()
			type res struct {
				ph   int64
				jobs []protocol.Assignment
			}
			done := make(chan res, 2)
			ask := func(ph int64) {
				r, err := e.s.Next(ctx, protocol.Next{Placeholder: ph, Free: 1, WaitMS: 5000})
				if err != nil {
					t.Error(err)
				}
				done <- res{ph, r.Jobs}
			}
			first, second := a, b
			if bFirst {
				first, second = b, a
			}
			go ask(first)
			e.parkedAtLeast(1, 0)
			go ask(second)
			e.parkedAtLeast(2, 0)
			jx, jy := e.dcNeeds("x"), e.dcNeeds("y")
			want := map[int64]int64{a: jx, b: jy}
			for range 2 {
				r := <-done
				if len(r.jobs) != 1 || r.jobs[0].ID != want[r.ph] {
					t.Fatalf("placeholder %d got %v, want job %d", r.ph, ids(r.jobs), want[r.ph])
				}
			}
			e.check()
		})
	}
}

// TestDCWaitIsRedecided: a placeholder far from a job's data is told to
// wait (its poll stays parked); DC decides again as time passes, and the
// growing queue time finally sends the job there when the data's site does
// not come.
func TestDCWaitIsRedecided(t *testing.T) {
	t.Parallel()
	e, a, b := dcTwoSites(t, "dc", linkedAt(1e6))
	e.produceAt(a, "/d/x", 1e6) // A has now asked twice: it has an interval
	e.next(a, 1)
	id := e.dcNeeds("x")
	// B asks: A is predicted back at once, and moving 1 MB to B costs
	// 25 x 1.1 s: wait.
	done := e.nextAsync(b)
	e.parkedAtLeast(1, 0)
	deadline := time.Now().Add(5 * time.Second)
	e.dcWaitsPast(0, deadline, "DC never decided to wait")
	// A second of the store's time later (the core ticks every 100 ms), DC
	// decides again and still waits.
	w0 := e.dcWaits()
	e.clock.Advance(1100 * time.Millisecond)
	e.dcWaitsPast(w0, deadline, "DC did not decide again after a second")
	e.dcHeld(done, id, "while A is expected")
	// Priority = -25 x 1.1 s / 0.01 + queue_time / 0.1 s: non-negative
	// after 275 s in the queue.
	e.clock.Advance(280 * time.Second)
	e.dcReceives(done, id, 5*time.Second, "the waiting job was never dispatched")
	e.check()
}

// TestDCHoldsByShape: in a dc queue, a 2-core job whose input was written
// at A, where only a 1-core placeholder runs, goes at once to B's 4-core
// placeholder: DC does not hold a job for a placeholder that cannot hold
// it (dispatch.Shaped). A 1-core job reading the same file is still held
// for A, and A gets it.
func TestDCHoldsByShape(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, linkedAt(1e6))
	e.setPolicy("dq", "dc")
	a, b := e.registerSized("A", protocol.Capacity{CPUs: 1}), e.registerSized("B", protocol.Capacity{CPUs: 4})
	e.produceAt(a, "/d/x", 1e6)
	e.next(a, 1) // A has now asked twice: it has an interval
	one := e.dcNeeds("x")
	js := withFiles("c", "needs x", []protocol.File{{Path: "/d/x"}}, nil)
	js.Resources = protocol.Resources{CPUs: 2}
	two := e.submit(js)[0]
	e.siteGets(b, two, "B")
	e.siteGetsNothing(b, "B took the 1-core job that A, at its data, holds")
	e.siteGets(a, one, "A")
	e.check()
}

// TestDCMixedQueues: fcfs and dc queues side by side; the fcfs queue is
// served as before while DC holds its own job back for the data's site.
func TestDCMixedQueues(t *testing.T) {
	t.Parallel()
	e, a, b := dcTwoSites(t, "dc", hourLease)
	e.produceAt(a, "/d/x", 50<<20)
	e.next(a, 1)
	held := e.dcNeeds("x")
	plain := e.submit(spec("p", "plain 1"), spec("p", "plain 2"))
	// B gets the fcfs jobs, oldest first, one per request; not the dc one.
	for _, want := range plain {
		e.siteGets(b, want, "B")
	}
	e.siteGetsNothing(b, "B: DC should hold the job for A")
	got := e.next(a, 2)
	if len(got) != 1 || got[0].ID != held {
		t.Fatalf("A got %v, want %d", ids(got), held)
	}
	// Jobs without declared inputs, or whose inputs no job produced, go
	// anywhere in submission order.
	free := e.submit(withFiles("c", "no data", nil, nil), withFiles("c", "outside data", []protocol.File{file("/elsewhere", 1<<30)}, nil))
	for _, want := range free {
		e.siteGets(b, want, "B")
	}
	qs, err := e.s.Queues(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	pols := map[string]string{}
	for _, q := range qs {
		pols[q.Name] = q.Policy
	}
	if pols["dq"] != "dc" || pols["default"] != "fcfs" {
		t.Fatalf("policies %v", pols)
	}
	if sum, _ := e.s.Summary(context.Background()); len(sum) != 2 || sum[0].Policy == "" {
		t.Fatalf("summary %+v", sum)
	}
	// The policy survives a restart; switching back to fcfs works.
	e.reopen()
	e.siteGetsNothing(e.registerAt("B", "hb"), "after restart")
	e.check()
}

// TestDCBundle: a bundle in a dc queue is priced by all its inputs and
// goes whole to the site holding them.
func TestDCBundle(t *testing.T) {
	t.Parallel()
	e, a, b := dcTwoSites(t, "dc", hourLease)
	e.produceAt(a, "/d/1", 10<<20)
	e.produceAt(a, "/d/2", 10<<20)
	e.next(a, 1)
	req := protocol.Submit{Bundle: true, Jobs: []protocol.JobSpec{
		withFiles("bb", "one", []protocol.File{{Path: "/d/1"}}, nil),
		withFiles("bb", "two", []protocol.File{{Path: "/d/2"}}, nil),
	}}
	bundle := e.submitReq(req)
	e.siteGetsNothing(b, "B")
	if got := e.next(a, 1); fmt.Sprint(ids(got)) != fmt.Sprint(bundle) {
		t.Fatalf("A got %v, want the bundle %v", ids(got), bundle)
	}
	e.check()
}

func TestSetQueuePolicyErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	bad := "lifo"
	_, err := e.s.SetQueue(context.Background(), protocol.QueueSet{Name: "q", Policy: &bad})
	errCode(t, err, protocol.CodeBadRequest)
	if want := `unknown policy "lifo" (known: fcfs, sjf, cp, dc, sa, wqr, xsufferage, dbc-cost, dbc-costtime, dbc-time, lp)`; err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
	for _, live := range []string{"sa", "wqr", "xsufferage"} { // seed 000's, live since queues copy jobs
		if _, err := e.s.SetQueue(context.Background(), protocol.QueueSet{Name: "q", Policy: &live}); err != nil {
			t.Fatalf("policy %s: %v", live, err)
		}
	}
	bad2 := -1
	_, err = e.s.SetQueue(context.Background(), protocol.QueueSet{Name: "q", MaxCopies: &bad2})
	errCode(t, err, protocol.CodeBadRequest)
}

// TestDCRerunKeepsFiles: a rerun job gets its declared files back (memory
// forgets them when a job ends), so DC still sends it to its data.
func TestDCRerunKeepsFiles(t *testing.T) {
	t.Parallel()
	e, a, b := dcTwoSites(t, "dc", hourLease)
	e.produceAt(a, "/d/x", 50<<20)
	id := e.dcNeeds("x")
	got := e.next(a, 1)
	if len(got) != 1 || got[0].ID != id {
		t.Fatalf("A got %v", ids(got))
	}
	e.report(a, ok(got[0]))
	if r, err := e.s.Rerun(context.Background(), protocol.Select{IDs: []int64{id}}); err != nil || len(r.IDs) != 1 {
		t.Fatalf("rerun: %+v %v", r, err)
	}
	e.siteGetsNothing(b, "B after the rerun; its input is at A")
	e.siteGets(a, id, "A")
	e.check()
}

// TestDCUsesMeasuredLinks: DC prices transfers with the links measured
// from real transfers once there are any, the configured ones (the
// prior) until then. With the configured 1 MB/s a job whose 1 MB input is
// at A is held from B's placeholder for 275 s of queue time; once the
// links measure 1 TB/s it costs 2.5 s to move and goes to B at once (at
// 30 s in the queue, past the 25 s it then needs).
func TestDCUsesMeasuredLinks(t *testing.T) {
	t.Parallel()
	e, a, b := dcTwoSites(t, "dc", linkedAt(1e6))
	e.produceAt(a, "/d/x", 1e6)
	e.next(a, 1)
	id := e.dcNeeds("x")
	done := e.nextAsync(b)
	e.parkedAtLeast(1, 0)
	deadline := time.Now().Add(10 * time.Second)
	e.dcWaitsPast(0, deadline, "DC did not decide (again)")
	e.clock.Advance(30 * time.Second)
	e.dcWaitsPast(e.dcWaits(), deadline, "DC did not decide (again)")
	e.dcHeld(done, id, "with the configured 1 MB/s links")
	fast := dc.Link{Latency: 0.1, Bandwidth: 1e12}
	e.s.MeasuredLink("A", fast)
	e.s.MeasuredLink("B", fast)
	e.clock.Advance(1100 * time.Millisecond)
	e.dcReceives(done, id, 10*time.Second, "DC kept holding the job after the links measured fast")
	e.check()
}

// TestLiveStorageAffinity: a live sa queue gives the asking placeholder
// the ready job with the most input bytes at its site, not the oldest
// (FCFS would give A the job reading y).
func TestLiveStorageAffinity(t *testing.T) {
	t.Parallel()
	e, a, b := dcTwoSites(t, "sa", nil)
	e.produceAt(a, "/d/x", 100<<20)
	e.produceAt(b, "/d/y", 100<<20)
	jy := e.dcNeeds("y")
	jx := e.dcNeeds("x")
	e.siteGets(a, jx, "A (its input is at A)")
	e.siteGets(b, jy, "B")
	e.check()
}

// TestLiveXSufferage: a live xsufferage queue prices moving a job's input
// at the links' rates, measured ones over configured ones. B asks for a
// job whose 1 MB input is at A, A being expected in some seconds: over a
// 10 kB/s link B is told to wait (and gets the job once it has waited
// past dispatch.ChoosePatience); over a measured fast link B gets it at once.
func TestLiveXSufferage(t *testing.T) {
	t.Parallel()
	for _, measuredFast := range []bool{false, true} {
		t.Run(fmt.Sprintf("measured fast %v", measuredFast), func(t *testing.T) {
			t.Parallel()
			e, a, b := dcTwoSites(t, "xsufferage", linkedAt(1e4))
			e.produceAt(a, "/d/x", 1e6)
			// A asks every few seconds: it is expected back in seconds,
			// far sooner than 1 MB crosses a 10 kB/s link.
			e.clock.Advance(30 * time.Second)
			e.next(a, 1)
			if measuredFast {
				for _, site := range []string{"A", "B"} {
					e.s.MeasuredLink(site, dc.Link{Latency: 0.01, Bandwidth: 1e12})
				}
			}
			id := e.dcNeeds("x")
			if measuredFast {
				e.siteGets(b, id, "B over a fast link")
				return
			}
			done := e.nextAsync(b)
			e.parkedAtLeast(1, 0)
			e.dcWaitsPast(0, time.Now().Add(30*time.Second), "XSufferage never told B to wait")
			e.dcHeld(done, id, "while A is expected")
			e.clock.Advance(dispatch.ChoosePatience + time.Second)
			e.dcReceives(done, id, 30*time.Second, "the held job never went to B past the patience bound")
			e.check()
		})
	}
}

// TestDCPricesUnmeasuredSiteAsBestMeasured: an input on the CLS host, a
// site A whose link staging measured at milliseconds and a site B not
// measured yet. B's placeholder asks: priced at the fixed prior (0.5 s a
// file, times DC's penalty), B would wait for A for good, and, given no
// transfer, never be measured. Priced as the best measured site, it gets
// the job.
func TestDCPricesUnmeasuredSiteAsBestMeasured(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, hourLease)
	e.setPolicy("dq", "dc")
	loc, a, b := e.registerAt(catalog.LocalSite, "hl"), e.registerAt("A", "ha"), e.registerAt("B", "hb")
	e.produceAt(loc, "/d/x", 300)
	e.next(a, 1)
	e.next(a, 1)
	e.s.MeasuredLink("A", dc.Link{Latency: 0.003, Bandwidth: 1e8})
	id := e.dcNeeds("x")
	done := e.nextAsync(b)
	e.dcReceives(done, id, 20*time.Second, "DC held the job from B, not measured yet, for A")
	if l := e.s.linkOf("B"); l.Latency != 0.003 || l.Bandwidth != 1e8 {
		t.Errorf("B's link %+v: want A's, the best measured", l)
	}
	if l := e.s.linkOf(catalog.LocalSite); l != dc.DefaultLocalLink {
		t.Errorf("the local site's link %+v changed", l)
	}
	e.check()
}
