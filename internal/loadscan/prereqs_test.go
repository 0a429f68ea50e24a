package loadscan

import (
	"database/sql"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mq-hpc/mq/internal/dag"
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
