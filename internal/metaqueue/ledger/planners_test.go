package ledger

import (
	"context"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/protocol"
)

// fakePlanCore is the core as the planners' side reads it: one queue, q.
type fakePlanCore struct {
	fakeCore
	calls int // Do calls: every request runs on the core
}

func (f *fakePlanCore) Do(_ context.Context, fn func() error) error { f.calls++; return fn() }
func (f *fakePlanCore) Queues() []QueueCounts                       { return nil }
func (f *fakePlanCore) Graph() *dag.Graph                           { return dag.New() }
func (f *fakePlanCore) NextID() int64                               { return 1 }
func (f *fakePlanCore) Now() time.Time                              { return time.Unix(0, 0) }
func (f *fakePlanCore) Estimate(dag.Node) float64                   { return 0 }
func (f *fakePlanCore) Bandwidth(site string) float64               { return float64(len(site)) }

func (f *fakePlanCore) QueueID(name string) (int32, bool) { return 7, name == "q" }

// The planners' requests each run on the core; caps go to the named
// queue, an unknown queue is not found.
func TestPlanners(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		queue  string
		caps   map[string]int
		capped bool
		code   string
	}{
		{"caps a queue", "q", map[string]int{"a": 1}, true, ""},
		{"nil uncaps", "q", nil, false, ""},
		{"unknown queue", "nope", map[string]int{"a": 1}, false, protocol.CodeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &fakePlanCore{}
			l := New(nil)
			err := NewPlanners(l, c).SetEconPlan(ctx, tc.queue, tc.caps, 0)
			if tc.code != "" {
				if !protocol.IsCode(err, tc.code) {
					t.Fatalf("SetEconPlan: %v, want code %s", err, tc.code)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if got := l.Capped(7); got != tc.capped {
				t.Errorf("Capped = %v, want %v", got, tc.capped)
			}
			if c.calls != 1 {
				t.Errorf("%d calls on the core, want 1", c.calls)
			}
		})
	}
	c := &fakePlanCore{}
	_, links, err := NewPlanners(New(nil), c).StageQueues(ctx, []string{"ab", "cde"})
	if err != nil || links["ab"] != 2 || links["cde"] != 3 || c.calls != 1 {
		t.Errorf("StageQueues: links %v, err %v, %d calls; want each site's bandwidth, one call", links, err, c.calls)
	}
}
