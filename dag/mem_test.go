package dag

import (
	"runtime"
	"strconv"
	"testing"
)

// BenchmarkPipelineTargets adds n/2 two-stage pipelines (targets a{i} and
// b{i}, b{i}'s job needing a{i}) the way a bulk submit does and reports the
// live heap per target after a GC: issue 21's memory case, in the graph
// alone. DAG_BENCH_BIG-free: 200,000 jobs keep it quick; the bytes per
// target do not depend on n.
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
