package resource

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func mustPool(t testing.TB, c Capacity) *Pool {
	t.Helper()
	p, err := NewPool(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPoolPacksMixedJobs(t *testing.T) {
	// 16 cores and 64 GiB run one 8-core 30 GiB job beside eight 1-core jobs.
	p := mustPool(t, Capacity{CPUs: 16, Mem: 64 * GiB})
	if _, ok := p.Take(Request{CPUs: 8, Mem: 30 * GiB}); !ok {
		t.Fatal("big job does not fit an empty pool")
	}
	for i := range 8 {
		if _, ok := p.Take(Request{CPUs: 1, Mem: GiB}); !ok {
			t.Fatalf("small job %d does not fit", i)
		}
	}
	if p.Fits(Request{}) {
		t.Errorf("a 17th core fits: free %v", p.Free())
	}
}

func TestPoolSlots(t *testing.T) {
	// No declared cores, memory or GPUs: today's placeholder of 3 slots.
	p := mustPool(t, Capacity{CPUs: 3})
	var gs []Grant
	for range 3 {
		g, ok := p.Take(Request{Mem: 100 * GiB}) // memory not counted when not known
		if !ok || g.Cores() != nil || g.GPUs() != nil {
			t.Fatalf("Take = %+v, %v", g, ok)
		}
		gs = append(gs, g)
	}
	if _, ok := p.Take(Request{}); ok {
		t.Fatal("a 4th slot was taken")
	}
	if p.Fits(Request{GPUs: 1}) || p.Fits(Request{Named: map[string]int{"lic": 1}}) {
		t.Error("GPU or named request fits a pool with none")
	}
	p.Give(gs[1])
	if _, ok := p.Take(Request{}); !ok {
		t.Fatal("a slot given back cannot be taken")
	}
}

func TestPoolChoosesLowestIDs(t *testing.T) {
	// The GPU ids are declared here: there is no GPU on the test machine.
	p := mustPool(t, Capacity{CPUs: 4, CoreIDs: []int{2, 3, 6, 7}, GPUIDs: []string{"0", "1", "2", "3"}})
	a, _ := p.Take(Request{CPUs: 2, GPUs: 1})
	b, _ := p.Take(Request{CPUs: 1, GPUs: 2})
	if got := a.Cores(); !slices.Equal(got, []int{2, 3}) {
		t.Errorf("a cores %v", got)
	}
	if got := a.GPUs(); !slices.Equal(got, []string{"0"}) {
		t.Errorf("a GPUs %v", got)
	}
	if got := b.Cores(); !slices.Equal(got, []int{6}) {
		t.Errorf("b cores %v", got)
	}
	if got := b.GPUs(); !slices.Equal(got, []string{"1", "2"}) {
		t.Errorf("b GPUs %v", got)
	}
	p.Give(a)
	c, _ := p.Take(Request{CPUs: 3, GPUs: 2})
	if got := c.Cores(); !slices.Equal(got, []int{2, 3, 7}) {
		t.Errorf("c cores %v", got)
	}
	if got := c.GPUs(); !slices.Equal(got, []string{"0", "3"}) {
		t.Errorf("c GPUs %v", got)
	}
	if p.Fits(Request{}) {
		t.Errorf("a core fits a full pool: free %v", p.Free())
	}
}

func TestPoolOddRequests(t *testing.T) {
	p := mustPool(t, Capacity{CPUs: 2, Mem: GiB})
	for _, r := range []Request{{GPUs: -1}, {Mem: -1}, {Named: map[string]int{"lic": -1}}} {
		if p.Fits(r) {
			t.Errorf("%+v fits", r)
		}
	}
	// A named amount of zero asks for nothing, even of a name the pool lacks.
	g, ok := p.Take(Request{Named: map[string]int{"lic": 0}})
	if !ok {
		t.Fatal("zero named amount does not fit")
	}
	p.Give(g)
	if !p.Idle() {
		t.Errorf("not idle: %v", p.Free())
	}
}

func TestPoolGiveTwicePanics(t *testing.T) {
	p := mustPool(t, Capacity{CPUs: 2, GPUIDs: []string{"0"}})
	g, _ := p.Take(Request{GPUs: 1})
	p.Give(g)
	defer func() {
		if recover() == nil {
			t.Error("second Give did not panic")
		}
	}()
	p.Give(g)
}

func TestCapacityValidate(t *testing.T) {
	bad := []Capacity{
		{CPUs: 0},
		{CPUs: 2, CoreIDs: []int{1}},
		{CPUs: 2, CoreIDs: []int{1, 1}},
		{CPUs: 1, GPUIDs: []string{""}},
		{CPUs: 1, GPUIDs: []string{"0", "0"}},
		{CPUs: 1, Mem: -1},
		{CPUs: 1, Named: map[string]int{"a-b": 1}},
	}
	for _, c := range bad {
		if _, err := NewPool(c); err == nil {
			t.Errorf("NewPool(%+v): no error", c)
		}
	}
}

// TestPoolModel takes and gives at random and checks the pool against a
// model: never more taken than held, never a core or GPU in two grants,
// and everything back when all is given.
func TestPoolModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 30))
	for round := range 200 {
		ncore := 1 + rng.IntN(70)
		c := Capacity{CPUs: ncore, Mem: int64(1+rng.IntN(64)) * GiB, Named: map[string]int{"lic": rng.IntN(4)}}
		if rng.IntN(2) == 0 {
			for i := range ncore {
				c.CoreIDs = append(c.CoreIDs, 2*i+1)
			}
		}
		for i := range rng.IntN(9) {
			c.GPUIDs = append(c.GPUIDs, string(rune('a'+i)))
		}
		p := mustPool(t, c)
		var held []Grant
		for range 300 {
			if len(held) > 0 && rng.IntN(3) == 0 {
				i := rng.IntN(len(held))
				p.Give(held[i])
				held = slices.Delete(held, i, i+1)
			} else {
				r := Request{CPUs: rng.IntN(5), Mem: int64(rng.IntN(8)) * GiB, GPUs: rng.IntN(3)}
				if rng.IntN(4) == 0 {
					r.Named = map[string]int{"lic": 1}
				}
				fits := p.Fits(r)
				g, ok := p.Take(r)
				if ok != fits {
					t.Fatalf("round %d: Fits %v but Take %v", round, fits, ok)
				}
				if ok {
					held = append(held, g)
				}
			}
			cores, gpus, mem, lic := map[int]bool{}, map[string]bool{}, int64(0), 0
			ncpu := 0
			for _, g := range held {
				ncpu += g.CPUs
				mem += g.Mem
				lic += g.Named["lic"]
				if c.CoreIDs != nil && len(g.Cores()) != g.CPUs {
					t.Fatalf("grant of %d cpus names cores %v", g.CPUs, g.Cores())
				}
				for _, id := range g.Cores() {
					if cores[id] {
						t.Fatalf("core %d granted twice", id)
					}
					cores[id] = true
				}
				for _, id := range g.GPUs() {
					if gpus[id] {
						t.Fatalf("GPU %s granted twice", id)
					}
					gpus[id] = true
				}
			}
			if ncpu > c.CPUs || mem > c.Mem || len(gpus) > len(c.GPUIDs) || lic > c.Named["lic"] {
				t.Fatalf("over-allocated: %d cpus, %d mem, %d GPUs, %d lic of %v", ncpu, mem, len(gpus), lic, c)
			}
			if f := p.Free(); f.CPUs != c.CPUs-ncpu || len(f.GPUIDs) != len(c.GPUIDs)-len(gpus) {
				t.Fatalf("free %v, model %d cpus %d GPUs", f, c.CPUs-ncpu, len(c.GPUIDs)-len(gpus))
			}
		}
		for _, g := range held {
			p.Give(g)
		}
		if !p.Idle() {
			t.Fatalf("round %d: not idle after giving all back: %v", round, p.Free())
		}
	}
}

// BenchmarkFitTakeGive is one dispatch decision's work on a placeholder:
// Fits, Take and Give, cycling over 8 request shapes.
func BenchmarkFitTakeGive(b *testing.B) {
	ids := make([]int, 64)
	for i := range ids {
		ids[i] = i
	}
	for _, bc := range []struct {
		name string
		c    Capacity
	}{
		{"slots", Capacity{CPUs: 64, Mem: 256 * GiB}},
		{"cores+gpus", Capacity{CPUs: 64, CoreIDs: ids, Mem: 256 * GiB, GPUIDs: []string{"0", "1", "2", "3"}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := mustPool(b, bc.c)
			shapes := make([]Request, 8)
			for i := range shapes {
				shapes[i] = Request{CPUs: 1 << (i % 4), Mem: int64(i+1) * GiB}
				if len(bc.c.GPUIDs) > 0 {
					shapes[i].GPUs = i / 6
				}
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				r := shapes[i%8]
				if !p.Fits(r) {
					b.Fatal("no fit")
				}
				g, _ := p.Take(r)
				p.Give(g)
			}
		})
	}
}

// BenchmarkWindowFirstFit is the fit's share of one dispatch decision
// at 100,000 ready jobs of 8 shapes: the dispatch examines at most a
// window of 128 jobs in policy order and takes the first that fits. The
// pool here is nearly full, so most shapes do not fit and the scan is
// long; the grant is given back after each decision.
func BenchmarkWindowFirstFit(b *testing.B) {
	const ready, window = 100_000, 128
	shapes := []Request{
		{CPUs: 1, Mem: GiB}, {CPUs: 2, Mem: 4 * GiB}, {CPUs: 4, Mem: 8 * GiB}, {CPUs: 8, Mem: 30 * GiB},
		{CPUs: 1, GPUs: 1, Mem: 8 * GiB}, {CPUs: 2, Named: map[string]int{"lic": 1}}, {CPUs: 16, Mem: 60 * GiB}, {CPUs: 3, Mem: 2 * GiB},
	}
	rng := rand.New(rand.NewPCG(1, 1))
	jobs := make([]Request, ready)
	for i := range jobs {
		jobs[i] = shapes[rng.IntN(len(shapes)-1)+1] // no 1-core job is first...
	}
	for i := 0; i < ready; i += 97 {
		jobs[i] = shapes[0] // ...but one in every 97
	}
	p := mustPool(b, Capacity{CPUs: 16, Mem: 64 * GiB, GPUIDs: []string{"0"}, Named: map[string]int{"lic": 2}})
	p.Take(Request{CPUs: 15, Mem: 40 * GiB, GPUs: 1, Named: map[string]int{"lic": 2}})
	at := 0
	b.ReportAllocs()
	for b.Loop() {
		found := false
		for k := 0; k < window; k++ {
			r := jobs[(at+k)%ready]
			if p.Fits(r) {
				g, _ := p.Take(r)
				p.Give(g)
				found = true
				break
			}
		}
		if !found {
			b.Fatal("no job fits in the window")
		}
		at = (at + 1) % ready
	}
}

// FuzzPool drives a pool with take and give operations from the fuzzer's
// bytes and checks it never grants more than it holds, nor a core or GPU
// twice, and is whole again once everything is given back.
func FuzzPool(f *testing.F) {
	f.Add([]byte{0x12, 0x34, 0x80, 0x07, 0xff, 0x81})
	f.Fuzz(func(t *testing.T, ops []byte) {
		c := Capacity{CPUs: 8, CoreIDs: []int{0, 1, 2, 3, 4, 5, 6, 7}, Mem: 16 * GiB, GPUIDs: []string{"0", "1", "2"}, Named: map[string]int{"lic": 2}}
		p := mustPool(t, c)
		var held []Grant
		for _, op := range ops {
			if op&0x80 != 0 && len(held) > 0 {
				i := int(op&0x7f) % len(held)
				p.Give(held[i])
				held = slices.Delete(held, i, i+1)
				continue
			}
			r := Request{CPUs: int(op & 7), Mem: int64(op>>3&3) * 4 * GiB, GPUs: int(op >> 5 & 3)}
			if op&0x40 != 0 {
				r.Named = map[string]int{"lic": 1}
			}
			if g, ok := p.Take(r); ok {
				held = append(held, g)
			}
			cores, gpus, ncpu := map[int]bool{}, map[string]bool{}, 0
			for _, g := range held {
				ncpu += g.CPUs
				for _, id := range g.Cores() {
					if cores[id] {
						t.Fatalf("core %d granted twice", id)
					}
					cores[id] = true
				}
				for _, id := range g.GPUs() {
					if gpus[id] {
						t.Fatalf("GPU %s granted twice", id)
					}
					gpus[id] = true
				}
			}
			if ncpu > c.CPUs || len(cores) != ncpu {
				t.Fatalf("%d cpus granted as %d cores of %d", ncpu, len(cores), c.CPUs)
			}
		}
		for _, g := range held {
			p.Give(g)
		}
		if !p.Idle() {
			t.Fatalf("not idle after giving all back: %v", p.Free())
		}
	})
}
