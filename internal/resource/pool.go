package resource

import (
	"fmt"
	"math/bits"
	"sort"
	"strconv"
	"strings"
)

// MaxCoreIDs bounds the core ids a Pool tracks one by one; a placeholder
// with more cores is counted, not pinned.
const MaxCoreIDs = 512

// A Capacity is what a placeholder holds.
type Capacity struct {
	CPUs    int            // cores; at least 1 (a placeholder's slots when nothing else is known)
	CoreIDs []int          // the cores' ids when known (len CPUs), for pinning
	Mem     int64          // bytes; 0 means not known, and memory is then not counted
	GPUIDs  []string       // the GPUs' ids as CUDA_VISIBLE_DEVICES names them
	Named   map[string]int // site-declared amounts
}

// Validate reports the first thing wrong with c, in one line.
func (c Capacity) Validate() error {
	switch {
	case c.CPUs < 1:
		return fmt.Errorf("capacity: %d cpus; want at least 1", c.CPUs)
	case c.CoreIDs != nil && len(c.CoreIDs) != c.CPUs:
		return fmt.Errorf("capacity: %d core ids for %d cpus", len(c.CoreIDs), c.CPUs)
	case len(c.CoreIDs) > MaxCoreIDs:
		return fmt.Errorf("capacity: %d core ids; at most %d are tracked", len(c.CoreIDs), MaxCoreIDs)
	case len(c.GPUIDs) > MaxGPUs:
		return fmt.Errorf("capacity: %d GPUs; at most %d", len(c.GPUIDs), MaxGPUs)
	case c.Mem < 0:
		return fmt.Errorf("capacity: negative memory")
	}
	seen := make(map[int]bool, len(c.CoreIDs))
	for _, id := range c.CoreIDs {
		if id < 0 || seen[id] {
			return fmt.Errorf("capacity: core id %d negative or repeated", id)
		}
		seen[id] = true
	}
	gseen := make(map[string]bool, len(c.GPUIDs))
	for _, id := range c.GPUIDs {
		if id == "" || gseen[id] {
			return fmt.Errorf("capacity: GPU id %q empty or repeated", id)
		}
		gseen[id] = true
	}
	for name, n := range c.Named {
		if !isIdent(name) || n < 0 {
			return fmt.Errorf("capacity: resource %s=%d", name, n)
		}
	}
	return nil
}

// Holds reports whether an empty placeholder of capacity c could run r:
// the shape test, as against Pool.Fits, the free-amounts test.
func (c Capacity) Holds(r Request) bool {
	if r.Cores() > c.CPUs || r.GPUs > len(c.GPUIDs) {
		return false
	}
	if c.Mem > 0 && r.Mem > c.Mem {
		return false
	}
	for name, n := range r.Named {
		if n > c.Named[name] {
			return false
		}
	}
	return true
}

// String formats c as "cpus=16 mem=64 GiB gpus=0,1".
func (c Capacity) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cpus=%d", c.CPUs)
	if c.Mem > 0 {
		b.WriteString(" mem=" + FormatMem(c.Mem))
	}
	if len(c.GPUIDs) > 0 {
		b.WriteString(" gpus=" + strings.Join(c.GPUIDs, ","))
	}
	for _, name := range sortedNames(c.Named) {
		b.WriteString(" " + name + "=" + strconv.Itoa(c.Named[name]))
	}
	return b.String()
}

// coreSet is a set of core positions (indexes into Capacity.CoreIDs).
type coreSet [MaxCoreIDs / 64]uint64

// A Grant is what Pool.Take gave one job; give it back with Pool.Give.
type Grant struct {
	CPUs  int
	Mem   int64
	Named map[string]int // the request's map, not a copy: do not change it

	pool  *Pool
	cores coreSet // positions in the pool's CoreIDs, when known
	gpus  uint64  // positions in the pool's GPUIDs
}

// Cores returns the ids of the cores granted, lowest first, or nil when
// the pool does not know its core ids.
func (g Grant) Cores() []int {
	if g.pool == nil || g.pool.c.CoreIDs == nil {
		return nil
	}
	ids := make([]int, 0, g.CPUs)
	for w, word := range g.cores {
		for word != 0 {
			i := bits.TrailingZeros64(word)
			word &^= 1 << i
			ids = append(ids, g.pool.c.CoreIDs[w*64+i])
		}
	}
	return ids
}

// PoolHasGPUs reports whether the pool g came from holds GPUs, granted
// to g or not: a job there must be told which are its own, even none.
func (g Grant) PoolHasGPUs() bool {
	return g.pool != nil && len(g.pool.c.GPUIDs) > 0
}

// GPUs returns the ids of the GPUs granted, in the pool's order.
func (g Grant) GPUs() []string {
	if g.gpus == 0 {
		return nil
	}
	ids := make([]string, 0, bits.OnesCount64(g.gpus))
	for word := g.gpus; word != 0; {
		i := bits.TrailingZeros64(word)
		word &^= 1 << i
		ids = append(ids, g.pool.c.GPUIDs[i])
	}
	return ids
}

// A Pool is what a placeholder has free. It is not safe for concurrent
// use.
type Pool struct {
	c        Capacity
	cpus     int
	mem      int64
	cores    coreSet // free positions, when core ids are known
	gpus     uint64  // free positions
	named    map[string]int
	ngpu     int
	hasCores bool
}

// NewPool returns an empty (all free) pool of capacity c.
func NewPool(c Capacity) (*Pool, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	p := &Pool{c: c, cpus: c.CPUs, mem: c.Mem, ngpu: len(c.GPUIDs), hasCores: c.CoreIDs != nil}
	if p.hasCores {
		for i := range c.CoreIDs {
			p.cores[i/64] |= 1 << (i % 64)
		}
	}
	for i := range c.GPUIDs {
		p.gpus |= 1 << i
	}
	if len(c.Named) > 0 {
		p.named = make(map[string]int, len(c.Named))
		for k, v := range c.Named {
			p.named[k] = v
		}
	}
	return p, nil
}

// Capacity returns the pool's whole capacity.
func (p *Pool) Capacity() Capacity { return p.c }

// Free returns what is free now, as a Capacity.
func (p *Pool) Free() Capacity {
	f := Capacity{CPUs: p.cpus, Mem: p.mem}
	if p.hasCores {
		f.CoreIDs = []int{}
		for i, id := range p.c.CoreIDs {
			if p.cores[i/64]&(1<<(i%64)) != 0 {
				f.CoreIDs = append(f.CoreIDs, id)
			}
		}
	}
	for i, id := range p.c.GPUIDs {
		if p.gpus&(1<<i) != 0 {
			f.GPUIDs = append(f.GPUIDs, id)
		}
	}
	if p.named != nil {
		f.Named = make(map[string]int, len(p.named))
		for k, v := range p.named {
			f.Named[k] = v
		}
	}
	return f
}

// FreeCPUs is the cores free now (Free's CPUs, without its copies).
func (p *Pool) FreeCPUs() int { return p.cpus }

// Idle reports whether nothing is taken.
func (p *Pool) Idle() bool {
	if p.cpus != p.c.CPUs || p.mem != p.c.Mem || p.ngpu != len(p.c.GPUIDs) {
		return false
	}
	for k, v := range p.named {
		if v != p.c.Named[k] {
			return false
		}
	}
	return true
}

// Fits reports whether r fits what is free now. A request with a
// negative amount fits nowhere.
func (p *Pool) Fits(r Request) bool {
	if r.Cores() > p.cpus || r.GPUs > p.ngpu || r.GPUs < 0 || r.Mem < 0 {
		return false
	}
	if p.c.Mem > 0 && r.Mem > p.mem {
		return false
	}
	for name, n := range r.Named {
		if n > p.named[name] || n < 0 {
			return false
		}
	}
	return true
}

// Take takes r from the pool if it fits, choosing the lowest free core
// positions and GPUs, and reports whether it did.
func (p *Pool) Take(r Request) (Grant, bool) {
	if !p.Fits(r) {
		return Grant{}, false
	}
	g := Grant{CPUs: r.Cores(), Named: r.Named, pool: p}
	p.cpus -= g.CPUs
	if p.c.Mem > 0 {
		g.Mem = r.Mem
		p.mem -= r.Mem
	}
	if p.hasCores {
		need := g.CPUs
		for w := 0; need > 0; w++ {
			word := p.cores[w]
			for word != 0 && need > 0 {
				bit := word & -word
				word &^= bit
				g.cores[w] |= bit
				need--
			}
			p.cores[w] &^= g.cores[w]
		}
	}
	for need := r.GPUs; need > 0; need-- {
		bit := p.gpus & -p.gpus
		p.gpus &^= bit
		g.gpus |= bit
	}
	p.ngpu -= r.GPUs
	for name, n := range r.Named {
		if n != 0 {
			p.named[name] -= n
		}
	}
	return g, true
}

// Give returns a grant's resources to the pool. Giving back a grant of
// another pool, or one twice, is a bug and panics.
func (p *Pool) Give(g Grant) {
	if g.pool != p {
		panic("resource: Give of a grant from another pool")
	}
	if p.gpus&g.gpus != 0 {
		panic("resource: Give of a GPU that is free")
	}
	if p.hasCores {
		for w := range g.cores {
			if p.cores[w]&g.cores[w] != 0 {
				panic("resource: Give of a core that is free")
			}
			p.cores[w] |= g.cores[w]
		}
	}
	p.cpus += g.CPUs
	p.mem += g.Mem
	p.gpus |= g.gpus
	p.ngpu += bits.OnesCount64(g.gpus)
	for name, n := range g.Named {
		if n != 0 {
			p.named[name] += n
		}
	}
	if p.cpus > p.c.CPUs || p.mem > p.c.Mem {
		panic("resource: Give of more than was taken")
	}
}

func sortedNames(m map[string]int) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
