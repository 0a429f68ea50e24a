// Package heap is a binary min-heap of values ordered by a function.
//
// Unlike container/heap it stores T directly and calls less without
// boxing through an interface, so a push or pop allocates nothing once the
// backing slice has grown and costs O(log n) calls of less.
package heap

import "slices"

// Heap is a min-heap of T: the item for which less holds against every
// other comes out first. Items that compare equal come out in no
// particular order; callers that need a stable order break ties in less
// (with a sequence number, say). The zero Heap is not usable: make one
// with New.
type Heap[T any] struct {
	less  func(a, b T) bool
	items []T
}

// New returns an empty heap ordered by less.
func New[T any](less func(a, b T) bool) *Heap[T] {
	return &Heap[T]{less: less}
}

// From returns a heap ordered by less holding items, which it takes over
// (the caller must not use the slice afterwards). It costs O(n).
func From[T any](less func(a, b T) bool, items []T) *Heap[T] {
	h := &Heap[T]{less: less, items: items}
	for i := len(items)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
	return h
}

// Len is the number of items.
func (h *Heap[T]) Len() int { return len(h.items) }

// Push adds x.
func (h *Heap[T]) Push(x T) {
	h.items = append(h.items, x)
	h.up(len(h.items) - 1)
}

// Peek returns the first item without removing it; ok is false if the
// heap is empty.
func (h *Heap[T]) Peek() (x T, ok bool) {
	if len(h.items) == 0 {
		return x, false
	}
	return h.items[0], true
}

// Pop removes and returns the first item; ok is false if the heap is
// empty.
func (h *Heap[T]) Pop() (x T, ok bool) {
	n := len(h.items) - 1
	if n < 0 {
		return x, false
	}
	top := h.items[0]
	h.items[0] = h.items[n]
	var zero T
	h.items[n] = zero // drop references the item held
	h.items = h.items[:n]
	if n > 1 {
		h.down(0)
	}
	return top, true
}

// FixTop restores the order after the first item was changed in place
// through Top, cheaper than a Pop and a Push.
func (h *Heap[T]) FixTop() {
	if len(h.items) > 1 {
		h.down(0)
	}
}

// Top returns a pointer to the first item, for changing it in place
// before FixTop; nil if the heap is empty.
func (h *Heap[T]) Top() *T {
	if len(h.items) == 0 {
		return nil
	}
	return &h.items[0]
}

// Each calls f for every item, in no particular order, until f returns
// false. f must not change the heap.
func (h *Heap[T]) Each(f func(T) bool) {
	for _, x := range h.items {
		if !f(x) {
			return
		}
	}
}

// Clip gives memory back after a drain: when the backing array is large
// and at most a quarter full, the items move to one that fits them.
func (h *Heap[T]) Clip(min int) {
	if cap(h.items) > min && len(h.items) < cap(h.items)/4 {
		h.items = append([]T(nil), h.items...)
	}
}

// Grow makes room for n more items, so that many pushes allocate once.
func (h *Heap[T]) Grow(n int) { h.items = slices.Grow(h.items, n) }

// Cap is the capacity of the backing array, which Clip bounds.
func (h *Heap[T]) Cap() int { return cap(h.items) }

func (h *Heap[T]) up(i int) {
	items, less := h.items, h.less
	for i > 0 {
		p := (i - 1) / 2
		if !less(items[i], items[p]) {
			break
		}
		items[i], items[p] = items[p], items[i]
		i = p
	}
}

func (h *Heap[T]) down(i int) {
	items, less := h.items, h.less
	n := len(items)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && less(items[r], items[l]) {
			m = r
		}
		if !less(items[m], items[i]) {
			return
		}
		items[i], items[m] = items[m], items[i]
		i = m
	}
}
