package metaqueue

import (
	"context"
	"errors"
	"testing"

	"github.com/mq-hpc/mq/internal/metaqueue/catalog"
	"github.com/mq-hpc/mq/protocol"
)

func TestSitesStoredAcrossRestart(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a := protocol.SiteSpec{Name: "a", Type: "sge", SSH: "u@h", Min: 1, Max: 4, Walltime: 3600, Slots: 2, Idle: 60}
	if err := e.s.AddSite(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := e.s.AddSite(ctx, a); !protocol.IsCode(err, protocol.CodeBadRequest) {
		t.Fatalf("adding a site twice: %v, want bad_request", err)
	}
	if err := e.s.AddSite(ctx, protocol.SiteSpec{Name: "b", Type: "local", Max: 1}); err != nil {
		t.Fatal(err)
	}
	e.reopen()
	got, err := e.s.Sites(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != a || got[1].Name != "b" {
		t.Fatalf("Sites after restart = %+v", got)
	}
	if err := e.s.RemoveSite(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := e.s.RemoveSite(ctx, "a"); !protocol.IsCode(err, protocol.CodeNotFound) {
		t.Fatalf("removing a removed site: %v, want not_found", err)
	}
	if got, _ := e.s.Sites(ctx); len(got) != 1 || got[0].Name != "b" {
		t.Fatalf("Sites after remove = %+v", got)
	}
}

func TestSiteDemand(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ceil := 100.0
	if _, err := e.s.SetQueue(ctx, protocol.QueueSet{Name: "capped", Ceiling: &ceil}); err != nil {
		t.Fatal(err)
	}
	e.submit(
		protocol.JobSpec{Target: "a", Command: "x", Est: 10},
		protocol.JobSpec{Target: "b", Command: "x", Est: 500},
		protocol.JobSpec{Target: "c", Command: "x"},                         // no estimate, no ceiling: fits anything
		protocol.JobSpec{Target: "d", Command: "x", Queue: "capped"},        // the ceiling (100) counts
		protocol.JobSpec{Target: "e", Command: "x", Prereqs: []string{"a"}}, // waiting: not ready
	)
	for _, tc := range []struct {
		walltime float64
		limit    int
		want     int
	}{
		{0, 100, 4},   // no walltime: every ready job
		{50, 100, 2},  // est 10 and the unestimated one
		{200, 100, 3}, // plus the capped queue's job
		{1000, 100, 4},
		{1000, 2, 2}, // counting stops at the limit
	} {
		ready, exec, err := e.s.SiteDemand(ctx, tc.walltime, nil, tc.limit)
		if err != nil || ready != tc.want || exec != 0 {
			t.Errorf("SiteDemand(walltime %g, limit %d) = %d, %d, %v; want %d ready", tc.walltime, tc.limit, ready, exec, err, tc.want)
		}
	}
	ph := e.register("s")
	other := e.register("t")
	if got := e.next(ph, 2); len(got) != 2 {
		t.Fatalf("dispatched %d", len(got))
	}
	e.next(other, 1)
	ready, exec, err := e.s.SiteDemand(ctx, 0, []int64{ph}, 100)
	if err != nil || ready != 1 || exec != 2 {
		t.Fatalf("after dispatch: ready %d, executing %d (%v); want 1 ready, 2 executing on the site's placeholder", ready, exec, err)
	}
}

// TestRemovedSitePlaceholdersIdle: the placeholders of a site removed get
// no more work, also after a reconnection with their ids, while their
// batch system has yet to end them. Its name, configured no more, passed
// for a site sharing the CLS host's filesystem: one was handed a job
// whose input had never been brought there. A placeholder registering
// at a site of that name later is a new one, and works.
func TestRemovedSitePlaceholdersIdle(t *testing.T) {
	t.Parallel()
	e, st := newStagingEnv(t)
	ctx := context.Background()
	old := e.registerAt("siteA", "h")
	e.submit(withFiles("a", "x", []protocol.File{userIn("/w/in", 10)}, nil), spec("b", "y"))
	if got := e.next(old, 1); len(got) != 1 || got[0].ID != 2 {
		t.Fatalf("siteA's placeholder got %v; want job 2 (no files) while job 1's input is brought", ids(got))
	}
	reqs := st.requests()
	if len(reqs) != 1 || reqs[0].To.Site != "siteA" {
		t.Fatalf("requests %+v; want job 1's input to siteA", reqs)
	}
	if err := e.s.RemoveSite(ctx, "siteA"); err != nil {
		t.Fatal(err)
	}
	// The transfer ends cut off with the site's connection.
	r := reqs[0]
	if err := e.s.Catalog().Staged(ctx, catalog.StageResult{Path: r.Path, To: r.To, From: r.From[0], Started: e.clock.Now(), Job: r.Job,
		Err: errors.New("connection lost"), Unreachable: []catalog.Place{r.To}}); err != nil {
		t.Fatal(err)
	}
	if got := e.next(old, 4); len(got) != 0 {
		t.Fatalf("a placeholder of the removed site got %v", ids(got))
	}
	if r, err := e.s.Register(ctx, protocol.Register{ID: old, Site: "siteA", Host: "h", PID: 1, Slots: 1, OutDir: "/out"}); err != nil || r.ID != old {
		t.Fatalf("reconnecting: %+v %v", r, err)
	} else if got := e.next(old, 4); len(got) != 0 {
		t.Fatalf("a placeholder of the removed site, reconnected, got %v", ids(got))
	}
	e.submit(spec("c", "z"))
	if got := e.next(e.registerAt("siteA", "h2"), 4); len(got) != 2 {
		t.Fatalf("a new placeholder at a site named siteA got %v; want jobs 1 and 3", ids(got))
	}
}
