package policy

// Heap keeps ready jobs in an Ordering's order. Entries may go stale (the
// job was dispatched or re-waited through another path); the owner skips
// them when popping, which keeps every operation O(log n).
type Heap struct {
	order Ordering
	items []Ready
}

// NewHeap returns an empty heap ordered by o.
func NewHeap(o Ordering) *Heap { return &Heap{order: o} }

// Len is the number of entries, stale ones included.
func (h *Heap) Len() int { return len(h.items) }

// Order returns the heap's policy.
func (h *Heap) Order() Ordering { return h.order }

// Push adds a ready job.
func (h *Heap) Push(r Ready) {
	h.items = append(h.items, r)
	h.up(len(h.items) - 1)
}

// Peek returns the first job without removing it.
func (h *Heap) Peek() (Ready, bool) {
	if len(h.items) == 0 {
		return Ready{}, false
	}
	return h.items[0], true
}

// Pop removes and returns the first job.
func (h *Heap) Pop() (Ready, bool) {
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
		h.items = append([]Ready(nil), h.items...) // give memory back after a drain
	}
	return top, true
}

func (h *Heap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.order.Less(h.items[i], h.items[p]) {
			break
		}
		h.items[i], h.items[p] = h.items[p], h.items[i]
		i = p
	}
}

func (h *Heap) down(i int) {
	n := len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h.order.Less(h.items[r], h.items[l]) {
			m = r
		}
		if !h.order.Less(h.items[m], h.items[i]) {
			return
		}
		h.items[i], h.items[m] = h.items[m], h.items[i]
		i = m
	}
}

// Each calls f for every entry, stale ones included, in no particular
// order, until f returns false.
func (h *Heap) Each(f func(Ready) bool) {
	for _, r := range h.items {
		if !f(r) {
			return
		}
	}
}
