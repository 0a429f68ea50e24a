package bystate

import (
	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/job"
)

// Targets is every target's jobs by state, kept as they move, so that a
// target's counts (mqstat --summary -t, mqwait -t) cost the same at a
// million jobs as at one instead of a read of every job's row (a second
// at a million). A target of one job (a pipeline's step: the commonest
// shape at ten million targets, where the CLS's memory is tightest)
// costs one byte, its job's state; a target that ever had two jobs its
// counts, about 50 bytes. Its zero value is empty and ready to use.
type Targets struct {
	one  []job.State // by target id: 0 no job, many: in many, else the one job's state
	many map[dag.TargetID]*[len(slots)]int32
}

// many marks a target counted in Targets.many.
const many job.State = 0xff

// slots are the states a job is stored in, in the order of a target's
// counts (Prefetched is shown, never stored).
var slots = [...]job.State{job.Waiting, job.Queued, job.Held, job.Executing, job.Done, job.Failed, job.Blocked, job.Deleted}

// slotOf is each stored state's place in slots, by letter; -1 for others.
var slotOf = func() (s [256]int8) {
	for i := range s {
		s[i] = -1
	}
	for i, st := range slots {
		s[st] = int8(i)
	}
	return s
}()

// Move takes a job of target t out of state from and into state to; 0
// for either is none (a new job, a purged one). Targets below 1 are
// ignored.
func (ts *Targets) Move(t dag.TargetID, from, to job.State) {
	if t < 1 || from == to {
		return
	}
	if int(t) >= len(ts.one) {
		grown := append(ts.one, make([]job.State, int(t)+1-len(ts.one))...)
		ts.one = grown[:cap(grown)]
	}
	cur := ts.one[t]
	switch {
	case cur == many:
	case cur == 0 || cur == from: // its only job, or its first
		ts.one[t] = to
		return
	case from == 0: // a second job
		if ts.many == nil {
			ts.many = map[dag.TargetID]*[len(slots)]int32{}
		}
		c := new([len(slots)]int32)
		add(c, cur, 1)
		ts.many[t], ts.one[t] = c, many
	default: // its one job was not in from: as if it were
		ts.one[t] = to
		return
	}
	c := ts.many[t]
	add(c, from, -1)
	add(c, to, 1)
}

func add(c *[len(slots)]int32, st job.State, n int32) {
	if i := slotOf[st]; i >= 0 {
		c[i] += n
	}
}

// Of is target t's jobs by state letter (none: a target with no job kept,
// or an unknown one).
func (ts *Targets) Of(t dag.TargetID) (n [128]int) {
	if t < 1 || int(t) >= len(ts.one) {
		return n
	}
	switch cur := ts.one[t]; cur {
	case 0:
	case many:
		for i, v := range ts.many[t] {
			n[slots[i]] = int(v)
		}
	default:
		n[cur] = 1
	}
	return n
}

// Reset forgets every target, before a load.
func (ts *Targets) Reset() { *ts = Targets{} }
