package inspect

import (
	"database/sql"
	"slices"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/internal/metaqueue/internal/modtest"
	"github.com/mq-hpc/mq/protocol"
)

// TestTargetPrefixListing: a listing by target prefix (mq-status's of a
// Snakemake run, every second) reads the jobs of the prefix's targets by
// target when they are few among all, and scans every job in id order
// when they are many; either way it lists the same jobs, in id order.
func TestTargetPrefixListing(t *testing.T) {
	t.Parallel()
	w := modtest.NewDB(t)
	ctx := t.Context()
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := w.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec("INSERT INTO queues (id, name, created) VALUES (1, 'default', 0)")
	exec("INSERT INTO targets (id, name) VALUES (1, 'big'), (2, 'run1.a'), (3, 'run1.b'), (4, 'run10.a'), (5, 'run1')")
	// big's 40 jobs, with run1.a's, run1.b's, run10.a's and run1's among them.
	byTarget := map[int64][]int64{}
	for id := int64(1); id <= 50; id++ {
		tg := int64(1)
		switch {
		case id%10 == 3:
			tg = 2
		case id%10 == 7:
			tg = 3
		case id == 20:
			tg = 4
		case id == 30:
			tg = 5
		}
		st := "D"
		if id%4 == 0 {
			st = "Q"
		}
		exec("INSERT INTO jobs (id, queue_id, target_id, state, command, cwd, submitted) VALUES (?, 1, ?, ?, 'true', '/', 0)", id, tg, st)
		byTarget[tg] = append(byTarget[tg], id)
	}
	// A job array of ids 11..20 (13 and 17 run1's, 20 run10.a's), left
	// out of a collapsed listing.
	exec("INSERT INTO arrays (first_job, last_job) VALUES (11, 20)")
	out := func(ids []int64) []int64 {
		return slices.DeleteFunc(slices.Clone(ids), func(id int64) bool { return id >= 11 && id <= 20 })
	}
	run1 := sorted(byTarget[2], byTarget[3])
	r := New(w, "", nil)
	for _, tc := range []struct {
		name string
		st   protocol.Stat
		few  bool
		want []int64
	}{
		{"a run's jobs", protocol.Stat{TargetPrefix: "run1.", States: "WQHPEDFBX"}, true, sorted(byTarget[2], byTarget[3])},
		{"a run's, the latest 3", protocol.Stat{TargetPrefix: "run1.", States: "WQHPEDFBX", Last: 3}, true, sorted(byTarget[2], byTarget[3])[7:]},
		{"a run's, the first 2", protocol.Stat{TargetPrefix: "run1.", States: "WQHPEDFBX", Limit: 2}, true, sorted(byTarget[2], byTarget[3])[:2]},
		{"a run's queued", protocol.Stat{TargetPrefix: "run1.", States: "Q"}, true, []int64{}},
		{"a prefix of every run", protocol.Stat{TargetPrefix: "run1", States: "WQHPEDFBX"}, true, sorted(byTarget[2], byTarget[3], byTarget[4], byTarget[5])},
		{"most jobs", protocol.Stat{TargetPrefix: "b", States: "WQHPEDFBX"}, false, byTarget[1]},
		{"most jobs, the latest 2", protocol.Stat{TargetPrefix: "b", States: "WQHPEDFBX", Last: 2}, false, byTarget[1][len(byTarget[1])-2:]},
		{"none", protocol.Stat{TargetPrefix: "zz", States: "WQHPEDFBX"}, true, []int64{}},
		{"named jobs are read by id", protocol.Stat{TargetPrefix: "run1.", IDs: []int64{3, 4, 7}}, false, []int64{3, 7}},
		{"a run's, collapsed", protocol.Stat{TargetPrefix: "run1.", States: "WQHPEDFBX", Collapse: true}, true, out(run1)},
		{"a run's, collapsed, the latest 3", protocol.Stat{TargetPrefix: "run1.", States: "WQHPEDFBX", Collapse: true, Last: 3}, true, out(run1)[len(out(run1))-3:]},
		{"a run's, collapsed, the first 3", protocol.Stat{TargetPrefix: "run1.", States: "WQHPEDFBX", Collapse: true, Limit: 3}, true, out(run1)[:3]},
		{"a prefix of every run, collapsed", protocol.Stat{TargetPrefix: "run1", States: "WQHPEDFBX", Collapse: true}, true, out(sorted(byTarget[2], byTarget[3], byTarget[4], byTarget[5]))},
		{"most jobs, collapsed", protocol.Stat{TargetPrefix: "b", States: "WQHPEDFBX", Collapse: true}, false, out(byTarget[1])},
		{"most jobs, collapsed, the latest 2", protocol.Stat{TargetPrefix: "b", States: "WQHPEDFBX", Collapse: true, Last: 2}, false, byTarget[1][len(byTarget[1])-2:]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			few, err := fewByPrefix(ctx, w, tc.st)
			if err != nil || few != tc.few {
				t.Fatalf("fewByPrefix = %v, %v; want %v", few, err, tc.few)
			}
			got := []int64{}
			err = r.Stat(ctx, tc.st, 0, func(js []protocol.JobInfo) error {
				for _, j := range js {
					got = append(got, j.ID)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("listed %v, want %v", got, tc.want)
			}
		})
	}
	// Read by target, the query finds the prefix's targets, then their
	// jobs through jobs_target; not every job. Collapsed, it looks each
	// up in the arrays (arrays_first), in the same one query, where one
	// query for each gap between arrays read every job of the gap.
	st := protocol.Stat{TargetPrefix: "run1.", States: "WQHPEDFBX"}
	planByTarget(t, w, st, "")
	st.Collapse = true
	planByTarget(t, w, st, "arrays_first")
}

// planByTarget fails t unless st's query read by target is planned
// through jobs_target, reading no job that is not the prefix's, and with
// also in its plan.
func planByTarget(t *testing.T, w *sql.Conn, st protocol.Stat, also string) {
	t.Helper()
	ctx := t.Context()
	q, args, _, err := buildStat(st, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := w.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	rows.Close()
	if all := strings.Join(plan, "\n"); !strings.Contains(all, "USING INDEX jobs_target (target_id=?)") || strings.Contains(all, "SCAN j") ||
		!strings.Contains(all, also) {
		t.Errorf("a listing of a prefix's few jobs (collapsed %v) is planned as\n%s", st.Collapse, all)
	}
}

// sorted is the ids of lists, in order.
func sorted(lists ...[]int64) []int64 {
	out := slices.Concat(lists...)
	slices.Sort(out)
	return out
}
