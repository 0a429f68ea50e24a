package plan

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/mq-hpc/mq/internal/policy"
)

// ListSearch plans by searching priority lists for identical slots: the
// sites' slots pooled, every job at its mean runtime over the sites, no
// transfers. A list is decoded the way the CLS follows a plan's order
// (pickPlanned: a free slot takes the first ready job of the list), so
// what it predicts is what a site with no overhead would do. For one
// site (cls serve --local N): on real traces it finds schedules within
// 0.01% of the Fernández-Bussell bound where cp's b-level list is 11%
// above it (BENCHMARKS.md). With several sites it ignores their speeds
// and links; HEFT or AEH-ETAA are for those.
type ListSearch struct {
	TimeLimit time.Duration // 0: 30 s
	Evals     int           // lists decoded; 0: 2,000,000
}

// Plan implements policy.Planner.
func (l ListSearch) Plan(ctx context.Context, p policy.Problem) (policy.Plan, error) {
	m, err := compile(p)
	if err != nil {
		return policy.Plan{}, err
	}
	n := len(m.ids)
	rt := make([]float64, n)
	for i := range n {
		k := 0
		for s := range m.sites {
			if e := m.exec[i][s]; !math.IsInf(e, 1) {
				rt[i] += e + m.staticCost[i][s]
				k++
			}
		}
		rt[i] /= float64(k)
	}
	slots := 0
	siteOf := []int32{} // pooled slot -> site
	for s, site := range m.sites {
		slots += site.Slots
		for range site.Slots {
			siteOf = append(siteOf, int32(s))
		}
	}
	limit := l.TimeLimit
	if limit <= 0 {
		limit = 30 * time.Second
	}
	r, err := SearchList(ctx, rt, m.pred, slots, uint64(p.Seed), cmp.Or(l.Evals, 2_000_000), limit, nil)
	if err != nil {
		return policy.Plan{}, err
	}
	// The slot each job ran on in the best schedule gives its site.
	sc := schedule{alloc: make([]int32, n+len(m.fileSize)), order: r.List}
	for i, k := range r.Slot {
		sc.alloc[i] = siteOf[k]
		if math.IsInf(m.exec[i][sc.alloc[i]], 1) {
			// It cannot run there: its fastest site instead.
			for s := range m.sites {
				if m.exec[i][s] < m.exec[i][sc.alloc[i]] {
					sc.alloc[i] = int32(s)
				}
			}
		}
	}
	m.filesAtProducers(sc.alloc)
	return m.toPlan(sc, newEval(m)), nil
}

// ListResult is what SearchList found.
type ListResult struct {
	// List is the best list, in the order its tasks start (a topological
	// order that decodes to the same schedule).
	List     []int32
	Makespan float64
	Start    []float64 // per task, in the best schedule
	Slot     []int32   // per task, the slot it ran on (0..slots-1)
	// First is the initial list's makespan, Justified its makespan after
	// forward-backward passes.
	First, Justified float64
	Evals            int
	Capped           bool // the time limit ended the search before evals
}

// SearchList looks for the priority list whose list schedule of the DAG
// (task i runs runtime[i] seconds after the tasks prereqs[i]) on slots
// identical slots ends first. A list schedule starts, whenever a slot is
// free, the ready task first in the list: it never holds a slot idle
// while a task is ready, so the CLS can follow it. The search starts from
// first (nil: by b-level, as policy CP orders), improves it by
// forward-backward passes (Valls, Ballestín and Quintanilla's
// justification, EJOR 165(2), 2005, with list schedules both ways), then
// by late-acceptance hill climbing over insert and swap moves with a
// forward-backward pass whenever it stalls. It stops after evals lists,
// or stallEvals without a gain, or on reaching max(longest chain,
// work/slots). For a seed and evals it is deterministic unless limit
// ends it first.
func SearchList(ctx context.Context, runtime []float64, prereqs [][]int32, slots int, seed uint64, evals int, limit time.Duration, first []int32) (ListResult, error) {
	n := len(runtime)
	if slots < 1 {
		return ListResult{}, fmt.Errorf("plan: %d slots", slots)
	}
	users := make([][]int32, n)
	for i, ps := range prereqs {
		for _, p := range ps {
			if p < 0 || int(p) >= n {
				return ListResult{}, fmt.Errorf("plan: task %d needs task %d of %d", i, p, n)
			}
			users[p] = append(users[p], int32(i))
		}
	}
	list := slices.Clone(first)
	if list == nil {
		b, ok := policy.Levels(runtime, prereqs)
		if !ok {
			return ListResult{}, errors.New("plan: the tasks form a cycle")
		}
		list = make([]int32, n)
		for i := range list {
			list[i] = int32(i)
		}
		slices.SortStableFunc(list, func(x, y int32) int { return cmp.Compare(b[y], b[x]) })
	}
	if len(list) != n {
		return ListResult{}, fmt.Errorf("plan: a first list of %d tasks for %d", len(list), n)
	}
	fw := newListSched(runtime, prereqs, users, slots)
	bw := newListSched(runtime, users, prereqs, slots)
	ms := fw.makespan(list)
	if ms < 0 {
		return ListResult{}, errors.New("plan: the tasks form a cycle, or the first list repeats one")
	}
	r := ListResult{First: ms}
	list, ms, r.Evals = fbi(fw, bw, list, ms)
	r.Justified = ms
	best, bestMS := slices.Clone(list), ms
	deadline := time.Now().Add(limit)
	// No list beats the longest chain or the work spread over every slot:
	// reaching that ends the search.
	floor := 0.0
	if lv, ok := policy.Levels(runtime, prereqs); ok {
		work := 0.0
		for i, p := range runtime {
			floor = max(floor, lv[i])
			work += p
		}
		floor = max(floor, work/float64(slots))
	}
	if n >= 2 && ms > floor {
		r.Evals, r.Capped = climb(ctx, fw, bw, &best, &bestMS, list, ms, rand.New(rand.NewPCG(seed, 0x6d71)), evals, r.Evals, deadline, floor)
	}
	r.Makespan = fw.makespan(best)
	r.Start = slices.Clone(fw.start)
	r.Slot = slices.Clone(fw.slot)
	r.List = best
	slices.SortStableFunc(r.List, func(x, y int32) int { return cmp.Compare(r.Start[x], r.Start[y]) })
	return r, ctx.Err()
}

// climb is SearchList's late-acceptance hill climbing from list; it
// leaves the best list in *best.
func climb(ctx context.Context, fw, bw *listSched, best *[]int32, bestMS *float64, list []int32, ms float64, rng *rand.Rand, evals, done int, deadline time.Time, floor float64) (int, bool) {
	n := len(list)
	// Moves pick the task to move by runtime: a list's short tasks rarely
	// matter, and most of real workflows' tasks are short.
	cum := make([]float64, n)
	total, mean := 0.0, 0.0
	for _, p := range fw.runtime {
		mean += p / float64(n)
	}
	for i, p := range fw.runtime {
		total += p + mean/4
		cum[i] = total
	}
	pos := make([]int32, n)
	pick := func() int {
		t, _ := slices.BinarySearch(cum, rng.Float64()*total)
		return int(pos[min(t, n-1)])
	}
	// Late acceptance (Burke and Bykov): a move stands if it is no worse
	// than the list of hist steps ago, which walks plateaus and out of
	// shallow pits without a temperature to tune.
	const hist = 500
	lahc := make([]float64, hist)
	for i := range lahc {
		lahc[i] = ms
	}
	cand := make([]int32, n)
	stall := 0
	lastGain := done
	for step := 0; done < evals && *bestMS > floor && done-lastGain < stallEvals; step++ {
		if step%256 == 0 && (time.Now().After(deadline) || ctx.Err() != nil) {
			return done, true
		}
		for k, i := range list {
			pos[i] = int32(k)
		}
		copy(cand, list)
		a := pick()
		var b int
		if rng.IntN(2) == 0 {
			b = max(0, min(n-1, a+rng.IntN(41)-20))
		} else {
			b = rng.IntN(n)
		}
		switch {
		case rng.IntN(2) == 0:
			cand[a], cand[b] = cand[b], cand[a]
		case a < b:
			copy(cand[a:b], cand[a+1:b+1])
			cand[b] = list[a]
		default:
			copy(cand[b+1:a+1], cand[b:a])
			cand[b] = list[a]
		}
		m := fw.makespan(cand)
		done++
		if m <= lahc[step%hist] || m <= ms {
			list, cand = cand, list
			ms = m
		}
		lahc[step%hist] = ms
		if ms < *bestMS {
			*bestMS = ms
			*best = append((*best)[:0], list...)
			stall, lastGain = 0, done
		} else if stall++; stall%20_000 == 0 {
			// Stalled: justify the current list, and every fifth time
			// the best one.
			if stall%100_000 == 0 {
				list, ms = slices.Clone(*best), *bestMS
			}
			var e int
			list, ms, e = fbi(fw, bw, slices.Clone(list), ms)
			done += e
			if ms < *bestMS {
				*bestMS, *best, stall, lastGain = ms, slices.Clone(list), 0, done
			}
		}
	}
	return done, false
}

// stallEvals ends a search that has not improved in that many lists.
const stallEvals = 500_000

// fbi runs forward-backward passes from list until a forward pass stops
// improving, and returns the best forward list, its makespan and the
// lists decoded. A backward pass decodes, on the reversed DAG, the tasks
// latest-ending first; read from the end it is a schedule of the DAG
// that starts each task as late as it can, and its tasks latest-ending
// first (earliest-starting, in forward time) are the next forward list.
func fbi(fw, bw *listSched, list []int32, ms float64) ([]int32, float64, int) {
	evals := 0
	for {
		fw.makespan(list)
		back := byLatestFinish(fw, list)
		bw.makespan(back)
		next := byLatestFinish(bw, back)
		m := fw.makespan(next)
		evals += 3
		if m >= ms {
			return list, ms, evals
		}
		list, ms = next, m
	}
}

// byLatestFinish orders list by the finish times left in s, latest first
// (ties keep list's order).
func byLatestFinish(s *listSched, list []int32) []int32 {
	out := slices.Clone(list)
	slices.SortStableFunc(out, func(x, y int32) int { return cmp.Compare(s.finish[y], s.finish[x]) })
	return out
}

// DecodeList is the list schedule of list (every task once): each task's
// start and the makespan; -1 if the tasks form a cycle.
func DecodeList(runtime []float64, prereqs [][]int32, slots int, list []int32) (start []float64, makespan float64) {
	users := make([][]int32, len(runtime))
	for i, ps := range prereqs {
		for _, p := range ps {
			users[p] = append(users[p], int32(i))
		}
	}
	s := newListSched(runtime, prereqs, users, max(slots, 1))
	ms := s.makespan(list)
	return s.start, ms
}

// listSched decodes lists into list schedules of one DAG, reusing its
// buffers (a search decodes millions). Among tasks ending at once, the
// lower index frees its slot first; all that end at a time end before
// any starts.
type listSched struct {
	runtime        []float64
	prereqs, users [][]int32
	slots          int
	rank           []int32 // task -> place in the list
	pending        []int32
	ready          []int32 // heap of tasks by rank
	run            []ending
	free           []int32 // slots free
	start, finish  []float64
	slot           []int32
}

type ending struct {
	at   float64
	task int32
	slot int32
}

func (a ending) before(b ending) bool { return a.at < b.at || a.at == b.at && a.task < b.task }

func newListSched(runtime []float64, prereqs, users [][]int32, slots int) *listSched {
	n := len(runtime)
	return &listSched{runtime: runtime, prereqs: prereqs, users: users, slots: slots,
		rank: make([]int32, n), pending: make([]int32, n), ready: make([]int32, 0, n),
		run: make([]ending, 0, slots), free: make([]int32, 0, slots),
		start: make([]float64, n), finish: make([]float64, n), slot: make([]int32, n)}
}

// makespan decodes list and leaves each task's start, finish and slot in
// s; it is -1 if some task never became ready (a cycle).
func (s *listSched) makespan(list []int32) float64 {
	for k, i := range list {
		s.rank[i] = int32(k)
	}
	s.ready = s.ready[:0]
	for i := range s.prereqs {
		if s.pending[i] = int32(len(s.prereqs[i])); s.pending[i] == 0 {
			s.push(int32(i))
		}
	}
	s.run = s.run[:0]
	s.free = s.free[:0]
	for k := s.slots - 1; k >= 0; k-- {
		s.free = append(s.free, int32(k))
	}
	now, started := 0.0, 0
	for {
		for len(s.free) > 0 && len(s.ready) > 0 {
			i := s.pop()
			k := s.free[len(s.free)-1]
			s.free = s.free[:len(s.free)-1]
			s.start[i], s.finish[i], s.slot[i] = now, now+s.runtime[i], k
			s.runPush(ending{s.finish[i], i, k})
			started++
		}
		if len(s.run) == 0 {
			if started < len(s.runtime) {
				return -1
			}
			return now
		}
		now = s.run[0].at
		for len(s.run) > 0 && s.run[0].at == now {
			e := s.runPop()
			s.free = append(s.free, e.slot)
			for _, u := range s.users[e.task] {
				if s.pending[u]--; s.pending[u] == 0 {
					s.push(u)
				}
			}
		}
	}
}

// The heaps are written out: container/heap's interface calls were most
// of a decode's cost, and internal/heap's call of less through a func
// value makes a decode twice as slow (BenchmarkListDecode).

func (s *listSched) push(i int32) {
	h := append(s.ready, i)
	for k := len(h) - 1; k > 0; {
		p := (k - 1) / 2
		if s.rank[h[p]] <= s.rank[h[k]] {
			break
		}
		h[p], h[k] = h[k], h[p]
		k = p
	}
	s.ready = h
}

func (s *listSched) pop() int32 {
	h := s.ready
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for k := 0; ; {
		c := 2*k + 1
		if c >= len(h) {
			break
		}
		if c+1 < len(h) && s.rank[h[c+1]] < s.rank[h[c]] {
			c++
		}
		if s.rank[h[k]] <= s.rank[h[c]] {
			break
		}
		h[k], h[c] = h[c], h[k]
		k = c
	}
	s.ready = h
	return top
}

func (s *listSched) runPush(x ending) {
	h := append(s.run, x)
	for k := len(h) - 1; k > 0; {
		p := (k - 1) / 2
		if !h[k].before(h[p]) {
			break
		}
		h[p], h[k] = h[k], h[p]
		k = p
	}
	s.run = h
}

func (s *listSched) runPop() ending {
	h := s.run
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for k := 0; ; {
		c := 2*k + 1
		if c >= len(h) {
			break
		}
		if c+1 < len(h) && h[c+1].before(h[c]) {
			c++
		}
		if !h[c].before(h[k]) {
			break
		}
		h[k], h[c] = h[c], h[k]
		k = c
	}
	s.run = h
	return top
}
