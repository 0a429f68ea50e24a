package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// The catalog's state rules, in memory: what the core's tests reach only
// through a whole store. Writes to the database are the core's tests'
// (internal/metaqueue: catalog_test.go, perhost_test.go, catalog_hooks_test.go).

type fakeStager struct{ reqs []StageRequest }

func (f *fakeStager) Stage(r StageRequest) { f.reqs = append(f.reqs, r) }

// newTest is a catalog with no statements: enough for every rule that
// does not write. Sites "rooted" (a data root of its own) and "nodes"
// (per host) are configured; "nfs" shares the CLS host's filesystem.
func newTest(st Stager) *Catalog {
	c := &Catalog{stager: st, stg: newStaging()}
	c.Reset()
	c.AddSite("rooted", protocol.SiteSpec{Name: "rooted", Type: "slurm"})
	c.AddSite("nodes", protocol.SiteSpec{Name: "nodes", Type: "sge", NodeLocal: true})
	c.AddSite("nfs", protocol.SiteSpec{Name: "nfs", Type: "pbs", SharedFS: true})
	return c
}

var (
	rooted = Place{Site: "rooted"}
	n1     = Place{Site: "nodes", Host: "n1"}
	n2     = Place{Site: "nodes", Host: "n2"}
	nfs    = Place{Site: "nfs"}
)

// nopExec is a transaction that writes nothing, for the rules whose
// writes do not matter here.
type nopExec struct{ Querier }

func (nopExec) ExecContext(context.Context, string, ...any) (sql.Result, error) { return nil, nil }

func TestAddSite(t *testing.T) {
	for _, tc := range []struct {
		spec          protocol.SiteSpec
		rooted, hosts bool
	}{
		{protocol.SiteSpec{Type: LocalSite}, false, false},
		{protocol.SiteSpec{Type: "slurm", SharedFS: true}, false, false},
		{protocol.SiteSpec{Type: "slurm"}, true, false},
		{protocol.SiteSpec{Type: "sge", NodeLocal: true}, true, true},
	} {
		c := newTest(nil)
		got := c.AddSite("s", tc.spec)
		if got != tc.rooted || c.IsShared("s") == tc.rooted || c.perHost["s"] != tc.hosts {
			t.Errorf("%+v: rooted %v, shared %v, per host %v; want rooted %v, per host %v", tc.spec, got, c.IsShared("s"), c.perHost["s"], tc.rooted, tc.hosts)
		}
		if err := c.RemoveSite(context.Background(), nopExec{}, "s"); err != nil {
			t.Fatal(err)
		}
		if !c.IsShared("s") {
			t.Errorf("%+v: removed, still rooted", tc.spec)
		}
	}
	if c := newTest(nil); !c.IsShared("never-configured") {
		t.Error("a site the CLS does not know does not share the CLS host's filesystem")
	}
}

// A removed site's replicas go with it when the site kept files of its
// own (its name would pass for a shared site's); a shared site's are the
// CLS host's files, and stay.
func TestRemoveSite(t *testing.T) {
	for _, tc := range []struct {
		site   string
		left   []Place
		shared bool // Present at the CLS host after
	}{
		{"rooted", []Place{nfs, n1}, true},
		{"nodes", []Place{rooted, nfs}, true},
		{"nfs", []Place{rooted, nfs, n1}, true},
	} {
		c := newTest(nil)
		c.files["/f"] = &file{size: 7, reps: []Place{rooted, nfs, n1}}
		c.files["/g"] = &file{size: 7, reps: []Place{rooted}}
		if err := c.RemoveSite(context.Background(), nopExec{}, tc.site); err != nil {
			t.Fatal(err)
		}
		if got := c.files["/f"].reps; !slices.Equal(got, tc.left) {
			t.Errorf("removed %s: replicas %v, want %v", tc.site, got, tc.left)
		}
		if got := c.Present("/f", Shared); got != tc.shared {
			t.Errorf("removed %s: present at the CLS host %v, want %v", tc.site, got, tc.shared)
		}
		if got := c.Present("/g", Shared); got {
			t.Errorf("removed %s: a file only at rooted is present at the CLS host", tc.site)
		}
	}
}

func TestStorePlace(t *testing.T) {
	c := newTest(nil)
	for _, tc := range []struct {
		site, host string
		want       Place
	}{
		{LocalSite, "h", Shared},
		{"nfs", "", Shared},
		{"unknown", "x", Shared},
		{"rooted", "", rooted},
		{"nodes", "n1", n1},
	} {
		if got := c.StorePlace(tc.site, tc.host); got != tc.want {
			t.Errorf("StorePlace(%q, %q) = %v, want %v", tc.site, tc.host, got, tc.want)
		}
	}
}

func TestPresent(t *testing.T) {
	c := newTest(nil)
	c.files["/f"] = &file{size: 7, reps: []Place{nfs, n1}}
	c.files["/g"] = &file{size: -1, reps: []Place{rooted}}
	for _, tc := range []struct {
		path string
		to   Place
		want bool
	}{
		{"/f", Shared, true}, // nfs sees the CLS host's filesystem
		{"/f", n1, true},
		{"/f", n2, false},
		{"/f", Place{Site: "nodes"}, false},
		{"/f", rooted, false},
		{"/g", Shared, false},
		{"/g", rooted, true},
		{"/unknown", Shared, false},
	} {
		if got := c.Present(tc.path, tc.to); got != tc.want {
			t.Errorf("Present(%s, %v) = %v, want %v", tc.path, tc.to, got, tc.want)
		}
		size, ok := c.SizeAt(tc.path, tc.to)
		if ok != tc.want || ok && size != c.files[tc.path].size || !ok && size != -1 {
			t.Errorf("SizeAt(%s, %v) = %d, %v", tc.path, tc.to, size, ok)
		}
	}
}

func TestSources(t *testing.T) {
	c := newTest(nil)
	f := &file{reps: []Place{n1, nfs, rooted, Shared, n2}}
	for _, tc := range []struct {
		tried []Place
		want  []Place
	}{
		{nil, []Place{Shared, n1, rooted, n2}},                     // the CLS host's first; nfs is it
		{[]Place{Shared}, []Place{n1, rooted, n2, Shared}},         // failed ones last
		{[]Place{rooted, n1}, []Place{Shared, n2, rooted, n1}},     // the oldest failure first among them
		{[]Place{{Site: "gone"}}, []Place{Shared, n1, rooted, n2}}, // a place no longer holding it
	} {
		if got := c.sources(f, tc.tried); !slices.Equal(got, tc.want) {
			t.Errorf("sources(tried %v) = %v, want %v", tc.tried, got, tc.want)
		}
	}
}

func TestCheckReplica(t *testing.T) {
	sha := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		path string
		at   Place
		sha  string
		code string
	}{
		{"/x", rooted, sha, ""},
		{"/x", rooted, "", ""},
		{"x", rooted, "", protocol.CodeBadRequest},
		{"", rooted, "", protocol.CodeBadRequest},
		{"/x", Place{}, "", protocol.CodeBadRequest},
		{"/x", rooted, strings.ToUpper(sha), protocol.CodeBadRequest},
		{"/x", rooted, sha[:63], protocol.CodeBadRequest},
	} {
		if got := codeOf(CheckReplica(tc.path, tc.at, tc.sha)); got != tc.code {
			t.Errorf("CheckReplica(%q, %v, %q): code %q, want %q", tc.path, tc.at, tc.sha, got, tc.code)
		}
	}
}

func codeOf(err error) string {
	var pe *protocol.Error
	if err == nil {
		return ""
	}
	if errors.As(err, &pe) {
		return pe.Code
	}
	return "not a protocol error: " + err.Error()
}

func TestReplicaPlace(t *testing.T) {
	c := newTest(nil)
	sha, other := strings.Repeat("a", 64), strings.Repeat("b", 64)
	c.files["/known"] = &file{sha: sha}
	for _, tc := range []struct {
		path string
		at   Place
		sha  string
		want Place
		code string
	}{
		{"/known", rooted, sha, rooted, ""},
		{"/known", rooted, "", rooted, ""},
		{"/known", rooted, other, Place{}, protocol.CodeBadState},
		{"/new", Place{Site: "nfs", Host: "h"}, "", Shared, ""}, // seen from there, the CLS host's
		{"/new", Place{Site: LocalSite, Host: "h"}, "", Place{Site: LocalSite, Host: "h"}, ""},
		{"/new", Place{Site: "rooted", Host: "h"}, "", rooted, ""}, // one place per site
		{"/new", n1, "", n1, ""},
		{"/new", Place{Site: "nodes"}, "", Place{}, protocol.CodeBadRequest},
	} {
		got, err := c.ReplicaPlace(tc.path, tc.at, tc.sha)
		if code := codeOf(err); code != tc.code || err == nil && got != tc.want {
			t.Errorf("ReplicaPlace(%s, %v, %.4s) = %v, %v; want %v, code %q", tc.path, tc.at, tc.sha, got, err, tc.want, tc.code)
		}
	}
}

func TestCheckRemove(t *testing.T) {
	c := newTest(nil)
	c.files["/in"] = &file{reps: []Place{Shared, rooted}}
	c.files["/free"] = &file{reps: []Place{rooted}}
	c.SetInputs(7, []Input{{Path: "/in", Movable: true}})
	for _, tc := range []struct {
		path, site string
		force      bool
		code       string
	}{
		{"/nope", "", false, protocol.CodeNotFound},
		{"/in", "nodes", false, protocol.CodeNotFound},
		{"/in", "rooted", false, ""},              // one left
		{"/in", "", false, protocol.CodeBadState}, // the last, and job 7 reads it
		{"/in", "", true, ""},                     // forced
		{"/free", "", false, ""},                  // nobody reads it
		{"/free", LocalSite, false, protocol.CodeNotFound},
	} {
		if got := codeOf(c.CheckRemove(tc.path, tc.site, tc.force)); got != tc.code {
			t.Errorf("CheckRemove(%s, %q, %v): code %q, want %q", tc.path, tc.site, tc.force, got, tc.code)
		}
	}
	// The refusal names the flag that overrides it.
	if err := c.CheckRemove("/in", "", false); err == nil || !strings.Contains(err.Error(), "cls files rm --force drops it anyway") {
		t.Errorf("the last replica of a file job 7 reads: %v, want the refusal naming --force", err)
	}
	c.JobEnded(7)
	if err := c.CheckRemove("/in", "", false); err != nil {
		t.Errorf("job 7 ended, yet: %v", err)
	}
}

func TestStale(t *testing.T) {
	st := &fakeStager{}
	c := newTest(st)
	c.files["/a"] = &file{reps: []Place{rooted}}
	c.files["/b"] = &file{reps: []Place{Shared}}
	c.files["/local"] = &file{reps: []Place{rooted}}
	c.SetInputs(1, []Input{{Path: "/a", Movable: true}, {Path: "/b", Movable: true}, {Path: "/local"}})
	for _, tc := range []struct {
		name    string
		id      int64
		to      Place
		missing []string
		want    []string
	}{
		{"movable input held there", 1, rooted, []string{"/a"}, []string{"/a"}},
		{"not held there", 1, rooted, []string{"/b"}, nil},
		{"not movable", 1, rooted, []string{"/local"}, nil},
		{"not its input", 1, rooted, []string{"/other"}, nil},
		{"the CLS host's filesystem", 1, Shared, []string{"/b"}, nil},
		{"unknown job", 2, rooted, []string{"/a"}, nil},
	} {
		if got := c.Stale(tc.id, tc.to, tc.missing); !slices.Equal(got, tc.want) {
			t.Errorf("%s: Stale = %v, want %v", tc.name, got, tc.want)
		}
	}
	c.jobs[1].staleReturns = protocol.MaxStaleReturns
	if got := c.Stale(1, rooted, []string{"/a"}); got != nil {
		t.Errorf("handed back %d times already, still stale: %v", protocol.MaxStaleReturns, got)
	}
	if got := newTest(nil).Stale(1, rooted, []string{"/a"}); got != nil {
		t.Errorf("without a stager: %v", got)
	}
	// Long lists are matched as sets, not by a scan of the inputs per
	// missing path (which runs in the core).
	var ins []Input
	var missing []string
	for i := range 40_000 {
		ins = append(ins, Input{Path: fmt.Sprintf("/in%d", i), Movable: true})
		missing = append(missing, fmt.Sprintf("/gone%d", i))
	}
	c.SetInputs(3, append(ins, Input{Path: "/a", Movable: true}))
	start := time.Now()
	if got := c.Stale(3, rooted, append(missing, "/a")); !slices.Equal(got, []string{"/a"}) || time.Since(start) > 3*time.Second {
		t.Errorf("40,001 inputs, 40,001 missing: %v in %v; want [/a] in far less than 3 s", got, time.Since(start))
	}
}

func TestInputsAt(t *testing.T) {
	now := time.Unix(1000, 0)
	queued := func(int64) bool { return true }
	setup := func() (*Catalog, *fakeStager) {
		st := &fakeStager{}
		c := newTest(st)
		c.files["/in"] = &file{size: 5, mtime: 42, reps: []Place{Shared}}
		c.files["/there"] = &file{size: 1, reps: []Place{Shared, rooted}}
		c.files["/nowhere"] = &file{size: -1}
		c.SetInputs(1, []Input{{Path: "/in", Movable: true}, {Path: "/there", Movable: true}, {Path: "/nowhere", Movable: true}, {Path: "/abs"}})
		c.SetInputs(2, []Input{{Path: "/in", Movable: true}})
		c.SetInputs(3, []Input{{Path: "/there", Movable: true}})
		return c, st
	}

	c, st := setup()
	if here := c.InputsAt([]int64{3}, rooted, now, queued); !here || len(st.reqs) != 0 {
		t.Fatalf("inputs there: %v, %d requests", here, len(st.reqs))
	}
	if here := c.InputsAt([]int64{1}, rooted, now, queued); here {
		t.Fatal("/in is not at rooted, yet here")
	}
	want := StageRequest{Path: "/in", To: rooted, From: []Place{Shared}, Size: 5, Job: 1, ModTime: time.Unix(0, 42)}
	if len(st.reqs) != 1 || !equalReq(st.reqs[0], want) {
		t.Fatalf("requests %+v, want one %+v", st.reqs, want)
	}
	if !c.Marked(1) || c.StagingTo(rooted) != 1 || c.StagingTo(Shared) != 0 {
		t.Errorf("job 1 not marked as staging to rooted (%d)", c.StagingTo(rooted))
	}
	// Another job wanting the same file there waits for the same transfer.
	if here := c.InputsAt([]int64{2}, rooted, now, func(int64) bool { return false }); here || len(st.reqs) != 1 {
		t.Errorf("job 2: here %v, %d requests", here, len(st.reqs))
	}
	if c.Marked(2) {
		t.Error("job 2 is not queued, yet marked")
	}
	// Elsewhere, job 1 is left to the place bringing its inputs.
	if here := c.InputsAt([]int64{1}, n1, now, queued); here || len(st.reqs) != 1 || !c.StagingElsewhere([]int64{1}, n1) {
		t.Errorf("job 1 at n1: here %v, %d requests", here, len(st.reqs))
	}
	if c.InputsPresent([]int64{1}, rooted) || !c.InputsPresent([]int64{1}, Shared) || !c.InputsPresent([]int64{3, 4}, rooted) {
		t.Error("InputsPresent disagrees with the replicas")
	}

	// A place left alone is asked nothing.
	c, st = setup()
	c.stg.down[rooted] = now.Add(time.Second)
	if here := c.InputsAt([]int64{1}, rooted, now, queued); here || len(st.reqs) != 0 {
		t.Errorf("down: here %v, %d requests", here, len(st.reqs))
	}
	if here := c.InputsAt([]int64{1}, rooted, now.Add(time.Second), queued); here || len(st.reqs) != 1 {
		t.Errorf("back: here %v, %d requests", here, len(st.reqs))
	}
	// A place that had no room is asked for no file, but a job whose
	// inputs are there already may run there.
	c, st = setup()
	c.stg.full[rooted] = now.Add(time.Second)
	if here := c.InputsAt([]int64{1}, rooted, now, queued); here || len(st.reqs) != 0 || c.Marked(1) {
		t.Errorf("full: here %v, %d requests", here, len(st.reqs))
	}
	if here := c.InputsAt([]int64{3}, rooted, now, queued); !here {
		t.Error("full: a job with its inputs there may not run")
	}
	if here := c.InputsAt([]int64{1}, rooted, now.Add(time.Second), queued); here || len(st.reqs) != 1 {
		t.Errorf("room again: here %v, %d requests", here, len(st.reqs))
	}
	// A file whose every replica is at a place left alone waits for it.
	c, st = setup()
	c.stg.down[Shared] = now.Add(time.Second)
	if here := c.InputsAt([]int64{2}, rooted, now, queued); here || len(st.reqs) != 0 || c.Marked(2) {
		t.Errorf("sources down: here %v, %d requests, marked %v", here, len(st.reqs), c.Marked(2))
	}

	if here := newTest(nil).InputsAt([]int64{1}, rooted, now, queued); !here {
		t.Errorf("without a stager every place has everything: %v", here)
	}
}

func equalReq(a, b StageRequest) bool {
	return a.Path == b.Path && a.To == b.To && slices.Equal(a.From, b.From) && a.Size == b.Size && a.SHA256 == b.SHA256 &&
		a.Job == b.Job && a.ModTime.Equal(b.ModTime)
}

func TestStagingMarks(t *testing.T) {
	st := &fakeStager{}
	c := newTest(st)
	c.files["/a"] = &file{reps: []Place{Shared}}
	c.files["/b"] = &file{reps: []Place{Shared}}
	c.SetInputs(1, []Input{{Path: "/a", Movable: true}, {Path: "/b", Movable: true}})
	now := time.Unix(1000, 0)
	if here := c.InputsAt([]int64{1}, rooted, now, func(int64) bool { return true }); here || len(st.reqs) != 2 {
		t.Fatalf("here %v, %d requests", here, len(st.reqs))
	}
	c.stageEnded(StageResult{Path: "/a", To: rooted}, now)
	if !c.Marked(1) {
		t.Error("one of two transfers ended: the mark went")
	}
	c.stageEnded(StageResult{Path: "/b", To: rooted}, now)
	if c.Marked(1) || len(c.stg.pending) != 0 || len(c.stg.inflight) != 0 {
		t.Errorf("both ended: marked %v, pending %v, in flight %d", c.Marked(1), c.stg.pending, len(c.stg.inflight))
	}
	c.RequestStage("/a", rooted, 1)
	c.JobEnded(1)
	if c.Marked(1) || c.stg.pending[1] != 0 {
		t.Error("an ended job keeps its staging state")
	}
}

func TestStageEnded(t *testing.T) {
	now := time.Unix(1000, 0)
	boom := errors.New("boom")
	for _, tc := range []struct {
		name     string
		results  []StageResult
		arrived  bool
		fail     []int64 // nil: none
		requests int     // in all, the first included
		downAt   []Place
		fullAt   []Place // taking no file for a minute, still a source
	}{
		{name: "copied", results: []StageResult{{}}, arrived: true, requests: 1},
		{name: "retried from the other replica, then copied",
			results: []StageResult{{From: Shared, Err: boom}, {From: n1}}, arrived: true, requests: 2},
		{name: "fails after MaxStageTries",
			results: slices.Repeat([]StageResult{{From: Shared, Err: boom}}, MaxStageTries), fail: []int64{1, 2}, requests: MaxStageTries},
		{name: "permanent", results: []StageResult{{From: Shared, Err: boom, Permanent: true}}, fail: []int64{1, 2}, requests: 1},
		{name: "destination unreachable: no failure counted",
			results: []StageResult{{From: Shared, Err: boom, Unreachable: []Place{rooted}}}, requests: 1, downAt: []Place{rooted}},
		{name: "every source unreachable",
			results: []StageResult{{From: Shared, Err: boom, Unreachable: []Place{Shared, n1}}}, requests: 1, downAt: []Place{Shared, n1}},
		{name: "destination full, again and again: never a failure counted",
			results: slices.Repeat([]StageResult{{From: Shared, Err: boom, Full: true, FullFor: time.Minute}}, MaxStageTries+1), requests: 1, fullAt: []Place{rooted}},
	} {
		st := &fakeStager{}
		c := newTest(st)
		c.files["/f"] = &file{size: 3, reps: []Place{Shared, n1}}
		if u := c.RequestStage("/f", rooted, 2); u != nil {
			t.Fatalf("%s: %+v", tc.name, u)
		}
		c.RequestStage("/f", rooted, 1)
		var out Outcome
		for _, r := range tc.results {
			r.Path, r.To, r.Job = "/f", rooted, 2
			out = c.stageEnded(r, now)
		}
		var fail []int64
		if out.Fail != nil {
			fail = out.Fail.Jobs
			if !strings.Contains(out.Fail.Reason, "input /f could not be staged to rooted: boom") {
				t.Errorf("%s: reason %q", tc.name, out.Fail.Reason)
			}
		}
		if out.Arrived != tc.arrived || !slices.Equal(fail, tc.fail) || len(st.reqs) != tc.requests {
			t.Errorf("%s: arrived %v, fail %v, %d requests; want %v, %v, %d", tc.name, out.Arrived, fail, len(st.reqs), tc.arrived, tc.fail, tc.requests)
		}
		if len(st.reqs) > 1 && st.reqs[1].From[0] != n1 {
			t.Errorf("%s: retried from %v, not the replica that did not fail first", tc.name, st.reqs[1].From)
		}
		for _, p := range tc.downAt {
			if !c.stg.isDown(p, now) || c.stg.isDown(p, now.Add(PlaceDownFor)) {
				t.Errorf("%s: %v not left alone for PlaceDownFor", tc.name, p)
			}
		}
		for _, p := range tc.fullAt {
			if !c.stg.isFull(p, now.Add(time.Minute-time.Second)) || c.stg.isFull(p, now.Add(time.Minute)) || c.stg.isDown(p, now) {
				t.Errorf("%s: %v not full for a minute, or left alone as a source", tc.name, p)
			}
		}
		if (tc.downAt != nil || tc.fullAt != nil) && (len(c.stg.inflight) != 0 || !out.Changed || out.Fail != nil) {
			t.Errorf("%s: transfer kept (%d) or jobs failed (%+v)", tc.name, len(c.stg.inflight), out.Fail)
		}
	}
	// A result for a transfer this run did not ask for changes nothing.
	c := newTest(&fakeStager{})
	if out := c.stageEnded(StageResult{Path: "/f", To: rooted, Err: boom}, now); out.Changed || out.Fail != nil || out.Arrived {
		t.Errorf("a result not asked for: %+v", out)
	}
}

// A transfer of a user's file recorded anew while it ran (edited and
// submitted again, or made by a job since) ends uncounted and is asked
// for once more; that one's end is the file's.
func TestStageEndedResubmitted(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		name string
		now  *file // the file's record once the first transfer runs
	}{
		{"edited", &file{size: 3, mtime: 6, reps: []Place{Shared}}},
		{"produced", &file{size: 3, producer: 9, reps: []Place{n1}}},
	} {
		st := &fakeStager{}
		c := newTest(st)
		c.files["/f"] = &file{size: 3, mtime: 5, reps: []Place{Shared}}
		c.RequestStage("/f", rooted, 1)
		c.files["/f"] = tc.now
		out := c.stageEnded(StageResult{Path: "/f", To: rooted, From: Shared, Job: 1}, now)
		if out.Arrived || out.Fail != nil || len(st.reqs) != 2 {
			t.Fatalf("%s: %+v, %d requests; want none arrived, none failed, the file asked for again", tc.name, out, len(st.reqs))
		}
		if want := tc.now.mtime; st.reqs[1].ModTime.IsZero() != (want == 0) || want != 0 && st.reqs[1].ModTime.UnixNano() != want {
			t.Errorf("%s: asked again with mtime %v; want %d", tc.name, st.reqs[1].ModTime, want)
		}
		out = c.stageEnded(StageResult{Path: "/f", To: rooted, From: st.reqs[1].From[0], Job: 1}, now)
		if !out.Arrived || len(st.reqs) != 2 {
			t.Errorf("%s: the second transfer: %+v, %d requests; want it arrived", tc.name, out, len(st.reqs))
		}
	}
}

func TestRequestStageNoReplica(t *testing.T) {
	st := &fakeStager{}
	c := newTest(st)
	c.files["/f"] = &file{size: -1}
	u := c.RequestStage("/f", rooted, 4)
	if u == nil || !slices.Equal(u.Jobs, []int64{4}) || !strings.Contains(u.Reason, "no replica of it is left") || len(st.reqs) != 0 {
		t.Errorf("no replica: %+v, %d requests", u, len(st.reqs))
	}
	if len(c.stg.inflight) != 0 || c.stg.pending[4] != 0 {
		t.Error("the failed transfer stays in flight")
	}
}

func TestPlaceString(t *testing.T) {
	for _, p := range []Place{Shared, rooted, n1} {
		if got := ParsePlace(p.String()); got != p {
			t.Errorf("ParsePlace(%q) = %v, want %v", p.String(), got, p)
		}
	}
}

func TestValidSHA(t *testing.T) {
	for h, want := range map[string]bool{
		strings.Repeat("0f", 32): true,
		strings.Repeat("0F", 32): false,
		strings.Repeat("0g", 32): false,
		strings.Repeat("0", 63):  false,
		"":                       false,
		strings.Repeat("ab", 33): false,
	} {
		if ValidSHA(h) != want {
			t.Errorf("ValidSHA(%q) = %v", h, !want)
		}
	}
}

func TestReady(t *testing.T) {
	now := time.Unix(1000, 0)
	queued := func(int64) bool { return true }
	st := &fakeStager{}
	c := newTest(st)
	for i := int64(1); i <= 3; i++ {
		path := "/in" + strconv.FormatInt(i, 10)
		c.files[path] = &file{reps: []Place{Shared}}
		c.SetInputs(i, []Input{{Path: path, Movable: true}})
	}
	c.files["/here"] = &file{reps: []Place{rooted}}
	c.SetInputs(4, []Input{{Path: "/here", Movable: true}})
	// One free slot: one job's inputs are brought; the next waits without
	// a request, unless its inputs are there already.
	if c.Ready([]int64{1}, rooted, 1, now, queued) || len(st.reqs) != 1 {
		t.Fatalf("job 1: %d requests", len(st.reqs))
	}
	if c.Ready([]int64{2}, rooted, 1, now, queued) || len(st.reqs) != 1 {
		t.Errorf("job 2 asked for beyond the free slots: %d requests", len(st.reqs))
	}
	if !c.Ready([]int64{4}, rooted, 1, now, queued) {
		t.Error("job 4's inputs are there, yet not ready")
	}
	// A marked job asks again (its transfers are in flight: no new one);
	// more free slots ask for more jobs.
	if c.Ready([]int64{1}, rooted, 1, now, queued) || len(st.reqs) != 1 {
		t.Errorf("job 1 again: %d requests", len(st.reqs))
	}
	if c.Ready([]int64{3}, rooted, 2, now, queued) || len(st.reqs) != 2 {
		t.Errorf("job 3 with 2 free slots: %d requests", len(st.reqs))
	}
}

func TestAddSums(t *testing.T) {
	c := newTest(nil)
	sha := strings.Repeat("c", 64)
	c.files["/sized"] = &file{size: 9, sha: sha}
	c.files["/unsized"] = &file{size: -1}
	in := []protocol.AssignedFile{{Path: "/sized", Size: 1}, {Path: "/unsized", Size: 2, SHA256: "x"}, {Path: "/unknown", Size: 3}}
	c.AddSums(in)
	want := []protocol.AssignedFile{{Path: "/sized", Size: 9, SHA256: sha}, {Path: "/unsized", Size: 2}, {Path: "/unknown", Size: 3}}
	if !slices.Equal(in, want) {
		t.Errorf("AddSums: %+v, want %+v", in, want)
	}
}
