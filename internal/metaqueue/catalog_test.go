package metaqueue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/dc"

	"github.com/mq-hpc/mq/internal/metaqueue/catalog"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// fakeStager records the stage requests the store makes.
type fakeStager struct {
	mu  sync.Mutex
	got []catalog.StageRequest
}

func (f *fakeStager) Stage(r catalog.StageRequest) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, r)
}

func (f *fakeStager) requests() []catalog.StageRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.got)
}

// newStagingEnv opens a store with a fakeStager and sites siteA, siteB,
// siteC and siteX that keep files under data roots of their own (a site
// the store does not know shares the CLS host's filesystem).
func newStagingEnv(t *testing.T) (*env, *fakeStager) {
	st := &fakeStager{}
	e := newEnvWith(t, func(o *Options) { o.Stager = st })
	for _, name := range []string{"siteA", "siteB", "siteC", "siteX"} {
		if err := e.s.AddSite(context.Background(), protocol.SiteSpec{Name: name, Type: "slurm"}); err != nil {
			t.Fatal(err)
		}
	}
	return e, st
}

const sumA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

// userIn is a movable input that exists on the CLS host (as FillSizes
// leaves it).
func userIn(path string, size int64) protocol.File {
	return protocol.File{Path: path, Size: sz(size), Rel: true, MTime: 1e18}
}

// staged reports the end of request r (err nil = done).
func (e *env) staged(r catalog.StageRequest, from catalog.Place, err error, permanent bool) {
	e.t.Helper()
	res := catalog.StageResult{Path: r.Path, To: r.To, From: from, Bytes: max(r.Size, 0), Started: e.clock.Now(),
		Duration: time.Second, SHA256: sumA, Job: r.Job, Err: err, Permanent: permanent, Via: "sftp>agent"}
	if err != nil {
		res.Bytes, res.SHA256 = 0, ""
	}
	if err := e.s.Catalog().Staged(context.Background(), res); err != nil {
		e.t.Fatalf("Staged: %v", err)
	}
}

// TestStagingGatesDispatch: a job whose input is only on the CLS host is
// held back from a site without it while other ready work goes there; two
// jobs wanting the file cause one transfer; a parked poll is woken when
// the file lands, and the assignment carries the files.
func TestStagingGatesDispatch(t *testing.T) {
	t.Parallel()
	e, st := newStagingEnv(t)
	a := e.submit(withFiles("a", "blast", []protocol.File{userIn("/w/seqs/p1.fa", 10), {Path: "/abs/db"}}, []protocol.File{{Path: "/w/hom/p1.tsv", Rel: true}}))[0]
	c := e.submit(withFiles("c", "blast2", []protocol.File{userIn("/w/seqs/p1.fa", 10)}, nil))[0]
	other := e.submit(withFiles("o", "other", nil, nil))[0]
	b := e.registerAt("siteB", "b1")
	if got := e.next(b, 3); len(got) != 1 || got[0].ID != other {
		t.Fatalf("siteB got %v, want the job without inputs %d", ids(got), other)
	}
	reqs := st.requests()
	if len(reqs) != 1 || reqs[0].Path != "/w/seqs/p1.fa" || reqs[0].To != (catalog.Place{Site: "siteB"}) ||
		!slices.Equal(reqs[0].From, []catalog.Place{{Site: catalog.LocalSite}}) || reqs[0].Size != 10 || reqs[0].ModTime.IsZero() {
		t.Fatalf("requests %+v", reqs)
	}
	// Another site skips jobs staging to siteB.
	x := e.registerAt("siteX", "x1")
	if got := e.next(x, 2); len(got) != 0 {
		t.Fatalf("siteX got %v while their inputs go to siteB", ids(got))
	}
	if n := len(st.requests()); n != 1 {
		t.Fatalf("%d requests, want 1 (one per file and place)", n)
	}
	// The local site has the file: no staging.
	done := make(chan []protocol.Assignment, 1)
	go func() {
		r, err := e.s.Next(context.Background(), protocol.Next{Placeholder: b, Free: 2, WaitMS: 20000})
		if err != nil {
			t.Error(err)
		}
		done <- r.Jobs
	}()
	e.parkedAtLeast(1, 0)
	e.staged(reqs[0], catalog.Place{Site: catalog.LocalSite}, nil, false)
	var got []protocol.Assignment
	select {
	case got = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the parked poll was not woken by the staged file")
	}
	if fmt.Sprint(ids(got)) != fmt.Sprint([]int64{a, c}) {
		t.Fatalf("after staging siteB got %v, want %d %d", ids(got), a, c)
	}
	in := got[0].Inputs
	if len(in) != 2 || in[0].SHA256 != sumA || in[0].Size != 10 || in[0].Local || !in[1].Local || in[1].Size != -1 ||
		len(got[0].Outputs) != 1 || got[0].Outputs[0].Local {
		t.Fatalf("assignment files %+v %+v", in, got[0].Outputs)
	}
	d := e.job(a)
	if len(d.Transfers) != 1 || d.Transfers[0].From != catalog.LocalSite || d.Transfers[0].To != "siteB" || d.Transfers[0].Bytes != 10 {
		t.Fatalf("transfers %+v", d.Transfers)
	}
	if len(d.Inputs[0].Replicas) != 2 || d.Inputs[0].Replicas[0].Site != catalog.LocalSite || d.Inputs[0].SHA256 != sumA {
		t.Fatalf("input replicas %+v", d.Inputs[0])
	}
	e.check()
}

// TestStagingDC: a dc queue gates the same way.
func TestStagingDC(t *testing.T) {
	t.Parallel()
	e, st := newStagingEnv(t)
	e.submit(withFiles("warm", "x", nil, nil))
	e.setPolicy("dq", "dc")
	b := e.registerAt("siteB", "b1")
	e.next(b, 1) // the warm-up job
	a := e.submit(withFiles("a", "x", []protocol.File{userIn("/w/in", 5)}, nil))[0]
	if got := e.next(b, 1); len(got) != 0 {
		t.Fatalf("got %v before the input was there", ids(got))
	}
	reqs := st.requests()
	if len(reqs) != 1 {
		t.Fatalf("requests %+v", reqs)
	}
	e.staged(reqs[0], catalog.Place{Site: catalog.LocalSite}, nil, false)
	waitFor(t, func() bool { got := e.next(b, 1); return len(got) == 1 && got[0].ID == a })
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestStagingRetriesThenFails: a failed transfer is retried from another
// replica first; the third failure fails the job with the reason; a
// permanent failure fails it at once.
func TestStagingRetriesThenFails(t *testing.T) {
	t.Parallel()
	e, st := newStagingEnv(t)
	a := e.submit(withFiles("a", "x", []protocol.File{userIn("/w/seqs/p1.fa", 10)}, nil))[0]
	if _, err := e.s.Catalog().AddReplica(context.Background(), "/w/seqs/p1.fa", catalog.Place{Site: "siteC"}, 10, ""); err != nil {
		t.Fatal(err)
	}
	b := e.registerAt("siteB", "b1")
	e.next(b, 1)
	local, siteC := catalog.Place{Site: catalog.LocalSite}, catalog.Place{Site: "siteC"}
	for i, want := range [][]catalog.Place{{local, siteC}, {siteC, local}, {local, siteC}} {
		reqs := st.requests()
		if len(reqs) != i+1 || !slices.Equal(reqs[i].From, want) {
			t.Fatalf("try %d: requests %+v, want from %v", i+1, reqs, want)
		}
		e.staged(reqs[i], reqs[i].From[0], errors.New("connection reset"), false)
	}
	e.mustBe(a, job.Failed)
	if d := e.job(a); !strings.Contains(d.Reason, "input /w/seqs/p1.fa could not be staged to siteB: connection reset") {
		t.Fatalf("reason %q", d.Reason)
	}
	if n := len(st.requests()); n != 3 {
		t.Fatalf("%d requests after the third failure", n)
	}

	p := e.submit(withFiles("p", "x", []protocol.File{userIn("/w/other", 3)}, nil))[0]
	e.next(b, 1)
	reqs := st.requests()
	e.staged(reqs[len(reqs)-1], local, errors.New("input changed after submission"), true)
	e.mustBe(p, job.Failed)
	if m, err := e.s.Catalog().Moved(context.Background()); err != nil || m.Transfers != 4 || m.Failed != 4 {
		t.Fatalf("moved %+v %v", m, err)
	}
	e.check()
}

// TestStagingSharedFS: a site sharing the CLS host's filesystem takes
// the job at once.
func TestStagingSharedFS(t *testing.T) {
	t.Parallel()
	e, st := newStagingEnv(t)
	if err := e.s.AddSite(context.Background(), protocol.SiteSpec{Name: "siteS", SharedFS: true}); err != nil {
		t.Fatal(err)
	}
	a := e.submit(withFiles("a", "x", []protocol.File{userIn("/w/in", 5)}, nil))[0]
	s := e.registerAt("siteS", "s1")
	if got := e.next(s, 1); len(got) != 1 || got[0].ID != a {
		t.Fatalf("shared-fs site got %v", ids(got))
	}
	if n := len(st.requests()); n != 0 {
		t.Fatalf("%d stage requests for a shared filesystem", n)
	}
}

// TestStagingOutputs: reported outputs become replicas at the producer's
// place (unreported ones do not), and a dependent at another site has
// them staged from there.
func TestStagingOutputs(t *testing.T) {
	t.Parallel()
	e, st := newStagingEnv(t)
	out, miss := protocol.File{Path: "/w/hom/p1.tsv", Rel: true}, protocol.File{Path: "/w/hom/none", Rel: true}
	p := e.submit(withFiles("p", "x", nil, []protocol.File{out, miss}))[0]
	q := e.submit(withFiles("q", "y", []protocol.File{out}, nil))[0]
	mustSpec := withFiles("r", "z", []protocol.File{out}, nil)
	mustSpec.Prereqs = []string{"p"}
	r := e.submit(mustSpec)[0]
	a := e.registerAt("siteA", "a1")
	got := e.next(a, 1)
	if len(got) != 1 || got[0].ID != p {
		t.Fatalf("siteA got %v", ids(got))
	}
	rep := ok(got[0])
	rep.Outputs = []protocol.FileSum{{Path: out.Path, Size: 77, SHA256: sumA}}
	e.report(a, rep)
	d := e.job(p)
	if len(d.Outputs[0].Replicas) != 1 || d.Outputs[0].Replicas[0].Site != "siteA" || d.Outputs[0].SHA256 != sumA ||
		*d.Outputs[0].Size != 77 || d.Outputs[0].Job != p || len(d.Outputs[1].Replicas) != 0 {
		t.Fatalf("outputs %+v", d.Outputs)
	}
	b := e.registerAt("siteB", "b1")
	if got := e.next(b, 2); len(got) != 0 {
		t.Fatalf("siteB got %v before the output was staged", ids(got))
	}
	reqs := st.requests()
	if len(reqs) != 1 || !slices.Equal(reqs[0].From, []catalog.Place{{Site: "siteA"}}) || reqs[0].SHA256 != sumA || reqs[0].Size != 77 || !reqs[0].ModTime.IsZero() {
		t.Fatalf("requests %+v", reqs)
	}
	e.staged(reqs[0], reqs[0].From[0], nil, false)
	waitFor(t, func() bool { return len(e.next(b, 2)) == 2 })
	e.mustBe(q, job.Executing)
	e.mustBe(r, job.Executing)
}

// TestCatalogOps: paging by path and prefix, and dropping replicas (the
// last one of a file live jobs read only with force); the accounting
// survives a reopen.
func TestCatalogOps(t *testing.T) {
	t.Parallel()
	e, _ := newStagingEnv(t)
	ctx := context.Background()
	for i := range 5 {
		if _, err := e.s.Catalog().AddReplica(ctx, fmt.Sprintf("/d/f%d", i), catalog.Place{Site: "siteA"}, int64(i), ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.s.Catalog().AddReplica(ctx, "/e/x", catalog.Place{Site: "siteA"}, 1, sumA); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.Catalog().AddReplica(ctx, "/e/x", catalog.Place{Site: "siteB"}, 1, strings.Repeat("b", 64)); err == nil {
		t.Fatal("a replica with another checksum was added")
	}
	var paths []string
	after := ""
	for {
		r, err := catalog.Files(ctx, e.s.ReadDB(), protocol.FilesQuery{Prefix: "/d/", After: after, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range r.Files {
			paths = append(paths, f.Path)
			if len(f.Replicas) != 1 || f.Replicas[0].Site != "siteA" {
				t.Fatalf("file %+v", f)
			}
		}
		if !r.More {
			break
		}
		after = r.Files[len(r.Files)-1].Path
	}
	if fmt.Sprint(paths) != "[/d/f0 /d/f1 /d/f2 /d/f3 /d/f4]" {
		t.Fatalf("paged %v", paths)
	}

	e.submit(withFiles("a", "x", []protocol.File{{Path: "/d/f1", Rel: true}}, nil))
	if _, err := e.s.Catalog().AddReplica(ctx, "/d/f1", catalog.Place{Site: "siteB"}, 1, ""); err != nil {
		t.Fatal(err)
	}
	left, dropped, err := e.s.Catalog().RemoveReplicas(ctx, "/d/f1", "siteA", false)
	if err != nil || len(dropped) != 1 || len(left.Replicas) != 1 || left.Replicas[0].Site != "siteB" {
		t.Fatalf("drop one: %+v %v %v", left, dropped, err)
	}
	if _, _, err := e.s.Catalog().RemoveReplicas(ctx, "/d/f1", "", false); err == nil || !strings.Contains(err.Error(), "last replica") {
		t.Fatalf("dropped the last replica of a file a live job reads: %v", err)
	}
	if _, dropped, err := e.s.Catalog().RemoveReplicas(ctx, "/d/f1", "", true); err != nil || len(dropped) != 1 {
		t.Fatalf("force: %v %v", dropped, err)
	}
	if _, _, err := e.s.Catalog().RemoveReplicas(ctx, "/d/f2", "", false); err != nil {
		t.Fatalf("a file no job reads: %v", err)
	}
	if err := e.s.Catalog().RecordTransfer(ctx, protocol.TransferInfo{Path: "/d/f3", From: "siteA", To: catalog.LocalSite, Bytes: 3, Seconds: 0.5, Started: time.Now().Format(time.RFC3339)}); err != nil {
		t.Fatal(err)
	}
	e.reopen()
	if m, err := e.s.Catalog().Moved(ctx); err != nil || m == nil || m.Transfers != 1 || m.Bytes != 3 || m.Seconds != 0.5 {
		t.Fatalf("moved after reopen %+v %v", m, err)
	}
	if reps, err := catalog.Holding(ctx, e.s.ReadDB(), "/d/f0"); err != nil || len(reps) != 1 || reps[0].Size != 0 {
		t.Fatalf("replicas %+v %v", reps, err)
	}
	e.check()
}

// TestMeasuredLinkOverrides: a measured link replaces the configured one.
func TestMeasuredLinkOverrides(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, func(o *Options) { o.Links = map[string]dc.Link{"A": {Latency: 1, Bandwidth: 1}} })
	e.s.MeasuredLink("A", dc.Link{Latency: 2, Bandwidth: 3})
	var l dc.Link
	e.s.do(context.Background(), func() error { l = e.s.link(e.s.data.At("A", "")); return nil })
	if l != (dc.Link{Latency: 2, Bandwidth: 3}) {
		t.Fatalf("link %+v", l)
	}
}

// TestMigrateFrom5: a version 5 database's file locations become the
// catalog's replicas, and DC still sees them.
func TestMigrateFrom5(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.submit(withFiles("t", "x", []protocol.File{{Path: "/o/x"}}, nil))[0]
	e.downgrade("DROP TABLE files", "DROP TABLE replicas", "DROP TABLE transfers", "ALTER TABLE job_files DROP COLUMN rel",
		`CREATE TABLE file_locations (path TEXT PRIMARY KEY, site TEXT NOT NULL, host TEXT NOT NULL, size INTEGER,
			job_id INTEGER NOT NULL, produced INTEGER NOT NULL) WITHOUT ROWID`,
		"INSERT INTO file_locations VALUES ('/o/x', 'siteA', '', 42, 7, 1000)",
		"UPDATE meta SET value = '5' WHERE key = 'schema'")
	d := e.job(id)
	if d.Inputs[0].Site != "siteA" || d.Inputs[0].Job != 7 || *d.Inputs[0].Size != 42 || len(d.Inputs[0].Replicas) != 1 {
		t.Fatalf("after migration %+v", d.Inputs[0])
	}
	var loc dc.Loc
	var site string
	e.s.do(context.Background(), func() error {
		loc, _ = e.s.data.Where("/o/x")
		site = e.s.data.SiteAt(loc.At).Site
		return nil
	})
	if loc.Job != 7 || site != "siteA" {
		t.Fatalf("DC location %+v at %q", loc, site)
	}
	e.check()
}

// TestStagingUnknownSiteShares: an agent started by hand with a site name
// the CLS has no site for shares the CLS host's filesystem, as every
// placeholder did before staging: its jobs are not held and nothing moves.
func TestStagingUnknownSiteShares(t *testing.T) {
	t.Parallel()
	e, st := newStagingEnv(t)
	a := e.submit(withFiles("a", "cat in", []protocol.File{userIn("/w/in", 10)}, nil))[0]
	u := e.registerAt("handmade", "h1")
	if got := e.next(u, 1); len(got) != 1 || got[0].ID != a {
		t.Fatalf("an unknown site got %v, want %d at once", ids(got), a)
	}
	if reqs := st.requests(); len(reqs) != 0 {
		t.Fatalf("staging requested for an unknown site: %+v", reqs)
	}
}

// TestStagingErrorTextBounded: a transfer error carrying a site's words
// (control characters, any length) is stored bounded and escaped, in the
// transfer and in the reason of the job that fails for it.
func TestStagingErrorTextBounded(t *testing.T) {
	t.Parallel()
	e, st := newStagingEnv(t)
	a := e.submit(withFiles("a", "cat in", []protocol.File{userIn("/w/in", 10)}, nil))[0]
	b := e.registerAt("siteB", "b1")
	e.next(b, 1)
	reqs := st.requests()
	if len(reqs) != 1 {
		t.Fatalf("requests %+v", reqs)
	}
	hostile := "sftp: \x1b]0;owned\x07" + strings.Repeat("x", 10000)
	e.staged(reqs[0], catalog.Place{Site: catalog.LocalSite}, errors.New(hostile), true)
	d := e.job(a)
	if d.State != "F" || len(d.Reason) > protocol.MaxReasonBytes || strings.ContainsAny(d.Reason, "\x1b\x07") {
		t.Fatalf("job: state %s, reason %d bytes %q", d.State, len(d.Reason), d.Reason[:min(len(d.Reason), 80)])
	}
	if len(d.Transfers) != 1 || len(d.Transfers[0].Error) > protocol.MaxReasonBytes || strings.ContainsAny(d.Transfers[0].Error, "\x1b\x07") {
		t.Fatalf("transfers %+v", d.Transfers)
	}
}

// TestStagingMarkClearsWhenAllEnd: a job with two inputs on their way to
// one place is not taken up by another place when the first transfer
// ends, only when the last one did.
func TestStagingMarkClearsWhenAllEnd(t *testing.T) {
	t.Parallel()
	e, st := newStagingEnv(t)
	a := e.submit(withFiles("a", "x", []protocol.File{userIn("/w/in1", 3), userIn("/w/in2", 4)}, nil))[0]
	b := e.registerAt("siteB", "b1")
	if got := e.next(b, 1); len(got) != 0 {
		t.Fatalf("siteB got %v before its inputs were there", ids(got))
	}
	reqs := st.requests()
	if len(reqs) != 2 {
		t.Fatalf("requests %+v; want one per input", reqs)
	}
	e.staged(reqs[0], catalog.Place{Site: catalog.LocalSite}, nil, false)
	x := e.registerAt("siteX", "x1")
	if got := e.next(x, 1); len(got) != 0 {
		t.Fatalf("siteX got %v while one of its inputs still goes to siteB", ids(got))
	}
	if n := len(st.requests()); n != 2 {
		t.Fatalf("%d requests: siteX asked for the job's inputs while they go to siteB", n)
	}
	e.staged(reqs[1], catalog.Place{Site: catalog.LocalSite}, nil, false)
	waitFor(t, func() bool { got := e.next(b, 1); return len(got) == 1 && got[0].ID == a })
	e.check()
}

// TestStagingPlaceUnreachable: a transfer to a site that cannot be reached
// does not count against the file: the job stays queued, the site is left
// alone for a while (its placeholders get nothing that needs staging),
// another site may run the job, and the site is tried again later. Retried
// any number of times, the job never fails for it.
func TestStagingPlaceUnreachable(t *testing.T) {
	t.Parallel()
	e, st := newStagingEnv(t)
	a := e.submit(withFiles("a", "x", []protocol.File{userIn("/w/in", 5)}, nil))[0]
	b := e.registerAt("siteB", "b1")
	siteB := catalog.Place{Site: "siteB"}
	for i := range catalog.MaxStageTries + 2 {
		e.next(b, 1)
		reqs := st.requests()
		if len(reqs) != i+1 || reqs[i].To != siteB {
			t.Fatalf("round %d: requests %+v", i, reqs)
		}
		res := catalog.StageResult{Path: reqs[i].Path, To: siteB, From: catalog.Place{Site: catalog.LocalSite}, Started: e.clock.Now(), Job: a,
			Err: errors.New("site siteB: dial tcp 127.0.0.1:22: connect: connection refused"), Unreachable: []catalog.Place{siteB}}
		if err := e.s.Catalog().Staged(context.Background(), res); err != nil {
			t.Fatal(err)
		}
		e.mustBe(a, job.Queued)
		e.next(b, 1)
		if n := len(st.requests()); n != i+1 {
			t.Fatalf("round %d: siteB was asked for again at once (%d requests)", i, n)
		}
		e.clock.Advance(catalog.PlaceDownFor)
	}
	e.clock.Advance(-catalog.PlaceDownFor / 2) // siteB down again for a while
	e.next(b, 1)
	n := len(st.requests())
	res := catalog.StageResult{Path: "/w/in", To: siteB, From: catalog.Place{Site: catalog.LocalSite}, Job: a, Started: e.clock.Now(),
		Err: errors.New("unreachable"), Unreachable: []catalog.Place{siteB}}
	if err := e.s.Catalog().Staged(context.Background(), res); err != nil {
		t.Fatal(err)
	}
	x := e.registerAt("siteX", "x1")
	e.next(x, 1)
	reqs := st.requests()
	if len(reqs) != n+1 || reqs[n].To != (catalog.Place{Site: "siteX"}) {
		t.Fatalf("requests %+v; want the job's input asked for at siteX", reqs)
	}
	e.staged(reqs[n], catalog.Place{Site: catalog.LocalSite}, nil, false)
	waitFor(t, func() bool { got := e.next(x, 1); return len(got) == 1 && got[0].ID == a })
	if m, err := e.s.Catalog().Moved(context.Background()); err != nil || m.Failed != catalog.MaxStageTries+3 {
		t.Fatalf("moved %+v, %v; want every unreachable try recorded failed", m, err)
	}
	e.check()
}

// TestStagingDCStagesOnlyChosen: in a dc queue a placeholder's request
// stages at most the one job DC chose for it, not every job it looked at
// whose inputs are elsewhere.
func TestStagingDCStagesOnlyChosen(t *testing.T) {
	t.Parallel()
	e, st := newStagingEnv(t)
	e.setPolicy("dq", "dc")
	for i := range 3 {
		p := fmt.Sprintf("/w/db/f%d", i)
		e.submit(withFiles(fmt.Sprintf("j%d", i), "x", []protocol.File{{Path: p, Size: sz(8 << 20), Rel: true}}, nil))
		if _, err := e.s.Catalog().AddReplica(context.Background(), p, catalog.Place{Site: "siteA"}, 8<<20, ""); err != nil {
			t.Fatal(err)
		}
	}
	b := e.registerAt("siteB", "b1")
	if got := e.next(b, 1); len(got) != 0 {
		t.Fatalf("siteB got %v before any input was there", ids(got))
	}
	if reqs := st.requests(); len(reqs) > 1 {
		t.Fatalf("%d stage requests for one placeholder's ask: %+v", len(reqs), reqs)
	}
	e.check()
}

// TestStagingOutsideAttemptsAndCeiling: staging happens before the job's
// attempt: failed transfers and time spent staging use neither its
// attempts (a queue allowing one still runs it after two failed
// transfers) nor its walltime (the assignment carries the whole ceiling
// though staging took longer than it).
func TestStagingOutsideAttemptsAndCeiling(t *testing.T) {
	t.Parallel()
	e, st := newStagingEnv(t)
	one, ceiling := 1, 10.0
	if _, err := e.s.SetQueue(context.Background(), protocol.QueueSet{Name: "dq", MaxAttempts: &one, Ceiling: &ceiling}); err != nil {
		t.Fatal(err)
	}
	a := e.submit(withFiles("a", "x", []protocol.File{userIn("/w/in", 5)}, nil))[0]
	b := e.registerAt("siteB", "b1")
	for i := range catalog.MaxStageTries - 1 {
		if got := e.next(b, 1); len(got) != 0 {
			t.Fatalf("try %d: got %v before the input was there", i+1, ids(got))
		}
		reqs := st.requests()
		if len(reqs) != i+1 {
			t.Fatalf("try %d: requests %+v", i+1, reqs)
		}
		e.clock.Advance(time.Minute) // staging outlasts the ceiling
		e.staged(reqs[i], catalog.Place{Site: catalog.LocalSite}, errors.New("connection reset"), false)
		e.mustBe(a, job.Queued)
		if d := e.job(a); len(d.History) != 0 {
			t.Fatalf("try %d: attempts %+v before the job ran", i+1, d.History)
		}
	}
	e.next(b, 1)
	reqs := st.requests()
	e.staged(reqs[len(reqs)-1], catalog.Place{Site: catalog.LocalSite}, nil, false)
	var got []protocol.Assignment
	waitFor(t, func() bool { got = e.next(b, 1); return len(got) == 1 })
	if got[0].ID != a || got[0].Attempt != 1 || got[0].Ceiling != ceiling {
		t.Fatalf("assignment %+v; want job %d, attempt 1, ceiling %g", got[0], a, ceiling)
	}
	e.report(b, ok(got[0]))
	e.mustBe(a, job.Done)
	if d := e.job(a); len(d.Transfers) != catalog.MaxStageTries || d.Transfers[0].Error == "" || d.Transfers[catalog.MaxStageTries-1].Error != "" {
		t.Fatalf("transfers %+v; want two failed, then one done", d.Transfers)
	}
	e.check()
}

// TestStagingStaleReplica: an input whose copy at a site was deleted
// behind the CLS's back is found missing by the agent there
// (Report.Missing): the CLS forgets that replica, hands the job back
// unstarted (no attempt used) and stages the file again, and the job
// waits for it; a path the job does not read changes nothing; after
// protocol.MaxStaleReturns hand-backs the job fails with the agent's
// reason.
func TestStagingStaleReplica(t *testing.T) {
	t.Parallel()
	e, st := newStagingEnv(t)
	a := e.submit(withFiles("a", "x", []protocol.File{userIn("/w/in", 5)}, nil))[0]
	b := e.registerAt("siteB", "b1")
	const why = "input: /w/in missing at site siteB (not staged there, or deleted behind the CLS's back)"
	dispatch := func(round int) protocol.Assignment {
		t.Helper()
		if got := e.next(b, 1); len(got) != 0 {
			t.Fatalf("round %d: got %v before the input was staged (again)", round, ids(got))
		}
		reqs := st.requests()
		if len(reqs) != round+1 || reqs[round].To != (catalog.Place{Site: "siteB"}) {
			t.Fatalf("round %d: requests %+v; want the input staged to siteB again", round, reqs)
		}
		e.staged(reqs[round], catalog.Place{Site: catalog.LocalSite}, nil, false)
		var got []protocol.Assignment
		waitFor(t, func() bool { got = e.next(b, 1); return len(got) == 1 })
		return got[0]
	}
	for round := range protocol.MaxStaleReturns {
		asg := dispatch(round)
		if asg.ID != a {
			t.Fatalf("round %d: assignment %+v; want job %d", round, asg, a)
		}
		rep := exit(asg, 127)
		rep.Reason, rep.Missing = why, []string{"/w/in", "/w/not-its-input"}
		e.report(b, rep)
		e.mustBe(a, job.Queued)
		d := e.job(a)
		if len(d.History) != 0 || len(d.Inputs[0].Replicas) != 1 || d.Inputs[0].Replicas[0].Site != catalog.LocalSite {
			t.Fatalf("round %d: history %+v, replicas %+v; want no attempt, the CLS host's copy alone", round, d.History, d.Inputs[0].Replicas)
		}
	}
	asg := dispatch(protocol.MaxStaleReturns)
	rep := exit(asg, 127)
	rep.Reason, rep.Missing = why, []string{"/w/in"}
	e.report(b, rep)
	e.mustBe(a, job.Failed)
	if d := e.job(a); d.Reason != why || len(d.History) != 0 {
		t.Fatalf("reason %q, earlier attempts %+v; want the agent's reason, the hand-backs not counted", d.Reason, d.History)
	}

	// Missing naming no input of the job: it fails at once.
	c := e.submit(withFiles("c", "y", nil, nil))[0]
	got := e.next(b, 1)
	if len(got) != 1 || got[0].ID != c {
		t.Fatalf("got %v, want %d", ids(got), c)
	}
	rep = exit(got[0], 127)
	rep.Reason, rep.Missing = "input: /w/in missing", []string{"/w/in"}
	e.report(b, rep)
	e.mustBe(c, job.Failed)
	e.check()
}

// TestStagingUserFileChanged: a user's input edited on the CLS host and
// submitted again (another mtime, even at the same size) is another
// content: the copies staged of the old one are forgotten, so a job
// reading the new one at a site that holds an old copy waits for the new
// one to be staged there, and never gets the old copy's checksum.
func TestStagingUserFileChanged(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		size, mtime int64
		restaged    bool
	}{
		{"same file", 10, 1e18, false},
		{"edited, same size", 10, 2e18, true},
		{"edited, other size", 12, 2e18, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, st := newStagingEnv(t)
			e.submit(withFiles("a", "run1", []protocol.File{userIn("/w/cfg", 10)}, nil))
			b := e.registerAt("siteB", "b1")
			e.next(b, 1)
			reqs := st.requests()
			if len(reqs) != 1 {
				t.Fatalf("requests %+v; want one", reqs)
			}
			e.staged(reqs[0], catalog.Place{Site: catalog.LocalSite}, nil, false)
			if got := e.next(b, 1); len(got) != 1 {
				t.Fatalf("after staging siteB got %v, want the job", ids(got))
			}
			again := protocol.File{Path: "/w/cfg", Size: sz(tc.size), Rel: true, MTime: tc.mtime}
			c := e.submit(withFiles("c", "run2", []protocol.File{again}, nil))[0]
			got := e.next(b, 1)
			if n := len(st.requests()); tc.restaged != (n == 2) {
				t.Errorf("%d stage requests; want a second one: %v", n, tc.restaged)
			}
			if tc.restaged {
				if len(got) != 0 {
					t.Fatalf("siteB got %v (inputs %+v) before the new content was staged there", ids(got), got[0].Inputs)
				}
				return
			}
			if len(got) != 1 || got[0].ID != c || got[0].Inputs[0].SHA256 != sumA {
				t.Fatalf("siteB got %+v; want job %d with the staged copy's checksum", got, c)
			}
		})
	}
}

// TestStagingSiteRemovedForgetsReplicas: the copies at a site removed are
// forgotten, then and after a restart: its name, configured no more, does
// not pass for a site sharing the CLS host's filesystem, so a job on the
// CLS host reading a file copied there and at another site waits for it
// to be staged from that one, rather than starting without it.
func TestStagingSiteRemovedForgetsReplicas(t *testing.T) {
	t.Parallel()
	for _, reopen := range []bool{false, true} {
		t.Run(fmt.Sprint("reopen=", reopen), func(t *testing.T) {
			e, st := newStagingEnv(t)
			ctx := context.Background()
			for _, site := range []string{"siteA", "siteB"} {
				if _, err := e.s.Catalog().AddReplica(ctx, "/w/x", catalog.Place{Site: site}, 1, sumA); err != nil {
					t.Fatal(err)
				}
			}
			if err := e.s.RemoveSite(ctx, "siteA"); err != nil {
				t.Fatal(err)
			}
			if reopen {
				e.reopen()
			}
			if reps, err := catalog.Holding(ctx, e.s.ReadDB(), "/w/x"); err != nil || len(reps) != 1 || reps[0].Site != "siteB" {
				t.Errorf("replicas %+v %v; want siteB's alone", reps, err)
			}
			e.submit(withFiles("a", "x", []protocol.File{{Path: "/w/x", Rel: true}}, nil))
			if got := e.next(e.registerAt(catalog.LocalSite, "h"), 1); len(got) != 0 {
				t.Fatalf("the CLS host's placeholder got %v before /w/x was staged there", ids(got))
			}
			reqs := st.requests()
			if len(reqs) != 1 || reqs[0].To != catalog.Shared || !slices.Equal(reqs[0].From, []catalog.Place{{Site: "siteB"}}) {
				t.Fatalf("requests %+v; want /w/x from siteB to the CLS host", reqs)
			}
		})
	}
}

// TestStagingResubmittedWhileStaged: a user's input submitted anew
// (edited) while a transfer of its old content runs is not recorded
// where that transfer brought the old bytes, and a transfer of it that
// failed for the change fails no job: the file is asked for again, in its
// new form.
func TestStagingResubmittedWhileStaged(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"old content arrived", nil},
		{"refused as changed", errors.New("input /w/cfg changed after submission (modified ...)")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, st := newStagingEnv(t)
			a := e.submit(withFiles("a", "run1", []protocol.File{userIn("/w/cfg", 10)}, nil))[0]
			b := e.registerAt("siteB", "b1")
			e.next(b, 1)
			reqs := st.requests()
			if len(reqs) != 1 {
				t.Fatalf("requests %+v; want one", reqs)
			}
			edited := protocol.File{Path: "/w/cfg", Size: sz(10), Rel: true, MTime: 2e18}
			c := e.submit(withFiles("c", "run2", []protocol.File{edited}, nil))[0]
			e.staged(reqs[0], catalog.Place{Site: catalog.LocalSite}, tc.err, tc.err != nil)
			if got := e.next(b, 2); len(got) != 0 {
				t.Fatalf("siteB got %v (inputs %+v) before the edited file was staged there", ids(got), got[0].Inputs)
			}
			for _, id := range []int64{a, c} {
				if d := e.job(id); d.State != "Q" {
					t.Fatalf("job %d is %s (%s); want it queued", id, d.State, d.Reason)
				}
			}
			reqs = st.requests()
			if len(reqs) != 2 || reqs[1].ModTime.UnixNano() != 2e18 || reqs[1].SHA256 != "" {
				t.Fatalf("requests %+v; want the edited file asked for again", reqs)
			}
		})
	}
}

// TestDeclaredSizeSurvivesRestart: an output made without a checksum (the
// agent did not hash it) is located at its producer with its declared size
// as DC's hint, after a restart as before; the catalog still knows no size
// to check a reader's input against.
func TestDeclaredSizeSurvivesRestart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		out  protocol.File
		want int64
	}{
		{"sized", file("/o/x", 42), 42},
		{"unsized", protocol.File{Path: "/o/x"}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.submit(withFiles("t", "x", nil, []protocol.File{tc.out}))
			ph := e.register("A")
			got := e.next(ph, 1)
			if len(got) != 1 {
				t.Fatalf("got %d jobs", len(got))
			}
			e.report(ph, ok(got[0]))
			where := func() dc.Loc {
				var loc dc.Loc
				e.s.do(context.Background(), func() error { loc, _ = e.s.data.Where("/o/x"); return nil })
				return loc
			}
			before := where()
			e.reopen()
			after := where()
			if before.Size != tc.want || after != before {
				t.Fatalf("DC location %+v before the restart, %+v after; want size %d", before, after, tc.want)
			}
			if size, ok := e.s.cat.SizeAt("/o/x", catalog.Place{Site: "A", Host: "h-A"}); ok && size >= 0 {
				t.Fatalf("the catalog checks readers against %d, a size nobody measured", size)
			}
			e.check()
		})
	}
}
