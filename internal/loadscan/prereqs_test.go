package loadscan

import (
	"database/sql"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/job"
)

func TestJobPrereqs(t *testing.T) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, q := range []string{
		"CREATE TABLE job_prereqs (job_id INTEGER, target_id INTEGER, kind INTEGER)",
		"INSERT INTO job_prereqs VALUES (1, 10, 0), (1, 11, 1), (1, 12, 0), (2, 20, 1)",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	const query = "SELECT target_id, kind FROM job_prereqs WHERE job_id = ? ORDER BY rowid"
	for _, tc := range []struct {
		job           int64
		prereqs, anys []dag.TargetID
	}{
		{1, []dag.TargetID{10, 12}, []dag.TargetID{11}},
		{2, nil, []dag.TargetID{20}},
		{3, nil, nil},
	} {
		p, a, err := JobPrereqs(db.Query(query, tc.job))
		if err != nil {
			t.Fatalf("job %d: %v", tc.job, err)
		}
		if !slices.Equal(p, tc.prereqs) || !slices.Equal(a, tc.anys) {
			t.Errorf("job %d: %v, %v; want %v, %v", tc.job, p, a, tc.prereqs, tc.anys)
		}
	}
	boom := errors.New("boom")
	if _, _, err := JobPrereqs(nil, boom); !errors.Is(err, boom) {
		t.Errorf("query error: %v, want %v", err, boom)
	}
	if _, _, err := JobPrereqs(db.Query("SELECT 'x', kind FROM job_prereqs")); err == nil {
		t.Error("a target that is not a number: no error")
	}
}

// fixedRow scans fixed values, or fails with err.
type fixedRow struct {
	st                      string
	queue, target, att, bas int32
	est                     sql.NullFloat64
	err                     error
}

func (r fixedRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	*dest[0].(*string) = r.st
	*dest[1].(*int32), *dest[2].(*int32) = r.queue, r.target
	*dest[3].(*sql.NullFloat64) = r.est
	*dest[4].(*int32), *dest[5].(*int32) = r.att, r.bas
	return nil
}

func TestJobRow(t *testing.T) {
	for _, tc := range []struct {
		name string
		row  fixedRow
		want Job
		err  bool
	}{
		{"done", fixedRow{st: "D", queue: 2, target: 3, est: sql.NullFloat64{Float64: 1.5, Valid: true}, att: 4, bas: 1},
			Job{ID: 7, State: job.Done, Queue: 2, Target: 3, Est: 1.5, Attempts: 4, Base: 1}, false},
		{"no estimate", fixedRow{st: "Q", queue: 1, target: 1}, Job{ID: 7, State: job.Queued, Queue: 1, Target: 1}, false},
		{"no state", fixedRow{st: ""}, Job{}, true},
		{"no row", fixedRow{err: sql.ErrNoRows}, Job{}, true},
	} {
		got, err := JobRow(tc.row, 7)
		if tc.err {
			if err == nil {
				t.Errorf("%s: no error", tc.name)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
	if _, err := JobRow(fixedRow{err: sql.ErrNoRows}, 7); !errors.Is(err, sql.ErrNoRows) {
		t.Errorf("no row: %v, want sql.ErrNoRows", err)
	}
}
