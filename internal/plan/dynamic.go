package plan

import (
	"errors"
	"math"

	"github.com/mq-hpc/mq/internal/heap"
	"github.com/mq-hpc/mq/internal/policy"
)

// Binding is how a late-binding run picks a job for a slot that asks.
type Binding int

const (
	// FirstReady: the job ready longest (FCFS), ties by the Problem's order.
	FirstReady Binding = iota
	// MostLocal: the ready job with the most input bytes at the asking
	// slot's site, ties as FirstReady: a data-conscious pick in the spirit
	// of the dc policy, without its waiting.
	MostLocal
)

// Bindings names the late-binding ways, in the order mqsim plan shows them.
var Bindings = []struct {
	Name    string
	Binding Binding
}{{"late-fcfs", FirstReady}, {"late-local", MostLocal}}

// LateBinding scores mq's own way, with no plan, in the planners' model:
// a slot that frees asks for work and takes a ready job there and then
// (chosen by b), reading inputs from where their jobs ran, and holds as
// many of its site's slots as the job's cores (PlanJob.Slots) once they
// are free; files stay where they are written. It is the reference the
// planners are compared with (cls plan, mqsim plan), not the CLS's
// dispatch code: it models neither placeholder round trips nor queue
// waits.
func LateBinding(p policy.Problem, b Binding) (makespan float64, moved int64, err error) {
	m, err := compile(p)
	if err != nil {
		return 0, 0, err
	}
	n := len(m.ids)
	ft := make([]float64, n)
	site := make([]int32, n)
	waiting := make([]int, n)
	var ready []int32 // in the order they became ready
	for i := range n {
		waiting[i] = len(m.pred[i])
		if waiting[i] == 0 {
			ready = append(ready, int32(i))
		}
	}
	var free []slotFree
	for s, st := range m.sites {
		for range st.Slots {
			free = append(free, slotFree{site: int32(s)})
		}
	}
	slots := heap.From(slotBefore, free)
	running := heap.New(endBefore)
	done := 0
	cost := func(t int32, s int) (float64, int64) {
		d := m.exec[t][s] + m.staticCost[t][s]
		mv := m.staticBytes[t][s]
		for _, f := range m.ins[t] {
			if at := int(site[m.fileProd[f]]); at != s {
				d += m.transfer(m.fileSize[f], at, s)
				mv += m.fileSize[f]
			}
		}
		return d, mv
	}
	local := func(t int32, s int) int64 {
		var b int64
		for _, f := range m.ins[t] {
			if int(site[m.fileProd[f]]) == s {
				b += m.fileSize[f]
			}
		}
		return b
	}
	for done < n {
		sl, _ := slots.Pop()
		now := sl.at
		// Jobs that ended by now make their dependents ready.
		for e, ok := running.Peek(); ok && e.at <= now; e, ok = running.Peek() {
			running.Pop()
			for _, j := range m.succ[e.job] {
				if waiting[j]--; waiting[j] == 0 {
					ready = append(ready, j)
				}
			}
		}
		pick := -1
		var pickLocal int64 = -1
		for k, t := range ready {
			if math.IsInf(m.exec[t][sl.site], 1) {
				continue
			}
			if b == FirstReady {
				pick = k
				break
			}
			if l := local(t, int(sl.site)); l > pickLocal {
				pick, pickLocal = k, l
			}
		}
		if pick < 0 {
			// Nothing this slot can run: it asks again when a job ends.
			if running.Len() == 0 {
				return 0, 0, errors.New("plan: late binding stalled: ready jobs run at no free site")
			}
			e, _ := running.Peek()
			sl.at = e.at
			slots.Push(sl)
			continue
		}
		t := ready[pick]
		ready = append(ready[:pick], ready[pick+1:]...)
		d, mv := cost(t, int(sl.site))
		// A job of several cores holds as many slots of the site (all of
		// them if it is wider), as in the model: it starts once the
		// others it takes are free too.
		held := append(takeSite(slots, sl.site, int(min(m.width[t], int32(m.sites[sl.site].Slots)))-1), sl)
		start := now
		for _, h := range held {
			start = max(start, h.at)
		}
		site[t] = sl.site
		ft[t] = start + d
		moved += mv
		makespan = max(makespan, ft[t])
		done++
		running.Push(jobEnd{at: ft[t], job: t})
		for _, h := range held {
			h.at = ft[t]
			slots.Push(h)
		}
	}
	return makespan, moved, nil
}

// takeSite pops the n slots of site s that free first off slots.
func takeSite(slots *heap.Heap[slotFree], s int32, n int) []slotFree {
	var took, other []slotFree
	for len(took) < n {
		f, ok := slots.Pop()
		if !ok {
			break
		}
		if f.site == s {
			took = append(took, f)
		} else {
			other = append(other, f)
		}
	}
	for _, f := range other {
		slots.Push(f)
	}
	return took
}

type slotFree struct {
	at   float64
	site int32
}

func slotBefore(a, b slotFree) bool { return a.at < b.at || (a.at == b.at && a.site < b.site) }

type jobEnd struct {
	at  float64
	job int32
}

func endBefore(a, b jobEnd) bool { return a.at < b.at || (a.at == b.at && a.job < b.job) }
