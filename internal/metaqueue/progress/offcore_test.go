package progress

import (
	"context"
	"database/sql"
	"errors"
	"maps"
	"path/filepath"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// testDB is a read pool with the jobs table's columns that progress reads,
// and no job.
func testDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "t.db")+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec("CREATE TABLE jobs (id INTEGER PRIMARY KEY, target_id INTEGER, queue_id INTEGER, state TEXT)"); err != nil {
		t.Fatal(err)
	}
	return db
}

// hookedCore is core with work of its own between the calls it runs: at
// the nth Do, before[n] runs before the call and after[n] after it, on
// the core.
type hookedCore struct {
	core
	n             int
	before, after map[int]func()
}

func (c *hookedCore) Do(_ context.Context, fn func(State, Set) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	if f := c.before[c.n]; f != nil {
		f()
	}
	err := fn(c.world, c.set)
	if f := c.after[c.n]; f != nil {
		f()
	}
	return err
}

// TestStreamOffCore: a stream of a target's jobs in a queue (mqwait -q -t),
// of a range that is not one array's or of listed jobs is counted in a
// snapshot of the read pool, off the core, and is exact
// whatever the core changes meanwhile: a change committed after the watch
// joined but before the snapshot (in both), changes after the snapshot
// (in neither), a job submitted then; and a recount on the core meanwhile
// wins (its count, read here through the core's writer, has the job
// submitted meanwhile).
func TestStreamOffCore(t *testing.T) {
	t.Parallel()
	db := testDB(t)
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatal(err)
		}
	}
	for id, st := range map[int64]job.State{1: job.Queued, 2: job.Executing, 3: job.Done, 4: job.Waiting} {
		exec("INSERT INTO jobs VALUES (?, 1, 1, ?)", id, st.String())
	}
	exec("INSERT INTO jobs VALUES (5, 2, 1, 'Q')") // another target's
	// change makes a change on the core: in the database, then to the watches.
	var c *hookedCore
	change := func(id int64, from, to job.State) func() {
		return func() {
			if from == 0 {
				exec("INSERT INTO jobs VALUES (?, 1, 1, ?)", id, to.String())
			} else {
				exec("UPDATE jobs SET state = ? WHERE id = ?", to.String(), id)
			}
			c.set.Changes([]dag.Change{{ID: id, Queue: 1, Target: 1, From: from, To: to}})
		}
	}
	// The core's work between the stream's calls: after the watch joined,
	// before the snapshot (after its first call); after the snapshot
	// (before its second).
	beforeSnapshot := map[int]func(){1: change(4, job.Waiting, job.Queued)}
	afterSnapshot := map[int]func(){2: func() {
		change(1, job.Queued, job.Executing)()
		change(2, job.Executing, job.Done)()
		change(6, 0, job.Queued)()
	}}
	queueA := int32(1)
	for _, tc := range []struct {
		name          string
		req           protocol.Progress
		before, after map[int]func()
		arrays        map[[2]int64][128]int
		targets       map[dag.TargetID][128]int
		inQueue       *int32
		want          map[string]int
	}{
		{name: "target, no change", req: protocol.Progress{Queue: "a", Target: "t"}, want: map[string]int{"Q": 1, "E": 1, "D": 1, "W": 1}},
		{name: "range, no change", req: protocol.Progress{First: 1, Last: 6}, want: map[string]int{"Q": 2, "E": 1, "D": 1, "W": 1}},
		{name: "target, changes before and after the snapshot", req: protocol.Progress{Queue: "a", Target: "t"},
			before: afterSnapshot, after: beforeSnapshot, want: map[string]int{"E": 1, "D": 2, "Q": 2}},
		{name: "range, changes before and after the snapshot", req: protocol.Progress{First: 1, Last: 6},
			before: afterSnapshot, after: beforeSnapshot, want: map[string]int{"E": 1, "D": 2, "Q": 3}},
		{name: "listed, no change", req: protocol.Progress{IDs: []int64{1, 3, 5}}, want: map[string]int{"Q": 2, "D": 1}},
		{name: "listed, changes before and after the snapshot", req: protocol.Progress{IDs: []int64{1, 2, 4}},
			before: afterSnapshot, after: beforeSnapshot, want: map[string]int{"E": 1, "D": 1, "Q": 1}},
		{name: "an array's range: its kept counts", req: protocol.Progress{First: 1, Last: 6},
			arrays: map[[2]int64][128]int{{1, 6}: {job.Done: 6}}, want: map[string]int{"D": 6}},
		{name: "a target alone: its kept counts, no job read", req: protocol.Progress{Target: "t"},
			targets: map[dag.TargetID][128]int{1: {job.Queued: 2, job.Executing: 1}}, want: map[string]int{"Q": 2, "E": 1}},
		{name: "a target in its queue: its kept counts by queue, no job read", req: protocol.Progress{Queue: "a", Target: "t"},
			targets: map[dag.TargetID][128]int{1: {job.Queued: 2, job.Executing: 1}}, inQueue: &queueA, want: map[string]int{"Q": 2, "E": 1}},
		{name: "a target in another queue: none, no job read", req: protocol.Progress{Queue: "b", Target: "t"},
			targets: map[dag.TargetID][128]int{1: {job.Queued: 2, job.Executing: 1}}, inQueue: &queueA, want: map[string]int{}},
		{name: "target, recounted on the core meanwhile", req: protocol.Progress{Queue: "a", Target: "t"},
			before: map[int]func(){2: func() {
				change(7, 0, job.Held)()
				c.world.db = db
				if dropped := c.set.Recount(c.world); len(dropped) != 0 {
					t.Error(dropped)
				}
			}},
			want: map[string]int{"Q": 1, "E": 1, "D": 1, "W": 1, "H": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c = &hookedCore{core: core{world: newWorld(), set: Set{}}, before: tc.before, after: tc.after}
			c.world.err = errors.New("the core's writer is not read")
			c.world.arrays, c.world.targets, c.world.inQueue = tc.arrays, tc.targets, tc.inQueue
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var got *protocol.ProgressReply
			err := Stream(ctx, tc.req, c, db, func(r protocol.ProgressReply) error {
				got = &r
				cancel() // the first frame is enough
				return nil
			})
			if err != nil && !errors.Is(err, context.Canceled) { // nil: nothing pending
				t.Fatalf("Stream = %v", err)
			}
			if got == nil || !maps.Equal(got.Counts, tc.want) {
				t.Fatalf("counts %v, want %v", got, tc.want)
			}
			if len(c.set) != 0 {
				t.Errorf("%d watches left", len(c.set))
			}
		})
		exec("DELETE FROM jobs WHERE id > 5")
		exec("UPDATE jobs SET state = CASE id WHEN 1 THEN 'Q' WHEN 2 THEN 'E' WHEN 3 THEN 'D' WHEN 4 THEN 'W' ELSE state END")
	}
	// Once sends one frame and returns, for a range, a target or listed
	// jobs alike.
	for _, req := range []protocol.Progress{{First: 1, Last: 6, Once: true}, {Queue: "a", Target: "t", Once: true}, {IDs: []int64{5, 2}, Once: true}} {
		c = &hookedCore{core: core{world: newWorld(), set: Set{}}}
		c.world.db = db
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		n := 0
		err := Stream(ctx, req, c, db, func(protocol.ProgressReply) error { n++; return nil })
		cancel()
		if err != nil || n != 1 || len(c.set) != 0 {
			t.Errorf("once %+v: %v, %d frames, %d watches", req, err, n, len(c.set))
		}
	}
	// A listed job that does not exist is named, whether it is past the
	// last job submitted (on the core) or has no row (purged, off it),
	// and leaves no watch behind.
	for _, tc := range []struct {
		ids  []int64
		want string
	}{{[]int64{1, 9, 8}, "job 8 does not exist"}, {[]int64{6, 1, 5}, "job 6 does not exist"}} {
		for _, once := range []bool{true, false} {
			c = &hookedCore{core: core{world: newWorld(), set: Set{}}}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			err := Stream(ctx, protocol.Progress{IDs: tc.ids, Once: once}, c, db, func(protocol.ProgressReply) error {
				cancel() // a frame: the stream started
				return nil
			})
			cancel()
			if err == nil || err.Error() != tc.want || len(c.set) != 0 {
				t.Errorf("listed %v (once %v): %v, %d watches; want %q", tc.ids, once, err, len(c.set), tc.want)
			}
		}
	}
}
