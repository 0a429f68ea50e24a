package metaqueue

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/packing"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/internal/resource"
	"github.com/mq-hpc/mq/protocol"
)

// BenchmarkPackDecision: one dispatch decision with resources (the FCFS
// pick, dispatch.First with fitsResources) for a placeholder of 16 cores
// and 64 GiB, at 100,000 ready jobs of 8 shapes (1, 2, 4 and 8 cores, 1
// or 4 GiB, in turn). "idle": the first job fits; "3free": 13 cores are
// taken, so jobs of 4 and 8 cores are set aside until one of 1 or 2
// fits; "full": nothing fits, the whole window is examined. Target: <= 50
// us.
//
//	go test -run '^$' -bench PackDecision -benchtime 2000x ./internal/metaqueue
func BenchmarkPackDecision(b *testing.B) {
	const jobs = 100_000
	s, err := Open(context.Background(), Options{Path: filepath.Join(b.TempDir(), "mq.db"), Sync: SyncNormal, Lease: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	bulk, err := s.NewBulk()
	if err != nil {
		b.Fatal(err)
	}
	specs := make([]protocol.JobSpec, 0, 2000)
	for i := range jobs {
		shape := i % 8
		specs = append(specs, protocol.JobSpec{Target: "t", Command: fmt.Sprint("run ", i),
			Resources: protocol.Resources{CPUs: 1 << (shape % 4), Mem: int64(1+3*(shape/4)) << 30}})
		if len(specs) == cap(specs) {
			if err := bulk.Add(i+1, specs); err != nil {
				b.Fatal(err)
			}
			specs = specs[:0]
		}
	}
	if _, err := bulk.Commit(ctx); err != nil {
		b.Fatal(err)
	}
	c := protocol.Capacity{CPUs: 16, Mem: 64 << 30}
	r, err := s.Register(ctx, protocol.Register{Site: "s", Host: "h", PID: 1, Slots: 16, OutDir: "/o", Capacity: &c})
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		taken int // cores taken before the decision
		fits  bool
	}{{"idle", 0, true}, {"3free", 13, true}, {"full", 16, false}} {
		b.Run(tc.name, func(b *testing.B) {
			err := s.do(ctx, func() error {
				hog := packing.Run{Job: -1, Attempt: 1}
				if tc.taken > 0 {
					s.pack.Job(-1, resource.Request{CPUs: tc.taken}, resource.Category{})
					if _, ok := s.pack.Start(hog, r.ID); !ok {
						return fmt.Errorf("cannot take %d cores", tc.taken)
					}
					defer s.pack.Stop(hog)
				}
				q := s.queues["default"]
				p := &parkedNext{req: protocol.Next{Placeholder: r.ID, Free: 16 - tc.taken}}
				s.pack.Begin(s.now(), r.ID, 16-tc.taken)
				b.ResetTimer()
				for b.Loop() {
					id, ok, err := s.pickFrom(q, p)
					if err != nil {
						return err
					}
					if ok != tc.fits {
						return fmt.Errorf("%w: job %d, ok %v", errOtherDecision, id, ok)
					}
					if ok {
						q.ready.Push(policy.Ready{ID: id}) // undo: every op sees the same queue
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}
