package resource

import (
	"math/rand/v2"
	"testing"
	"time"
)

// simulateBig runs one 16-core pool on ticks: a big 8-core job waits
// from tick 0 on a pool full of small jobs, an endless stream of 1-core jobs of maxRun-1 or maxRun ticks
// stands behind it, and each tick the pool takes, in that order, every
// job that fits (and, once big starves, that Admits allows). It returns
// the tick big started, or -1 if it had not by the end.
func simulateBig(t *testing.T, bound time.Duration, maxRun int, ticks int) int {
	p := mustPool(t, Capacity{CPUs: 16})
	big := Request{CPUs: 8}
	small := Request{CPUs: 1}
	rng := rand.New(rand.NewPCG(3, 30))
	type running struct {
		g   Grant
		end int
	}
	var run []running
	// The stream came first: the pool is full of it when big arrives.
	// Their ends are staggered, so no more than two cores come free
	// at once and big never fits by chance.
	for i := 0; p.Fits(small); i++ {
		g, _ := p.Take(small)
		run = append(run, running{g, 1 + i%maxRun})
	}
	for now := 0; now < ticks; now++ {
		kept := run[:0]
		for _, r := range run {
			if r.end <= now {
				p.Give(r.g)
			} else {
				kept = append(kept, r)
			}
		}
		run = kept
		if _, ok := p.Take(big); ok {
			return now
		}
		reserved := Starving(p, big, time.Duration(now)*time.Second, bound)
		for p.Fits(small) && (!reserved || Admits(p, big, small)) {
			g, _ := p.Take(small)
			run = append(run, running{g, now + maxRun - rng.IntN(2)})
		}
	}
	return -1
}

func TestStarvationBounded(t *testing.T) {
	const maxRun, ticks = 10, 10000
	// Without the rule (a bound never reached) small jobs keep the pool
	// full and big never starts.
	if got := simulateBig(t, time.Duration(ticks+1)*time.Second, maxRun, ticks); got != -1 {
		t.Fatalf("without reservation big started at %d; the test stream is too thin", got)
	}
	// With it, big waits at most the bound plus the longest small run.
	for _, bound := range []int{0, 5, 50, 500} {
		got := simulateBig(t, time.Duration(bound)*time.Second, maxRun, ticks)
		if got < 0 || got > bound+maxRun {
			t.Errorf("bound %d: big started at %d; want by %d", bound, got, bound+maxRun)
		}
	}
}

func TestAdmitsSpare(t *testing.T) {
	// Big waits for 2 GPUs while one is taken: cores beyond its need
	// are still used, GPUs are not.
	p := mustPool(t, Capacity{CPUs: 16, Mem: 64 * GiB, GPUIDs: []string{"0", "1"}})
	p.Take(Request{CPUs: 1, GPUs: 1})
	big := Request{CPUs: 4, GPUs: 2, Mem: 32 * GiB}
	if !Starving(p, big, time.Hour, time.Minute) {
		t.Fatal("big is not starving")
	}
	if Starving(p, big, time.Second, time.Minute) {
		t.Error("starving before the bound")
	}
	if !Admits(p, big, Request{CPUs: 11, Mem: 32 * GiB}) {
		t.Error("a job using only the spare is refused")
	}
	for _, r := range []Request{{CPUs: 12}, {GPUs: 1}, {Mem: 33 * GiB}} {
		if Admits(p, big, r) {
			t.Errorf("%v admitted; it delays big", r)
		}
	}
	if Starving(p, Request{GPUs: 3}, time.Hour, time.Minute) {
		t.Error("a request the pool can never hold starves it")
	}
}
