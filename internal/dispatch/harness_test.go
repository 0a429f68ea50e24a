package dispatch_test

import (
	"fmt"
	"slices"

	"github.com/mq-hpc/mq/internal/dispatch"
	"github.com/mq-hpc/mq/internal/policy"
)

// Harness is a hand-built world for one asking placeholder, as nomad's
// scheduler tests drive the live scheduler's code: ready jobs with what
// each check answers about them and where their inputs are. It records
// what the decision asked of it, so a test says what was staged.
type Harness struct {
	Jobs map[int64]*Job
	// Here counts the jobs whose inputs are being brought here.
	Here int
	// Asked lists the jobs whose inputs were asked for here (InputsAt
	// on a job whose inputs are not here), in order.
	Asked []int64
}

// Job is one ready job of a Harness.
type Job struct {
	Stale  bool           // the heap entry no longer stands for a ready job
	Refuse dispatch.Chain // the checks that refuse it
	Fail   dispatch.Chain // the checks that fail with an error
	Absent bool           // its inputs are not here
	Marked string         // "", "here" or "elsewhere": where its inputs are being brought
}

var (
	_ dispatch.World     = (*Harness)(nil)
	_ dispatch.Placement = (*Harness)(nil)
)

// errCheck is the error of a check that fails.
var errCheck = fmt.Errorf("check failed")

func (h *Harness) job(id int64) *Job {
	if j, ok := h.Jobs[id]; ok {
		return j
	}
	return &Job{}
}

func (h *Harness) Current(r policy.Ready) bool { return !h.job(r.ID).Stale }

func (h *Harness) Allows(c dispatch.Check, r policy.Ready) (bool, error) {
	j := h.job(r.ID)
	if j.Fail.Has(c) {
		return false, errCheck
	}
	return !j.Refuse.Has(c), nil
}

func (h *Harness) InputsPresent(id int64) bool { return !h.job(id).Absent }

func (h *Harness) InputsAt(id int64) (bool, error) {
	j := h.job(id)
	switch {
	case j.Marked == "elsewhere":
		return false, nil
	case !j.Absent:
		return true, nil
	}
	h.Asked = append(h.Asked, id)
	if j.Marked == "" {
		j.Marked = "here"
		h.Here++
	}
	return false, nil
}

// heap returns an FCFS heap of jobs 1..n.
func heap(n int) *policy.Heap {
	fcfs, err := policy.Lookup("fcfs")
	if err != nil {
		panic(err)
	}
	q := policy.NewHeap(fcfs.Order)
	for id := range int64(n) {
		q.Push(policy.Ready{ID: id + 1})
	}
	return q
}

// drain lists a heap's jobs in order, emptying it.
func drain(q *policy.Heap) []int64 {
	var ids []int64
	for r, ok := q.Pop(); ok; r, ok = q.Pop() {
		ids = append(ids, r.ID)
	}
	slices.Sort(ids)
	return ids
}

// chooser is a policy.Chooser that takes the first candidate it is
// offered whose id is not in never, or waits.
type chooser struct{ never []int64 }

func (c chooser) Choose(s policy.Snapshot) policy.Decision {
	for cd := range s.Ready {
		if !slices.Contains(c.never, cd.ID) {
			return policy.Decision{Job: cd}
		}
	}
	return policy.Decision{Wait: true}
}
