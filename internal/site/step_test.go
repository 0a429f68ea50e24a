package site

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/internal/site/batch"
)

// TestObserveListing: a listing brings the site's placeholders up to date
// (a queued one seen running starts now and its wait is kept; one an
// earlier CLS submitted is adopted), forgets those gone or exited, and
// names those in the error state.
func TestObserveListing(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := t0.Add(time.Minute)
	ms := &managed{
		known: map[string]*tracked{
			"queued": {state: batch.Queued, submitted: t0, connects: 1},
			// Registered (the site's one registration so far).
			"gone": {state: batch.Running, submitted: t0, started: t0},
			// Submitted by this run after that, and ended before any
			// registration: one never seen running, one seen running.
			"died":  {state: batch.Queued, submitted: t0, connects: 1},
			"brief": {state: batch.Running, submitted: t0, started: t0, connects: 1},
		},
		batch:    map[string]bool{"gone": true},
		connects: 1,
	}
	var m Manager
	broken, vanished := m.observeLocked(ms, []batch.Placeholder{
		{ID: "queued", State: batch.Running},
		{ID: "earlier", State: batch.Queued},
		{ID: "bad", State: batch.Error},
	}, now)
	if len(broken) != 1 || broken[0] != "bad" {
		t.Errorf("broken %v, want [bad]", broken)
	}
	// "gone" connected (by its batch id); "earlier" and "bad" are not
	// this run's or erred.
	slices.Sort(vanished)
	if !slices.Equal(vanished, []string{"brief", "died"}) {
		t.Errorf("vanished %v, want [brief died]", vanished)
	}
	if q := ms.known["queued"]; q == nil || q.state != batch.Running || !q.started.Equal(now) {
		t.Errorf("queued placeholder seen running: %+v, want running since %v", q, now)
	}
	if len(ms.waits) != 1 || ms.waits[0] != time.Minute {
		t.Errorf("waits %v, want [1m0s]", ms.waits)
	}
	if e := ms.known["earlier"]; e == nil || e.state != batch.Queued || !e.submitted.Equal(now) {
		t.Errorf("an earlier CLS's placeholder: %+v, want queued, submitted now", e)
	}
	for _, id := range []string{"gone", "bad", "died", "brief"} {
		if _, ok := ms.known[id]; ok {
			t.Errorf("%s still known", id)
		}
	}
	if ms.batch["gone"] || ms.exited != 4 {
		t.Errorf("batch %v, exited %d; want gone forgotten and 4 exited", ms.batch, ms.exited)
	}
}

// TestDemandOf: a queue's demand gives each site its measured rate for
// the queue, its busy slots and its link, on a copy of the sites.
func TestDemandOf(t *testing.T) {
	sites := []policy.SiteView{{Name: "a", Slots: 4}, {Name: "b", Slots: 2}}
	q := policy.EconQueue{Ready: 7, PerJob: map[string]float64{"a": 10}, Busy: map[string]int{"b": 1}}
	d := demandOf(q, sites, map[string]float64{"a": 1e6})
	if d.Ready != 7 || len(d.Sites) != 2 {
		t.Fatalf("demand %+v", d)
	}
	if a := d.Sites[0]; a.Rate != 0.4 || a.Busy != 0 || a.Link != 1e6 {
		t.Errorf("site a: %+v, want rate 0.4 jobs/s, link 1e6", a)
	}
	if b := d.Sites[1]; b.Rate != 0 || b.Busy != 1 || b.Link != 0 {
		t.Errorf("site b: %+v, want no rate, 1 busy", b)
	}
	if sites[0].Rate != 0 || sites[1].Busy != 0 {
		t.Errorf("the sites given were changed: %+v", sites)
	}
	if d := demandOf(q, sites, nil); d.Sites[0].Link != 0 {
		t.Errorf("no links: site a's link %v", d.Sites[0].Link)
	}
}

// TestObserveForgetsStrayBatch: a batch id a placeholder registered with
// is kept while it is one of the site's placeholders or connected now,
// and forgotten otherwise: a holder of the site's key registering under a
// new batch id each time does not grow the manager's memory without end.
func TestObserveForgetsStrayBatch(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ms := &managed{
		known:     map[string]*tracked{"run": {state: batch.Running, submitted: now, started: now}},
		batch:     map[string]bool{"run": true, "live": true},
		connBatch: map[int64]string{5: "live"},
	}
	for i := range 1000 {
		ms.batch["stray-"+strconv.Itoa(i)] = true // registered and gone
	}
	var m Manager
	m.observeLocked(ms, []batch.Placeholder{{ID: "run", State: batch.Running}}, now)
	if len(ms.batch) != 2 || !ms.batch["run"] || !ms.batch["live"] {
		t.Errorf("batch ids kept: %d (run %v, live %v), want run and live alone", len(ms.batch), ms.batch["run"], ms.batch["live"])
	}
}
