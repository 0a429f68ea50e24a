package metaqueue

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// A peer can send durations directly over the protocol: the store checks
// every one itself (a bad request naming the field), whatever the command
// line checked.
func TestProtocolDurationRanges(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ph := e.register("s")
	id := e.submit1("t", "true")
	ctx := context.Background()
	f := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		name string
		call func() error
		want string
	}{
		{"ceiling 1e10", func() error { _, err := e.s.SetQueue(ctx, protocol.QueueSet{Name: "q", Ceiling: f(1e10)}); return err }, "ceiling must be 0..1e+09 seconds"},
		{"ceiling NaN", func() error {
			_, err := e.s.SetQueue(ctx, protocol.QueueSet{Name: "q", Ceiling: f(math.NaN())})
			return err
		}, "ceiling must be"},
		{"ceiling negative", func() error { _, err := e.s.SetQueue(ctx, protocol.QueueSet{Name: "q", Ceiling: f(-1)}); return err }, "ceiling must be"},
		{"register walltime", func() error {
			_, err := e.s.Register(ctx, protocol.Register{Site: "s", Host: "h", Slots: 1, Walltime: 1e12})
			return err
		}, "walltime_s must be"},
		{"register walltime NaN", func() error {
			_, err := e.s.Register(ctx, protocol.Register{Site: "s", Host: "h", Slots: 1, Walltime: math.NaN()})
			return err
		}, "walltime_s must be"},
		{"next walltime left", func() error {
			_, err := e.s.Next(ctx, protocol.Next{Placeholder: ph, Free: 1, WalltimeLeft: math.Inf(1)})
			return err
		}, "walltime_left_s must be"},
		{"next walltime left negative", func() error {
			_, err := e.s.Next(ctx, protocol.Next{Placeholder: ph, Free: 1, WalltimeLeft: -1})
			return err
		}, "walltime_left_s must be"},
		{"next wait huge", func() error {
			_, err := e.s.Next(ctx, protocol.Next{Placeholder: ph, Free: 1, WaitMS: math.MaxInt})
			return err
		}, "wait_ms must be"},
		{"next wait negative", func() error {
			_, err := e.s.Next(ctx, protocol.Next{Placeholder: ph, Free: 1, WaitMS: -1})
			return err
		}, "wait_ms must be"},
		{"wait timeout huge", func() error {
			_, err := e.s.WaitFor(ctx, protocol.Wait{IDs: []int64{id}, TimeoutMS: math.MaxInt})
			return err
		}, "timeout_ms must be"},
		{"wait timeout negative", func() error {
			_, err := e.s.WaitFor(ctx, protocol.Wait{IDs: []int64{id}, TimeoutMS: -1})
			return err
		}, "timeout_ms must be"},
		{"estimate", func() error {
			_, err := e.s.SubmitRequest(ctx, protocol.Submit{Jobs: []protocol.JobSpec{{Target: "t", Command: "x", Est: 1e10}}})
			return err
		}, "estimate must be"},
	} {
		err := tc.call()
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != protocol.CodeBadRequest || !strings.Contains(pe.Msg, tc.want) {
			t.Errorf("%s: %v; want a bad request with %q", tc.name, err, tc.want)
		}
	}
	// Nothing was dispatched or changed by the refused requests.
	if qs, _ := e.s.Queues(ctx); len(qs) != 1 || qs[0].Ceiling != 0 {
		t.Errorf("queues after refusals: %+v", qs)
	}
	e.mustBe(id, job.Queued)
}
