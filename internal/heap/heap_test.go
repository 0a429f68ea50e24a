package heap

import (
	"container/heap"
	"encoding/binary"
	"slices"
	"testing"
)

func intLess(a, b int) bool { return a < b }

func drain(h *Heap[int]) []int {
	var out []int
	for {
		x, ok := h.Pop()
		if !ok {
			return out
		}
		out = append(out, x)
	}
}

func TestHeap(t *testing.T) {
	for _, tc := range []struct {
		name string
		push []int
		want []int
	}{
		{"empty", nil, nil},
		{"one", []int{7}, []int{7}},
		{"sorted", []int{1, 2, 3, 4}, []int{1, 2, 3, 4}},
		{"reversed", []int{4, 3, 2, 1}, []int{1, 2, 3, 4}},
		{"duplicates", []int{2, 1, 2, 1, 2}, []int{1, 1, 2, 2, 2}},
		{"negative", []int{0, -5, 3, -5, 9, -1}, []int{-5, -5, -1, 0, 3, 9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := New(intLess)
			for _, x := range tc.push {
				h.Push(x)
			}
			if h.Len() != len(tc.push) {
				t.Fatalf("Len = %d, want %d", h.Len(), len(tc.push))
			}
			if len(tc.want) > 0 {
				if x, ok := h.Peek(); !ok || x != tc.want[0] {
					t.Fatalf("Peek = %d, %v; want %d, true", x, ok, tc.want[0])
				}
			}
			if got := drain(h); !slices.Equal(got, tc.want) {
				t.Fatalf("pushed %v: popped %v, want %v", tc.push, got, tc.want)
			}
			if got := drain(From(intLess, slices.Clone(tc.push))); !slices.Equal(got, tc.want) {
				t.Fatalf("From(%v): popped %v, want %v", tc.push, got, tc.want)
			}
		})
	}
}

func TestEmpty(t *testing.T) {
	h := New(intLess)
	if _, ok := h.Peek(); ok {
		t.Fatal("Peek on an empty heap reported an item")
	}
	if _, ok := h.Pop(); ok {
		t.Fatal("Pop on an empty heap reported an item")
	}
	if h.Top() != nil {
		t.Fatal("Top on an empty heap is not nil")
	}
	h.FixTop() // must not panic
}

func TestFixTop(t *testing.T) {
	h := From(intLess, []int{1, 5, 3, 8})
	*h.Top() = 6
	h.FixTop()
	if got, want := drain(h), []int{3, 5, 6, 8}; !slices.Equal(got, want) {
		t.Fatalf("popped %v, want %v", got, want)
	}
}

func TestEachAndClip(t *testing.T) {
	h := New(intLess)
	for i := range 5000 {
		h.Push(i)
	}
	for range 4990 {
		h.Pop()
	}
	h.Clip(1024)
	if cap(h.items) > 1024 {
		t.Fatalf("Clip kept capacity %d for %d items", cap(h.items), h.Len())
	}
	var seen []int
	h.Each(func(x int) bool { seen = append(seen, x); return true })
	slices.Sort(seen)
	if want := []int{4990, 4991, 4992, 4993, 4994, 4995, 4996, 4997, 4998, 4999}; !slices.Equal(seen, want) {
		t.Fatalf("Each saw %v, want %v", seen, want)
	}
	n := 0
	h.Each(func(int) bool { n++; return n < 3 })
	if n != 3 {
		t.Fatalf("Each went on after false: %d calls", n)
	}
}

// FuzzHeap checks a heap against a sorted slice: each input byte pair is
// a push (even first byte) or a pop, and every pop must return the
// smallest item the model holds.
func FuzzHeap(f *testing.F) {
	f.Add([]byte{0, 5, 0, 3, 1, 0, 0, 9, 1, 1, 1, 1})
	f.Add([]byte{0, 1, 0, 1, 0, 1, 1, 0, 1, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		h := New(intLess)
		var model []int
		for len(ops) >= 2 {
			op, v := ops[0], int(int8(ops[1]))
			ops = ops[2:]
			if op%2 == 0 {
				h.Push(v)
				model = append(model, v)
				slices.Sort(model)
			} else {
				x, ok := h.Pop()
				if ok != (len(model) > 0) {
					t.Fatalf("Pop ok = %v with %d items in the model", ok, len(model))
				}
				if ok {
					if x != model[0] {
						t.Fatalf("Pop = %d, want %d", x, model[0])
					}
					model = model[1:]
				}
			}
			if h.Len() != len(model) {
				t.Fatalf("Len = %d, want %d", h.Len(), len(model))
			}
		}
		rest := drain(h)
		if !slices.Equal(rest, model) {
			t.Fatalf("drained %v, want %v", rest, model)
		}
	})
}

func TestModelRandom(t *testing.T) {
	// A deterministic long run of the fuzz body, so plain go test covers it.
	var seed uint64 = 1
	buf := make([]byte, 0, 20000)
	for range 10000 {
		seed = seed*6364136223846793005 + 1442695040888963407
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], seed)
		buf = append(buf, b[7]%3, b[6]) // two pushes for every pop on average
	}
	h := New(intLess)
	var model []int
	for i := 0; i+1 < len(buf); i += 2 {
		if buf[i] < 2 {
			h.Push(int(buf[i+1]))
			model = append(model, int(buf[i+1]))
			continue
		}
		x, ok := h.Pop()
		if !ok {
			if len(model) != 0 {
				t.Fatal("Pop reported empty with items left")
			}
			continue
		}
		slices.Sort(model)
		if x != model[0] {
			t.Fatalf("Pop = %d, want %d", x, model[0])
		}
		model = model[1:]
	}
}

// item is the shape of the simulators' event queues: a time and a
// sequence number to break ties.
type item struct {
	t   float64
	seq uint64
	who int32
}

func itemLess(a, b item) bool { return a.t < b.t || a.t == b.t && a.seq < b.seq }

type boxed []item

func (h boxed) Len() int           { return len(h) }
func (h boxed) Less(i, j int) bool { return itemLess(h[i], h[j]) }
func (h boxed) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *boxed) Push(x any)        { *h = append(*h, x.(item)) }
func (h *boxed) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// handWritten is the heap this package replaces in the simulators: the
// sift loops written out against one type.
type handWritten []item

func (h *handWritten) push(x item) {
	s := append(*h, x)
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !itemLess(s[i], s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
	*h = s
}

func (h *handWritten) pop() item {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && itemLess(s[r], s[l]) {
			m = r
		}
		if !itemLess(s[m], s[i]) {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}

// The benchmarks keep 1,024 items queued and push one for every pop, as
// an event loop does.
const benchDepth = 1024

func nextItem(i int) item {
	return item{t: float64(uint32(i*2654435761) % 100000), seq: uint64(i), who: int32(i)}
}

func BenchmarkHeap(b *testing.B) {
	h := New(itemLess)
	for i := range benchDepth {
		h.Push(nextItem(i))
	}
	b.ResetTimer()
	for i := range b.N {
		x, _ := h.Pop()
		x.t += nextItem(i).t
		h.Push(x)
	}
}

func BenchmarkHandWritten(b *testing.B) {
	var h handWritten
	for i := range benchDepth {
		h.push(nextItem(i))
	}
	b.ResetTimer()
	for i := range b.N {
		x := h.pop()
		x.t += nextItem(i).t
		h.push(x)
	}
}

func BenchmarkContainerHeap(b *testing.B) {
	var h boxed
	for i := range benchDepth {
		heap.Push(&h, nextItem(i))
	}
	b.ResetTimer()
	for i := range b.N {
		x := heap.Pop(&h).(item)
		x.t += nextItem(i).t
		heap.Push(&h, x)
	}
}
