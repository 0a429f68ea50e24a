package main

import (
	"container/heap"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mq-hpc/mq/policy"
	"github.com/mq-hpc/mq/wfformat"
)

// wfideal schedules WfFormat traces on -slots ideal slots (no overhead:
// a task starts the instant a slot is free and its parents are done, one
// slot a task, as wfreplay runs them) with the metaqueue's own orderings,
// in process. Each task is a job in submission (file) order; cp ranks by
// b-level from the measured runtimes (what declared estimates give), and
// cp-noest from no estimates (every task 1 s: what wfreplay's jobs, which
// declare none, give the live CLS). Prints one line per trace: the bound
// max(critical path, work/slots) and each order's makespan over it.
func wfideal(args []string) error {
	fs := flag.NewFlagSet("wfideal", flag.ExitOnError)
	slots := fs.Int("slots", 8, "ideal slots")
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
		fcfs := d.schedule(*slots, policy.FCFS{}, nil)
		exact, _ := policy.BLevels(d.runtime, d.prereqs)
		cp := d.schedule(*slots, policy.CP{}, exact)
		noest, _ := policy.BLevels(make([]float64, len(d.runtime)), d.prereqs)
		cpNoest := d.schedule(*slots, policy.CP{}, noest)
		fmt.Printf("trace=%s tasks=%d slots=%d bound_s=%.1f fcfs=%.3f cp=%.3f cp_noest=%.3f cp_vs_fcfs=%.3f cp_noest_vs_fcfs=%.3f\n",
			strings.TrimSuffix(filepath.Base(path), ".json"), len(w.Tasks), *slots, lb,
			fcfs/lb, cp/lb, cpNoest/lb, cp/fcfs, cpNoest/fcfs)
	}
	return nil
}

// taskDAG is a workflow's tasks by index, in file order.
type taskDAG struct {
	runtime []float64
	prereqs [][]int32
	users   [][]int32
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
	var running finishes
	now, free := 0.0, slots
	for {
		for free > 0 {
			r, ok := ready.Pop()
			if !ok {
				break
			}
			i := int(r.ID - 1)
			heap.Push(&running, finish{now + d.runtime[i], i})
			free--
		}
		if running.Len() == 0 {
			return now
		}
		now = running[0].at
		for running.Len() > 0 && running[0].at == now {
			e := heap.Pop(&running).(finish)
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

// finishes is a min-heap of running tasks by finish time, then index.
type finishes []finish

func (f finishes) Len() int { return len(f) }
func (f finishes) Less(i, j int) bool {
	if f[i].at != f[j].at {
		return f[i].at < f[j].at
	}
	return f[i].task < f[j].task
}
func (f finishes) Swap(i, j int) { f[i], f[j] = f[j], f[i] }
func (f *finishes) Push(x any)   { *f = append(*f, x.(finish)) }
func (f *finishes) Pop() any {
	old := *f
	x := old[len(old)-1]
	*f = old[:len(old)-1]
	return x
}
