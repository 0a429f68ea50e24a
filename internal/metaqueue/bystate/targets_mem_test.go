package bystate

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/job"
)

// targetBytes is the live heap, a target, that n targets of jobs queued
// jobs each add to an empty Targets, a target's jobs one after another
// as a submission brings them.
func targetBytes(n, jobs int) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ts := new(Targets)
	for t := range n {
		for range jobs {
			ts.Move(dag.TargetID(t+1), 1, 0, job.Queued)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(ts)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
}

// BenchmarkTargetsMemory reports what a target of ten jobs costs the
// counts, in heap bytes (B/target), at 10,000 to a million such targets.
func BenchmarkTargetsMemory(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("targets=%d", n), func(b *testing.B) {
			var per float64
			for b.Loop() {
				per = targetBytes(n, 10)
			}
			b.ReportMetric(per, "B/target")
		})
	}
}

// TestTargetsMemory: a target of ten jobs costs its counts at most 40
// heap bytes (it was 79 with a heap object a target: BENCHMARKS.md).
func TestTargetsMemory(t *testing.T) {
	if per := targetBytes(10_000, 10); per > 40 {
		t.Errorf("10,000 targets of 10 jobs: %.1f bytes a target, want at most 40", per)
	}
}
