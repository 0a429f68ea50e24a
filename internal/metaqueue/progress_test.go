package metaqueue

import (
	"context"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// follow runs a progress stream in the background and returns its frames
// as they come.
func follow(t *testing.T, s *Store, req protocol.Progress) (<-chan protocol.ProgressReply, <-chan error) {
	t.Helper()
	frames := make(chan protocol.ProgressReply, 1000)
	done := make(chan error, 1)
	go func() {
		done <- s.Progress().Stream(t.Context(), req, func(r protocol.ProgressReply) error {
			frames <- r
			return nil
		})
	}()
	return frames, done
}

// lastFrame waits for the stream to end and returns its last frame.
func lastFrame(t *testing.T, frames <-chan protocol.ProgressReply, done <-chan error) protocol.ProgressReply {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Progress: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Progress did not end")
	}
	var last protocol.ProgressReply
	for {
		select {
		case f := <-frames:
			last = f
		default:
			return last
		}
	}
}

func TestProgressFollowsStateChanges(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ids := e.submit(spec("a", "true"), spec("a", "false"), spec("b", "true", "a"), spec("c", "true"))
	ph := e.register("s")
	cases := []struct {
		name string
		req  protocol.Progress
	}{
		{"range", protocol.Progress{First: ids[0], Last: ids[2], IntervalMS: 100}},
		{"ids", protocol.Progress{IDs: []int64{ids[0], ids[1], ids[2]}, IntervalMS: 100}},
		{"target", protocol.Progress{Target: "a", IntervalMS: 100}},
	}
	type stream struct {
		frames <-chan protocol.ProgressReply
		done   <-chan error
	}
	var streams []stream
	for _, c := range cases {
		f, d := follow(t, e.s, c.req)
		streams = append(streams, stream{f, d})
	}
	first := <-streams[0].frames
	if first.Total != 3 || first.Counts["Q"] != 2 || first.Counts["W"] != 1 || first.Ended {
		t.Fatalf("first frame = %+v", first)
	}
	as := e.next(ph, 3)
	var reps []protocol.Report
	for _, a := range as {
		switch a.ID {
		case ids[0], ids[3]:
			reps = append(reps, ok(a))
		case ids[1]:
			reps = append(reps, exit(a, 3))
		}
	}
	e.report(ph, reps...)
	for i, c := range cases {
		last := lastFrame(t, streams[i].frames, streams[i].done)
		if !last.Ended || last.Counts["D"] != 1 || last.Counts["F"] != 1 {
			t.Fatalf("%s: last frame = %+v", c.name, last)
		}
		if len(last.NotDone) == 0 || last.NotDone[0].ID != ids[1] || last.NotDone[0].State != "F" {
			t.Fatalf("%s: not done = %+v", c.name, last.NotDone)
		}
		if c.name != "target" && (last.Counts["B"] != 1 || len(last.NotDone) != 2) {
			t.Fatalf("%s: the blocked dependent is not counted: %+v", c.name, last)
		}
	}
	// Once: the counts now, for a queue (everything is in the default queue).
	var once []protocol.ProgressReply
	err := e.s.Progress().Stream(context.Background(), protocol.Progress{Queue: protocol.DefaultQueue, Once: true}, func(r protocol.ProgressReply) error {
		once = append(once, r)
		return nil
	})
	if err != nil || len(once) != 1 || once[0].Total != 4 || once[0].Counts["D"] != 2 {
		t.Fatalf("once = %+v, %v", once, err)
	}
}

func TestProgressBadRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.submit1("a", "true")
	for _, req := range []protocol.Progress{
		{First: 5, Last: 2},
		{First: 1, Last: 99},
		{IDs: []int64{1}, Queue: "q"},
		{Target: "nope"},
		{Queue: "nope"},
		{IDs: []int64{42}},
		{Target: "a", TargetPrefix: "a"},
		{IDs: []int64{1}, TargetPrefix: "a"},
		{TargetPrefix: "a b"},
		{TargetPrefix: "a", Spending: true, Once: true},
	} {
		err := e.s.Progress().Stream(context.Background(), req, func(protocol.ProgressReply) error { return nil })
		if err == nil {
			t.Errorf("Progress(%+v) succeeded", req)
		}
	}
}

func TestProgressEndsAtOnceWhenNothingPending(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var frames []protocol.ProgressReply
	err := e.s.Progress().Stream(context.Background(), protocol.Progress{}, func(r protocol.ProgressReply) error {
		frames = append(frames, r)
		return nil
	})
	if err != nil || len(frames) != 1 || !frames[0].Ended || frames[0].Total != 0 {
		t.Fatalf("frames = %+v, %v", frames, err)
	}
}

// TestProgressTargetPrefix: a stream of the targets whose names start with
// a prefix (mqwait --target-prefix) counts their jobs, one of a target made
// while it runs too, and no other target's; it ends when they have, naming
// the one that failed.
func TestProgressTargetPrefix(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ids := e.submit(spec("wf-a", "true"), spec("wf-b", "false"), spec("wf-é", "true"), spec("wfx", "true"), spec("other", "true"))
	frames, done := follow(t, e.s, protocol.Progress{TargetPrefix: "wf-", IntervalMS: 100})
	if first := <-frames; first.Total != 3 || first.Counts["Q"] != 3 || first.Ended {
		t.Fatalf("first frame = %+v, want the 3 jobs of wf-a, wf-b and wf-é queued", first)
	}
	e.submit1("wf-c", "true")
	deadline := time.After(30 * time.Second)
	for f := <-frames; f.Total != 4; {
		select {
		case f = <-frames:
		case <-deadline:
			t.Fatalf("the job of wf-c, made while the stream ran, was not counted: %+v", f)
		}
	}
	var once []protocol.ProgressReply
	err := e.s.Progress().Stream(t.Context(), protocol.Progress{Queue: protocol.DefaultQueue, TargetPrefix: "wf", Once: true}, func(r protocol.ProgressReply) error {
		once = append(once, r)
		return nil
	})
	if err != nil || len(once) != 1 || once[0].Total != 5 {
		t.Fatalf("once, prefix wf in the default queue = %+v, %v; want 5 jobs", once, err)
	}
	ph := e.register("s")
	var reps []protocol.Report
	for _, a := range e.next(ph, 10) {
		if a.ID == ids[1] {
			reps = append(reps, exit(a, 3))
		} else {
			reps = append(reps, ok(a))
		}
	}
	e.report(ph, reps...)
	last := lastFrame(t, frames, done)
	if !last.Ended || last.Total != 4 || last.Counts["D"] != 3 || last.Counts["F"] != 1 {
		t.Fatalf("last frame = %+v, want 3 done and 1 failed", last)
	}
	if len(last.NotDone) != 1 || last.NotDone[0].ID != ids[1] {
		t.Fatalf("not done = %+v, want job %d (wf-b)", last.NotDone, ids[1])
	}
}
