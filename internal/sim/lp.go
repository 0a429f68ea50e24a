package sim

import (
	"context"
	"fmt"
	"math"

	"github.com/mq-hpc/mq/internal/heap"
	"github.com/mq-hpc/mq/internal/lpplace"
)

// Seed 001 (do Nascimento et al., LPSched, section 5): a pipeline of
// stages run by placeholders bound to a stage, each pulling the next item
// its stage has ready, under three allocations: Trivial (one placeholder
// per stage), Total (every placeholder, split among the stages by their
// work) and LPSched (lpsched's plan). docs/policies/lp.md says what the seed
// does not give and what was chosen.

// LPScenario is one of the seed's experiments.
type LPScenario struct {
	Name    string
	Summary string
	Problem lpplace.Problem
	Items   []int // input sizes swept, items through the pipeline
}

// Fast Ethernet, the seed's LAN (section 5.1), in bytes per second.
const fastEthernet = 12.5e6

// The seed's machines (section 5.1): UFMG's three clusters (MG7 and MG8
// left out, as in section 5.2), Maryland's and the Ohio Supercomputer
// Center's, with their processing units as speeds.
func ufmg() []lpplace.Site {
	return []lpplace.Site{
		{Name: "mg1-6", Speed: 1.4745, Max: 6, NIC: fastEthernet, Link: fastEthernet},
		{Name: "mg9-12", Speed: 0.9912, Max: 4, NIC: fastEthernet, Link: fastEthernet},
		{Name: "mg13-19", Speed: 0.9912, Max: 7, NIC: fastEthernet, Link: fastEthernet},
	}
}

// slowLink is the shared link between Maryland and Ohio, bytes/s.
const slowLink = 1e6

func md() lpplace.Site {
	return lpplace.Site{Name: "md", Speed: 1.29105, Max: 48, NIC: fastEthernet, Link: slowLink}
}
func oh() lpplace.Site {
	return lpplace.Site{Name: "oh", Speed: 1.85466, Max: 24, NIC: fastEthernet, Link: slowLink}
}

// gridArrayAverager is the modified GridArrayAverager: a reader of
// 100 kB blocks on the first fast machine, an adder demanding imbalance
// times the reader's processing, an averager.
func gridArrayAverager(imbalance float64) []lpplace.Stage {
	return []lpplace.Stage{
		{Name: "reader", Work: 0.2, Out: 1e5, Sites: []string{"mg1-6"}, MaxCopies: 1},
		{Name: "adder", Work: 0.2 * imbalance, Out: 1e3},
		{Name: "averager", Work: 0.2},
	}
}

// virtualMicroscope is the virtual microscope: a reader of 0.5 MB
// compressed chunks at MD1, a decompress filter that dominates the work
// and makes 2.5 MB of image per chunk, clip, zoom and view. The works
// are in the ratio of the seed's Total allocation (35:6:5:1 at MD).
func virtualMicroscope() []lpplace.Stage {
	return []lpplace.Stage{
		{Name: "reader", Work: 0.12, Out: 0.5e6, Sites: []string{"md"}, MaxCopies: 1},
		{Name: "decompress", Work: 3.05, Out: 2.5e6},
		{Name: "clip", Work: 0.65, Out: 1e6},
		{Name: "zoom", Work: 0.45, Out: 1e5},
		{Name: "view", Work: 0.08},
	}
}

// LPScenarios are the seed's experiments this reproduces: load balancing
// at imbalance 2 and 5 (section 5.2), intra-cluster (5.5) and
// inter-cluster connectivity (5.6, W_MIN 0.7).
func LPScenarios() []LPScenario {
	sizes := []int{20, 40, 80, 160, 320} // 2-32 MB of 100 kB blocks
	chunks := []int{50, 100, 200, 400}
	return []LPScenario{
		{Name: "1x2x1", Summary: "GridArrayAverager, adder 2x the reader, UFMG's 17 machines (5.2, Figure 5)",
			Problem: lpplace.Problem{Stages: gridArrayAverager(2), Sites: ufmg()}, Items: sizes},
		{Name: "1x5x1", Summary: "GridArrayAverager, adder 5x the reader, UFMG's 17 machines (5.2, Figure 6)",
			Problem: lpplace.Problem{Stages: gridArrayAverager(5), Sites: ufmg()}, Items: sizes},
		{Name: "intra", Summary: "virtual microscope on Maryland's 48 machines (5.5, Figure 8)",
			Problem: lpplace.Problem{Stages: virtualMicroscope(), Sites: []lpplace.Site{md()}}, Items: chunks},
		{Name: "inter", Summary: "virtual microscope on Maryland + Ohio over a slow shared link, W_MIN 0.7 (5.6, Figure 9)",
			Problem: lpplace.Problem{Stages: virtualMicroscope(), Sites: []lpplace.Site{md(), oh()}, MinUtil: 0.7}, Items: chunks},
	}
}

// FindLPScenario finds a scenario by name.
func FindLPScenario(name string) (LPScenario, error) {
	var names []string
	for _, s := range LPScenarios() {
		if s.Name == name {
			return s, nil
		}
		names = append(names, s.Name)
	}
	return LPScenario{}, fmt.Errorf("unknown scenario %q (have %v)", name, names)
}

// LPStrategy is how placeholders are allocated to stages.
type LPStrategy int

const (
	Trivial LPStrategy = iota + 1 // one placeholder per stage
	Total                         // every placeholder, split by work
	LPSched                       // lpsched's plan
)

// LPStrategies lists the strategies in the seed's order.
func LPStrategies() []LPStrategy { return []LPStrategy{Trivial, Total, LPSched} }

func (s LPStrategy) String() string {
	switch s {
	case Trivial:
		return "trivial"
	case Total:
		return "total"
	case LPSched:
		return "lpsched"
	}
	return fmt.Sprintf("strategy(%d)", int(s))
}

// ParseLPStrategy reads a strategy's name.
func ParseLPStrategy(s string) (LPStrategy, error) {
	for _, st := range LPStrategies() {
		if st.String() == s {
			return st, nil
		}
	}
	return 0, fmt.Errorf("unknown strategy %q (have trivial, total, lpsched)", s)
}

// Allocate returns the placeholders per stage per site the strategy
// holds, and for LPSched the plan.
func (s LPStrategy) Allocate(ctx context.Context, p *lpplace.Problem) ([][]int, *lpplace.Plan, error) {
	if err := p.Validate(); err != nil {
		return nil, nil, err
	}
	K, S := len(p.Stages), len(p.Sites)
	alloc := make([][]int, K)
	for k := range alloc {
		alloc[k] = make([]int, S)
	}
	free := make([]int, S)
	for i, si := range p.Sites {
		free[i] = si.Max
	}
	// take places n placeholders of stage k at the allowed sites in
	// order, as a user filling machine lists would.
	take := func(k, n int) int {
		got := 0
		for i := range p.Sites {
			if got == n {
				break
			}
			if p.Capacity(k, i) <= 0 {
				continue
			}
			m := min(free[i], n-got)
			alloc[k][i] += m
			free[i] -= m
			got += m
		}
		return got
	}
	switch s {
	case Trivial:
		for k, st := range p.Stages {
			if take(k, 1) == 0 {
				return nil, nil, fmt.Errorf("trivial: no free placeholder for stage %s", st.Name)
			}
		}
	case Total:
		// Capped stages (the reader) take their copies first; the rest
		// of the placeholders go to the others in proportion to their
		// work, by largest remainder, at least one each.
		left, work := 0, 0.0
		for _, si := range p.Sites {
			left += si.Max
		}
		var open []int
		for k, st := range p.Stages {
			if st.MaxCopies > 0 {
				left -= take(k, st.MaxCopies)
			} else {
				open = append(open, k)
				work += st.Work
			}
		}
		if left < len(open) {
			return nil, nil, fmt.Errorf("total: %d placeholders for %d stages", left, len(open))
		}
		share := make([]int, K)
		rem := make([]float64, K)
		given := 0
		for _, k := range open {
			x := float64(left-len(open)) * p.Stages[k].Work / work
			share[k] = 1 + int(x)
			rem[k] = x - math.Floor(x)
			given += share[k]
		}
		for ; given < left; given++ {
			b := open[0]
			for _, k := range open {
				if rem[k] > rem[b] {
					b = k
				}
			}
			share[b]++
			rem[b] = -1
		}
		for _, k := range open {
			if take(k, share[k]) == 0 {
				return nil, nil, fmt.Errorf("total: no free placeholder for stage %s", p.Stages[k].Name)
			}
		}
	case LPSched:
		pl, err := p.Plan(ctx)
		if err != nil {
			return nil, nil, err
		}
		return pl.Count, &pl, nil
	default:
		return nil, nil, fmt.Errorf("unknown strategy %d", int(s))
	}
	return alloc, nil, nil
}

// LPResult is one run of a scenario under a strategy.
type LPResult struct {
	Scenario     string
	Strategy     LPStrategy
	Items        int
	Makespan     float64 // seconds until the last item left the last stage
	Placeholders int
	Alloc        [][]int
	CrossBytes   float64 // bytes that went over site links
	PlanRate     float64 // LPSched's predicted items per second; 0 for the others
}

// RunLP runs items through the scenario's pipeline under the allocation.
// Placeholders pull: a free placeholder of stage k takes the oldest item
// stage k-1 has finished (one at the item's site first), stages its
// input in (over its NIC from its own site, over the two sites' shared
// links, fairly shared, from another), then computes.
func RunLP(p *lpplace.Problem, alloc [][]int, items int) (LPResult, error) {
	if err := p.Validate(); err != nil {
		return LPResult{}, err
	}
	if items < 1 {
		return LPResult{}, fmt.Errorf("items %d < 1", items)
	}
	K, S := len(p.Stages), len(p.Sites)
	if len(alloc) != K {
		return LPResult{}, fmt.Errorf("allocation has %d stages, problem %d", len(alloc), K)
	}
	m := &pipe{p: p, ready: make([][]pipeItem, K), free: make([][]int32, K), linkUsers: make([]int, S), events: heap.New(pipeEventBefore)}
	used := make([]int, S)
	for k := range alloc {
		if len(alloc[k]) != S {
			return LPResult{}, fmt.Errorf("allocation stage %d has %d sites, problem %d", k, len(alloc[k]), S)
		}
		has := false
		for s, n := range alloc[k] {
			if n < 0 || (n > 0 && p.Capacity(k, s) <= 0) {
				return LPResult{}, fmt.Errorf("stage %s cannot hold %d at %s", p.Stages[k].Name, n, p.Sites[s].Name)
			}
			used[s] += n
			for range n {
				m.free[k] = append(m.free[k], int32(len(m.phs)))
				m.phs = append(m.phs, pipePH{stage: k, site: s})
				has = true
			}
		}
		if !has {
			return LPResult{}, fmt.Errorf("stage %s has no placeholder", p.Stages[k].Name)
		}
	}
	for s, n := range used {
		if n > p.Sites[s].Max {
			return LPResult{}, fmt.Errorf("site %s: %d placeholders of %d", p.Sites[s].Name, n, p.Sites[s].Max)
		}
	}
	for i := range items {
		m.ready[0] = append(m.ready[0], pipeItem{id: i, site: -1})
	}
	m.left = items
	if err := m.run(); err != nil {
		return LPResult{}, err
	}
	return LPResult{Items: items, Makespan: m.now, Placeholders: len(m.phs), Alloc: alloc, CrossBytes: m.cross}, nil
}

type pipeItem struct {
	id   int
	site int // where the previous stage made it; -1: the input
}

type pipePH struct {
	stage, site int
	item        pipeItem
}

type pipeXfer struct {
	ph       int32
	from, to int
	left     float64 // bytes
	rate     float64
}

type pipeEvent struct {
	t    float64
	seq  uint64
	ph   int32
	done bool // compute done (else: local staging done, compute next)
}

func pipeEventBefore(a, b pipeEvent) bool {
	return a.t < b.t || a.t == b.t && a.seq < b.seq
}

type pipe struct {
	p         *lpplace.Problem
	phs       []pipePH
	ready     [][]pipeItem
	free      [][]int32 // idle placeholders per stage, oldest first
	events    *heap.Heap[pipeEvent]
	xfers     []pipeXfer
	linkUsers []int
	now       float64
	seq       uint64
	left      int
	cross     float64
}

func (m *pipe) at(t float64, ph int32, done bool) {
	m.seq++
	m.events.Push(pipeEvent{t: t, seq: m.seq, ph: ph, done: done})
}

func (m *pipe) run() error {
	m.dispatch()
	for m.left > 0 {
		// The next thing to happen: an event or a cross-site copy ending.
		next, xi := math.Inf(1), -1
		for i, x := range m.xfers {
			if t := m.now + x.left/x.rate; t < next {
				next, xi = t, i
			}
		}
		if e, ok := m.events.Peek(); ok && e.t <= next {
			next, xi = e.t, -1
		}
		if math.IsInf(next, 1) {
			return fmt.Errorf("pipeline stalled with %d items left", m.left) // every stage has a placeholder: not expected
		}
		for i := range m.xfers {
			m.xfers[i].left -= m.xfers[i].rate * (next - m.now)
		}
		m.now = next
		if xi >= 0 {
			x := m.xfers[xi]
			m.xfers = append(m.xfers[:xi], m.xfers[xi+1:]...)
			m.linkUsers[x.from]--
			m.linkUsers[x.to]--
			m.relink()
			m.compute(x.ph)
		} else {
			e, _ := m.events.Pop()
			if e.done {
				m.finish(e.ph)
			} else {
				m.compute(e.ph)
			}
		}
		m.dispatch()
	}
	return nil
}

func (m *pipe) compute(ph int32) {
	h := m.phs[ph]
	m.at(m.now+m.p.Stages[h.stage].Work/m.p.Sites[h.site].Speed, ph, true)
}

func (m *pipe) finish(ph int32) {
	h := &m.phs[ph]
	if h.stage+1 < len(m.p.Stages) {
		m.ready[h.stage+1] = append(m.ready[h.stage+1], pipeItem{id: h.item.id, site: h.site})
	} else {
		m.left--
	}
	m.free[h.stage] = append(m.free[h.stage], ph)
}

// dispatch gives ready items to idle placeholders of their stage.
func (m *pipe) dispatch() {
	for k := range m.ready {
		for len(m.ready[k]) > 0 && len(m.free[k]) > 0 {
			it := m.ready[k][0]
			m.ready[k] = m.ready[k][1:]
			pick := 0
			for i, ph := range m.free[k] {
				if m.phs[ph].site == it.site {
					pick = i
					break
				}
			}
			ph := m.free[k][pick]
			m.free[k] = append(m.free[k][:pick], m.free[k][pick+1:]...)
			m.start(ph, it)
		}
	}
}

func (m *pipe) start(ph int32, it pipeItem) {
	h := &m.phs[ph]
	h.item = it
	bytes := 0.0
	if h.stage > 0 {
		bytes = m.p.Stages[h.stage-1].Out
	}
	to := m.p.Sites[h.site]
	switch {
	case bytes == 0 || it.site < 0:
		m.compute(ph)
	case it.site == h.site:
		t := 0.0
		if to.NIC > 0 {
			t = bytes / to.NIC
		}
		m.at(m.now+t, ph, false)
	default:
		m.cross += bytes
		m.xfers = append(m.xfers, pipeXfer{ph: ph, from: it.site, to: h.site, left: bytes})
		m.linkUsers[it.site]++
		m.linkUsers[h.site]++
		m.relink()
	}
}

// relink shares each site's link equally among the copies using it; a
// copy goes at its tighter share, and no faster than its receiver's NIC.
func (m *pipe) relink() {
	for i := range m.xfers {
		x := &m.xfers[i]
		r := math.Inf(1)
		for _, s := range []int{x.from, x.to} {
			if l := m.p.Sites[s].Link; l > 0 {
				r = min(r, l/float64(m.linkUsers[s]))
			}
		}
		if nic := m.p.Sites[x.to].NIC; nic > 0 {
			r = min(r, nic)
		}
		if math.IsInf(r, 1) {
			r = 1e18 // no limit given: effectively instant
		}
		x.rate = r
	}
}

// LPSweep runs scenarios x strategies x sizes.
type LPSweep struct {
	Scenarios  []LPScenario
	Strategies []LPStrategy
	Items      []int // nil: each scenario's own
}

// Run plans each scenario once per strategy and runs every size; results
// are in scenario, size, strategy order.
func (w LPSweep) Run(ctx context.Context) ([]LPResult, error) {
	var out []LPResult
	for _, sc := range w.Scenarios {
		type alloc struct {
			a    [][]int
			rate float64
		}
		allocs := make([]alloc, len(w.Strategies))
		for i, st := range w.Strategies {
			a, pl, err := st.Allocate(ctx, &sc.Problem)
			if err != nil {
				return nil, fmt.Errorf("%s, %s: %w", sc.Name, st, err)
			}
			allocs[i].a = a
			if pl != nil {
				allocs[i].rate = pl.Rate
			}
		}
		sizes := w.Items
		if sizes == nil {
			sizes = sc.Items
		}
		for _, n := range sizes {
			for i, st := range w.Strategies {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				r, err := RunLP(&sc.Problem, allocs[i].a, n)
				if err != nil {
					return nil, fmt.Errorf("%s, %s, %d items: %w", sc.Name, st, n, err)
				}
				r.Scenario, r.Strategy, r.PlanRate = sc.Name, st, allocs[i].rate
				out = append(out, r)
			}
		}
	}
	return out, nil
}
