package metaqueue

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/mq-hpc/mq/policy"
	"github.com/mq-hpc/mq/protocol"
)

// BenchmarkDCDecision: one live DC decision for a placeholder's request
// with 100,000 ready jobs in a dc queue, each reading one of 1,000 files
// produced at site A; 32 other placeholders are predicted. "wait" is a
// placeholder at B (every examined job is better left for A: all 128 go
// back to the heap), "dispatch" one at A (the oldest job is chosen). The
// target is <= 1 ms; policy.DC alone takes ~9 us.
//
//	go test -run '^$' -bench DCDecision -benchtime 2000x ./metaqueue
func BenchmarkDCDecision(b *testing.B) {
	const jobs, files = 100_000, 1000
	s, err := Open(context.Background(), Options{Path: filepath.Join(b.TempDir(), "mq.db"), Sync: SyncNormal, Lease: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	pol := "dc"
	if _, err := s.SetQueue(ctx, protocol.QueueSet{Name: "dq", Policy: &pol}); err != nil {
		b.Fatal(err)
	}
	bulk, err := s.NewBulk()
	if err != nil {
		b.Fatal(err)
	}
	specs := make([]protocol.JobSpec, 0, 2000)
	for i := 0; i < jobs; i++ {
		specs = append(specs, protocol.JobSpec{Queue: "dq", Target: "parse", Cwd: "/w", Command: fmt.Sprintf("parse %d", i),
			Inputs: []protocol.File{{Path: fmt.Sprintf("/data/hom-%d", i%files)}}})
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
	var phA, phB int64
	for i := 0; i < 34; i++ {
		site := "A"
		if i%2 == 1 {
			site = "B"
		}
		r, err := s.Register(ctx, protocol.Register{Site: site, Host: fmt.Sprint("h", i), PID: 1, Slots: 1, OutDir: "/o"})
		if err != nil {
			b.Fatal(err)
		}
		switch i {
		case 0:
			phA = r.ID
		case 1:
			phB = r.ID
		}
	}
	for _, tc := range []struct {
		name string
		ph   *int64
		wait bool
	}{{"wait", &phB, true}, {"dispatch", &phA, false}} {
		b.Run(tc.name, func(b *testing.B) {
			err := s.do(ctx, func() error {
				d := &s.data
				a := d.site(d.placeOf("A", ""))
				for i := 0; i < files; i++ {
					d.where[fmt.Sprintf("/data/hom-%d", i)] = fileLoc{at: a, size: 50_000, job: 1}
				}
				for ph := int64(1); ph <= 34; ph++ {
					at, _ := s.phSite(ph)
					d.arr.Observe(ph, at, 0)
					d.arr.Observe(ph, at, float64(ph))
				}
				q := s.queues["dq"]
				p := &parkedNext{req: protocol.Next{Placeholder: *tc.ph, Free: 1}}
				b.ResetTimer()
				for b.Loop() {
					id, ok, waited, err := s.pickDC(q, p)
					if err != nil {
						return err
					}
					if waited != tc.wait || ok == tc.wait {
						return fmt.Errorf("decision: job %d, ok %v, waited %v", id, ok, waited)
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
