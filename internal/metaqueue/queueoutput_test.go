package metaqueue

import (
	"context"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// TestQueueOutput: a queue's output setting (its cap, its mode) is checked,
// kept across a restart, carried in its jobs' assignments (and not in other
// queues'), and cleared by its zero value.
func TestQueueOutput(t *testing.T) {
	t.Parallel()
	limit, files := int64(1<<20), protocol.OutputModeFiles
	zeroLimit, noMode := int64(0), ""
	badLimits := []int64{-1, protocol.MaxQueueOutput + 1}
	badModes := []string{"streams", "file", "FILES"}
	tests := []struct {
		name, queue string
		what        string              // the setting, as messages name it
		bad         []protocol.QueueSet // each refused as a bad request
		set, clear  protocol.QueueSet
		setting     func(protocol.QueueInfo) any // the queue's setting as listed
		value, zero any                          // the setting once set, and unset
		carried     func(protocol.Assignment) any
		inQueue     any // what an assignment carries in the queue (zero elsewhere)
		noSetting   any // what an assignment of another queue carries
		commands    [2]string
	}{
		{
			name: "MaxOutput", queue: "capped", what: "max output",
			bad: []protocol.QueueSet{
				{Name: "capped", MaxOutput: &badLimits[0]},
				{Name: "capped", MaxOutput: &badLimits[1]},
			},
			set:       protocol.QueueSet{Name: "capped", MaxOutput: &limit},
			clear:     protocol.QueueSet{Name: "capped", MaxOutput: &zeroLimit},
			setting:   func(q protocol.QueueInfo) any { return q.MaxOutput },
			value:     limit,
			zero:      int64(0),
			carried:   func(a protocol.Assignment) any { return a.MaxOutput },
			inQueue:   limit,
			noSetting: int64(0),
			commands:  [2]string{"yes", "true"},
		},
		{
			name: "OutputFiles", queue: "tool", what: "output",
			bad: []protocol.QueueSet{
				{Name: "tool", Output: &badModes[0]},
				{Name: "tool", Output: &badModes[1]},
				{Name: "tool", Output: &badModes[2]},
			},
			set:       protocol.QueueSet{Name: "tool", Output: &files},
			clear:     protocol.QueueSet{Name: "tool", Output: &noMode},
			setting:   func(q protocol.QueueInfo) any { return q.Output },
			value:     files,
			zero:      "",
			carried:   func(a protocol.Assignment) any { return a.OutputFiles },
			inQueue:   true,
			noSetting: false,
			commands:  [2]string{"echo a", "echo b"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			ctx := context.Background()
			for _, bad := range tc.bad {
				_, err := e.s.SetQueue(ctx, bad)
				errCode(t, err, protocol.CodeBadRequest)
			}
			qi, err := e.s.SetQueue(ctx, tc.set)
			if err != nil || tc.setting(qi) != tc.value {
				t.Fatalf("SetQueue: %+v, %v", qi, err)
			}
			e.reopen()
			qs, err := e.s.Queues(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range qs {
				want := tc.zero
				if q.Name == tc.queue {
					want = tc.value
				}
				if got := tc.setting(q); got != want {
					t.Errorf("after a restart queue %s has %s %#v, want %#v", q.Name, tc.what, got, want)
				}
			}
			s := spec("a", tc.commands[0])
			s.Queue = tc.queue
			ids := e.submit(s, spec("b", tc.commands[1]))
			ph := e.register("s")
			got := map[int64]any{}
			for _, a := range e.next(ph, 2) {
				got[a.ID] = tc.carried(a)
			}
			if got[ids[0]] != tc.inQueue || got[ids[1]] != tc.noSetting || len(got) != 2 {
				t.Errorf("assignments' %s %v; want %#v for job %d and %#v for job %d", tc.what, got, tc.inQueue, ids[0], tc.noSetting, ids[1])
			}
			if qi, err := e.s.SetQueue(ctx, tc.clear); err != nil || tc.setting(qi) != tc.zero {
				t.Errorf("clearing: %+v, %v", qi, err)
			}
		})
	}
}
