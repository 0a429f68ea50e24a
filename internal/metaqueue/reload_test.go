package metaqueue

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/loadscan"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// memState is what a Store holds in memory that a load must rebuild.
type memState struct {
	NextID  int64
	Counts  map[string][128]int    // by queue name
	Targets map[string]targetState // by name
	Jobs    map[int64]jobState     // live jobs
	Ready   map[string][]int64     // queued jobs in each queue's heap order
	Running map[int64]runState     // Executing jobs' attempts
}

type targetState struct {
	Total, Done, Bad int
	Prereqs          []string
	Queue            int32
	HasQueue         bool
}

type runState struct {
	Attempt, Placeholder int
	Unstarted            bool // prefetched, not yet said started
}

type jobState struct {
	Target, Queue string
	Est           float32
	State         job.State
	Prereqs       []string
	AfterAny      []string
}

// snapshot reads s's in-memory state on its core.
func snapshot(t *testing.T, s *Store) memState {
	t.Helper()
	var m memState
	err := s.do(context.Background(), func() error {
		m = memState{NextID: s.nextID, Counts: map[string][128]int{}, Targets: map[string]targetState{},
			Jobs: map[int64]jobState{}, Ready: map[string][]int64{}, Running: map[int64]runState{}}
		qname := func(id int32) string {
			if q := s.queueIDs[id]; q != nil {
				return q.Name
			}
			return fmt.Sprintf("queue#%d", id)
		}
		for id, c := range s.counts {
			if *c != ([128]int{}) {
				m.Counts[qname(id)] = *c
			}
		}
		names := func(ts []dag.TargetID) []string {
			var out []string
			for _, p := range ts {
				out = append(out, s.g.Name(p))
			}
			slices.Sort(out)
			return out
		}
		for id := dag.TargetID(0); id < s.g.NextTargetID(); id++ {
			name := s.g.Name(id)
			if name == "" {
				continue
			}
			ts := targetState{Prereqs: names(s.g.Prereqs(id))}
			ts.Total, ts.Done, ts.Bad = s.g.Counts(id)
			ts.Queue, ts.HasQueue = s.g.TargetQueue(id)
			m.Targets[name] = ts
		}
		s.g.Each(func(id int64, j dag.Node) {
			m.Jobs[id] = jobState{Target: s.g.Name(j.Target), Queue: qname(j.Queue), Est: j.Est, State: j.State,
				Prereqs: names(j.Prereqs), AfterAny: names(j.AfterAny)}
		})
		for _, q := range s.qlist {
			// Stale entries (jobs no longer Queued, or pushed twice) are
			// skipped when popped; only the live order counts.
			seen := map[int64]bool{}
			var order []int64
			for _, id := range heapItems(q) {
				if n, ok := s.g.Node(id); ok && n.State == job.Queued && !seen[id] {
					seen[id] = true
					order = append(order, id)
				}
			}
			if len(order) > 0 {
				m.Ready[q.Name] = order
			}
		}
		for id, ru := range s.running {
			m.Running[id] = runState{ru.Attempt, int(ru.Placeholder), ru.Unstarted}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return m
}

// TestReloadKeepsState: for metaqueues of every shape, the state a Store
// rebuilds on opening is the state it held before it closed: counts by
// state per queue and per target, every live job with its prerequisites,
// the ready heaps' order, the running attempts.
func TestReloadKeepsState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pipes := func(e *env, n int) {
		var specs []protocol.JobSpec
		for i := range n {
			specs = append(specs, spec(fmt.Sprintf("a%d", i), "a"), spec(fmt.Sprintf("b%d", i), "b", fmt.Sprintf("a%d", i)))
		}
		e.submit(specs...)
	}
	cases := []struct {
		name  string
		build func(e *env)
		// States some job must be in before the reload (the case
		// builds what it says), as counted per queue.
		states string
	}{
		{"empty", func(e *env) {}, ""},
		{"flat", func(e *env) {
			for i := range 50 {
				e.submit(protocol.JobSpec{Target: "t", Command: fmt.Sprint(i), Est: float64(i % 7), Priority: i%3 - 1})
			}
		}, "Q"},
		{"pipes", func(e *env) { pipes(e, 40) }, "WQ"},
		{"after-any", func(e *env) {
			e.submit(spec("a", "1"), spec("a", "2"),
				protocol.JobSpec{Target: "clean", Command: "c", AfterAny: []string{"a"}},
				protocol.JobSpec{Target: "both", Command: "b", Prereqs: []string{"a"}, AfterAny: []string{"clean"}},
				protocol.JobSpec{Target: "late", Command: "l", AfterAny: []string{"nobody-yet"}})
		}, "WQ"},
		{"held", func(e *env) {
			ids := e.submit(spec("h", "1"), spec("h", "2"), spec("h", "3"), spec("after", "4", "h"))
			if _, err := e.s.Hold(ctx, protocol.Select{IDs: ids[:2], Atomic: true}); err != nil {
				e.t.Fatal(err)
			}
		}, "HQW"},
		{"array", func(e *env) { e.submitArray("arr", 20, 3) }, "Q"},
		{"queues", func(e *env) {
			pol := "sjf"
			if _, err := e.s.SetQueue(ctx, protocol.QueueSet{Name: "short", Policy: &pol}); err != nil {
				e.t.Fatal(err)
			}
			for i := range 20 {
				e.submit(protocol.JobSpec{Target: "s", Command: fmt.Sprint(i), Queue: "short", Est: float64(20 - i)})
				e.submit(protocol.JobSpec{Target: "f", Command: fmt.Sprint(i)})
			}
		}, "Q"},
		{"mixed with ended, running and prefetched jobs", func(e *env) {
			pipes(e, 10)
			e.submitArray("arr", 8, 2)
			e.submit(protocol.JobSpec{Target: "clean", Command: "c", AfterAny: []string{"a0", "b1"}})
			ids := e.submit(spec("h", "1"), spec("h", "2"))
			if _, err := e.s.Hold(ctx, protocol.Select{IDs: ids[:1], Atomic: true}); err != nil {
				e.t.Fatal(err)
			}
			ph := e.register("s")
			r, err := e.s.Next(ctx, protocol.Next{Placeholder: ph, Free: 6, Ahead: 2})
			if err != nil || len(r.Jobs) < 6 {
				e.t.Fatalf("Next = %+v, %v", r, err)
			}
			// Two Done, one Failed, one still running, two prefetched.
			e.report(ph, ok(r.Jobs[0]), ok(r.Jobs[1]), exit(r.Jobs[2], 1))
			if _, err := e.s.Delete(ctx, protocol.Select{IDs: []int64{ids[1]}, Atomic: true}); err != nil {
				e.t.Fatal(err)
			}
		}, "WQEHDFX"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			c.build(e)
			before := snapshot(t, e.s)
			for _, st := range c.states {
				n := 0
				for _, cs := range before.Counts {
					n += cs[st]
				}
				if n == 0 {
					t.Fatalf("setup: no job %c in %v", st, before.Counts)
				}
			}
			if c.states == "WQEHDFX" {
				unstarted := 0
				for _, r := range before.Running {
					if r.Unstarted {
						unstarted++
					}
				}
				if unstarted == 0 {
					t.Fatal("setup: no prefetched job")
				}
			}
			e.reopen()
			after := snapshot(t, e.s)
			// A reload only ever drops stale heap entries; everything else is
			// the same.
			if !reflect.DeepEqual(before, after) {
				for _, f := range []struct {
					name string
					a, b any
				}{
					{"next id", before.NextID, after.NextID}, {"counts", before.Counts, after.Counts},
					{"targets", before.Targets, after.Targets}, {"jobs", before.Jobs, after.Jobs},
					{"ready", before.Ready, after.Ready}, {"running", before.Running, after.Running},
				} {
					if !reflect.DeepEqual(f.a, f.b) {
						t.Errorf("%s before reload:\n%+v\nafter:\n%+v", f.name, f.a, f.b)
					}
				}
			}
			e.check()
		})
	}
}

// TestLoadFailsCleanly: a row the load cannot take, early in a long scan
// (found by the core) or late (found by the reader decoding it), fails
// Open with an error naming it; the scans on reader connections stop and
// nothing hangs.
func TestLoadFailsCleanly(t *testing.T) {
	t.Parallel()
	const n = 3 * loadscan.Batch * loadscan.Depth // the readers fill their queues and block
	tests := []struct {
		name, sql, want string
	}{
		{"a target stored twice, early", "INSERT INTO targets (id, name) VALUES (0, 't5')", `target "t5" is stored twice`},
		{"a job row that is not a job's, late", fmt.Sprintf("UPDATE jobs SET target_id = 1.5 WHERE id = %d", n-10), "is not an integer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			specs := make([]protocol.JobSpec, n)
			for i := range specs {
				specs[i] = spec(fmt.Sprintf("t%d", i), "true")
			}
			e.submit(specs...)
			if err := e.s.Close(); err != nil {
				t.Fatal(err)
			}
			e.s = nil
			db := openRaw(t, e.opt.Path)
			mustExec(t, db, tt.sql)
			db.Close()
			done := make(chan error, 1)
			go func() {
				s, err := Open(context.Background(), e.opt)
				if err == nil {
					s.Close()
				}
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("Open = %v, want an error with %q", err, tt.want)
				}
			case <-time.After(2 * time.Minute):
				t.Fatal("Open hung on a bad row")
			}
		})
	}
}
