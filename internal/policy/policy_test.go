package policy

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestLess(t *testing.T) {
	t.Parallel()
	r := func(id int64, est float32) Ready { return Ready{ID: id, Est: est} }
	p := func(id int64, est, prio float32) Ready { return Ready{ID: id, Est: est, Prio: prio} }
	tests := []struct {
		name string
		o    Ordering
		a, b Ready
		want bool
	}{
		{"fcfs older first", FCFS{}, r(1, 100), r(2, 1), true},
		{"fcfs newer second", FCFS{}, r(2, 1), r(1, 100), false},
		{"fcfs ignores est", FCFS{}, r(1, 0), r(2, 5), true},
		{"fcfs irreflexive", FCFS{}, r(3, 1), r(3, 1), false},
		{"sjf shorter first", SJF{}, r(2, 10), r(1, 20), true},
		{"sjf longer second", SJF{}, r(1, 20), r(2, 10), false},
		{"sjf equal est older first", SJF{}, r(1, 5), r(2, 5), true},
		{"sjf equal est newer second", SJF{}, r(2, 5), r(1, 5), false},
		{"sjf unknown after known", SJF{}, r(1, 0), r(2, 1000), false},
		{"sjf known before unknown", SJF{}, r(2, 1000), r(1, 0), true},
		{"sjf both unknown older first", SJF{}, r(1, 0), r(2, 0), true},
		{"sjf both unknown newer second", SJF{}, r(2, 0), r(1, 0), false},
		{"sjf irreflexive", SJF{}, r(3, 7), r(3, 7), false},
		{"sjf tiny est", SJF{}, r(9, 0.001), r(1, 0.002), true},
		{"cp longer chain first", CP{}, p(2, 1, 30), p(1, 20, 25), true},
		{"cp shorter chain second", CP{}, p(1, 20, 25), p(2, 1, 30), false},
		{"cp equal chain older first", CP{}, p(1, 9, 5), p(2, 1, 5), true},
		{"cp equal chain newer second", CP{}, p(2, 1, 5), p(1, 9, 5), false},
		{"cp ignores est", CP{}, p(5, 100, 1), p(6, 1, 2), false},
		{"cp irreflexive", CP{}, p(3, 7, 7), p(3, 7, 7), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.o.Less(tc.a, tc.b); got != tc.want {
				t.Fatalf("%s.Less(%+v, %+v) = %v, want %v", tc.o.Name(), tc.a, tc.b, got, tc.want)
			}
		})
	}
}

func TestLookup(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		kind  Kind
		needs Needs
	}{
		{"fcfs", Ordered, 0},
		{"sjf", Ordered, NeedsEstimates},
		{"cp", Ordered, NeedsEstimates | NeedsBLevels},
		{"dc", Choosing, NeedsEstimates | NeedsFiles | NeedsArrivals},
		{"sa", Choosing, NeedsFiles | NeedsBytesHere},
		{"wqr", Ordered, 0},
		{"xsufferage", Choosing, NeedsEstimates | NeedsFiles | NeedsArrivals},
	} {
		p, err := Lookup(tc.name)
		if err != nil || p.Name != tc.name || p.Order.Name() != tc.name || p.Kind != tc.kind || p.Needs != tc.needs || p.Summary == "" {
			t.Fatalf("Lookup(%s) = %+v, %v", tc.name, p, err)
		}
		if (p.Kind == Choosing) != (p.NewDC != nil || p.NewChooser != nil) {
			t.Fatalf("%s: a choosing policy has a decision rule, and only it", tc.name)
		}
	}
	for _, bad := range []string{"", "FCFS", "lifo", "sjf "} {
		if _, err := Lookup(bad); err == nil {
			t.Errorf("Lookup(%q) succeeded", bad)
		} else if !strings.Contains(err.Error(), "fcfs, sjf, cp, dc") {
			t.Errorf("Lookup(%q) error %q does not list the known policies", bad, err)
		}
	}
	if got := strings.Join(Names(), " "); got != "fcfs sjf cp dc sa wqr xsufferage dbc-cost dbc-costtime dbc-time lp" {
		t.Fatalf("Names() = %q", got)
	}
}

// drain pops everything.
func drain(h *Heap) []Ready {
	var out []Ready
	for {
		r, ok := h.Pop()
		if !ok {
			return out
		}
		out = append(out, r)
	}
}

func TestHeapOrder(t *testing.T) {
	t.Parallel()
	for _, o := range []Ordering{FCFS{}, SJF{}} {
		for _, n := range []int{0, 1, 2, 3, 10, 100, 5000} {
			rng := rand.New(rand.NewPCG(uint64(n), 7))
			var in []Ready
			for i := 0; i < n; i++ {
				est := float32(rng.IntN(20)) // many ties and zeros
				in = append(in, Ready{ID: int64(i + 1), Est: est})
			}
			rng.Shuffle(len(in), func(i, j int) { in[i], in[j] = in[j], in[i] })
			h := NewHeap(o)
			if h.Order().Name() != o.Name() {
				t.Fatalf("Order() = %s", h.Order().Name())
			}
			for _, r := range in {
				h.Push(r)
			}
			if h.Len() != n {
				t.Fatalf("Len = %d, want %d", h.Len(), n)
			}
			if n > 0 {
				top, ok := h.Peek()
				want := slices.MinFunc(in, func(a, b Ready) int {
					if o.Less(a, b) {
						return -1
					}
					if o.Less(b, a) {
						return 1
					}
					return 0
				})
				if !ok || top != want {
					t.Fatalf("%s n=%d: Peek = %+v, want %+v", o.Name(), n, top, want)
				}
			}
			got := drain(h)
			want := slices.Clone(in)
			slices.SortFunc(want, func(a, b Ready) int {
				if o.Less(a, b) {
					return -1
				}
				if o.Less(b, a) {
					return 1
				}
				return 0
			})
			if !slices.Equal(got, want) {
				t.Fatalf("%s n=%d: popped in the wrong order", o.Name(), n)
			}
			if _, ok := h.Pop(); ok {
				t.Fatal("Pop of an empty heap succeeded")
			}
			if _, ok := h.Peek(); ok {
				t.Fatal("Peek of an empty heap succeeded")
			}
		}
	}
}

func TestHeapSJFExample(t *testing.T) {
	t.Parallel()
	h := NewHeap(SJF{})
	for _, r := range []Ready{{ID: 1, Est: 30}, {ID: 2}, {ID: 3, Est: 10}, {ID: 4, Est: 20}, {ID: 5, Est: 10}, {ID: 6}} {
		h.Push(r)
	}
	var ids []int64
	for _, r := range drain(h) {
		ids = append(ids, r.ID)
	}
	if want := []int64{3, 5, 4, 1, 2, 6}; !slices.Equal(ids, want) {
		t.Fatalf("SJF order %v, want %v", ids, want)
	}
}

func TestHeapInterleavedAndShrink(t *testing.T) {
	t.Parallel()
	// Interleave pushes and pops (as dispatch does) and drain a large heap
	// past the point where it gives memory back.
	h := NewHeap(FCFS{})
	next := int64(1)
	var popped []int64
	for round := 0; round < 5; round++ {
		for i := 0; i < 3000; i++ {
			h.Push(Ready{ID: next})
			next++
		}
		for i := 0; i < 2500; i++ {
			r, ok := h.Pop()
			if !ok {
				t.Fatal("heap ran dry")
			}
			popped = append(popped, r.ID)
		}
	}
	for _, r := range drain(h) {
		popped = append(popped, r.ID)
	}
	if len(popped) != int(next-1) {
		t.Fatalf("popped %d, pushed %d", len(popped), next-1)
	}
	// FCFS with increasing pushes: pops within each round are increasing and
	// every id comes out exactly once.
	seen := map[int64]bool{}
	for _, id := range popped {
		if seen[id] {
			t.Fatalf("id %d popped twice", id)
		}
		seen[id] = true
	}
	if !slices.IsSorted(popped) {
		t.Fatal("FCFS heap popped out of order")
	}
	if cap(h.items) > 1024 {
		t.Fatalf("drained heap still holds %d slots", cap(h.items))
	}
}

func FuzzHeap(f *testing.F) {
	f.Add([]byte{1, 2, 3, 0, 0, 5, 5, 255})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, o := range []Ordering{FCFS{}, SJF{}} {
			h := NewHeap(o)
			var model []Ready
			for i, b := range data {
				if b == 255 && len(model) > 0 {
					r, ok := h.Pop()
					if !ok {
						t.Fatal("Pop failed on a non-empty heap")
					}
					// r must be a minimum of the model
					for _, m := range model {
						if o.Less(m, r) {
							t.Fatalf("%s popped %+v but %+v comes first", o.Name(), r, m)
						}
					}
					k := slices.Index(model, r)
					if k < 0 {
						t.Fatalf("popped %+v that was never pushed", r)
					}
					model = slices.Delete(model, k, k+1)
					continue
				}
				r := Ready{ID: int64(i), Est: float32(b % 8)}
				h.Push(r)
				model = append(model, r)
			}
			if h.Len() != len(model) {
				t.Fatalf("Len %d, model %d", h.Len(), len(model))
			}
		}
	})
}

// Every registry entry has what its kind needs, names are unique, and the
// check catches an entry that lacks them (a new policy is one entry).
func TestRegistryEntries(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, p := range All() {
		if err := p.check(); err != nil {
			t.Error(err)
		}
		if seen[p.Name] {
			t.Errorf("policy %s is registered twice", p.Name)
		}
		seen[p.Name] = true
	}
	for _, bad := range []Info{
		{Name: "x", Summary: "s", Kind: Ordered},
		{Name: "x", Summary: "s", Kind: Choosing, Order: FCFS{}},
		{Name: "x", Summary: "s", Kind: Provisioning},
		{Name: "x", Summary: "s", Kind: Provisioning, Order: FCFS{}, NewProvisioner: func() Provisioner { return nil }},
		{Name: "x", Kind: Ordered, Order: FCFS{}},
		{Name: "x", Summary: "s", Order: FCFS{}},
	} {
		if bad.check() == nil {
			t.Errorf("%+v passed the check", bad)
		}
	}
}
