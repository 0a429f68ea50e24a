package dag

import (
	"encoding/binary"

	"github.com/mq-hpc/mq/job"
)

// Live jobs are kept in pages indexed by id: the metaqueue hands out ids
// densely, so a page of 4,096 compact slots replaces a hash map entry per
// job (20 bytes a job instead of ~130), and a page whose jobs have all
// ended is freed. Prerequisite lists are interned and reference-counted:
// the jobs of one target usually share one list. A job's after-after
// prerequisites are interned with its after-ok ones, as one list whose
// first split entries are after-ok: the slot stays 20 bytes, and jobs
// without after-after prerequisites pay nothing for them.
const pageBits = 12

type slot struct {
	target TargetID
	queue  int32
	est    float32
	list   int32 // interned prerequisite list; 0 = none; -1 = just its target's first (pre[:])
	state  job.State
}

type page struct {
	slots [1 << pageBits]slot
	live  int32
}

type jobTable struct {
	pages []*page
	live  int

	lists    [][]TargetID // index 0: the empty list
	split    []int32      // lists[i][:split[i]] after-ok, the rest after-after
	refs     []int32
	byKey    map[string]int32
	freeList []int32
	scratch  []byte
}

func (t *jobTable) get(id int64) *slot {
	p := id >> pageBits
	if id < 0 || p >= int64(len(t.pages)) || t.pages[p] == nil {
		return nil
	}
	n := &t.pages[p].slots[id&(1<<pageBits-1)]
	if n.state == 0 {
		return nil
	}
	return n
}

// put stores a live job, replacing after slot with the same id.
func (t *jobTable) put(id int64, j Node, tt *targetTable) {
	p := id >> pageBits
	for int64(len(t.pages)) <= p {
		t.pages = append(t.pages, nil)
	}
	pg := t.pages[p]
	if pg == nil {
		pg = new(page)
		t.pages[p] = pg
	}
	n := &pg.slots[id&(1<<pageBits-1)]
	if n.state == 0 {
		pg.live++
		t.live++
	} else {
		t.release(n.list)
	}
	*n = slot{target: j.Target, queue: j.Queue, est: j.Est, list: t.intern(j.Prereqs, j.AfterAny, tt.at(j.Target)), state: j.State}
}

func (t *jobTable) remove(id int64) {
	n := t.get(id)
	if n == nil {
		return
	}
	t.release(n.list)
	*n = slot{}
	p := id >> pageBits
	t.live--
	if t.pages[p].live--; t.pages[p].live == 0 {
		t.pages[p] = nil
	}
}

func (t *jobTable) node(n *slot, tt *targetTable) Node {
	ok, after := t.prereqs(n, tt)
	return Node{Target: n.target, Queue: n.queue, Est: n.est, State: n.state, Prereqs: ok, AfterAny: after}
}

// prereqs returns a slot's after-ok and after-after prerequisites, shared.
// The after-ok slice is capped so an append cannot reach the after-after.
func (t *jobTable) prereqs(n *slot, tt *targetTable) (ok, after []TargetID) {
	switch {
	case n.list == 0:
		return nil, nil
	case n.list < 0:
		return tt.at(n.target).pre[:], nil
	}
	l, k := t.lists[n.list], t.split[n.list]
	if k == 0 {
		ok = nil
	} else {
		ok = l[:k:k]
	}
	if int(k) < len(l) {
		after = l[k:]
	}
	return ok, after
}

// each calls f for every live job, in id order.
func (t *jobTable) each(f func(id int64, n *slot)) {
	for p, pg := range t.pages {
		if pg == nil {
			continue
		}
		for i := range pg.slots {
			if n := &pg.slots[i]; n.state != 0 {
				f(int64(p)<<pageBits|int64(i), n)
			}
		}
	}
}

// intern returns the list of a job of target tg; prerequisite lists are
// shared between the jobs naming the same ones.
func (t *jobTable) intern(prereqs, afterAny []TargetID, tg *target) int32 {
	switch {
	case len(prereqs)+len(afterAny) == 0:
		return 0
	case len(prereqs) == 1 && len(afterAny) == 0 && tg.preList != 0 && tg.pre[0] == prereqs[0]:
		// The commonest list (a pipeline stage) is its target's first
		// prerequisite's one-element slice: nothing to allocate, hash
		// or count. -1 marks it (any negative did, when it held the id).
		return -1
	}
	if t.byKey == nil {
		t.byKey = map[string]int32{}
		t.lists = [][]TargetID{nil}
		t.split = []int32{0}
		t.refs = []int32{0}
	}
	t.scratch = appendKey(t.scratch[:0], prereqs, afterAny)
	if i, ok := t.byKey[string(t.scratch)]; ok { // no allocation for the lookup
		t.refs[i]++
		return i
	}
	own := make([]TargetID, 0, len(prereqs)+len(afterAny))
	own = append(append(own, prereqs...), afterAny...)
	var i int32
	if n := len(t.freeList); n > 0 {
		i = t.freeList[n-1]
		t.freeList = t.freeList[:n-1]
		t.lists[i], t.split[i], t.refs[i] = own, int32(len(prereqs)), 1
	} else {
		i = int32(len(t.lists))
		t.lists = append(t.lists, own)
		t.split = append(t.split, int32(len(prereqs)))
		t.refs = append(t.refs, 1)
	}
	t.byKey[string(t.scratch)] = i
	return i
}

func (t *jobTable) release(i int32) {
	if i <= 0 {
		return
	}
	if t.refs[i]--; t.refs[i] == 0 {
		k := t.split[i]
		t.scratch = appendKey(t.scratch[:0], t.lists[i][:k], t.lists[i][k:])
		delete(t.byKey, string(t.scratch))
		t.lists[i] = nil
		t.freeList = append(t.freeList, i)
	}
}

// appendKey encodes a list pair as its interning key. Target ids are
// never 0, so a 0 between the halves (only when there is an after-after
// half) tells [a b] after-ok apart from [a] after-ok, [b] after-after.
func appendKey(b []byte, ok, after []TargetID) []byte {
	for _, t := range ok {
		b = binary.LittleEndian.AppendUint32(b, uint32(t))
	}
	if len(after) > 0 {
		b = binary.LittleEndian.AppendUint32(b, 0)
		for _, t := range after {
			b = binary.LittleEndian.AppendUint32(b, uint32(t))
		}
	}
	return b
}
