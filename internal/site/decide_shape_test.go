package site

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue"
	"github.com/mq-hpc/mq/internal/metaqueue/packing"
	"github.com/mq-hpc/mq/internal/resource"
	"github.com/mq-hpc/mq/internal/site/batch"
	"github.com/mq-hpc/mq/protocol"
)

// needOf is k jobs of request r measured against shape.
func needOf(shape resource.Capacity, k int, r resource.Request) packing.Need {
	var n packing.Need
	for range k {
		n.Add(shape, r)
	}
	return n
}

// TestDecideShaped: jobs that ask for more than a slot are provisioned by
// what their requests need of the site's shape, not by Slots; jobs of one
// slot as before.
func TestDecideShaped(t *testing.T) {
	const gib = int64(1) << 30
	cores16 := resource.Capacity{CPUs: 16}
	fat := resource.Capacity{CPUs: 16, Mem: 64 * gib}
	eight := resource.Request{CPUs: 8}
	for _, tc := range []struct {
		name string
		c    Counts
		want Decision
	}{
		{"8-core jobs: two per 16-core placeholder", Counts{Ready: 100, ReadyNeed: needOf(cores16, 100, eight), Max: 60, Slots: 16}, Decision{Submit: 50}},
		{"8-core jobs: max caps", Counts{Ready: 100, ReadyNeed: needOf(cores16, 100, eight), Max: 8, Slots: 16}, Decision{Submit: 8}},
		{"one-slot jobs measured: jobs over slots", Counts{Ready: 100, ReadyNeed: needOf(cores16, 100, resource.Request{}), Max: 60, Slots: 16}, Decision{Submit: 7}},
		{"memory decides", Counts{Ready: 10, ReadyNeed: needOf(fat, 10, resource.Request{Mem: 32 * gib}), Max: 60, Slots: 16}, Decision{Submit: 5}},
		{"wide jobs: one each", Counts{Ready: 10, ReadyNeed: needOf(cores16, 10, resource.Request{CPUs: 9}), Max: 60, Slots: 16}, Decision{Submit: 10}},
		{"shape holds none: no ready work", Counts{Ready: 0, ReadyNeed: needOf(resource.Capacity{CPUs: 2}, 7, resource.Request{CPUs: 4}), Max: 10, Slots: 2}, Decision{}},
		{"shape holds none: queued cancelled", Counts{Ready: 0, Queued: 3, Max: 10, Slots: 2}, Decision{Cancel: 3}},
		{"running jobs count by their requests", Counts{Ready: 4, ReadyNeed: needOf(cores16, 4, eight), Running: 2, Executing: 4, ExecutingNeed: needOf(cores16, 4, eight), Max: 60, Slots: 16}, Decision{Submit: 2}},
		{"running one-core jobs beside shaped ready work", Counts{Ready: 4, ReadyNeed: needOf(cores16, 4, eight), Running: 1, Executing: 16, ExecutingNeed: needOf(cores16, 16, resource.Request{}), Max: 60, Slots: 16}, Decision{Submit: 2}},
		{"others take a share", Counts{Ready: 100, ReadyNeed: needOf(cores16, 100, eight), Elsewhere: 40, Max: 60, Slots: 16}, Decision{Submit: 30}},
		{"others take all", Counts{Ready: 100, ReadyNeed: needOf(cores16, 100, eight), Elsewhere: 100, Queued: 2, Max: 60, Slots: 16}, Decision{Cancel: 2}},
		{"min applies", Counts{Ready: 1, ReadyNeed: needOf(cores16, 1, eight), Min: 3, Max: 60, Slots: 16}, Decision{Submit: 3}},
		{"surplus queued cancelled", Counts{Ready: 4, ReadyNeed: needOf(cores16, 4, eight), Queued: 5, Max: 60, Slots: 16}, Decision{Cancel: 3}},
		{"steady keeps its count", Counts{Ready: 100, ReadyNeed: needOf(cores16, 100, eight), Running: 4, Min: 4, Max: 4, Slots: 16, Steady: true}, Decision{}},
	} {
		if got := Decide(tc.c); got != tc.want {
			t.Errorf("%s: Decide = %+v, want %+v", tc.name, got, tc.want)
		}
	}
	// Jobs of one slot measured against the shape decide as when only
	// counted, whatever the counts.
	for ready := 0; ready <= 40; ready += 3 {
		for slots := 1; slots <= 8; slots++ {
			for exec := 0; exec <= 9; exec += 4 {
				shape := resource.Capacity{CPUs: slots}
				counted := Counts{Ready: ready, Executing: exec, Running: 1, Elsewhere: ready / 3, Max: 9, Slots: slots}
				measured := counted
				measured.ReadyNeed = needOf(shape, ready, resource.Request{})
				measured.ExecutingNeed = needOf(shape, exec, resource.Request{})
				if a, b := Decide(counted), Decide(measured); a != b {
					t.Errorf("ready %d, slots %d, executing %d: counted %+v, measured %+v", ready, slots, exec, a, b)
				}
				if a, b := supplyOf(counted), supplyOf(measured); a != b {
					t.Errorf("ready %d, slots %d, executing %d: supply counted %d, measured %d", ready, slots, exec, a, b)
				}
			}
		}
	}
}

// TestSupplyOfShaped: a running placeholder's free worth takes as many
// ready jobs as the ready jobs' own count per placeholder's worth.
func TestSupplyOfShaped(t *testing.T) {
	cores16 := resource.Capacity{CPUs: 16}
	eight := resource.Request{CPUs: 8}
	for _, tc := range []struct {
		name string
		c    Counts
		want int
	}{
		{"two idle placeholders: four 8-core jobs", Counts{Ready: 100, ReadyNeed: needOf(cores16, 100, eight), Running: 2, Slots: 16}, 4},
		{"one busy, one half", Counts{Ready: 100, ReadyNeed: needOf(cores16, 100, eight), Running: 2, ExecutingNeed: needOf(cores16, 3, eight), Slots: 16}, 1},
		{"all busy", Counts{Ready: 100, ReadyNeed: needOf(cores16, 100, eight), Running: 2, ExecutingNeed: needOf(cores16, 4, eight), Slots: 16}, 0},
		{"no more than the ready jobs", Counts{Ready: 3, ReadyNeed: needOf(cores16, 3, eight), Running: 8, Slots: 16}, 3},
		{"none ready", Counts{ExecutingNeed: needOf(cores16, 1, eight), Running: 8, Slots: 16}, 0},
	} {
		if got := supplyOf(tc.c); got != tc.want {
			t.Errorf("%s: supplyOf = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestManagerShapedDemand, through the metaqueue: a site of 16-core
// placeholders with 100 ready 8-core jobs asks for 50 (capped by its
// max), not 100 over its slots; a site of 2-core placeholders, which can
// hold none of them, asks for none.
func TestManagerShapedDemand(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := metaqueue.Open(ctx, metaqueue.Options{Path: filepath.Join(t.TempDir(), "mq.db"), Sync: metaqueue.SyncNormal})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	specs := make([]protocol.JobSpec, 100)
	for i := range specs {
		specs[i] = protocol.JobSpec{Target: "t", Command: "true", Resources: protocol.Resources{CPUs: 8}}
	}
	if _, err := st.Submit(ctx, specs); err != nil {
		t.Fatal(err)
	}

	sites := map[string]*fakeSite{}
	for _, name := range []string{"big", "capped", "small"} {
		sites[name] = &fakeSite{jobs: map[string]batch.State{}}
	}
	sites["small"].jobs["earlier"] = batch.Queued
	m := &Manager{Store: st, Poll: 5 * time.Millisecond,
		Open: func(spec protocol.SiteSpec, _ func(int)) (Site, error) { return sites[spec.Name], nil }}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	for _, spec := range []protocol.SiteSpec{
		{Name: "big", Type: Slurm, SSH: "u@h", Slots: 16, Max: 60},
		{Name: "capped", Type: Slurm, SSH: "u@h", Slots: 16, Max: 30},
		{Name: "small", Type: Slurm, SSH: "u@h", Slots: 2, Max: 10},
	} {
		if _, err := m.Add(ctx, spec); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "big: 50 queued", func() bool { return sites["big"].count(batch.Queued) == 50 })
	eventually(t, "capped: 30 queued", func() bool { return sites["capped"].count(batch.Queued) == 30 })
	// The small site's placeholder left queued by an earlier CLS is
	// cancelled: Decide wanted none (wanting any, it would have kept it
	// and submitted the rest).
	eventually(t, "small: its queued placeholder cancelled", func() bool { return sites["small"].count(batch.Queued) == 0 })
	sites["small"].mu.Lock()
	if n := sites["small"].next; n != 0 {
		t.Errorf("small: %d placeholders submitted", n)
	}
	sites["small"].mu.Unlock()
	for name, want := range map[string]int{"big": 50, "capped": 30, "small": 0} {
		if got := sites[name].count(batch.Queued); got != want {
			t.Errorf("%s: %d placeholders queued, want %d", name, got, want)
		}
	}
}
