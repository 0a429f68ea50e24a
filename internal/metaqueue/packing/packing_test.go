package packing

import (
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/resource"
)

const gib = int64(1) << 30

// TestPacked: a placeholder of 16 cores and 64 GiB runs one 8-core 30 GiB
// job beside eight 1-core jobs, and no ninth; a job's end frees its share.
func TestPacked(t *testing.T) {
	p := New()
	if err := p.Placeholder(1, resource.Capacity{CPUs: 16, Mem: 64 * gib}); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	p.Job(100, resource.Request{CPUs: 8, Mem: 30 * gib}, resource.Category{})
	if !p.Fits(100, 1, now) {
		t.Fatal("the 8-core job does not fit an empty placeholder")
	}
	if _, ok := p.Start(Run{100, 1}, 1); !ok {
		t.Fatal("Start refused")
	}
	for id := int64(1); id <= 8; id++ {
		if !p.Fits(id, 1, now) {
			t.Fatalf("1-core job %d does not fit", id)
		}
		p.Start(Run{id, 1}, 1)
	}
	if p.Fits(9, 1, now) {
		t.Error("a ninth 1-core job fits a full placeholder")
	}
	p.Stop(Run{3, 1})
	p.Stop(Run{3, 1}) // twice: nothing more
	if !p.Fits(9, 1, now) {
		t.Error("a job's end did not free its core")
	}
	if free, _ := p.Free(1); free.CPUs != 1 || free.Mem != 34*gib {
		t.Errorf("free %v, want 1 core and 34 GiB", free)
	}
}

func TestSlotsWithoutPool(t *testing.T) {
	p := New()
	p.Job(2, resource.Request{CPUs: 4}, resource.Category{})
	for _, tc := range []struct {
		id   int64
		want bool
	}{{1, true}, {2, false}} {
		if got := p.Fits(tc.id, 7, time.Time{}); got != tc.want {
			t.Errorf("job %d on a placeholder with no pool: fits %v, want %v", tc.id, got, tc.want)
		}
	}
	if g, ok := p.Start(Run{1, 1}, 7); !ok || g.CPUs != 0 {
		t.Errorf("a slot job's start: %+v, %v", g, ok)
	}
}

// TestStarvationReserves: a 4-core job behind an endless stream of 1-core
// jobs gets the placeholder once it has waited StarveAfter; meanwhile only
// jobs that leave its need free are let in.
func TestStarvationReserves(t *testing.T) {
	p := New()
	p.StarveAfter = time.Minute
	p.Placeholder(1, resource.Capacity{CPUs: 4})
	t0 := time.Unix(0, 0)
	big := int64(1000)
	p.Job(big, resource.Request{CPUs: 4}, resource.Category{})
	next := int64(1)
	running := []Run{}
	startSmall := func(now time.Time) bool {
		if !p.Fits(next, 1, now) {
			return false
		}
		ru := Run{next, 1}
		p.Start(ru, 1)
		running = append(running, ru)
		next++
		return true
	}
	for i := 0; i < 4; i++ {
		startSmall(t0)
	}
	started := false
	for step := 0; step < 100 && !started; step++ {
		now := t0.Add(time.Duration(step) * 10 * time.Second)
		// One small job ends; the big one asks first, then a small one.
		p.Stop(running[0])
		running = running[1:]
		if p.Fits(big, 1, now) {
			p.Start(Run{big, 1}, 1)
			started = true
			if now.Sub(t0) > 2*time.Minute {
				t.Errorf("the big job started after %v; want about the bound", now.Sub(t0))
			}
			break
		}
		startSmall(now)
	}
	if !started {
		t.Fatal("the big job never started: starved")
	}
	if len(p.holds) != 0 {
		t.Errorf("reservation kept after the big job started: %v", p.holds)
	}
}

func TestWhy(t *testing.T) {
	p := New()
	p.Job(1, resource.Request{GPUs: 4}, resource.Category{})
	if why := p.Why(1); why != "" {
		t.Errorf("with nothing known: %q, want none (a site may be added)", why)
	}
	p.Placeholder(1, resource.Capacity{CPUs: 8, Mem: 16 * gib, GPUIDs: []string{"0", "1"}})
	p.site("gpu", resource.Capacity{CPUs: 4, Mem: 8 * gib, GPUIDs: []string{"0"}})
	for _, tc := range []struct {
		r    resource.Request
		want string
	}{
		{resource.Request{GPUs: 4}, "needs 4 GPUs; the largest placeholder or site holds 2"},
		{resource.Request{CPUs: 32}, "needs 32 cores; the largest placeholder or site holds 8"},
		{resource.Request{Mem: 20 * gib}, "needs 20 GiB of memory; the largest placeholder or site holds 16 GiB"},
		{resource.Request{Named: map[string]int{"matlab": 1}}, "needs matlab=1; the most any placeholder or site holds is 0"},
		{resource.Request{CPUs: 8, GPUs: 2}, ""},
		{resource.Request{}, ""},
	} {
		p.Job(2, tc.r, resource.Category{})
		if got := p.Why(2); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.r, got, tc.want)
		}
	}
}

func TestCapacityChangeWhileRunning(t *testing.T) {
	p := New()
	p.Placeholder(1, resource.Capacity{CPUs: 2})
	p.Start(Run{1, 1}, 1)
	if err := p.Placeholder(1, resource.Capacity{CPUs: 4}); err == nil {
		t.Error("capacity changed under a running job")
	}
	if err := p.Placeholder(2, resource.Capacity{CPUs: 0}); err == nil {
		t.Error("a capacity of 0 cores accepted")
	}
}

// TestAutoSizes: an auto request first runs with the whole placeholder,
// then with what its category's finished jobs used; a job killed for its
// memory runs once more at twice it, then with the whole placeholder,
// then not again; one the user sized runs once more only.
func TestAutoSizes(t *testing.T) {
	p := New()
	p.Placeholder(1, resource.Capacity{CPUs: 16, Mem: 64 * gib})
	cat := resource.Category{Queue: "default", Target: "assemble"}
	auto := resource.Request{AutoCPUs: true, AutoMem: true}
	p.Job(1, auto, cat)
	g, ok := p.Start(Run{1, 1}, 1)
	if !ok || g.CPUs != 16 || g.Mem != 64*gib {
		t.Fatalf("first auto job got %+v, want the whole placeholder", g)
	}
	p.Stop(Run{1, 1})
	for i := 0; i < 10; i++ {
		p.Observe(cat, 3*gib, 2*time.Second, time.Second) // 2 cores, 3 GiB
	}
	p.Job(2, auto, cat)
	g, _ = p.Start(Run{2, 1}, 1)
	if g.CPUs != 2 || g.Mem < 3*gib || g.Mem > 4*gib {
		t.Fatalf("learned auto job got %d cores, %s; want 2 cores and 3 GiB with headroom", g.CPUs, resource.FormatMem(g.Mem))
	}
	if !p.KilledForMemory(Run{2, 1}) {
		t.Fatal("a job killed for memory is not retried")
	}
	p.Stop(Run{2, 1})
	if r := p.Request(2); r.Mem != 2*g.Mem || r.AutoMem {
		t.Errorf("retry request %v, want twice %s", r, resource.FormatMem(g.Mem))
	}
	p.Start(Run{2, 2}, 1)
	if !p.KilledForMemory(Run{2, 2}) {
		t.Fatal("a learned size killed twice is not given the whole placeholder")
	}
	p.Stop(Run{2, 2})
	if r := p.Request(2); r.Mem != 64*gib {
		t.Errorf("second retry request %v, want the whole placeholder's 64 GiB", r)
	}
	p.Start(Run{2, 3}, 1)
	if p.KilledForMemory(Run{2, 3}) {
		t.Error("retried for memory with the whole placeholder")
	}
	p.Stop(Run{2, 3})

	// A size the user gave is raised once only.
	p.Job(3, resource.Request{Mem: 4 * gib}, cat)
	if _, ok := p.Start(Run{3, 1}, 1); !ok {
		t.Fatal("a 4 GiB job does not start on an idle placeholder")
	}
	if !p.KilledForMemory(Run{3, 1}) {
		t.Fatal("a job killed for its memory is not retried")
	}
	p.Stop(Run{3, 1})
	p.Start(Run{3, 2}, 1)
	if p.KilledForMemory(Run{3, 2}) {
		t.Error("a user-sized job retried for memory twice")
	}
}

func TestNumberedAndReload(t *testing.T) {
	p := New()
	if err := p.Placeholder(1, resource.Capacity{CPUs: 4}); err != nil {
		t.Fatal(err)
	}
	p.Job(7, resource.Request{CPUs: 3}, resource.Category{})
	if _, ok := p.Start(Run{Job: 7}, 1); !ok {
		t.Fatal("a 3-core job does not start on an idle 4-core placeholder")
	}
	p.Numbered(7, 2)
	p.Stop(Run{Job: 7}) // the unnumbered grant is gone: nothing given back
	if f, _ := p.Free(1); f.CPUs != 1 {
		t.Fatalf("free after stopping the old name: %d cores, want 1", f.CPUs)
	}
	p.Stop(Run{Job: 7, Attempt: 2})
	if f, _ := p.Free(1); f.CPUs != 4 {
		t.Fatalf("free after stopping attempt 2: %d cores, want 4", f.CPUs)
	}
	p.Start(Run{Job: 7, Attempt: 3}, 1)
	p.Reload()
	if f, _ := p.Free(1); f.CPUs != 4 || !p.Has(1) {
		t.Fatalf("after Reload: free %d cores (pool kept %v), want 4", f.CPUs, p.Has(1))
	}
	if r := p.Request(7); r.CPUs != 0 {
		t.Errorf("after Reload the request is kept: %v", r)
	}
}

// TestFetchAhead: a placeholder asking for more jobs than it has free
// cores gets jobs that ask for nothing beyond them (without a grant), but
// never a job that asks for more than is free.
func TestFetchAhead(t *testing.T) {
	p := New()
	p.Placeholder(1, resource.Capacity{CPUs: 1})
	p.Job(9, resource.Request{CPUs: 2}, resource.Category{})
	now := time.Unix(0, 0)
	p.Begin(now, 1, 1)
	if _, ok := p.Start(Run{Job: 1, Attempt: 1}, 1); !ok {
		t.Fatal("a 1-core job does not start on an idle 1-core placeholder")
	}
	if p.FitsNow(2, 1) {
		t.Error("a second 1-core job fits a full placeholder asking for no more than its cores")
	}
	p.Begin(now, 1, 5)
	if !p.FitsNow(2, 1) {
		t.Error("fetching ahead, a 1-core job does not go beyond the free cores")
	}
	if g, ok := p.Start(Run{Job: 2, Attempt: 1}, 1); !ok || g.CPUs != 0 {
		t.Errorf("fetched ahead: grant %+v, %v; want none, ok", g, ok)
	}
	if p.FitsNow(9, 1) {
		t.Error("fetching ahead let in a job that asks for 2 cores")
	}
	p.Stop(Run{Job: 2, Attempt: 1})
	if f, _ := p.Free(1); f.CPUs != 0 {
		t.Errorf("stopping a job fetched ahead gave back cores: %d free", f.CPUs)
	}
}

// TestUnholdableRemembersGone: a placeholder that left (a lapsed lease on
// a busy machine, a site between two batch jobs) still tells what jobs
// can never be held, and one that could hold a job keeps it holdable.
func TestUnholdableRemembersGone(t *testing.T) {
	p := New()
	p.Placeholder(1, resource.Capacity{CPUs: 2})
	p.PlaceholderGone(1)
	if got, want := p.Unholdable(resource.Request{CPUs: 64}), "needs 64 cores; the largest placeholder or site holds 2"; got != want {
		t.Errorf("after the placeholder left: %q, want %q", got, want)
	}
	if got := p.Unholdable(resource.Request{CPUs: 2}); got != "" {
		t.Errorf("2 cores, held by the placeholder gone: %q", got)
	}
	for ph := int64(2); ph < 2+2*maxLeft; ph++ {
		p.Placeholder(ph, resource.Capacity{CPUs: int(ph)})
		p.PlaceholderGone(ph)
		p.Placeholder(ph+100, resource.Capacity{CPUs: int(ph)}) // alike: kept once
		p.PlaceholderGone(ph + 100)
	}
	if len(p.left) != maxLeft {
		t.Errorf("%d capacities kept, want at most %d", len(p.left), maxLeft)
	}
}

// AdmitsAll (a pick then skips Fits) holds only where FitsNow admits
// every job: no job asks for more than a slot and the placeholder has no
// pool, or fetches ahead; a pool not fetching ahead, or a job that asks,
// makes it false.
func TestAdmitsAll(t *testing.T) {
	now := time.Unix(0, 0)
	for _, c := range []struct {
		name string
		set  func(p *Packing)
		want bool
	}{
		{"no pool, no job asks", func(p *Packing) {}, true},
		{"no pool, a job asks", func(p *Packing) { p.Job(3, resource.Request{CPUs: 4}, resource.Category{}) }, false},
		{"idle pool", func(p *Packing) { p.Placeholder(1, resource.Capacity{CPUs: 2}) }, false},
		{"full pool, fetching ahead", func(p *Packing) {
			p.Placeholder(1, resource.Capacity{CPUs: 1})
			p.Start(Run{Job: 9, Attempt: 1}, 1)
			p.Begin(now, 1, 3)
		}, true},
		{"pool, not fetching ahead", func(p *Packing) {
			p.Placeholder(1, resource.Capacity{CPUs: 2})
			p.Start(Run{Job: 9, Attempt: 1}, 1)
			p.Begin(now, 1, 1)
		}, false},
		{"fetching ahead, a job asks", func(p *Packing) {
			p.Placeholder(1, resource.Capacity{CPUs: 1})
			p.Job(3, resource.Request{CPUs: 2}, resource.Category{})
			p.Begin(now, 1, 3)
		}, false},
	} {
		p := New()
		p.Begin(now, 1, 1)
		c.set(p)
		if got := p.AdmitsAll(1); got != c.want {
			t.Errorf("%s: AdmitsAll %v, want %v", c.name, got, c.want)
		}
		all := true
		for id := int64(1); id <= 4; id++ {
			all = all && p.FitsNow(id, 1)
		}
		if p.AdmitsAll(1) && !all {
			t.Errorf("%s: AdmitsAll, yet some job does not fit", c.name)
		}
	}
}
