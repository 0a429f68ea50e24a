package bystate

import (
	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/job"
)

// Targets is every target's jobs by state, and by queue, kept as they
// move, so that a target's counts (mqstat --summary -t, mqwait -t, and
// with -q) cost the same at a million jobs as at one instead of a read of
// every job's row (a second at a million). A target of one job (a
// pipeline's step: the commonest shape at ten million targets, where the
// CLS's memory is tightest) costs one byte, its job's state and queue; a
// target that ever had two jobs its counts, about 70 bytes (and 40 a
// queue more, for one whose jobs are in several queues). Its zero value is
// empty and ready to use.
type Targets struct {
	one []uint8 // by target id: 0 no job, many: in many, else its one job (oneOf)
	// many is a target's jobs in the queue of the first it was counted
	// in; more those in others (few targets have jobs in two queues).
	many map[dag.TargetID]*inQueue
	more map[dag.TargetID][]inQueue
	// qids are the queues a one-job target's byte names, by their slot:
	// the first maxSlots seen; a job of a later queue in a one-job target
	// is in queue unknown. qslot is 1 + a queue's slot, by queue id (ids
	// are small: queues are few).
	qids  []int32
	qslot []uint8
}

// inQueue is a target's jobs in one queue, by state (slots).
type inQueue struct {
	q int32
	n [len(slots)]int32
}

// many marks a target counted in Targets.many.
const many = 0xff

// maxSlots is how many queues a one-job target's byte can name: a byte is
// 1 + state slot + 8 * queue slot, queue slot maxSlots for any other.
const maxSlots = 30

// unknown is the queue of a one-job target's job whose queue had no slot:
// its target's counts by queue are not known (In says so).
const unknown int32 = -1 << 31

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

// Move takes a job of target t in queue q out of state from and into
// state to; 0 for either is none (a new job, a purged one). Targets below
// 1, and states not stored, are ignored.
func (ts *Targets) Move(t dag.TargetID, q int32, from, to job.State) {
	if t < 1 || from == to {
		return
	}
	if int(t) >= len(ts.one) {
		grown := append(ts.one, make([]uint8, int(t)+1-len(ts.one))...)
		ts.one = grown[:cap(grown)]
	}
	cur := ts.one[t]
	if cur != many {
		if cur == 0 || from != 0 { // its only job (as if it were, if it was not in from)
			ts.one[t] = ts.oneByte(q, to)
			return
		}
		st, cq := ts.oneOf(cur)
		// A second job.
		if ts.many == nil {
			ts.many = map[dag.TargetID]*inQueue{}
		}
		c := &inQueue{q: cq}
		add(&c.n, st, 1)
		ts.many[t], ts.one[t] = c, many
	}
	if c := ts.many[t]; c.q == q {
		add(&c.n, from, -1)
		add(&c.n, to, 1)
		return
	}
	c := ts.more[t]
	i := 0
	for i < len(c) && c[i].q != q {
		i++
	}
	if i == len(c) {
		if ts.more == nil {
			ts.more = map[dag.TargetID][]inQueue{}
		}
		c = append(c, inQueue{q: q})
		ts.more[t] = c
	}
	add(&c[i].n, from, -1)
	add(&c[i].n, to, 1)
}

// queues are a counted target's jobs by queue.
func (ts *Targets) queues(t dag.TargetID) []inQueue {
	return append([]inQueue{*ts.many[t]}, ts.more[t]...)
}

// oneByte is the byte of a one-job target whose job is in queue q and
// state st (0: none).
func (ts *Targets) oneByte(q int32, st job.State) uint8 {
	s := slotOf[st]
	if st == 0 || s < 0 {
		return 0
	}
	return 1 + uint8(s) + 8*ts.slotOf(q)
}

// slotOf is queue q's slot in a one-job target's byte, maxSlots for none.
func (ts *Targets) slotOf(q int32) uint8 {
	if q >= 0 && int(q) < len(ts.qslot) && ts.qslot[q] != 0 {
		return ts.qslot[q] - 1
	}
	if len(ts.qids) == maxSlots || q < 0 || q >= 1<<16 {
		return maxSlots
	}
	if int(q) >= len(ts.qslot) {
		ts.qslot = append(ts.qslot, make([]uint8, int(q)+1-len(ts.qslot))...)
	}
	ts.qids = append(ts.qids, q)
	ts.qslot[q] = uint8(len(ts.qids))
	return uint8(len(ts.qids) - 1)
}

// oneOf is the state and queue of a one-job target's job from its byte
// (0: none).
func (ts *Targets) oneOf(b uint8) (job.State, int32) {
	if b == 0 || b == many {
		return 0, 0
	}
	b--
	st, qs := slots[b%8], int(b/8)
	if qs >= len(ts.qids) {
		return st, unknown
	}
	return st, ts.qids[qs]
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
		for _, c := range ts.queues(t) {
			for i, v := range c.n {
				n[slots[i]] += int(v)
			}
		}
	default:
		st, _ := ts.oneOf(cur)
		n[st] = 1
	}
	return n
}

// In is target t's jobs in queue q by state letter, and false when they
// are not known: some job of the target was counted in a queue past the
// first maxSlots while it was the target's only one.
func (ts *Targets) In(t dag.TargetID, q int32) (n [128]int, ok bool) {
	if t < 1 || int(t) >= len(ts.one) {
		return n, true
	}
	switch cur := ts.one[t]; cur {
	case 0:
	case many:
		for _, c := range ts.queues(t) {
			if c.q == unknown && c.n != [len(slots)]int32{} {
				return [128]int{}, false
			}
			if c.q == q {
				for i, v := range c.n {
					n[slots[i]] += int(v)
				}
			}
		}
	default:
		switch st, cq := ts.oneOf(cur); cq {
		case unknown:
			return n, false
		case q:
			n[st] = 1
		}
	}
	return n, true
}

// Reset forgets every target, before a load.
func (ts *Targets) Reset() { *ts = Targets{} }
