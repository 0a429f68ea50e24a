package metaqueue

import (
	"context"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// TestQueueMaxOutput: a queue's output cap is checked, kept across a
// restart, carried in its jobs' assignments (and not in other queues'),
// and cleared by 0.
func TestQueueMaxOutput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	for _, bad := range []int64{-1, protocol.MaxQueueOutput + 1} {
		_, err := e.s.SetQueue(ctx, protocol.QueueSet{Name: "capped", MaxOutput: &bad})
		errCode(t, err, protocol.CodeBadRequest)
	}
	limit := int64(1 << 20)
	qi, err := e.s.SetQueue(ctx, protocol.QueueSet{Name: "capped", MaxOutput: &limit})
	if err != nil || qi.MaxOutput != limit {
		t.Fatalf("SetQueue: %+v, %v", qi, err)
	}
	e.reopen()
	qs, err := e.s.Queues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if want := map[string]int64{"capped": limit}[q.Name]; q.MaxOutput != want {
			t.Errorf("after a restart queue %s has max output %d, want %d", q.Name, q.MaxOutput, want)
		}
	}
	s := spec("a", "yes")
	s.Queue = "capped"
	ids := e.submit(s, spec("b", "true"))
	ph := e.register("s")
	got := map[int64]int64{}
	for _, a := range e.next(ph, 2) {
		got[a.ID] = a.MaxOutput
	}
	if got[ids[0]] != limit || got[ids[1]] != 0 || len(got) != 2 {
		t.Errorf("assignments' max output %v; want %d for job %d and 0 for job %d", got, limit, ids[0], ids[1])
	}
	zero := int64(0)
	if qi, err := e.s.SetQueue(ctx, protocol.QueueSet{Name: "capped", MaxOutput: &zero}); err != nil || qi.MaxOutput != 0 {
		t.Errorf("clearing: %+v, %v", qi, err)
	}
}

// TestQueueOutputFiles: a queue's output mode is checked (files or
// nothing), kept across a restart, carried in its jobs' assignments (and
// not in other queues'), and cleared by "".
func TestQueueOutputFiles(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	for _, bad := range []string{"streams", "file", "FILES"} {
		_, err := e.s.SetQueue(ctx, protocol.QueueSet{Name: "tool", Output: &bad})
		errCode(t, err, protocol.CodeBadRequest)
	}
	files := protocol.OutputModeFiles
	qi, err := e.s.SetQueue(ctx, protocol.QueueSet{Name: "tool", Output: &files})
	if err != nil || qi.Output != files {
		t.Fatalf("SetQueue: %+v, %v", qi, err)
	}
	e.reopen()
	qs, err := e.s.Queues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if want := map[string]string{"tool": files}[q.Name]; q.Output != want {
			t.Errorf("after a restart queue %s has output %q, want %q", q.Name, q.Output, want)
		}
	}
	s := spec("a", "echo a")
	s.Queue = "tool"
	ids := e.submit(s, spec("b", "echo b"))
	ph := e.register("s")
	got := map[int64]bool{}
	for _, a := range e.next(ph, 2) {
		got[a.ID] = a.OutputFiles
	}
	if !got[ids[0]] || got[ids[1]] || len(got) != 2 {
		t.Errorf("assignments' output files %v; want true for job %d and false for job %d", got, ids[0], ids[1])
	}
	none := ""
	if qi, err := e.s.SetQueue(ctx, protocol.QueueSet{Name: "tool", Output: &none}); err != nil || qi.Output != "" {
		t.Errorf("clearing: %+v, %v", qi, err)
	}
}
