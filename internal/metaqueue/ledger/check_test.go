package ledger

import (
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// graph builds a graph of jobs, each the only job of its own target,
// with prerequisites named by the ids of the jobs before it.
func graph(jobs ...testJob) *dag.Graph {
	g := dag.New()
	targets := map[int64]dag.TargetID{}
	for _, j := range jobs {
		targets[j.id] = g.AddTarget("t" + string(rune('a'+j.id)))
	}
	for _, j := range jobs {
		var pre []dag.TargetID
		for _, p := range j.after {
			pre = append(pre, targets[p])
		}
		g.AddEdges(targets[j.id], pre)
		g.AddJob(j.id, dag.Node{Target: targets[j.id], Queue: j.queue, Est: j.est, Prereqs: pre})
	}
	return g
}

type testJob struct {
	id    int64
	queue int32
	est   float32
	after []int64
}

// The deadline check: a ready job too long for what is left, and a job
// whose prerequisites leave it too little, are infeasible; a parked one
// goes back once a later deadline makes it feasible.
func TestCheckDeadline(t *testing.T) {
	g := graph(
		testJob{id: 1, queue: 1, est: 600},
		testJob{id: 2, queue: 1, est: 600, after: []int64{1}},
		testJob{id: 3, queue: 1, est: 2000},
		testJob{id: 4, queue: 2, est: 5000}, // uncosted
	)
	if j, _ := g.Node(2); j.State != job.Waiting {
		t.Fatalf("job 2 is %v, want Waiting", j.State)
	}
	l := New(slog.New(slog.NewTextHandler(io.Discard, nil)))
	q := Queue{ID: 1, Name: "q", Deadline: float64(t0.Unix() + 1000)}
	view := func(q Queue) View {
		return View{Graph: g, Queues: []QueueCounts{{Queue: q, Counts: Counts{Queued: 2, Waiting: 1}}, {Queue: Queue{ID: 2}, Counts: Counts{Queued: 1}}},
			Started: func(int64) time.Time { return time.Time{} }, Estimate: declared}
	}
	if !l.Due(t0) {
		t.Fatal("a new ledger's check is not due")
	}
	if back := l.Check(view(q), t0); len(back) != 0 {
		t.Errorf("first check put back %v", back)
	}
	l.Took(time.Millisecond)
	for id, want := range map[int64]bool{1: false, 2: true, 3: true, 4: false} {
		if got := l.Infeasible(id) != ""; got != want {
			t.Errorf("job %d infeasible %v (%q), want %v", id, got, l.Infeasible(id), want)
		}
	}
	var info protocol.QueueInfo
	l.Fill(&info, 1)
	if info.Infeasible != 2 {
		t.Errorf("queue 1 counts %d infeasible, want 2", info.Infeasible)
	}
	if l.Due(t0.Add(time.Millisecond)) {
		t.Error("due again at once with nothing changed")
	}
	if !l.Park(1, readyOf(3)) {
		t.Fatal("job 3 not parked")
	}
	q.Deadline += 5000
	l.Changed()
	if !l.Due(t0.Add(time.Millisecond)) {
		t.Error("not due after a change")
	}
	back := l.Check(view(q), t0.Add(time.Millisecond))
	if len(back) != 1 || back[0].Ready.ID != 3 {
		t.Errorf("put back %v, want job 3", back)
	}
	if l.Infeasible(2) != "" || l.Infeasible(3) != "" {
		t.Errorf("still infeasible: %q, %q", l.Infeasible(2), l.Infeasible(3))
	}
}

// Stages come in the order their jobs feed each other, whatever the
// queues' creation order.
func TestStageOrder(t *testing.T) {
	g := graph(
		testJob{id: 1, queue: 2, est: 1},
		testJob{id: 2, queue: 1, est: 1, after: []int64{1}},
		testJob{id: 3, queue: 3, est: 1},
	)
	l := New(nil)
	got := l.StageOrder(g, []int32{1, 2, 3}, 4, t0)
	if want := []int32{2, 1, 3}; !slices.Equal(got, want) {
		t.Errorf("StageOrder = %v, want %v", got, want)
	}
	if !l.Feeds(2, 1) || l.Feeds(1, 2) || l.Feeds(1, 3) {
		t.Errorf("Feeds: 2->1 %v, 1->2 %v, 1->3 %v", l.Feeds(2, 1), l.Feeds(1, 2), l.Feeds(1, 3))
	}
}
