package dag

import (
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkPipelineTargets adds n/2 two-stage pipelines (targets a{i} and
// b{i}, b{i}'s job needing a{i}) the way a bulk submit does and reports the
// live heap per target after a GC (its job's slot and name included):
// The million-job memory case in the graph alone. 200,000 jobs keep it quick;
// the bytes per target hardly depend on n.
func BenchmarkPipelineTargets(b *testing.B) {
	const n = 200000
	names := make([]string, n)
	for i := 0; i < n/2; i++ {
		names[2*i], names[2*i+1] = "a"+strconv.Itoa(i), "b"+strconv.Itoa(i)
	}
	var perTarget float64
	for i := 0; i < b.N; i++ {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		g := New()
		id := int64(1)
		for k := 0; k < n; k += 2 {
			a := g.AddTarget(names[k])
			bt := g.AddTarget(names[k+1])
			g.AddJob(id, Node{Target: a})
			pre := []TargetID{a}
			g.AddEdges(bt, pre)
			g.AddJob(id+1, Node{Target: bt, Prereqs: pre})
			id += 2
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perTarget = float64(after.HeapAlloc-before.HeapAlloc) / n
		runtime.KeepAlive(g)
	}
	b.ReportMetric(perTarget, "heap-B/target")
}

func TestTargetNames(t *testing.T) {
	long := strings.Repeat("x", 0x10000) // longer than a chunk: its own
	edge := strings.Repeat("y", 0xffff)
	g := New()
	if got := g.Name(0); got != "" {
		t.Fatalf("Name(0) = %q", got)
	}
	// A long name before any chunk, then a short one that would fit
	// after it.
	names := []string{strings.Repeat("z", 0xffff), "s"}
	for i := 0; i < 100000; i++ { // fills chunks and grows the index
		names = append(names, "t"+strconv.Itoa(i))
		if i == 5000 {
			names = append(names, long, edge, "")
		}
	}
	ids := make([]TargetID, len(names))
	for i, n := range names {
		if _, ok := g.Lookup(n); ok {
			t.Fatalf("%.20q found before it was added", n)
		}
		ids[i] = g.AddTarget(n)
	}
	for i, n := range names {
		if id, ok := g.Lookup(n); !ok || id != ids[i] {
			t.Fatalf("Lookup(%.20q) = %d, %v; want %d", n, id, ok, ids[i])
		}
		if got := g.Name(ids[i]); got != n {
			t.Fatalf("Name(%d) = %.20q, want %.20q", ids[i], got, n)
		}
	}
	for _, n := range []string{"t100000", "x", "t-1", long + "x"} {
		if id, ok := g.Lookup(n); ok {
			t.Fatalf("Lookup(%.20q) = %d, want none", n, id)
		}
	}
}
