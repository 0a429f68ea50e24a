package inspect

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"math"
	"slices"
	"testing"

	"github.com/mq-hpc/mq/internal/metaqueue/bystate"
	"github.com/mq-hpc/mq/internal/metaqueue/internal/modtest"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// stateSources answers States from a bystate.Sets, as the core does
// from its own; the rest of Sources is not asked by a listing.
type stateSources struct {
	Sources
	sets bystate.Sets
	// calls counts States; the busyAt-th call (from 1) and those after
	// it answer ErrBusy (0: never). sparse makes every state look sparse.
	calls, busyAt int
	sparse        bool
}

func (s *stateSources) States(_ context.Context, fn func(StateSets) error) error {
	if s.calls++; s.busyAt > 0 && s.calls >= s.busyAt {
		return ErrBusy
	}
	return fn(sparseSets{&s.sets, s.sparse})
}

type sparseSets struct {
	*bystate.Sets
	sparse bool
}

func (s sparseSets) Page(states []job.State, after int64, limit int) ([]int64, int, int) {
	ids, in, all := s.Sets.Page(states, after, limit)
	if s.sparse {
		all = in * byStateShare
	}
	return ids, in, all
}

// keptStates is what the core keeps of the jobs stored in w.
func keptStates(t testing.TB, w *sql.Conn) *stateSources {
	t.Helper()
	src := &stateSources{}
	rows, err := w.QueryContext(context.Background(), "SELECT id, state, queue_id FROM jobs ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var st string
		var q int32
		if err := rows.Scan(&id, &st, &q); err != nil {
			t.Fatal(err)
		}
		src.sets.Move(id, 1, q, 0, job.State(st[0]))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return src
}

// TestStatByState: a listing by states few jobs are in names them from
// the core's sets (it asks InStates and reads no other job) and lists
// what the query over every job lists, with every other condition kept;
// states many jobs are in are read as before.
func TestStatByState(t *testing.T) {
	w := modtest.NewDB(t)
	fillJobs(t, w, 20000) // every 1,000th F, every 1,000th (offset 500) Q, the rest D
	for _, q := range []string{
		"INSERT INTO queues (id, name, created) VALUES (2, 'other', 0)",
		"UPDATE jobs SET queue_id = 2 WHERE id % 3 = 0",
		"UPDATE jobs SET state = 'X' WHERE id % 1000 = 7",
		"INSERT INTO placeholders (id, site, host, pid, out_dir, slots, started, last_seen) VALUES (10, 's1', 'h1', 1, '', 1, 0, 0)",
		"UPDATE jobs SET state = 'E', placeholder_id = 10, started = 1, prefetched = 1 WHERE id IN (1500, 7500)",
		"UPDATE jobs SET state = 'E', placeholder_id = 10, started = 1 WHERE id = 9500",
		"INSERT INTO arrays (first_job, last_job) VALUES (4000, 9999)",
	} {
		if _, err := w.ExecContext(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
	src := keptStates(t, w)
	// The core is ahead of the read's snapshot: a job it has failed is
	// still stored done, and the listing shows the stored state.
	src.sets.Move(12345, 1, 1, job.Done, job.Failed)
	scan, named := New(w, "", nil), New(w, "", src)
	list := func(r *Reader, st protocol.Stat, after int64) []int64 {
		var out []int64
		err := r.Stat(context.Background(), st, after, func(js []protocol.JobInfo) error {
			for _, j := range js {
				out = append(out, j.ID)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Stat(%+v): %v", st, err)
		}
		return out
	}
	for _, tc := range []struct {
		st    protocol.Stat
		after int64
		named bool
		wantN int
	}{
		{st: protocol.Stat{States: "F"}, named: true, wantN: 20},
		{st: protocol.Stat{States: "F"}, after: 5000, named: true, wantN: 15},
		{st: protocol.Stat{States: "FX", Queue: "other"}, named: true},
		{st: protocol.Stat{States: "FXQ", From: 3000, To: 12000}, named: true, wantN: 26},
		{st: protocol.Stat{States: "F", From: 1, To: math.MaxInt64}, named: true, wantN: 20}, // mqstat --cat all
		{st: protocol.Stat{States: "FXQ", Limit: 5}, named: true, wantN: 5},
		{st: protocol.Stat{States: "P"}, named: true, wantN: 2},
		{st: protocol.Stat{States: "E"}, named: true, wantN: 3},
		{st: protocol.Stat{States: "F", Collapse: true}, named: true, wantN: 14},
		{st: protocol.Stat{States: "F", Earlier: true, Target: "t"}, named: true, wantN: 20},
		{st: protocol.Stat{States: "B"}, named: true, wantN: 0},
		{st: protocol.Stat{States: "D"}},
		{st: protocol.Stat{}},
		{st: protocol.Stat{States: "F", Last: 3}, wantN: 3},
		{st: protocol.Stat{States: "F", IDs: []int64{1000, 2000, 2500}}, wantN: 2},
	} {
		t.Run(fmt.Sprintf("%+v after %d", tc.st, tc.after), func(t *testing.T) {
			want, got := list(scan, tc.st, tc.after), list(named, tc.st, tc.after)
			if !slices.Equal(got, want) {
				t.Fatalf("listed %v, want %v", got, want)
			}
			if tc.wantN > 0 && len(got) != tc.wantN {
				t.Errorf("listed %d jobs, want %d", len(got), tc.wantN)
			}
			done, err := named.byState(context.Background(), tc.st, tc.after, func([]protocol.JobInfo) error { return nil })
			if err != nil || done != tc.named {
				t.Errorf("byState = %v, %v; want %v (by the core's sets)", done, err, tc.named)
			}
		})
	}
}

// TestStatByStateBusy: while the core runs a batch that holds it for
// seconds (InStates says ErrBusy), a listing reads its snapshot alone:
// from the start, or from the last job it named.
func TestStatByStateBusy(t *testing.T) {
	w := modtest.NewDB(t)
	fillJobs(t, w, 5000)
	src := keptStates(t, w)
	src.sparse = true
	for _, tc := range []struct {
		st     protocol.Stat
		busyAt int
	}{
		{protocol.Stat{States: "F"}, 1},
		{protocol.Stat{States: "D"}, 1},
		{protocol.Stat{States: "D"}, 2},
		{protocol.Stat{States: "D", Collapse: true}, 3},
		{protocol.Stat{States: "D", Limit: 2500}, 3},
		{protocol.Stat{States: "DF"}, 0},
	} {
		t.Run(fmt.Sprintf("%s limit %d busy at %d", tc.st.States, tc.st.Limit, tc.busyAt), func(t *testing.T) {
			src.calls, src.busyAt = 0, tc.busyAt
			var lists [2][]int64
			for i, r := range []*Reader{New(w, "", nil), New(w, "", src)} {
				err := r.Stat(context.Background(), tc.st, 0, func(js []protocol.JobInfo) error {
					for _, j := range js {
						lists[i] = append(lists[i], j.ID)
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			if scan, got := lists[0], lists[1]; !slices.Equal(got, scan) || len(got) == 0 {
				t.Errorf("listed %d jobs, the scan %d", len(got), len(scan))
			}
			if tc.busyAt > 0 && src.calls < tc.busyAt {
				t.Errorf("InStates asked %d times, never busy", src.calls)
			}
		})
	}
}

// queryNamed counts the queries run whose text holds a query's first
// line after its name.
type queryNamed struct {
	DB
	texts []string
}

func (c *queryNamed) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	c.texts = append(c.texts, q)
	return c.DB.QueryContext(ctx, q, args...)
}

func (c *queryNamed) ran(name string) bool {
	return slices.Contains(c.texts, queries.Get(name))
}

// TestWaitingOnRuns: a prerequisite target whose jobs are every id from
// its lowest to its highest (an array) is counted by state from the
// core's sets, its rows unread (PrereqStates, which reads them, is not
// run when every target is such a run); a target with other jobs
// between its own is read; a busy core or no core, all are read; the
// counts are the same every way.
func TestWaitingOnRuns(t *testing.T) {
	w := modtest.NewDB(t)
	fillJobs(t, w, 3000) // target t (1): jobs 1-3000, every 1,000th F, every 1,000th (500) Q, the rest D
	for _, q := range []string{
		"INSERT INTO targets (id, name) VALUES (2, 'scattered'), (3, 'empty'), (4, 'gather'), (5, 'run')",
		"UPDATE jobs SET target_id = 2 WHERE id IN (10, 20, 2500)",
		"UPDATE jobs SET target_id = 5, state = 'H' WHERE id BETWEEN 2601 AND 2700",
		"UPDATE jobs SET state = 'X' WHERE id = 2650",
		"INSERT INTO jobs (id, queue_id, target_id, state, command, cwd, submitted) VALUES (5000, 1, 4, 'W', 'gather', '/', 0), (5001, 1, 4, 'W', 'gather', '/', 0)",
		"INSERT INTO job_prereqs (job_id, target_id, kind) VALUES (5000, 5, 0), (5000, 3, 0), (5000, 2, 1), (5001, 5, 0), (5001, 3, 0)",
	} {
		if _, err := w.ExecContext(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	src := keptStates(t, w)
	for _, tc := range []struct {
		job       int64
		prereqs   []string
		afterAny  []string
		busyAt    int
		nilSrc    bool
		readsRows bool
	}{
		{job: 5001, prereqs: []string{"run", "empty"}},
		{job: 5000, prereqs: []string{"run", "empty"}, afterAny: []string{"scattered"}, readsRows: true},
		{job: 5001, prereqs: []string{"run", "empty"}, busyAt: 1, readsRows: true},
		{job: 5001, prereqs: []string{"run", "empty"}, nilSrc: true, readsRows: true},
	} {
		src.calls, src.busyAt = 0, tc.busyAt
		db := &queryNamed{DB: w}
		r := New(db, "", src)
		if tc.nilSrc {
			r = New(db, "", nil)
		}
		got, err := r.waitingOn(context.Background(), tc.job, tc.prereqs, tc.afterAny)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]map[string]int{"run": {"H": 99, "X": 1}, "empty": {}, "scattered": {"D": 2, "Q": 1}}
		for _, ts := range got {
			if !maps.Equal(ts.Counts, want[ts.Target]) || ts.Complete || ts.Ended {
				t.Errorf("job %d (busy at %d, no core %v): %+v, want counts %v", tc.job, tc.busyAt, tc.nilSrc, ts, want[ts.Target])
			}
		}
		if len(got) != len(tc.prereqs)+len(tc.afterAny) {
			t.Errorf("job %d: %d targets", tc.job, len(got))
		}
		if db.ran("PrereqStates") != tc.readsRows {
			t.Errorf("job %d (busy at %d, no core %v): PrereqStates run %v, want %v", tc.job, tc.busyAt, tc.nilSrc, db.ran("PrereqStates"), tc.readsRows)
		}
	}
}
