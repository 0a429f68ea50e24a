package metaqueue

import (
	"context"
	"slices"
	"testing"

	"github.com/mq-hpc/mq/internal/metaqueue/catalog"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// addNodeLocal adds a site whose nodes share no filesystem.
func addNodeLocal(t *testing.T, e *env, name string) {
	t.Helper()
	if err := e.s.AddSite(context.Background(), protocol.SiteSpec{Name: name, Type: "slurm", NodeLocal: true}); err != nil {
		t.Fatal(err)
	}
}

// TestStagingPerHost: at a site whose nodes share no filesystem an output
// is a replica on the host that made it; a dependent job asked for by a
// placeholder on another host of that site is staged to that host (from
// the first), while the producer's host has it already; the replicas and
// the request name hosts, and they survive a reopen.
func TestStagingPerHost(t *testing.T) {
	t.Parallel()
	e, st := newStagingEnv(t)
	addNodeLocal(t, e, "nodes")
	out := protocol.File{Path: "/w/mid.dat", Rel: true}
	p := e.submit(withFiles("p", "x", nil, []protocol.File{out}))[0]
	n1 := e.registerAt("nodes", "n1")
	got := e.next(n1, 1)
	if len(got) != 1 || got[0].ID != p {
		t.Fatalf("n1 got %v", ids(got))
	}
	rep := ok(got[0])
	rep.Outputs = []protocol.FileSum{{Path: out.Path, Size: 42, SHA256: sumA}}
	e.report(n1, rep)
	if reps := e.job(p).Outputs[0].Replicas; len(reps) != 1 || reps[0].Site != "nodes" || reps[0].Host != "n1" {
		t.Fatalf("output replicas %+v, want one at nodes:n1", reps)
	}

	c1 := e.submit(withFiles("c1", "y", []protocol.File{out}, nil))[0]
	c2 := e.submit(withFiles("c2", "y", []protocol.File{out}, nil))[0]
	n2 := e.registerAt("nodes", "n2")
	if got := e.next(n2, 1); len(got) != 0 {
		t.Fatalf("n2 got %v though the input is on n1 only", ids(got))
	}
	reqs := st.requests()
	if len(reqs) != 1 || reqs[0].To != (catalog.Place{Site: "nodes", Host: "n2"}) || !slices.Equal(reqs[0].From, []catalog.Place{{Site: "nodes", Host: "n1"}}) {
		t.Fatalf("requests %+v, want one to nodes:n2 from nodes:n1", reqs)
	}
	e.staged(reqs[0], reqs[0].From[0], nil, false)
	waitFor(t, func() bool { got := e.next(n2, 2); return len(got) == 2 && got[0].ID == c1 })
	e.mustBe(c1, job.Executing)
	e.mustBe(c2, job.Executing)
	d := e.job(c1)
	if len(d.Transfers) != 1 || d.Transfers[0].From != "nodes:n1" || d.Transfers[0].To != "nodes:n2" || d.Transfers[0].Via != "sftp>agent" {
		t.Fatalf("transfers %+v", d.Transfers)
	}

	// A third host needs its own copy, from either of the two.
	c3 := e.submit(withFiles("c3", "y", []protocol.File{out}, nil))[0]
	n3 := e.registerAt("nodes", "n3")
	if got := e.next(n3, 1); len(got) != 0 {
		t.Fatalf("n3 got %v", ids(got))
	}
	reqs = st.requests()
	last := reqs[len(reqs)-1]
	if last.To != (catalog.Place{Site: "nodes", Host: "n3"}) || len(last.From) != 2 || !slices.Contains(last.From, catalog.Place{Site: "nodes", Host: "n2"}) {
		t.Fatalf("request %+v, want to nodes:n3 from n1 and n2", last)
	}
	_ = c3

	// A reopened store knows the site keeps files per host.
	e.reopen()
	err := e.s.do(context.Background(), func() error {
		if !e.s.data.NodeLocal("nodes") {
			t.Error("after a reopen nodes is not per host")
		}
		if c := e.s.cat; !c.Present(out.Path, catalog.Place{Site: "nodes", Host: "n2"}) || c.Present(out.Path, catalog.Place{Site: "nodes", Host: "n3"}) || c.Present(out.Path, catalog.Place{Site: "nodes"}) {
			r, _ := catalog.Holding(context.Background(), e.s.ReadDB(), out.Path)
			t.Errorf("after a reopen the replicas are %+v", r)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// files.add at such a site needs the host.
	if _, err := e.s.Catalog().AddReplica(context.Background(), "/w/other", catalog.Place{Site: "nodes"}, 1, ""); err == nil {
		t.Fatal("AddReplica at a per-host site without a host succeeded")
	}
}

// TestDCPricesPerHost: DC prices an input by whether it is on the asking
// placeholder's host: at a site whose nodes share no filesystem, data on
// another host of the same site costs a transfer, a copy staged to this
// host costs nothing; and of two jobs DC gives each host the one whose
// data it holds.
func TestDCPricesPerHost(t *testing.T) {
	t.Parallel()
	e, _ := newStagingEnv(t)
	addNodeLocal(t, e, "nodes")
	e.setPolicy("dq", "dc")
	const size = 64 << 20
	f1, f2 := "/w/in1", "/w/in2"
	probe := e.submit(withFiles("probe", "x", []protocol.File{{Path: f1, Size: sz(size), Rel: true}}, nil))[0]
	for _, r := range []struct {
		path, host string
	}{{f1, "n1"}, {f2, "n2"}} {
		if _, err := e.s.Catalog().AddReplica(context.Background(), r.path, catalog.Place{Site: "nodes", Host: r.host}, size, ""); err != nil {
			t.Fatal(err)
		}
	}
	n1 := e.registerAt("nodes", "n1")
	n2 := e.registerAt("nodes", "n2")
	price := func(ph, id int64) []policy.Input {
		var ins []policy.Input
		e.s.do(context.Background(), func() error {
			cur, _, _ := e.s.phPlaces(ph)
			here, _ := e.s.storePlace(ph)
			ins = e.s.inputs(nil, []int64{id}, cur, here)
			for i := range ins {
				if ins[i].Site == cur {
					ins[i].Site = -1 // here
				}
			}
			return nil
		})
		return ins
	}
	if in := price(n1, probe); len(in) != 1 || in[0].Site != -1 || in[0].Bytes != size {
		t.Fatalf("probe at n1 priced %+v, want its input here", in)
	}
	if in := price(n2, probe); len(in) != 1 || in[0].Site == -1 {
		t.Fatalf("j1 at n2 priced %+v, want its input elsewhere", in)
	}
	if _, err := e.s.Delete(context.Background(), protocol.Select{IDs: []int64{probe}}); err != nil {
		t.Fatal(err)
	}
	// Both hosts ask at once, each is given the job whose data it holds
	// (FCFS would give the first to ask the older j1).
	for range 3 {
		e.submit(withFiles("x", "x", nil, nil)) // priced nothing: taken first
	}
	e.next(n1, 1)
	e.next(n2, 1)
	e.next(n1, 1)
	type given struct {
		ph   int64
		jobs []protocol.Assignment
	}
	got := make(chan given, 2)
	for _, ph := range []int64{n2, n1} {
		go func() {
			r, err := e.s.Next(context.Background(), protocol.Next{Placeholder: ph, Free: 1, WaitMS: 20000})
			if err != nil {
				t.Error(err)
			}
			got <- given{ph, r.Jobs}
		}()
	}
	e.parkedAtLeast(2, 0)
	j1 := e.submit(withFiles("j1", "x", []protocol.File{{Path: f1, Size: sz(size), Rel: true}}, nil))[0]
	j2 := e.submit(withFiles("j2", "x", []protocol.File{{Path: f2, Size: sz(size), Rel: true}}, nil))[0]
	for range 2 {
		g := <-got
		a := g.jobs
		if len(a) != 1 {
			t.Fatalf("a host got %v", ids(a))
		}
		e.s.do(context.Background(), func() error {
			at, _, _ := e.s.phPlaces(g.ph)
			want := map[int64]string{j1: "n1", j2: "n2"}[a[0].ID]
			if host := e.s.data.SiteAt(at).Host; host != want {
				t.Errorf("job %d went to %s, want %s where its data is", a[0].ID, host, want)
			}
			return nil
		})
	}
	// A copy on n2 prices j1's input there.
	if _, err := e.s.Catalog().AddReplica(context.Background(), f1, catalog.Place{Site: "nodes", Host: "n2"}, size, ""); err != nil {
		t.Fatal(err)
	}
	if in := price(n2, j1); len(in) != 1 || in[0].Site != -1 {
		t.Fatalf("j1 at n2 with a copy there priced %+v, want its input here", in)
	}
}

// TestStagingFCFSBoundedByFree: an FCFS queue brings inputs to the asking
// placeholder's place for no more jobs than it has free slots, so the
// jobs it cannot take stay free for a place holding their data, which
// runs them without any transfer.
func TestStagingFCFSBoundedByFree(t *testing.T) {
	t.Parallel()
	e, st := newStagingEnv(t)
	var jobs []int64
	for i := range 4 {
		p := "/w/db/f" + string(rune('0'+i))
		jobs = append(jobs, e.submit(withFiles("j"+string(rune('0'+i)), "x", []protocol.File{{Path: p, Size: sz(1 << 20), Rel: true}}, nil))[0])
		if _, err := e.s.Catalog().AddReplica(context.Background(), p, catalog.Place{Site: "siteA"}, 1<<20, ""); err != nil {
			t.Fatal(err)
		}
	}
	b := e.registerAt("siteB", "b1")
	if got := e.next(b, 1); len(got) != 0 {
		t.Fatalf("siteB got %v", ids(got))
	}
	if reqs := st.requests(); len(reqs) != 1 || reqs[0].To != (catalog.Place{Site: "siteB"}) {
		t.Fatalf("requests %+v, want one, for siteB's one free slot", reqs)
	}
	a := e.registerAt("siteA", "a1")
	got := e.next(a, 4)
	if !slices.Equal(ids(got), jobs[1:]) {
		t.Fatalf("siteA got %v, want %v (all but the one staging to siteB)", ids(got), jobs[1:])
	}
	if n := len(st.requests()); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
}

// TestArrivalsKeepBusyPlaceholders: a placeholder running a job longer
// than a lease (heartbeating) stays in DC's arrival predictions; one that
// neither asks nor runs anything for a lease is forgotten.
func TestArrivalsKeepBusyPlaceholders(t *testing.T) {
	t.Parallel()
	e, _ := newStagingEnv(t)
	e.setPolicy("dq", "dc")
	busy, gone := e.registerAt("siteA", "a1"), e.registerAt("siteB", "b1")
	e.next(busy, 1)
	e.next(gone, 1)
	e.next(gone, 1)
	id := e.submit(withFiles("long", "x", nil, nil))[0]
	got := e.next(busy, 1)
	if len(got) != 1 || got[0].ID != id {
		t.Fatalf("busy got %v", ids(got))
	}
	for range 3 {
		e.clock.Advance(testLease / 2)
		if _, err := e.s.Heartbeat(context.Background(), protocol.Heartbeat{Placeholder: busy, Running: []protocol.JobRef{{ID: id, Attempt: got[0].Attempt}}}); err != nil {
			t.Fatal(err)
		}
		e.tick()
	}
	e.s.do(context.Background(), func() error {
		if !e.s.data.Asking(busy) {
			t.Error("a placeholder running a job was dropped from the arrival predictions")
		}
		if e.s.data.Asking(gone) {
			t.Error("a placeholder silent and idle for a lease is still predicted")
		}
		return nil
	})
}
