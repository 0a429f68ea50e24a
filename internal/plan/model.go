// Package plan holds the planners that place a target DAG's jobs and
// files on sites ahead of running it (seed 003: HEFT, MinMin and the
// evolutionary AEH-ETAA), and the schedule model they share.
//
// A plan is scored by one function, Evaluate, the seed's Algorithm 8
// generalised from one task at a time per virtual machine to a site with
// Slots slots: jobs start in the plan's order, each at its planned site
// as soon as its prerequisites have ended and a slot there is free (as
// many as the job holds, PlanJob.Slots: its cores), and
// takes its runtime there plus the time to read each input from where
// it is kept and to write each output to where the plan keeps it. A file
// read or written at its own site costs nothing; between sites, its size
// over the link's bandwidth plus the link's latency. Planners differ only
// in how they choose sites, file places and the order.
package plan

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/mq-hpc/mq/internal/policy"
)

// model is a Problem compiled to dense indexes: jobs 0..n-1 in the order
// given, sites 0..m-1, dynamic files (outputs of a job of the Problem)
// 0..f-1. An allocation is a vector of n+f site indexes, jobs first, then
// files: the seed's allocation vector.
type model struct {
	ids   []int64
	sites []policy.PlanSite
	width []int32     // slots each job holds at once (1 for most)
	exec  [][]float64 // [job][site] seconds; +Inf where it cannot run
	pred  [][]int32   // prerequisite jobs: declared, and producers of inputs
	succ  [][]int32
	ins   [][]int32 // dynamic files read
	outs  [][]int32 // dynamic files written
	// static inputs: read from the cheapest replica; their cost per site
	// (seconds) and bytes moved per site are fixed by the Problem.
	staticCost  [][]float64 // [job][site]
	staticBytes [][]int64   // [job][site]
	fileSize    []int64
	fileProd    []int32
	filePath    []string
	bw, lat     [][]float64 // [from][to]; same site: +Inf, 0
	topo        []int32     // a topological order of the jobs
	level       []int32     // the seed's initial height (Eq. 5.1)
}

// ErrNoSites is returned for a Problem without a site to place jobs at.
var ErrNoSites = errors.New("plan: no sites")

// compile checks p and builds its model.
func compile(p policy.Problem) (*model, error) {
	if len(p.Sites) == 0 {
		return nil, ErrNoSites
	}
	m := &model{sites: p.Sites}
	siteIdx, err := indexSites(p.Sites)
	if err != nil {
		return nil, err
	}
	if err := m.links(p); err != nil {
		return nil, err
	}
	idx, err := m.indexJobs(p.Jobs)
	if err != nil {
		return nil, err
	}
	fileIdx, err := m.indexOutputs(p.Jobs)
	if err != nil {
		return nil, err
	}
	n, ns := len(p.Jobs), len(p.Sites)
	m.exec = make([][]float64, n)
	m.pred, m.succ = make([][]int32, n), make([][]int32, n)
	m.ins, m.outs = make([][]int32, n), make([][]int32, n)
	m.staticCost, m.staticBytes = make([][]float64, n), make([][]int64, n)
	m.width = make([]int32, n)
	for i, j := range p.Jobs {
		if j.Slots < 0 {
			return nil, fmt.Errorf("plan: job %d holds %d slots", j.ID, j.Slots)
		}
		m.width[i] = int32(max(j.Slots, 1))
		m.exec[i] = make([]float64, ns)
		if !m.runtimes(i, j) {
			return nil, fmt.Errorf("plan: job %d has a runtime at no site", j.ID)
		}
		if err := m.edges(i, j, idx, fileIdx, siteIdx); err != nil {
			return nil, err
		}
		for _, o := range j.Outputs {
			m.outs[i] = append(m.outs[i], fileIdx[o.Path])
		}
	}
	if err := m.order(); err != nil {
		return nil, err
	}
	return m, nil
}

// indexSites checks the sites and maps their names to their indexes.
func indexSites(sites []policy.PlanSite) (map[string]int, error) {
	siteIdx := make(map[string]int, len(sites))
	for i, s := range sites {
		if s.Slots < 1 {
			return nil, fmt.Errorf("plan: site %q has %d slots", s.Name, s.Slots)
		}
		if _, dup := siteIdx[s.Name]; dup {
			return nil, fmt.Errorf("plan: site %q named twice", s.Name)
		}
		siteIdx[s.Name] = i
	}
	return siteIdx, nil
}

// links fills the bandwidth and latency between every two sites.
func (m *model) links(p policy.Problem) error {
	ns := len(p.Sites)
	m.bw, m.lat = make([][]float64, ns), make([][]float64, ns)
	for i := range ns {
		m.bw[i], m.lat[i] = make([]float64, ns), make([]float64, ns)
		for j := range ns {
			if i == j {
				m.bw[i][j] = math.Inf(1)
				continue
			}
			bw, lat := math.Inf(1), 0.0
			if p.Bandwidth != nil {
				bw = p.Bandwidth(p.Sites[i].Name, p.Sites[j].Name)
			}
			if p.Latency != nil {
				lat = p.Latency(p.Sites[i].Name, p.Sites[j].Name)
			}
			if !(bw > 0) || lat < 0 || math.IsNaN(lat) {
				return fmt.Errorf("plan: link %s->%s: bandwidth %g, latency %g", p.Sites[i].Name, p.Sites[j].Name, bw, lat)
			}
			m.bw[i][j], m.lat[i][j] = bw, lat
		}
	}
	return nil
}

// indexJobs fills m.ids and maps each job's ID to its index.
func (m *model) indexJobs(jobs []policy.PlanJob) (map[int64]int32, error) {
	idx := make(map[int64]int32, len(jobs))
	m.ids = make([]int64, len(jobs))
	for i, j := range jobs {
		if _, dup := idx[j.ID]; dup {
			return nil, fmt.Errorf("plan: job %d listed twice", j.ID)
		}
		idx[j.ID] = int32(i)
		m.ids[i] = j.ID
	}
	return idx, nil
}

// indexOutputs numbers the dynamic files, the jobs' outputs, and maps
// each path to its number.
func (m *model) indexOutputs(jobs []policy.PlanJob) (map[string]int32, error) {
	fileIdx := map[string]int32{}
	for i, j := range jobs {
		for _, o := range j.Outputs {
			if prev, dup := fileIdx[o.Path]; dup {
				return nil, fmt.Errorf("plan: %s is an output of jobs %d and %d", o.Path, m.ids[m.fileProd[prev]], j.ID)
			}
			fileIdx[o.Path] = int32(len(m.fileSize))
			m.fileSize = append(m.fileSize, max(o.Size, 0))
			m.fileProd = append(m.fileProd, int32(i))
			m.filePath = append(m.filePath, o.Path)
		}
	}
	return fileIdx, nil
}

// runtimes fills job i's runtime per site (+Inf where it has none) and
// reports whether it can run anywhere.
func (m *model) runtimes(i int, j policy.PlanJob) (runnable bool) {
	for s, site := range m.sites {
		e, ok := j.Est[site.Name]
		switch {
		case !ok || math.IsNaN(e) || e < 0:
			m.exec[i][s] = math.Inf(1)
		default:
			m.exec[i][s] = e
			runnable = runnable || !math.IsInf(e, 1)
		}
	}
	return runnable
}

// edges fills job i's prerequisites (declared, and the producers of its
// inputs), its dynamic inputs, and the cost of its static ones.
func (m *model) edges(i int, j policy.PlanJob, idx map[int64]int32, fileIdx map[string]int32, siteIdx map[string]int) error {
	seen := map[int32]bool{}
	addPred := func(q int32) {
		if q != int32(i) && !seen[q] {
			seen[q] = true
			m.pred[i] = append(m.pred[i], q)
			m.succ[q] = append(m.succ[q], int32(i))
		}
	}
	for _, pr := range j.Prereqs {
		q, ok := idx[pr]
		if !ok {
			return fmt.Errorf("plan: job %d needs job %d, which the problem does not list", j.ID, pr)
		}
		addPred(q)
	}
	ns := len(m.sites)
	m.staticCost[i], m.staticBytes[i] = make([]float64, ns), make([]int64, ns)
	for _, in := range j.Inputs {
		if f, ok := fileIdx[in.Path]; ok {
			if m.fileProd[f] == int32(i) {
				return fmt.Errorf("plan: job %d reads its own output %s", j.ID, in.Path)
			}
			m.ins[i] = append(m.ins[i], f)
			addPred(m.fileProd[f])
			continue
		}
		m.addStaticInput(i, in, siteIdx)
	}
	return nil
}

// addStaticInput adds to job i's static cost per site that of reading
// input in, a file already somewhere, from its cheapest replica. One held
// nowhere the Problem knows is taken as present.
func (m *model) addStaticInput(i int, in policy.PlanFile, siteIdx map[string]int) {
	var at []int
	for _, a := range in.At {
		if s, ok := siteIdx[a]; ok {
			at = append(at, s)
		}
	}
	for s := range m.sites {
		best, bytes := 0.0, int64(0)
		if len(at) > 0 {
			best = math.Inf(1)
			for _, a := range at {
				if c := m.transfer(in.Size, a, s); c < best {
					best = c
					bytes = 0
					if a != s {
						bytes = in.Size
					}
				}
			}
		}
		m.staticCost[i][s] += best
		m.staticBytes[i][s] += bytes
	}
}

// transfer is the seconds to move size bytes from site a to site b.
func (m *model) transfer(size int64, a, b int) float64 {
	if a == b || size <= 0 {
		return 0
	}
	return float64(size)/m.bw[a][b] + m.lat[a][b]
}

// order computes a topological order and each job's level, refusing a
// cycle.
func (m *model) order() error {
	n := len(m.ids)
	indeg := make([]int, n)
	for i := range n {
		indeg[i] = len(m.pred[i])
	}
	m.level = make([]int32, n)
	m.topo = make([]int32, 0, n)
	for i := range n {
		if indeg[i] == 0 {
			m.topo = append(m.topo, int32(i))
		}
	}
	for k := 0; k < len(m.topo); k++ {
		i := m.topo[k]
		for _, s := range m.succ[i] {
			m.level[s] = max(m.level[s], m.level[i]+1)
			if indeg[s]--; indeg[s] == 0 {
				m.topo = append(m.topo, s)
			}
		}
	}
	if len(m.topo) != n {
		for i := range n {
			if indeg[i] > 0 {
				return fmt.Errorf("plan: the jobs' dependencies form a cycle (through job %d)", m.ids[i])
			}
		}
	}
	return nil
}

// schedule is one plan in model terms: the allocation vector (n job
// sites, then f file sites) and the order jobs start in.
type schedule struct {
	alloc []int32
	order []int32
}

// eval is a reusable evaluator: Evaluate's scratch space.
type eval struct {
	m     *model
	ft    []float64
	slots [][]float64 // per site, each slot's free time (a min-heap)
}

func newEval(m *model) *eval {
	e := &eval{m: m, ft: make([]float64, len(m.ids)), slots: make([][]float64, len(m.sites))}
	for s, site := range m.sites {
		e.slots[s] = make([]float64, site.Slots)
	}
	return e
}

// run scores a schedule: the makespan and the bytes moved between sites.
// An order that starts a job before one of its prerequisites is invalid:
// +Inf.
func (e *eval) run(sc schedule) (makespan float64, moved int64) {
	m := e.m
	for i := range e.ft {
		e.ft[i] = -1
	}
	for s := range e.slots {
		clear(e.slots[s])
	}
	for _, t := range sc.order {
		s := sc.alloc[t]
		ready := 0.0
		for _, p := range m.pred[t] {
			if e.ft[p] < 0 {
				return math.Inf(1), 0
			}
			ready = max(ready, e.ft[p])
		}
		d, mv := m.duration(t, sc.alloc)
		moved += mv
		_, end := takeSlots(e.slots[s], m.width[t], ready, d)
		e.ft[t] = end
		makespan = max(makespan, end)
	}
	return makespan, moved
}

// duration is how long job t takes at its site under alloc (its runtime
// there, reading its inputs, writing its outputs) and the bytes it moves
// between sites.
func (m *model) duration(t int32, alloc []int32) (d float64, moved int64) {
	n, s := len(m.ids), alloc[t]
	d = m.exec[t][s] + m.staticCost[t][s]
	moved = m.staticBytes[t][s]
	for _, f := range m.ins[t] {
		if at := int(alloc[n+int(f)]); at != int(s) {
			d += m.transfer(m.fileSize[f], at, int(s))
			moved += m.fileSize[f]
		}
	}
	for _, f := range m.outs[t] {
		if at := int(alloc[n+int(f)]); at != int(s) {
			d += m.transfer(m.fileSize[f], int(s), at)
			moved += m.fileSize[f]
		}
	}
	return d, moved
}

// takeSlots starts a job of width slots lasting d on the min-heap h of
// a site's slot free times, once ready: when the width-th slot to free
// does (all of them for a width past the site's), taking that many of the
// first to free until its end.
func takeSlots(h []float64, width int32, ready, d float64) (start, end float64) {
	start = max(ready, kthFree(h, width))
	end = start + d
	setFirst(h, width, end)
	return start, end
}

// setFirst sets the width first slots of h to free to v, keeping h a
// min-heap.
func setFirst(h []float64, width int32, v float64) {
	if width <= 1 {
		heapFix0(h, v)
		return
	}
	slices.Sort(h)
	for i := range min(int(width), len(h)) {
		h[i] = v
	}
	slices.Sort(h)
}

// kthFree is when the width-th slot of h to free does (all of them for a
// width past the site's). It sorts h, which a sorted slice leaves a
// min-heap of the same times.
func kthFree(h []float64, width int32) float64 {
	if width <= 1 {
		return h[0]
	}
	slices.Sort(h)
	return h[min(int(width), len(h))-1]
}

// heapFix0 replaces the smallest free time of a min-heap with v.
func heapFix0(h []float64, v float64) {
	h[0] = v
	i, n := 0, len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		c := l
		if r := l + 1; r < n && h[r] < h[l] {
			c = r
		}
		if h[i] <= h[c] {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// toPlan turns a schedule into the Plan a caller sees.
func (m *model) toPlan(sc schedule, e *eval) policy.Plan {
	n := len(m.ids)
	p := policy.Plan{Site: make(map[int64]string, n), FileSite: make(map[string]string, len(m.fileSize))}
	for i := range n {
		p.Site[m.ids[i]] = m.sites[sc.alloc[i]].Name
	}
	for f := range m.fileSize {
		p.FileSite[m.filePath[f]] = m.sites[sc.alloc[n+f]].Name
	}
	p.Order = make([]int64, len(sc.order))
	for k, t := range sc.order {
		p.Order[k] = m.ids[t]
	}
	p.Makespan, p.Moved = e.run(sc)
	return p
}

// filesAtProducers keeps each file where the job that writes it runs:
// what HEFT and MinMin, which place jobs only, imply.
func (m *model) filesAtProducers(alloc []int32) {
	n := len(m.ids)
	for f, prod := range m.fileProd {
		alloc[n+f] = alloc[prod]
	}
}

// Evaluate scores a plan made elsewhere (or edited) against p: its
// makespan and bytes moved under the model the planners use. Jobs or
// files the plan does not place, and sites it names that p lacks, are
// errors; files it does not place are kept where they are written.
func Evaluate(p policy.Problem, pl policy.Plan) (makespan float64, moved int64, err error) {
	m, sc, err := compilePlan(p, pl)
	if err != nil {
		return 0, 0, err
	}
	ms, mv := newEval(m).run(sc)
	if math.IsInf(ms, 1) {
		return 0, 0, errors.New("plan: the order starts a job before its prerequisites")
	}
	return ms, mv, nil
}

// compilePlan compiles p and turns pl into a schedule of it (Evaluate,
// Timeline).
func compilePlan(p policy.Problem, pl policy.Plan) (*model, schedule, error) {
	m, err := compile(p)
	if err != nil {
		return nil, schedule{}, err
	}
	siteIdx := map[string]int32{}
	for i, s := range m.sites {
		siteIdx[s.Name] = int32(i)
	}
	n := len(m.ids)
	sc := schedule{alloc: make([]int32, n+len(m.fileSize))}
	for i, id := range m.ids {
		s, ok := siteIdx[pl.Site[id]]
		if !ok {
			return nil, sc, fmt.Errorf("plan: job %d placed at %q, not a site of the problem", id, pl.Site[id])
		}
		sc.alloc[i] = s
	}
	m.filesAtProducers(sc.alloc)
	for f, path := range m.filePath {
		if name, ok := pl.FileSite[path]; ok {
			s, ok := siteIdx[name]
			if !ok {
				return nil, sc, fmt.Errorf("plan: file %s kept at %q, not a site of the problem", path, name)
			}
			sc.alloc[n+f] = s
		}
	}
	pos := make(map[int64]int32, n)
	for i, id := range m.ids {
		pos[id] = int32(i)
	}
	for _, id := range pl.Order {
		t, ok := pos[id]
		if !ok {
			return nil, sc, fmt.Errorf("plan: order names job %d, not in the problem", id)
		}
		sc.order = append(sc.order, t)
	}
	if len(sc.order) != n {
		return nil, sc, fmt.Errorf("plan: order lists %d jobs, the problem %d", len(sc.order), n)
	}
	return m, sc, nil
}

// sortedBy returns the jobs sorted by key descending, ties by topological
// position (so a prerequisite with an equal key goes first).
func (m *model) sortedBy(key []float64) []int32 {
	pos := make([]int, len(m.ids))
	for k, t := range m.topo {
		pos[t] = k
	}
	out := append([]int32(nil), m.topo...)
	sort.SliceStable(out, func(a, b int) bool {
		ka, kb := key[out[a]], key[out[b]]
		if ka != kb {
			return ka > kb
		}
		return pos[out[a]] < pos[out[b]]
	})
	return out
}
