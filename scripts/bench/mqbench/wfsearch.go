package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mq-hpc/mq/policy"
	"github.com/mq-hpc/mq/wfformat"
)

// wfsearch looks for a better priority list than cp's for each WfFormat
// trace on -slots ideal slots (no overhead), decoding every list the way
// the metaqueue dispatches: a free slot takes the ready task first in the
// list (a list schedule, never holding a slot idle while a task is ready,
// so whatever it finds a live CLS can follow by job priorities). It
// starts from cp's list, improves it by forward-backward passes (Valls,
// Ballestín and Quintanilla's justification, EJOR 165(2), 2005, done with
// list schedules both ways) and then by late-acceptance hill climbing
// over insert and swap moves, with a forward-backward pass whenever it
// stalls. It is deterministic for a seed and -evals; -time caps it.
// Prints the best makespan over max(critical path, work/slots) and over
// the best lower bound (fbBound, pairBound); -order DIR writes the best
// list, one task id a line, first first.
func wfsearch(args []string) error {
	fs := flag.NewFlagSet("wfsearch", flag.ExitOnError)
	slots := fs.Int("slots", 8, "ideal slots")
	seed := fs.Uint64("seed", 1, "random seed")
	evals := fs.Int("evals", 2_000_000, "lists to decode per trace")
	limit := fs.Duration("time", 90*time.Second, "time cap per trace")
	orderDir := fs.String("order", "", "write each trace's best list to DIR/TRACE.order")
	fs.Parse(args)
	if fs.NArg() == 0 {
		return errors.New("need WfFormat trace files")
	}
	for _, path := range fs.Args() {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		w, err := wfformat.Read(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		d, err := newTaskDAG(w)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		lb := w.LowerBound(*slots)
		best := max(d.fbBound(*slots), d.pairBound(*slots))
		t0 := time.Now()
		r := d.search(*slots, *seed, *evals, *limit)
		name := strings.TrimSuffix(filepath.Base(path), ".json")
		fmt.Printf("trace=%s tasks=%d slots=%d seed=%d bound_s=%.1f best_bound=%.4f cp=%.4f fbi=%.4f searched=%.4f searched_vs_best_bound=%.4f evals=%d capped=%v secs=%.1f\n",
			name, len(w.Tasks), *slots, *seed, lb, best/lb, r.cp/lb, r.fbi/lb, r.makespan/lb, r.makespan/best, r.evals, r.capped, time.Since(t0).Seconds())
		if *orderDir != "" {
			var b strings.Builder
			for _, i := range r.list {
				fmt.Fprintln(&b, w.Tasks[i].ID)
			}
			if err := os.WriteFile(filepath.Join(*orderDir, name+".order"), []byte(b.String()), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// listSched decodes priority lists into list schedules of one DAG, with
// the same rules and ties as taskDAG.schedule, reusing its buffers (a
// search decodes millions).
type listSched struct {
	d       *taskDAG
	slots   int
	rank    []int32 // task -> place in the list
	pending []int32
	ready   []int32 // heap of tasks by rank
	run     finishes
	start   []float64
	finish  []float64
}

func newListSched(d *taskDAG, slots int) *listSched {
	n := len(d.runtime)
	return &listSched{d: d, slots: slots, rank: make([]int32, n), pending: make([]int32, n),
		ready: make([]int32, 0, n), run: make(finishes, 0, slots), start: make([]float64, n), finish: make([]float64, n)}
}

// makespan decodes list (every task once) and leaves each task's start
// and finish in s.start and s.finish.
func (s *listSched) makespan(list []int32) float64 {
	d := s.d
	for k, i := range list {
		s.rank[i] = int32(k)
	}
	s.ready = s.ready[:0]
	for i := range d.prereqs {
		if s.pending[i] = int32(len(d.prereqs[i])); s.pending[i] == 0 {
			s.push(int32(i))
		}
	}
	s.run = s.run[:0]
	now, free := 0.0, s.slots
	for {
		for free > 0 && len(s.ready) > 0 {
			i := s.pop()
			s.start[i], s.finish[i] = now, now+d.runtime[i]
			s.run.push(finish{s.finish[i], int(i)})
			free--
		}
		if len(s.run) == 0 {
			return now
		}
		now = s.run[0].at
		for len(s.run) > 0 && s.run[0].at == now {
			e := s.run.pop()
			free++
			for _, u := range d.users[e.task] {
				if s.pending[u]--; s.pending[u] == 0 {
					s.push(u)
				}
			}
		}
	}
}

// push and pop keep s.ready a min-heap by rank without container/heap's
// interface calls (they are most of a decode's cost).
func (s *listSched) push(i int32) {
	h := append(s.ready, i)
	k := len(h) - 1
	for k > 0 {
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

func (f *finishes) push(x finish) {
	h := append(*f, x)
	for k := len(h) - 1; k > 0; {
		p := (k - 1) / 2
		if !h.Less(k, p) {
			break
		}
		h[p], h[k] = h[k], h[p]
		k = p
	}
	*f = h
}

func (f *finishes) pop() finish {
	h := *f
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for k := 0; ; {
		c := 2*k + 1
		if c >= len(h) {
			break
		}
		if c+1 < len(h) && h.Less(c+1, c) {
			c++
		}
		if !h.Less(c, k) {
			break
		}
		h[k], h[c] = h[c], h[k]
		k = c
	}
	*f = h
	return top
}

// reversed is the DAG with every edge turned round (a backward pass
// schedules it: its list schedule read from the end is one of d).
func (d *taskDAG) reversed() *taskDAG {
	return &taskDAG{runtime: d.runtime, prereqs: d.users, users: d.prereqs}
}

// cpList is cp's list: by b-level from the runtimes (as float32, as
// Ready.Prio carries it), the earlier task first among equals, so that
// decoding it is taskDAG.schedule with policy.CP.
func (d *taskDAG) cpList() []int32 {
	b, _ := policy.BLevels(d.runtime, d.prereqs)
	list := make([]int32, len(b))
	for i := range list {
		list[i] = int32(i)
	}
	slices.SortStableFunc(list, func(x, y int32) int { return cmp.Compare(float32(b[y]), float32(b[x])) })
	return list
}

// byLatestFinish orders list by the finish times left in s, latest first
// (ties keep list's order): decoded on the reversed DAG it starts first
// what ended last, which is a forward-backward pass's next list.
func byLatestFinish(s *listSched, list []int32) []int32 {
	out := slices.Clone(list)
	slices.SortStableFunc(out, func(x, y int32) int { return cmp.Compare(s.finish[y], s.finish[x]) })
	return out
}

// fbi runs forward-backward passes from list until a forward pass stops
// improving, and returns the best forward list and its makespan.
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

type searchResult struct {
	list     []int32
	makespan float64
	cp, fbi  float64
	evals    int
	capped   bool
}

// search is wfsearch's search on one DAG.
func (d *taskDAG) search(slots int, seed uint64, evals int, limit time.Duration) searchResult {
	n := len(d.runtime)
	fw, bw := newListSched(d, slots), newListSched(d.reversed(), slots)
	rng := rand.New(rand.NewPCG(seed, 0x6d71))
	deadline := time.Now().Add(limit)
	list := d.cpList()
	ms := fw.makespan(list)
	r := searchResult{cp: ms}
	list, ms, r.evals = fbi(fw, bw, list, ms)
	r.fbi = ms
	best, bestMS := slices.Clone(list), ms
	if n < 2 {
		r.list, r.makespan = best, bestMS
		return r
	}
	// Moves pick the task to move by runtime: a list's short tasks rarely
	// matter, and most of these traces' tasks are short.
	cum := make([]float64, n)
	total := 0.0
	mean := 0.0
	for _, p := range d.runtime {
		mean += p / float64(n)
	}
	for i, p := range d.runtime {
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
	for step := 0; r.evals < evals; step++ {
		if step%256 == 0 && time.Now().After(deadline) {
			r.capped = true
			break
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
		if rng.IntN(2) == 0 {
			cand[a], cand[b] = cand[b], cand[a]
		} else if a < b {
			copy(cand[a:b], cand[a+1:b+1])
			cand[b] = list[a]
		} else {
			copy(cand[b+1:a+1], cand[b:a])
			cand[b] = list[a]
		}
		m := fw.makespan(cand)
		r.evals++
		if v := lahc[step%hist]; m <= v || m <= ms {
			list, cand = cand, list
			ms = m
		}
		lahc[step%hist] = ms
		if ms < bestMS {
			bestMS = ms
			best = append(best[:0], list...)
			stall = 0
		} else if stall++; stall%20_000 == 0 {
			// Stalled: justify the current list, and every fifth time
			// go back to the best one.
			if stall%100_000 == 0 {
				list, ms = slices.Clone(best), bestMS
			}
			var e int
			list, ms, e = fbi(fw, bw, slices.Clone(list), ms)
			r.evals += e
			if ms < bestMS {
				bestMS, best, stall = ms, slices.Clone(list), 0
			}
		}
	}
	r.list, r.makespan = best, bestMS
	return r
}
