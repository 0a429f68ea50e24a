package progress

import (
	"context"
	"database/sql"
	"errors"
	"iter"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/metaqueue/internal/modtest"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// world is a core as State sees it: jobs in memory, ended jobs, queues'
// counts, what was spent.
type world struct {
	nodes  map[int64]dag.Node
	ended  map[int64]job.State
	nextID int64
	queues map[string]int32
	counts map[int32]*[128]int
	spent  map[int32]map[string]float64
	err    error   // what Query fails with
	ahead  []int64 // handed out, not started (P)
	arrays map[[2]int64][128]int
	db     *sql.DB // what Query reads, if set
	// targets are the targets' kept counts; every job of them is in
	// queue inQueue if set, else their counts by queue are not known
	targets map[dag.TargetID][128]int
	inQueue *int32
}

func (w *world) Node(id int64) (dag.Node, bool) { n, ok := w.nodes[id]; return n, ok }
func (w *world) Lookup(name string) (dag.TargetID, bool) {
	if name == "t" {
		return 1, true
	}
	return 0, false
}
func (w *world) TargetName(t dag.TargetID) string { return map[dag.TargetID]string{1: "t", 2: "u"}[t] }
func (w *world) NextID() int64                    { return w.nextID }
func (w *world) Queue(name string) (int32, bool) {
	q, ok := w.queues[name]
	return q, ok
}
func (w *world) EachCount(f func(int32, *[128]int)) {
	for q, c := range w.counts {
		f(q, c)
	}
}
func (w *world) EndState(id int64) (job.State, error) {
	if s, ok := w.ended[id]; ok {
		return s, nil
	}
	return 0, protocol.Errorf(protocol.CodeNotFound, "job %d does not exist", id)
}
func (w *world) EachSpent(f func(int32, string, float64)) {
	for q, m := range w.spent {
		for site, v := range m {
			f(q, site, v)
		}
	}
}
func (w *world) Query(q string, args ...any) (*sql.Rows, error) {
	if w.db != nil {
		return w.db.Query(q, args...)
	}
	return nil, w.err
}
func (w *world) Unstarted() iter.Seq[int64] { return slices.Values(w.ahead) }
func (w *world) Targets() Targets           { return worldTargets{w} }

// worldTargets are a world's targets' counts: by queue, only those of
// inQueue's queue are known.
type worldTargets struct{ w *world }

func (t worldTargets) Target(id dag.TargetID) [128]int { return t.w.targets[id] }
func (t worldTargets) TargetIn(id dag.TargetID, q int32) ([128]int, bool) {
	if t.w.inQueue == nil || *t.w.inQueue != q {
		return [128]int{}, false
	}
	return t.w.targets[id], true
}
func (w *world) ArrayCounts(first, last int64) ([128]int, bool) {
	c, ok := w.arrays[[2]int64{first, last}]
	return c, ok
}

var _ State = (*world)(nil)

func newWorld() *world {
	return &world{
		nodes: map[int64]dag.Node{
			1: {Queue: 1, Target: 1, State: job.Queued},
			2: {Queue: 1, Target: 1, State: job.Executing},
			3: {Queue: 2, Target: 2, State: job.Waiting},
		},
		ended:  map[int64]job.State{4: job.Done, 5: job.Failed, 6: job.Deleted},
		nextID: 7,
		queues: map[string]int32{"a": 1, "b": 2},
		counts: map[int32]*[128]int{
			1: {job.Queued: 1, job.Executing: 1, job.Done: 1, job.Failed: 1},
			2: {job.Waiting: 1, job.Deleted: 1},
		},
		spent: map[int32]map[string]float64{1: {"hpc": 2, "local": 1}, 2: {"hpc": 4}},
		err:   errors.New("disk gone"),
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		req  protocol.Progress
		ok   bool
	}{
		{"everything", protocol.Progress{}, true},
		{"range", protocol.Progress{First: 1, Last: 5}, true},
		{"ids", protocol.Progress{IDs: []int64{1, 2}}, true},
		{"queue and target", protocol.Progress{Queue: "a", Target: "t"}, true},
		{"bad range", protocol.Progress{First: 5, Last: 1}, false},
		{"range from 0", protocol.Progress{Last: 3}, false},
		{"range and ids", protocol.Progress{First: 1, Last: 2, IDs: []int64{1}}, false},
		{"ids and queue", protocol.Progress{IDs: []int64{1}, Queue: "a"}, false},
		{"too many ids", protocol.Progress{IDs: make([]int64, maxIDs+1)}, false},
		{"a zero id", protocol.Progress{IDs: []int64{1, 0}}, false},
		{"negative interval", protocol.Progress{IntervalMS: -1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.req)
			if tc.ok != (err == nil) {
				t.Fatalf("New(%+v) = %v, want ok %v", tc.req, err, tc.ok)
			}
			var pe *protocol.Error
			if err != nil && (!errors.As(err, &pe) || pe.Code != protocol.CodeBadRequest) {
				t.Errorf("err = %v, want a bad request", err)
			}
		})
	}
}

// TestCount counts each kind of selection over the world and follows a
// change; deleted jobs count in the total only when named.
func TestCount(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		req     protocol.Progress
		queue   int32
		want    map[string]int
		total   int
		pending int
		err     string
		ahead   []int64
		arrays  map[[2]int64][128]int
		targets map[dag.TargetID][128]int
	}{
		{name: "everything", req: protocol.Progress{},
			want: map[string]int{"Q": 1, "E": 1, "D": 1, "F": 1, "W": 1, "X": 1}, total: 5, pending: 3},
		{name: "everything, one not started: P", req: protocol.Progress{}, ahead: []int64{2},
			want: map[string]int{"Q": 1, "P": 1, "D": 1, "F": 1, "W": 1, "X": 1}, total: 5, pending: 3},
		{name: "a queue, one not started: P", req: protocol.Progress{Queue: "a"}, queue: 1, ahead: []int64{2},
			want: map[string]int{"Q": 1, "P": 1, "D": 1, "F": 1}, total: 4, pending: 2},
		{name: "another queue's not started", req: protocol.Progress{Queue: "b"}, queue: 2, ahead: []int64{2},
			want: map[string]int{"W": 1, "X": 1}, total: 1, pending: 1},
		{name: "ids, not the one not started", req: protocol.Progress{IDs: []int64{1, 4, 6}}, ahead: []int64{2},
			want: map[string]int{"Q": 1, "D": 1, "X": 1}, total: 3, pending: 1},
		{name: "a live range, one not started", req: protocol.Progress{First: 1, Last: 3}, ahead: []int64{2, 9},
			want: map[string]int{"Q": 1, "P": 1, "W": 1}, total: 3, pending: 3},
		{name: "a queue", req: protocol.Progress{Queue: "a"}, queue: 1,
			want: map[string]int{"Q": 1, "E": 1, "D": 1, "F": 1}, total: 4, pending: 2},
		{name: "ids", req: protocol.Progress{IDs: []int64{1, 4, 6}},
			want: map[string]int{"Q": 1, "D": 1, "X": 1}, total: 3, pending: 1},
		{name: "an unknown id", req: protocol.Progress{IDs: []int64{9}}, err: "does not exist"},
		{name: "a live range", req: protocol.Progress{First: 1, Last: 3},
			want: map[string]int{"Q": 1, "E": 1, "W": 1}, total: 3, pending: 3},
		{name: "a range past the last job", req: protocol.Progress{First: 1, Last: 7}, err: "job 7 does not exist"},
		{name: "a range wholly past the last job", req: protocol.Progress{First: 7, Last: 9}, err: "jobs 7-9 do not exist"},
		{name: "a one-job range past the last job", req: protocol.Progress{First: 8, Last: 8}, err: "job 8 does not exist"},
		{name: "a range with ended jobs reads them", req: protocol.Progress{First: 3, Last: 5}, err: "disk gone"},
		{name: "an array's range: its counts, no member read", req: protocol.Progress{First: 3, Last: 5},
			arrays: map[[2]int64][128]int{{3, 5}: {job.Waiting: 1, job.Executing: 1, job.Done: 1}}, ahead: []int64{9},
			want: map[string]int{"W": 1, "E": 1, "D": 1}, total: 3, pending: 2},
		{name: "a range not an array's reads its members", req: protocol.Progress{First: 3, Last: 5},
			arrays: map[[2]int64][128]int{{3, 6}: {job.Done: 4}}, err: "disk gone"},
		{name: "an unknown target", req: protocol.Progress{Target: "u"}, err: "target u does not exist"},
		{name: "a target: its kept counts, no job read", req: protocol.Progress{Target: "t"},
			targets: map[dag.TargetID][128]int{1: {job.Queued: 2, job.Executing: 1, job.Deleted: 1}},
			want:    map[string]int{"Q": 2, "E": 1, "X": 1}, total: 3, pending: 3},
		{name: "a target in a queue reads its jobs", req: protocol.Progress{Queue: "a", Target: "t"}, queue: 1, err: "disk gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := New(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			w.queue, w.hasQ = tc.queue, tc.queue != 0
			world := newWorld()
			world.ahead, world.arrays, world.targets = tc.ahead, tc.arrays, tc.targets
			err = w.count(world)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("count = %v, want %q", err, tc.err)
				}
				if tc.err == "disk gone" {
					if _, ok := errors.AsType[*StorageError](err); !ok {
						t.Errorf("a failed read is %T, want a StorageError", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			r := w.reply(world)
			if !maps.Equal(r.Counts, tc.want) || r.Total != tc.total || w.pending() != tc.pending {
				t.Errorf("counts %v total %d pending %d, want %v %d %d", r.Counts, r.Total, w.pending(), tc.want, tc.total, tc.pending)
			}
		})
	}
}

// TestChanges: a watch follows the changes of its own jobs only and
// signals when none is pending.
func TestChanges(t *testing.T) {
	t.Parallel()
	world := newWorld()
	byQueue, _ := New(protocol.Progress{})
	byQueue.queue, byQueue.hasQ = 2, true
	byRange, _ := New(protocol.Progress{First: 1, Last: 2})
	set := Set{byQueue: {}, byRange: {}}
	if dropped := set.Recount(world); len(dropped) != 0 {
		t.Fatal(dropped)
	}
	set.Changes([]dag.Change{
		{ID: 1, Queue: 1, Target: 1, From: job.Queued, To: job.Executing},
		{ID: 3, Queue: 2, Target: 2, From: job.Waiting, To: job.Queued},
	})
	if got := byRange.reply(world).Counts; !maps.Equal(got, map[string]int{"E": 2}) {
		t.Errorf("range counts %v", got)
	}
	if got := byQueue.reply(world).Counts; !maps.Equal(got, map[string]int{"Q": 1, "X": 1}) {
		t.Errorf("queue counts %v", got)
	}
	set.Changes([]dag.Change{{ID: 3, Queue: 2, Target: 2, From: job.Queued, To: job.Done}})
	select {
	case <-byQueue.ended:
	default:
		t.Error("the queue's last job ended and its watch was not told")
	}
	select {
	case <-byRange.ended:
		t.Error("the range's watch was told it ended")
	default:
	}
	// A recount that fails drops the watch.
	gone, _ := New(protocol.Progress{IDs: []int64{9}})
	set[gone] = struct{}{}
	if dropped := set.Recount(world); len(dropped) != 1 || len(set) != 2 {
		t.Errorf("dropped %v, %d watches left", dropped, len(set))
	}
}

// TestSpending: a one-off count's spending is a queue's or every queue's
// from the core's memory, a range's or a target's from the charges table
// (read through the read pool), and none for listed ids.
func TestSpending(t *testing.T) {
	t.Parallel()
	db := testDB(t)
	for _, q := range []string{
		"INSERT INTO jobs VALUES (1, 1, 1, 'D'), (2, 1, 1, 'D'), (3, 2, 2, 'D')",
		"CREATE TABLE charges (job_id INTEGER, site TEXT, cost REAL)",
		"INSERT INTO charges VALUES (1, 'hpc', 0.5), (2, 'local', 0.25), (3, 'hpc', 8)",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		req  protocol.Progress
		want map[string]float64
	}{
		{name: "everything", want: map[string]float64{"hpc": 6, "local": 1}},
		{name: "a queue", req: protocol.Progress{Queue: "b"}, want: map[string]float64{"hpc": 4}},
		{name: "listed ids: none", req: protocol.Progress{IDs: []int64{1}}},
		{name: "a range reads the charges", req: protocol.Progress{First: 1, Last: 2}, want: map[string]float64{"hpc": 0.5, "local": 0.25}},
		{name: "a target reads the charges", req: protocol.Progress{Target: "t"}, want: map[string]float64{"hpc": 0.5, "local": 0.25}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &core{world: newWorld(), set: Set{}} // its writer fails: not read
			tc.req.Once, tc.req.Spending = true, true
			var got map[string]float64
			err := Stream(context.Background(), tc.req, c, db, func(r protocol.ProgressReply) error {
				got = r.SpentBySite
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("spent %v, want %v", got, tc.want)
			}
		})
	}
}

func TestWhere(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		req    protocol.Progress
		target bool
		queue  int32
		want   string
		args   int
	}{
		{name: "range", req: protocol.Progress{First: 1, Last: 2}, want: "id BETWEEN ? AND ?", args: 2},
		{name: "ids", req: protocol.Progress{IDs: []int64{7}}, want: "id IN (7)"},
		{name: "target and queue", target: true, queue: 3, want: "target_id = ? AND queue_id = ?", args: 2},
		{name: "everything"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := New(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			w.hasT, w.target = tc.target, 4
			w.queue, w.hasQ = tc.queue, tc.queue != 0
			where, args := w.where()
			if got := strings.Join(where, " AND "); got != tc.want || len(args) != tc.args {
				t.Errorf("where %q %v, want %q with %d arguments", got, args, tc.want, tc.args)
			}
		})
	}
}

// failing is a read pool whose every read fails.
type failing struct{}

func (failing) QueryContext(context.Context, string, ...any) (*sql.Rows, error) {
	return nil, errors.New("read pool gone")
}

// core runs Do under a lock, as the core goroutine would one at a time.
type core struct {
	mu    sync.Mutex
	world *world
	set   Set
}

func (c *core) Do(_ context.Context, fn func(State, Set) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fn(c.world, c.set)
}

// TestStream: Once sends one frame; a stream sends frames until its jobs
// end, at once when the last one does, and leaves no watch behind.
func TestStream(t *testing.T) {
	t.Parallel()
	c := &core{world: newWorld(), set: Set{}}
	var frames []protocol.ProgressReply
	send := func(r protocol.ProgressReply) error { frames = append(frames, r); return nil }
	if err := Stream(context.Background(), protocol.Progress{Queue: "a", Once: true, Spending: true}, c, nil, send); err != nil {
		t.Fatal(err)
	}
	if len(frames) != 1 || frames[0].Ended || frames[0].Spent != 3 || len(c.set) != 0 {
		t.Fatalf("once: frames %+v, %d watches", frames, len(c.set))
	}
	if err := Stream(context.Background(), protocol.Progress{Queue: "z"}, c, nil, send); err == nil {
		t.Fatal("a stream of an unknown queue started")
	}
	// A target's one-off count in a queue reads through the read pool, not
	// the core's writer (which fails here with "disk gone"); a target's
	// alone comes from its kept counts and an unknown target reads nothing.
	if err := Stream(context.Background(), protocol.Progress{Queue: "a", Target: "t", Once: true}, c, failing{}, send); err == nil || !strings.Contains(err.Error(), "read pool") {
		t.Fatalf("once by target and queue: %v, want the read pool's error", err)
	}
	c.world.targets = map[dag.TargetID][128]int{1: {job.Done: 2}}
	frames = nil
	if err := Stream(context.Background(), protocol.Progress{Target: "t", Once: true}, c, failing{}, send); err != nil || len(frames) != 1 || !maps.Equal(frames[0].Counts, map[string]int{"D": 2}) {
		t.Fatalf("once by target: %v, frames %+v", err, frames)
	}
	if err := Stream(context.Background(), protocol.Progress{Target: "u", Once: true}, c, failing{}, send); err == nil || !strings.Contains(err.Error(), "target u does not exist") {
		t.Fatalf("once by an unknown target: %v", err)
	}

	frames = nil
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	var mu sync.Mutex
	go func() {
		done <- Stream(ctx, protocol.Progress{IDs: []int64{1, 4}, IntervalMS: 60000}, c, nil, func(r protocol.ProgressReply) error {
			mu.Lock()
			defer mu.Unlock()
			return send(r)
		})
	}()
	// Wait for the watch, then end its last job.
	for {
		c.mu.Lock()
		n := len(c.set)
		if n == 1 {
			c.set.Changes([]dag.Change{{ID: 1, Queue: 1, Target: 1, From: job.Queued, To: job.Done}})
		}
		c.mu.Unlock()
		if n == 1 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("no watch was added")
		case <-time.After(time.Millisecond):
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	last := frames[len(frames)-1]
	if !last.Ended || !maps.Equal(last.Counts, map[string]int{"D": 2}) || len(c.set) != 0 {
		t.Errorf("last frame %+v, %d watches", last, len(c.set))
	}
}

// TestQueriesUsed: every query of progress.sql is used by the package and
// every query it names is in the file.
func TestQueriesUsed(t *testing.T) {
	t.Parallel()
	modtest.QueriesUsed(t, "progress.sql", queries.Names(), regexp.MustCompile(`(?:Get|base)\("([A-Z][A-Za-z]+)"\)`))
}
