package blevel

import (
	"maps"
	"slices"
	"testing"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/job"
)

// world is a job graph as the core keeps it, with the heaps' pushes
// recorded.
type world struct {
	g      *dag.Graph
	ex     policy.Expect
	ts     map[string]dag.TargetID
	next   int64
	pushed map[int64]float32 // job -> last priority pushed
	cp     map[int32]bool    // queues ranking by b-level
}

func newWorld() *world {
	return &world{g: dag.New(), ts: map[string]dag.TargetID{}, next: 1, pushed: map[int64]float32{}, cp: map[int32]bool{1: true}}
}

func (w *world) push(queue int32, r policy.Ready) bool {
	if !w.cp[queue] {
		return false
	}
	w.pushed[r.ID] = r.Prio
	return true
}

// add adds a job of target t (created if new) in queue 1, needing the
// targets pre, as the core does: into the graph, then noted.
func (w *world) add(l *Levels, t string, est float32, pre ...string) int64 {
	tid, ok := w.ts[t]
	if !ok {
		tid = w.g.AddTarget(t)
		w.ts[t] = tid
	}
	var ps []dag.TargetID
	for _, p := range pre {
		ps = append(ps, w.ts[p])
	}
	w.g.AddEdges(tid, ps)
	id := w.next
	w.next++
	w.g.AddJob(id, dag.Node{Target: tid, Queue: 1, Est: est, Prereqs: ps})
	if l.On() {
		l.Note(tid, est)
	}
	return id
}

func (w *world) rank(l *Levels, id int64) float32 {
	j, _ := w.g.Node(id)
	return l.Rank(w.g, &w.ex, j.Target, id, j.Est)
}

// TestRank: a job ranks at its expected runtime (declared, else learned,
// else policy.UnknownRuntime) plus the longest chain of targets after it.
func TestRank(t *testing.T) {
	t.Parallel()
	type spec struct {
		target string
		est    float32
		pre    []string
	}
	tests := []struct {
		name    string
		jobs    []spec
		learned map[string]float64 // target -> a Done job's runtime
		want    map[string]float32 // target -> its first job's rank
	}{
		{"alone", []spec{{"a", 5, nil}}, nil, map[string]float32{"a": 5}},
		{"chain", []spec{{"a", 1, nil}, {"b", 2, []string{"a"}}, {"c", 4, []string{"b"}}}, nil,
			map[string]float32{"a": 7, "b": 6, "c": 4}},
		{"longest of two", []spec{{"a", 1, nil}, {"b", 2, []string{"a"}}, {"c", 10, []string{"a"}}}, nil,
			map[string]float32{"a": 11, "b": 2, "c": 10}},
		{"largest job of a target", []spec{{"a", 1, nil}, {"b", 2, []string{"a"}}, {"b", 8, []string{"a"}}}, nil,
			map[string]float32{"a": 9, "b": 2}},
		{"unknown runtimes", []spec{{"a", 0, nil}, {"b", 0, []string{"a"}}}, nil,
			map[string]float32{"a": 2 * policy.UnknownRuntime, "b": policy.UnknownRuntime}},
		{"learned runtime", []spec{{"a", 0, nil}, {"b", 0, []string{"a"}}}, map[string]float64{"b": 30},
			map[string]float32{"a": policy.UnknownRuntime + 30, "b": 30}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld()
			for target, s := range tt.learned {
				w.ex.Observe(target, s)
			}
			var l Levels
			l.Start(w.g, w.next, &w.ex, w.push)
			first := map[string]int64{}
			for _, j := range tt.jobs {
				id := w.add(&l, j.target, j.est, j.pre...)
				if _, ok := first[j.target]; !ok {
					first[j.target] = id
				}
			}
			if fresh := l.Settle(w.g, &w.ex, w.push); len(fresh) != 0 {
				t.Fatalf("Settle handed back %v, deferred nothing", fresh)
			}
			for _, target := range slices.Sorted(maps.Keys(tt.want)) {
				if got := w.rank(&l, first[target]); got != tt.want[target] {
					t.Errorf("rank of %s's job = %v, want %v", target, got, tt.want[target])
				}
			}
			// Started afresh over the same jobs, the ranks are the same.
			var again Levels
			again.Start(w.g, w.next, &w.ex, w.push)
			for target, want := range tt.want {
				if got := w.rank(&again, first[target]); got != want {
					t.Errorf("after Start, rank of %s's job = %v, want %v", target, got, want)
				}
			}
		})
	}
}

// TestSettleRaisesReady: a later submission that lengthens the chain
// behind ready jobs pushes them again at their new rank; jobs no longer
// ready, or whose queue no longer ranks by b-level, are not pushed and are
// dropped from their target's list.
func TestSettleRaisesReady(t *testing.T) {
	t.Parallel()
	w := newWorld()
	var l Levels
	l.Start(w.g, w.next, &w.ex, w.push)
	a1, a2, a3 := w.add(&l, "a", 1), w.add(&l, "a", 1), w.add(&l, "a", 1)
	l.Settle(w.g, &w.ex, w.push)
	for _, id := range []int64{a1, a2, a3} {
		if got := w.rank(&l, id); got != 1 {
			t.Fatalf("rank of %d = %v, want 1", id, got)
		}
	}
	if _, err := w.g.Set(a2, job.Executing); err != nil {
		t.Fatal(err)
	}
	w.add(&l, "b", 10, "a")
	l.Settle(w.g, &w.ex, w.push)
	if want := map[int64]float32{a1: 11, a3: 11}; !maps.Equal(w.pushed, want) {
		t.Fatalf("pushed %v, want the ready jobs of a at 11: %v", w.pushed, want)
	}
	if got := l.ready[w.ts["a"]]; !slices.Equal(got, []int64{a1, a3}) {
		t.Fatalf("a's list %v, want the dispatched job dropped", got)
	}
	clear(w.pushed)
	w.cp[1] = false // the queue went back to fcfs
	w.add(&l, "c", 20, "b")
	l.Settle(w.g, &w.ex, w.push)
	if len(w.pushed) != 0 || len(l.ready[w.ts["a"]]) != 0 {
		t.Fatalf("pushed %v, a's list %v: want nothing pushed and the list emptied", w.pushed, l.ready[w.ts["a"]])
	}
}

// TestDefer: jobs held back in a submission are handed back by its Settle,
// once; with b-levels off nothing is held back.
func TestDefer(t *testing.T) {
	t.Parallel()
	w := newWorld()
	var l Levels
	if l.Defer(99) || len(l.fresh) != 0 {
		t.Fatal("b-levels off, yet a job was held back")
	}
	l.Start(w.g, w.next, &w.ex, w.push)
	a := w.add(&l, "a", 1)
	if !l.Defer(a) {
		t.Fatal("b-levels on, yet the job was not held back")
	}
	if got := l.Settle(w.g, &w.ex, w.push); !slices.Equal(got, []int64{a}) {
		t.Fatalf("Settle handed back %v, want [%d]", got, a)
	}
	if got := l.Settle(w.g, &w.ex, w.push); len(got) != 0 {
		t.Fatalf("a second Settle handed back %v", got)
	}
}

// TestOnOff: the zero Levels is off; Start turns it on, Off frees it.
func TestOnOff(t *testing.T) {
	t.Parallel()
	w := newWorld()
	var l Levels
	if l.On() {
		t.Fatal("the zero Levels is on")
	}
	w.add(&l, "a", 3)
	l.Start(w.g, w.next, &w.ex, w.push)
	if !l.On() || len(l.down) == 0 {
		t.Fatal("Start left b-levels off")
	}
	l.Off()
	if l.On() || l.down != nil {
		t.Fatal("Off kept b-levels")
	}
}

// TestAlter: a job's estimate changed (mqalter) raises its chain at the
// next Settle, as a job added does, when it rises; when it falls, nothing
// is raised and Stale says every b-level must be computed afresh, which
// Start does (and clears Stale). Off, or an estimate unchanged, does
// nothing.
func TestAlter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		from, to  float32
		stale     bool
		headAfter float32 // a's rank after the change settles (Start if stale)
	}{
		{"raised", 2, 50, false, 1 + 50},
		{"lowered", 50, 2, true, 1 + 2},
		{"unchanged", 7, 7, false, 1 + 7},
		{"made unknown", 50, 0, true, 1 + policy.UnknownRuntime},
		{"made known, above the unknown runtime", 0, 9, false, 1 + 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld()
			var l Levels
			l.Start(w.g, w.next, &w.ex, w.push)
			a := w.add(&l, "a", 1)
			b := w.add(&l, "b", tt.from, "a")
			l.Settle(w.g, &w.ex, w.push)
			w.rank(&l, a) // a is ready in a cp heap
			clear(w.pushed)
			l.Alter(w.g, &w.ex, b, tt.to)
			if err := w.g.SetEst(b, tt.to); err != nil {
				t.Fatal(err)
			}
			l.Settle(w.g, &w.ex, w.push)
			if l.Stale() != tt.stale {
				t.Fatalf("Stale() = %v, want %v", l.Stale(), tt.stale)
			}
			if tt.stale {
				l.Start(w.g, w.next, &w.ex, w.push)
				if l.Stale() {
					t.Fatal("Start left Stale set")
				}
			} else if tt.to > tt.from && w.pushed[a] != tt.headAfter {
				t.Fatalf("a pushed at %v (pushed %v), want %v", w.pushed[a], w.pushed, tt.headAfter)
			}
			if got := w.rank(&l, a); got != tt.headAfter {
				t.Fatalf("a ranks %v, want %v", got, tt.headAfter)
			}
		})
	}
	t.Run("off", func(t *testing.T) {
		w := newWorld()
		var l Levels
		b := w.add(&l, "b", 5)
		l.Alter(w.g, &w.ex, b, 1)
		if l.Stale() || l.On() || len(l.seeds) != 0 {
			t.Fatalf("b-levels off, yet Alter of job %d left stale %v, seeds %v", b, l.Stale(), l.seeds)
		}
	})
}
