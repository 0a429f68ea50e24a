package policy

import (
	"cmp"
	"math"
	"slices"
	"testing"
	"unsafe"
)

// TestHeapPacking: entries keep every field of a Ready through the packed
// form, and a heap given an id too large to pack goes on in order with
// plain entries, then packs again once drained.
func TestHeapPacking(t *testing.T) {
	t.Parallel()
	if s := unsafe.Sizeof(entry{}); s != 16 {
		t.Fatalf("entry is %d bytes, want 16", s)
	}
	tests := []struct {
		name string
		in   []Ready
	}{
		{"packed", []Ready{{ID: 5, Est: 1.5, Prio: 2, Priority: -1024}, {ID: 1, Priority: 1023}, {ID: maxPacked, Est: 3}, {ID: 0}, {ID: 2, Priority: -1}}},
		{"an id past 2^47", []Ready{{ID: 3}, {ID: maxPacked + 1, Priority: 7}, {ID: 1, Est: 2}, {ID: math.MaxInt64}}},
		{"a negative id", []Ready{{ID: 3}, {ID: -4, Prio: 1}, {ID: 1}}},
	}
	for _, tt := range tests {
		for _, o := range []Ordering{FCFS{}, SJF{}} {
			t.Run(tt.name+"/"+o.Name(), func(t *testing.T) {
				t.Parallel()
				h := NewHeap(o)
				h.Grow(len(tt.in))
				for _, r := range tt.in {
					h.Push(r)
				}
				if h.Len() != len(tt.in) {
					t.Fatalf("Len %d, want %d", h.Len(), len(tt.in))
				}
				var each []Ready
				h.Each(func(r Ready) bool { each = append(each, r); return true })
				want := slices.Clone(tt.in)
				slices.SortFunc(want, func(a, b Ready) int {
					switch {
					case o.Less(a, b):
						return -1
					case o.Less(b, a):
						return 1
					}
					return 0
				})
				if first, ok := h.Peek(); !ok || first != want[0] {
					t.Fatalf("Peek = %+v, want %+v", first, want[0])
				}
				var got []Ready
				for {
					r, ok := h.Pop()
					if !ok {
						break
					}
					got = append(got, r)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("popped %+v, want %+v", got, want)
				}
				byID := func(a, b Ready) int { return cmp.Compare(a.ID, b.ID) }
				slices.SortFunc(each, byID)
				all := slices.Clone(tt.in)
				slices.SortFunc(all, byID)
				if !slices.Equal(each, all) {
					t.Fatalf("Each gave %+v, want %+v", each, all)
				}
				if h.wide != nil {
					t.Fatal("a drained heap stays wide")
				}
			})
		}
	}
}

// TestHeapCompact: Compact keeps one entry per job among those current
// accepts, and the heap still pops them in its order.
func TestHeapCompact(t *testing.T) {
	t.Parallel()
	for _, order := range []Ordering{FCFS{}, SJF{}} {
		h := NewHeap(order)
		for round := range 3 { // every job entered three times
			for id := int64(1); id <= 100; id++ {
				h.Push(Ready{ID: id, Est: float32(101 - id), Priority: int16(id % 3), Prio: float32(round)})
			}
		}
		h.Compact(func(r Ready) bool { return r.ID%10 != 0 }) // jobs 10, 20, ... went stale
		if h.Len() != 90 {
			t.Fatalf("%T: %d entries after Compact, want 90", order, h.Len())
		}
		var got []Ready
		for r, ok := h.Pop(); ok; r, ok = h.Pop() {
			if r.ID%10 == 0 {
				t.Fatalf("%T: stale job %d kept", order, r.ID)
			}
			got = append(got, r)
		}
		if !slices.IsSortedFunc(got, func(a, b Ready) int {
			if order.Less(a, b) {
				return -1
			}
			if order.Less(b, a) {
				return 1
			}
			return 0
		}) {
			t.Fatalf("%T: popped out of order after Compact", order)
		}
	}
}

// TestHeapByArrival: the queues whose order is FCFS under their policy's
// name compare packed keys alone, as an fcfs queue's do (through Less, a
// dc queue's 128-job look took a third longer); the others call Less.
func TestHeapByArrival(t *testing.T) {
	for _, p := range All() {
		if p.Order == nil {
			continue
		}
		want := p.Name == "fcfs" || p.Name == "dc" || p.Name == "sa" || p.Name == "wqr" || p.Name == "xsufferage"
		if got := NewHeap(p.Order).fcfs; got != want {
			t.Errorf("%s: a heap comparing keys alone %v, want %v", p.Name, got, want)
		}
	}
}
