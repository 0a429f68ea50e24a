package inspect

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"testing"

	"github.com/mq-hpc/mq/internal/metaqueue/bystate"
	"github.com/mq-hpc/mq/internal/metaqueue/internal/modtest"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// stateSources answers InStates from a bystate.Sets, as the core does
// from its own; the rest of Sources is not asked by a listing.
type stateSources struct {
	Sources
	sets bystate.Sets
	// calls counts InStates; the busyAt-th call (from 1) and those after
	// it answer ErrBusy (0: never). sparse makes every state look sparse.
	calls, busyAt int
	sparse        bool
}

func (s *stateSources) InStates(_ context.Context, states []job.State, after int64, limit int) ([]int64, int, int, error) {
	if s.calls++; s.busyAt > 0 && s.calls >= s.busyAt {
		return nil, 0, 0, ErrBusy
	}
	ids, in, all := s.sets.Page(states, after, limit)
	if s.sparse {
		all = in * byStateShare
	}
	return ids, in, all, nil
}

// keptStates is what the core keeps of the jobs stored in w.
func keptStates(t testing.TB, w *sql.Conn) *stateSources {
	t.Helper()
	src := &stateSources{}
	rows, err := w.QueryContext(context.Background(), "SELECT id, state FROM jobs")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var st string
		if err := rows.Scan(&id, &st); err != nil {
			t.Fatal(err)
		}
		src.sets.Move(id, 0, job.State(st[0]))
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
	src.sets.Move(12345, job.Done, job.Failed)
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
