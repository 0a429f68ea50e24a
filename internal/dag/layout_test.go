package dag

import (
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// TestTargetLayout: a target stays 40 bytes (ten million of them are most
// of a CLS's memory with pipelines queued).
func TestTargetLayout(t *testing.T) {
	if s := unsafe.Sizeof(target{}); s != 40 {
		t.Fatalf("target is %d bytes, want 40", s)
	}
}

// TestSinglePrereqLists: a job needing one target shares its target's
// first prerequisite's list when that is the one it names, and otherwise
// keeps its own; both read back right, before and after more edges.
func TestSinglePrereqLists(t *testing.T) {
	g := New()
	a, b, c := g.AddTarget("a"), g.AddTarget("b"), g.AddTarget("c")
	g.AddEdges(c, []TargetID{a})
	g.AddJob(1, Node{Target: c, Prereqs: []TargetID{a}}) // c's first: shared
	g.AddEdges(c, []TargetID{b})
	g.AddJob(2, Node{Target: c, Prereqs: []TargetID{b}}) // not c's first: its own
	g.AddJob(3, Node{Target: b, Prereqs: []TargetID{a}}) // no edge recorded yet: its own
	for id, want := range map[int64][]TargetID{1: {a}, 2: {b}, 3: {a}} {
		n, ok := g.Node(id)
		if !ok || !slices.Equal(n.Prereqs, want) || len(n.AfterAny) != 0 {
			t.Errorf("job %d: %+v, want prerequisites %v", id, n, want)
		}
	}
	if got := g.Prereqs(c); !slices.Equal(got, []TargetID{a, b}) {
		t.Errorf("c's prerequisites %v, want [a b]", got)
	}
}

// TestNameLengths: names around the length prefix's one-byte limit and a
// chunk's end read back whole.
func TestNameLengths(t *testing.T) {
	g := New()
	var names []string
	for _, n := range []int{0, 1, 126, 127, 128, 129, 255, 256, 257, 300} {
		for i := 0; i < 300; i++ { // enough to cross chunk ends
			names = append(names, strings.Repeat(string(rune('a'+i%26)), n)+strings.Repeat("z", i%3))
		}
	}
	ids := make([]TargetID, len(names))
	for i, n := range names {
		if id, ok := g.Lookup(n); ok {
			ids[i] = id
			continue
		}
		ids[i] = g.AddTarget(n)
	}
	for i, n := range names {
		if got := g.Name(ids[i]); got != n {
			t.Fatalf("name %d: %d bytes back, want %d", i, len(got), len(n))
		}
	}
}
