// Package bystate keeps which jobs are in each state, as one bitmap over
// job ids a state: a listing by a state few jobs are in (mqstat -s F, the
// dashboard's failed jobs) names them instead of reading every job to
// find them. The jobs table has no index on the state: one would cost
// every change of a job's state, at dispatch and at every report, more
// than the listings gain (BENCHMARKS.md, "Dashboard cost"). A bit a job
// a state costs 1.1 MB for every million ids and a move two word writes.
//
// It keeps every target's jobs by state and queue as well (Targets),
// moved with them: what mqwait -t and mqstat --summary -t answer, with -q
// or without.
//
// The core moves a job at each change of its state, where it counts its
// queues' jobs (and the arrays' members): at load, at every change, and
// when a purge takes an ended job away.
package bystate

import (
	"math/bits"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/job"
)

// Sets is every state's jobs, and every target's jobs by state (Target).
// Its zero value is empty and ready to use.
type Sets struct {
	bits    [128][]uint64 // by the state's letter: bit id%64 of word id/64
	n       [128]int
	targets Targets
	queues  Spans
}

// Move takes job id of target t in queue q out of state from and into
// state to; 0 for either is none (a new job, a purged one). Ids below 1
// are ignored.
func (s *Sets) Move(id int64, t dag.TargetID, q int32, from, to job.State) {
	if id < 1 || from == to {
		return
	}
	s.targets.Move(t, q, from, to)
	if from == 0 {
		s.queues.Add(q, id)
	}
	w, b := id/64, uint64(1)<<(id%64)
	if from != 0 && int(from) < len(s.bits) && w < int64(len(s.bits[from])) && s.bits[from][w]&b != 0 {
		s.bits[from][w] &^= b
		s.n[from]--
	}
	if to == 0 || int(to) >= len(s.bits) {
		return
	}
	set := s.bits[to]
	if w >= int64(len(set)) {
		set = append(set, make([]uint64, int(w)+1-len(set))...)
		set = set[:cap(set)]
		s.bits[to] = set
	}
	if set[w]&b == 0 {
		set[w] |= b
		s.n[to]++
	}
}

// Count is how many jobs are in the states given, and in any state.
func (s *Sets) Count(states []job.State) (in, all int) {
	for _, st := range states {
		if int(st) < len(s.n) {
			in += s.n[st]
		}
	}
	for _, n := range s.n {
		all += n
	}
	return in, all
}

// IDs appends to out, in id order, the jobs above after in any of the
// states given, at most limit of them (limit <= 0: no bound). A state's
// empty words cost a comparison each: 16,000 a million ids.
func (s *Sets) IDs(out []int64, states []job.State, after int64, limit int) []int64 {
	var sets [][]uint64
	words := 0
	for _, st := range states {
		if int(st) < len(s.bits) && s.n[st] > 0 {
			sets = append(sets, s.bits[st])
			words = max(words, len(s.bits[st]))
		}
	}
	start := max(after+1, 0)
	for w := int(start / 64); w < words; w++ {
		var word uint64
		for _, set := range sets {
			if w < len(set) {
				word |= set[w]
			}
		}
		if w == int(start/64) {
			word &^= uint64(1)<<(start%64) - 1 // ids at or below after
		}
		for word != 0 {
			i := bits.TrailingZeros64(word)
			word &^= 1 << i
			out = append(out, int64(w)*64+int64(i))
			if limit--; limit == 0 {
				return out
			}
		}
	}
	return out
}

// Span counts the jobs first..last by state letter.
func (s *Sets) Span(first, last int64) (n [128]int) {
	first, last = max(first, 0), max(last, -1)
	for st, set := range s.bits {
		if s.n[st] == 0 {
			continue
		}
		for w := first / 64; w <= last/64 && w < int64(len(set)); w++ {
			word := set[w]
			if w == first/64 {
				word &^= uint64(1)<<(first%64) - 1
			}
			if w == last/64 {
				word &= ^uint64(0) >> (63 - last%64)
			}
			n[st] += bits.OnesCount64(word)
		}
	}
	return n
}

// Page is IDs' page of at most limit jobs above after in the states given,
// with Count's counts: a listing's one question to the core a page.
func (s *Sets) Page(states []job.State, after int64, limit int) (ids []int64, in, all int) {
	in, all = s.Count(states)
	return s.IDs(make([]int64, 0, max(limit, 0)), states, after, limit), in, all
}

// Target is target t's jobs by state letter, as they are now.
func (s *Sets) Target(t dag.TargetID) [128]int { return s.targets.Of(t) }

// TargetIn is target t's jobs in queue q by state letter, as they are
// now, and false when they are not known (Targets.In).
func (s *Sets) TargetIn(t dag.TargetID, q int32) ([128]int, bool) { return s.targets.In(t, q) }

// QueueRuns are runs of ids, first and last, that hold every job of
// queue q, in id order, and false when they are not kept (Spans.Of).
func (s *Sets) QueueRuns(q int32) ([][2]int64, bool) {
	runs, ok := s.queues.Of(q)
	out := make([][2]int64, len(runs))
	for i, r := range runs {
		out[i] = [2]int64{r.First, r.Last}
	}
	return out, ok
}

// Reset empties every state, before a load.
func (s *Sets) Reset() { *s = Sets{} }
