package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mq-hpc/mq/internal/heap"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/internal/wfformat"
)

// wfideal schedules WfFormat traces on -slots ideal slots (no overhead:
// a task starts the instant a slot is free and its parents are done, one
// slot a task, as wfreplay runs them) with the metaqueue's own orderings,
// in process. Each task is a job in submission (file) order; cp ranks by
// b-level from the measured runtimes (what declared estimates give), and
// cp-noest from no estimates (every task 1 s: what wfreplay's jobs, which
// declare none, give the live CLS). Prints one line per trace: the bound
// max(critical path, work/slots), the Fernández-Bussell bound over it (no
// schedule can do better: above 1.10 no replay can meet 1.10x of the
// bound), the pair bound over it (pairBound: a second proof of the same
// kind), and each order's makespan over it; cp_vs_best_bound is cp's
// makespan over the larger of the two bounds.
func wfideal(args []string) error {
	fs := flag.NewFlagSet("wfideal", flag.ExitOnError)
	slots := fs.Int("slots", 8, "ideal slots")
	fs.Parse(args)
	if fs.NArg() == 0 {
		return errors.New("need WfFormat trace files")
	}
	for _, path := range fs.Args() {
		w, d, err := readTaskDAG(path)
		if err != nil {
			return err
		}
		lb := w.LowerBound(*slots)
		fcfs := d.schedule(*slots, policy.FCFS{}, nil)
		exact, _ := policy.BLevels(d.runtime, d.prereqs)
		cp := d.schedule(*slots, policy.CP{}, exact)
		noest, _ := policy.BLevels(make([]float64, len(d.runtime)), d.prereqs)
		cpNoest := d.schedule(*slots, policy.CP{}, noest)
		fb := d.fbBound(*slots)
		pair := d.pairBound(*slots)
		best := max(fb, pair)
		fmt.Printf("trace=%s tasks=%d slots=%d bound_s=%.1f fb_bound=%.3f pair_bound=%.3f fcfs=%.3f cp=%.3f cp_noest=%.3f cp_vs_fcfs=%.3f cp_noest_vs_fcfs=%.3f cp_vs_best_bound=%.3f\n",
			strings.TrimSuffix(filepath.Base(path), ".json"), len(w.Tasks), *slots, lb,
			fb/lb, pair/lb, fcfs/lb, cp/lb, cpNoest/lb, cp/fcfs, cpNoest/fcfs, cp/best)
	}
	return nil
}

// taskDAG is a workflow's tasks by index, in file order.
type taskDAG struct {
	runtime []float64
	prereqs [][]int32
	users   [][]int32
}

// readTaskDAG reads the WfFormat trace at path and its task DAG.
func readTaskDAG(path string) (*wfformat.Workflow, *taskDAG, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	w, err := wfformat.Read(f)
	f.Close()
	if err == nil {
		var d *taskDAG
		if d, err = newTaskDAG(w); err == nil {
			return w, d, nil
		}
	}
	return nil, nil, fmt.Errorf("%s: %w", path, err)
}

func newTaskDAG(w *wfformat.Workflow) (*taskDAG, error) {
	n := len(w.Tasks)
	d := &taskDAG{runtime: make([]float64, n), prereqs: make([][]int32, n), users: make([][]int32, n)}
	idx := make(map[string]int32, n)
	for i, t := range w.Tasks {
		idx[t.ID] = int32(i)
	}
	for i, t := range w.Tasks {
		d.runtime[i] = t.Runtime
		for _, p := range t.Parents {
			j, ok := idx[p]
			if !ok {
				return nil, fmt.Errorf("task %s: unknown parent %s", t.ID, p)
			}
			d.prereqs[i] = append(d.prereqs[i], j)
			d.users[j] = append(d.users[j], int32(i))
		}
	}
	return d, nil
}

// schedule returns the makespan of a list schedule on slots slots: when a
// slot is free, the ready task first in o's order starts (prio is each
// task's Ready.Prio, or nil).
func (d *taskDAG) schedule(slots int, o policy.Ordering, prio []float64) float64 {
	n := len(d.runtime)
	pending := make([]int, n)
	ready := policy.NewHeap(o)
	push := func(i int) {
		r := policy.Ready{ID: int64(i) + 1, Est: float32(d.runtime[i])}
		if prio != nil {
			r.Prio = float32(prio[i])
		}
		ready.Push(r)
	}
	for i := range d.prereqs {
		if pending[i] = len(d.prereqs[i]); pending[i] == 0 {
			push(i)
		}
	}
	running := heap.New(finish.before)
	now, free := 0.0, slots
	for {
		for free > 0 {
			r, ok := ready.Pop()
			if !ok {
				break
			}
			i := int(r.ID - 1)
			running.Push(finish{now + d.runtime[i], i})
			free--
		}
		if running.Len() == 0 {
			return now
		}
		first, _ := running.Peek()
		now = first.at
		for e, ok := running.Peek(); ok && e.at == now; e, ok = running.Peek() {
			running.Pop()
			free++
			for _, u := range d.users[e.task] {
				if pending[u]--; pending[u] == 0 {
					push(int(u))
				}
			}
		}
	}
}

type finish struct {
	at   float64
	task int
}

// before orders running tasks by finish time, then index.
func (f finish) before(g finish) bool {
	if f.at != g.at {
		return f.at < g.at
	}
	return f.task < g.task
}

// fbBound is Fernández and Bussell's lower bound on the makespan of the DAG
// on slots identical slots (IEEE Trans. Computers C-22(8), 1973): the
// critical path cp, plus, for the interval [θ1, θ2] that is most
// overloaded, the work every task must do inside it however it is
// scheduled within cp (its time windows from earliest starts and latest
// finishes), beyond what slots slots can do there, spread over the slots.
// It is what max(cp, work/slots) misses: a fork-join whose serial ends
// leave the parallel middle a narrow window cannot finish by either.
// No schedule at all, clairvoyant or not, beats it.
func (d *taskDAG) fbBound(slots int) float64 {
	n := len(d.runtime)
	order := d.topo()
	es := make([]float64, n)
	cp := 0.0
	for _, i := range order {
		for _, p := range d.prereqs[i] {
			es[i] = max(es[i], es[p]+d.runtime[p])
		}
		cp = max(cp, es[i]+d.runtime[i])
	}
	lf := make([]float64, n)
	for k := n - 1; k >= 0; k-- {
		i := order[k]
		lf[i] = cp
		for _, u := range d.users[i] {
			lf[i] = min(lf[i], lf[u]-d.runtime[u])
		}
	}
	// The most overloaded interval starts at a breakpoint of the tasks'
	// windows; for each start θ1, the required work as θ2 grows is a sum
	// of ramps (task j: 0 until b, slope 1 for a, then flat), so its
	// excess over slots*(θ2-θ1) peaks at a ramp's corner.
	starts := make([]float64, 0, 4*n)
	for i := range n {
		p := d.runtime[i]
		starts = append(starts, es[i], es[i]+p, lf[i]-p, lf[i])
	}
	slices.Sort(starts)
	starts = slices.Compact(starts)
	type corner struct {
		at    float64
		slope int
	}
	m := float64(slots)
	excess := 0.0
	corners := make([]corner, 0, 2*n)
	for _, t1 := range starts {
		corners = corners[:0]
		for j := range n {
			p := d.runtime[j]
			a := min(es[j]+p-t1, p) // the most of j inside [t1, ∞) it cannot avoid
			if a <= 0 {
				continue
			}
			b := max(lf[j]-p, t1) // where that part starts at the latest
			corners = append(corners, corner{b, 1}, corner{b + a, -1})
		}
		slices.SortFunc(corners, func(x, y corner) int { return cmp.Compare(x.at, y.at) })
		w, slope, at := 0.0, 0, t1
		for _, c := range corners {
			w += float64(slope) * (c.at - at)
			at = c.at
			slope += c.slope
			if at > t1 {
				excess = max(excess, w-m*(at-t1))
			}
		}
	}
	return cp + excess/m
}

// pairBound is a lower bound on the makespan that the Fernández-Bussell
// bound, being preemptive at heart (it counts work, not whole tasks),
// misses: of any slots+1 tasks two share a slot, one after the other, so
// the makespan is at least the least, over those pairs x, y, of
// min(head(x) + p(x) + p(y) + tail(y), the same with x and y swapped),
// where head is the longest chain before a task and tail the longest
// after it. Nine mProjects of 336-546 s on eight slots (montage 0.5d) make
// two of them run back to back whatever the order. It tries two sets: the
// longest tasks, and those on the longest chains.
func (d *taskDAG) pairBound(slots int) float64 {
	n := len(d.runtime)
	if n <= slots {
		return 0
	}
	order := d.topo()
	head, tail := make([]float64, n), make([]float64, n)
	for _, i := range order {
		for _, p := range d.prereqs[i] {
			head[i] = max(head[i], head[p]+d.runtime[p])
		}
	}
	for k := n - 1; k >= 0; k-- {
		i := order[k]
		for _, u := range d.users[i] {
			tail[i] = max(tail[i], d.runtime[u]+tail[u])
		}
	}
	best := 0.0
	for _, key := range []func(i int) float64{
		func(i int) float64 { return d.runtime[i] },
		func(i int) float64 { return head[i] + d.runtime[i] + tail[i] },
	} {
		set := make([]int, n)
		for i := range set {
			set[i] = i
		}
		slices.SortStableFunc(set, func(x, y int) int { return cmp.Compare(key(y), key(x)) })
		set = set[:slots+1]
		least := math.Inf(1)
		for a, x := range set {
			for _, y := range set[a+1:] {
				px, py := d.runtime[x], d.runtime[y]
				least = min(least, head[x]+px+py+tail[y], head[y]+py+px+tail[x])
			}
		}
		best = max(best, least)
	}
	return best
}

// topo is the tasks in an order where each comes after its prerequisites.
func (d *taskDAG) topo() []int32 {
	n := len(d.runtime)
	pending := make([]int, n)
	var order []int32
	for i := range n {
		if pending[i] = len(d.prereqs[i]); pending[i] == 0 {
			order = append(order, int32(i))
		}
	}
	for k := 0; k < len(order); k++ {
		for _, u := range d.users[order[k]] {
			if pending[u]--; pending[u] == 0 {
				order = append(order, u)
			}
		}
	}
	return order
}
