package bystate

import (
	"math"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/job"
)

// Targets is every target's jobs by state, and by queue, kept as they
// move, so that a target's counts (mqstat --summary -t, mqwait -t, and
// with -q) cost the same at a million jobs as at one instead of a read of
// every job's row (a second at a million). A target of one job (a
// pipeline's step: the commonest shape at ten million targets, where the
// CLS's memory is tightest) costs one byte, its job's state and queue; a
// target that ever had two jobs its counts, 26-33 bytes
// (BenchmarkTargetsMemory: 12 for the counts while they fit a byte, the
// rest the map to them; 36 more once one passes 255), and about 110 a
// queue more, for one whose jobs are in several queues. Its zero value
// is empty and ready to use.
type Targets struct {
	one []uint8 // by target id: 0 no job, many: in many, else its one job (oneOf)
	// many is where a target's jobs in the queue of the first it was
	// counted in are: its index in narrow (narrowAt), or with wideBit in
	// wide; more its jobs in others (few targets have jobs in two
	// queues). Indexes, not pointers: no object a target, nothing for the
	// collector to scan. narrow is in chunks of 1 << chunkBits, filled in
	// turn: the last chunk's room is all it holds unused, and it grows
	// without a copy.
	many   map[dag.TargetID]uint32
	narrow [][]narrowQueue
	wide   []inQueue
	more   map[dag.TargetID][]inQueue
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

// narrowQueue is an inQueue of at most 255 jobs a state, 12 bytes where
// an inQueue is 36: what a target needs where targets are many (a
// million jobs in targets of ten). A count that would leave its range
// (256 jobs in a state, or a job moved out of a state it was not counted
// in) moves the target's counts to an inQueue in wide, for good, and
// leaves its narrowQueue unused: a target that had 256 jobs in a state
// can spare 12 bytes.
type narrowQueue struct {
	q int32
	n [len(slots)]uint8
}

// wideBit marks an index in Targets.many as one in wide.
const wideBit = 1 << 31

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
			ts.many = map[dag.TargetID]uint32{}
		}
		c := narrowQueue{q: cq}
		c.n[slotOf[st]] = 1
		ts.many[t], ts.one[t] = ts.newNarrow(c), many
	}
	// Its jobs in the queue of the first counted: most targets'.
	i := ts.many[t]
	if i&wideBit == 0 {
		c := ts.narrowAt(i)
		if c.q == q && c.move(from, to) {
			return
		}
		if c.q == q { // a count past a byte's range: the target goes wide
			i = wideBit | uint32(len(ts.wide))
			ts.wide = append(ts.wide, c.wide())
			ts.many[t] = i
		}
	}
	if i&wideBit != 0 {
		if c := &ts.wide[i&^wideBit]; c.q == q {
			add(&c.n, from, -1)
			add(&c.n, to, 1)
			return
		}
	}
	// Its jobs in others.
	c := ts.more[t]
	k := 0
	for k < len(c) && c[k].q != q {
		k++
	}
	if k == len(c) {
		if ts.more == nil {
			ts.more = map[dag.TargetID][]inQueue{}
		}
		c = append(c, inQueue{q: q})
		ts.more[t] = c
	}
	add(&c[k].n, from, -1)
	add(&c[k].n, to, 1)
}

// chunkBits sizes Targets.narrow's chunks: 1024 narrowQueues, 12 KB.
const chunkBits = 10

// newNarrow keeps c in narrow, and is its index.
func (ts *Targets) newNarrow(c narrowQueue) uint32 {
	n := len(ts.narrow)
	if n == 0 || len(ts.narrow[n-1]) == 1<<chunkBits {
		ts.narrow = append(ts.narrow, make([]narrowQueue, 0, 1<<chunkBits))
		n++
	}
	last := &ts.narrow[n-1]
	*last = append(*last, c)
	return uint32(n-1)<<chunkBits | uint32(len(*last)-1)
}

// narrowAt is the narrowQueue at index i in narrow.
func (ts *Targets) narrowAt(i uint32) *narrowQueue {
	return &ts.narrow[i>>chunkBits][i&(1<<chunkBits-1)]
}

// queues are a counted target's jobs by queue.
func (ts *Targets) queues(t dag.TargetID) []inQueue {
	var first inQueue
	if i := ts.many[t]; i&wideBit != 0 {
		first = ts.wide[i&^wideBit]
	} else {
		first = ts.narrowAt(i).wide()
	}
	return append([]inQueue{first}, ts.more[t]...)
}

// move takes a job out of state from and into state to, and false, with
// c unchanged, if a count would leave a byte's range (below zero too, as
// an inQueue's would go for a job moved out of a state it was not
// counted in).
func (c *narrowQueue) move(from, to job.State) bool {
	f, t := slotOf[from], slotOf[to]
	if f >= 0 && c.n[f] == 0 || t >= 0 && c.n[t] == math.MaxUint8 {
		return false
	}
	if f >= 0 {
		c.n[f]--
	}
	if t >= 0 {
		c.n[t]++
	}
	return true
}

// wide is c as an inQueue.
func (c *narrowQueue) wide() inQueue {
	w := inQueue{q: c.q}
	for i, v := range c.n {
		w.n[i] = int32(v)
	}
	return w
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
