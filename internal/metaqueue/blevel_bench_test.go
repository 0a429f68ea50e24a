package metaqueue_test

import (
	"context"
	"testing"

	"github.com/mq-hpc/mq/internal/metaqueue"
	"github.com/mq-hpc/mq/protocol"
)

// BenchmarkSubmitShapesCP is BenchmarkSubmitShapes into a default queue
// whose policy is cp: what ranking b-levels at submit adds (compare the
// same shape of BenchmarkSubmitShapes in the same run).
func BenchmarkSubmitShapesCP(b *testing.B) {
	for _, shape := range []string{"flat", "targets", "pipes-shared", "pipes"} {
		b.Run(shape, func(b *testing.B) {
			specs := shapeSpecs(shape, 200000)
			cp := "cp"
			jobs := 0
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				s := benchStore(b, metaqueue.SyncNormal)
				if _, err := s.SetQueue(context.Background(), protocol.QueueSet{Name: protocol.DefaultQueue, Policy: &cp}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				benchBulk(b, s, specs)
				jobs += len(specs)
			}
			b.ReportMetric(float64(jobs)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}
