package metaqueue

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/inspect"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

type recorder struct {
	mu         sync.Mutex
	dispatched []time.Duration // waits
	ended      []job.State
	commits    int
}

func (r *recorder) Dispatched(latency, wait time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dispatched = append(r.dispatched, wait)
}

func (r *recorder) Ended(to job.State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ended = append(r.ended, to)
}

func (r *recorder) Committed(time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.commits++
}

func TestObserver(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	e := newEnvWith(t, func(o *Options) { o.Observer = rec })
	a := e.submit1("a", "true")
	b := e.submit1("b", "false")
	e.advance(3 * time.Second)
	ph := e.register("local")
	as := e.next(ph, 2)
	if len(as) != 2 {
		t.Fatalf("dispatched %v", ids(as))
	}
	var rs []protocol.Report
	for _, x := range as {
		if x.ID == a {
			rs = append(rs, ok(x))
		} else {
			rs = append(rs, exit(x, 1))
		}
	}
	e.report(ph, rs...)
	e.mustBe(a, job.Done)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.dispatched) != 2 || rec.dispatched[0] < 3*time.Second {
		t.Errorf("dispatch waits %v, want two of at least 3s", rec.dispatched)
	}
	// b is retried or failed, depending on the queue: not done.
	if len(rec.ended) != 2 || (rec.ended[0] != job.Done && rec.ended[1] != job.Done) {
		t.Errorf("ended %q", rec.ended)
	}
	if st := e.state(b); (st == job.Failed) != (rec.ended[0] == job.Failed || rec.ended[1] == job.Failed) {
		t.Errorf("b is %v but the observer saw %q", st, rec.ended)
	}
	if rec.commits == 0 {
		t.Error("no commit observed")
	}
}

func TestTargetGraphAndJobsPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.submit1("a", "true")
	e.submit1("b", "true", "a")
	e.submit1("c", "true", "a", "b")
	for i := 0; i < 5; i++ {
		e.submit1("d", "true", "c")
	}
	ctx := context.Background()
	nodes, trunc, err := e.s.Inspect().TargetGraph(ctx, "d", 0)
	if err != nil || trunc {
		t.Fatal(err, trunc)
	}
	names := map[string]inspect.TargetNode{}
	for _, n := range nodes {
		names[n.Name] = n
	}
	if len(nodes) != 4 || nodes[0].Name != "d" || nodes[0].Total != 5 || names["a"].Depth != 2 || names["c"].Depth != 1 {
		t.Errorf("graph %+v", nodes)
	}
	if p := names["c"].Prereqs; len(p) != 2 {
		t.Errorf("c's prerequisites %v", p)
	}
	if _, trunc, _ := e.s.Inspect().TargetGraph(ctx, "d", 2); !trunc {
		t.Error("a graph cut at 2 targets is not said to be truncated")
	}
	if _, _, err := e.s.Inspect().TargetGraph(ctx, "nope", 0); !protocol.IsCode(err, protocol.CodeNotFound) {
		t.Errorf("unknown target: %v", err)
	}

	page, err := e.s.Inspect().Page(ctx, protocol.Stat{Target: "d"}, 0, 2)
	if err != nil || len(page) != 2 || page[0].ID != 4 || page[1].ID != 5 {
		t.Fatalf("first page %+v %v", page, err)
	}
	page, err = e.s.Inspect().Page(ctx, protocol.Stat{Target: "d"}, 7, 10)
	if err != nil || len(page) != 1 || page[0].ID != 8 {
		t.Fatalf("last page %+v %v", page, err)
	}
	ph := e.register("x")
	e.next(ph, 1)
	run, jobs, err := e.s.RunningByPlaceholder(ctx)
	if err != nil || run[ph] != 1 || len(jobs) != 1 {
		t.Errorf("running by placeholder %v, jobs %v, %v", run, jobs, err)
	}
}
