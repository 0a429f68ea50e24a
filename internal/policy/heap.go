package policy

import (
	"cmp"
	"slices"

	"github.com/mq-hpc/mq/internal/heap"
)

// Heap keeps ready jobs in an Ordering's order. Entries may go stale (the
// job was dispatched or re-waited through another path); the owner skips
// them when popping, which keeps every operation O(log n).
//
// Entries are kept packed in 16 bytes, not Ready's 24: ten million queued
// jobs are millions of entries. An id too large to pack (past 2^47) turns
// the heap to plain Ready entries, so nothing is ever misstated.
type Heap struct {
	order Ordering
	fcfs  bool // order is FCFS, under any name: entries compare by key alone
	items []entry
	wide  *heap.Heap[Ready] // used instead of items once an id does not pack
}

// entry is a Ready packed. key holds the priority in its top 16 bits,
// flipped so that a higher priority is a smaller key, over the id: FCFS's
// order is the keys' order.
type entry struct {
	key       uint64
	est, prio float32
}

// maxPacked is the largest id an entry holds.
const maxPacked = 1<<47 - 1

func pack(r Ready) (entry, bool) {
	if r.ID < 0 || r.ID > maxPacked {
		return entry{}, false
	}
	return entry{key: uint64(uint16(r.Priority)^0x7fff)<<48 | uint64(r.ID), est: r.Est, prio: r.Prio}, true
}

func (e entry) ready() Ready {
	return Ready{ID: int64(e.key & (1<<48 - 1)), Priority: int16(uint16(e.key>>48) ^ 0x7fff), Est: e.est, Prio: e.prio}
}

// NewHeap returns an empty heap ordered by o.
func NewHeap(o Ordering) *Heap {
	_, fcfs := o.(interface{ byArrival() })
	return &Heap{order: o, fcfs: fcfs}
}

// Len is the number of entries, stale ones included.
func (h *Heap) Len() int {
	if h.wide != nil {
		return h.wide.Len()
	}
	return len(h.items)
}

// Order returns the heap's policy.
func (h *Heap) Order() Ordering { return h.order }

// Grow makes room for n more entries, so a load or a bulk submit of
// millions of jobs allocates the heap once, to size, not by appends that
// leave it up to a quarter empty.
func (h *Heap) Grow(n int) {
	if h.wide != nil {
		h.wide.Grow(n)
		return
	}
	h.items = slices.Grow(h.items, n)
}

// StaleSlack is how many entries past twice its ready jobs a heap's owner
// lets it hold before it calls Compact.
const StaleSlack = 4096

// Compact drops the entries current rejects, and every entry but one of
// a job entered more than once: holding a job and releasing it (mqhold,
// mqrls, mqalter) leaves its old entry behind, and only a pop dropped one,
// so cycles over an array of a million with nothing running added a
// million entries each. It works in place; a heap of ids too large to
// pack (wide) is left as it is.
func (h *Heap) Compact(current func(Ready) bool) {
	if h.wide != nil {
		return
	}
	kept := h.items[:0]
	for _, e := range h.items {
		if current(e.ready()) {
			kept = append(kept, e)
		}
	}
	id := func(e entry) uint64 { return e.key & maxPacked }
	slices.SortFunc(kept, func(a, b entry) int { return cmp.Compare(id(a), id(b)) })
	h.items = slices.CompactFunc(kept, func(a, b entry) bool { return id(a) == id(b) })
	for i := len(h.items)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

// Push adds a ready job.
func (h *Heap) Push(r Ready) {
	if h.wide == nil {
		if e, ok := pack(r); ok {
			h.items = append(h.items, e)
			h.up(len(h.items) - 1)
			return
		}
		h.widen()
	}
	h.wide.Push(r)
}

// widen turns the heap to plain Ready entries, keeping their order.
func (h *Heap) widen() {
	wide := make([]Ready, len(h.items), max(len(h.items)+1, 8))
	for i, e := range h.items {
		wide[i] = e.ready()
	}
	h.items = nil
	h.wide = heap.From(h.order.Less, wide)
}

func (h *Heap) less(a, b entry) bool {
	if h.fcfs {
		return a.key < b.key
	}
	return h.order.Less(a.ready(), b.ready())
}

// up and down are pop's and Push's for packed entries, not package
// heap's: a compare through a func value cost a quarter of an FCFS
// dispatch's Pop and Push.
func (h *Heap) up(i int) {
	items := h.items
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(items[i], items[p]) {
			break
		}
		items[i], items[p] = items[p], items[i]
		i = p
	}
}

func (h *Heap) down(i int) {
	items := h.items
	n := len(items)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h.less(items[r], items[l]) {
			m = r
		}
		if !h.less(items[m], items[i]) {
			return
		}
		items[i], items[m] = items[m], items[i]
		i = m
	}
}

// Peek returns the first job without removing it.
func (h *Heap) Peek() (Ready, bool) {
	if h.wide != nil {
		return h.wide.Peek()
	}
	if len(h.items) == 0 {
		return Ready{}, false
	}
	return h.items[0].ready(), true
}

// Pop removes and returns the first job.
func (h *Heap) Pop() (Ready, bool) {
	if h.wide != nil {
		r, ok := h.wide.Pop()
		h.wide.Clip(1024) // give memory back after a drain
		if h.wide.Len() == 0 {
			h.wide = nil // pack again from empty
		}
		return r, ok
	}
	n := len(h.items)
	if n == 0 {
		return Ready{}, false
	}
	top := h.items[0]
	h.items[0] = h.items[n-1]
	h.items = h.items[:n-1]
	if n > 1 {
		h.down(0)
	}
	if cap(h.items) > 1024 && len(h.items) < cap(h.items)/4 {
		h.items = append([]entry(nil), h.items...) // give memory back after a drain
	}
	return top.ready(), true
}

// Each calls f for every entry, stale ones included, in no particular
// order, until f returns false.
func (h *Heap) Each(f func(Ready) bool) {
	if h.wide != nil {
		h.wide.Each(f)
		return
	}
	for _, e := range h.items {
		if !f(e.ready()) {
			return
		}
	}
}
