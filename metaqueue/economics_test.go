package metaqueue

import (
	"context"
	"math"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// A queue's deadline and budget are stored, survive a restart, are kept
// when other fields change, clear with 0, and bad values are refused.
func TestQueueDeadlineBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	f := func(v float64) *float64 { return &v }
	info, err := e.s.SetQueue(ctx, protocol.QueueSet{Name: "q", Deadline: f(1.8e9), Budget: f(5000)})
	if err != nil || info.Deadline != 1.8e9 || info.Budget != 5000 {
		t.Fatalf("SetQueue = %+v, %v", info, err)
	}
	if info, err = e.s.SetQueue(ctx, protocol.QueueSet{Name: "q", Ceiling: f(60)}); err != nil || info.Deadline != 1.8e9 || info.Budget != 5000 {
		t.Fatalf("another field changed them: %+v, %v", info, err)
	}
	e.reopen()
	qs, err := e.s.Queues(ctx)
	if err != nil || len(qs) != 1 || qs[0].Deadline != 1.8e9 || qs[0].Budget != 5000 || qs[0].Ceiling != 60 {
		t.Fatalf("after a restart: %+v, %v", qs, err)
	}
	if info, err = e.s.SetQueue(ctx, protocol.QueueSet{Name: "q", Budget: f(0), Deadline: f(0)}); err != nil || info.Deadline != 0 || info.Budget != 0 {
		t.Fatalf("clearing: %+v, %v", info, err)
	}
	for _, bad := range []protocol.QueueSet{
		{Name: "q", Deadline: f(-1)}, {Name: "q", Deadline: f(math.NaN())}, {Name: "q", Deadline: f(1e12)},
		{Name: "q", Budget: f(-1)}, {Name: "q", Budget: f(math.Inf(1))}, {Name: "q", Budget: f(math.NaN())},
	} {
		if _, err := e.s.SetQueue(ctx, bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
