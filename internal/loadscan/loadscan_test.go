package loadscan

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/job"
)

// TestDecode: each load row decodes from the driver's values, NULLs as
// zero, and a value of the wrong kind is an error naming it.
func TestDecode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		row  []driver.Value
		dec  func([]driver.Value) (any, error)
		want any
		err  string
	}{
		{"target", []driver.Value{int64(3), "a"}, tgt, Target{3, "a"}, ""},
		{"target, name as bytes", []driver.Value{int64(3), []byte("a")}, tgt, Target{3, "a"}, ""},
		{"target, real id", []driver.Value{1.5, "a"}, tgt, nil, "1.5 (float64) is not an integer"},
		{"prereq", []driver.Value{int64(7), int64(2), int64(1), int64(4), int64(1)}, pre,
			Prereq{Job: 7, Target: 2, Kind: 1, JobTarget: 4, Live: true}, ""},
		{"prereq, text", []driver.Value{int64(7), "x", int64(1), int64(4), int64(1)}, pre, nil, "is not an integer"},
		{"job queued", []driver.Value{int64(9), int64(1), int64(2), int64('Q'), 2.5, nil, nil}, jb,
			Job{ID: 9, Queue: 1, Target: 2, State: job.Queued, Est: 2.5}, ""},
		{"job done", []driver.Value{int64(9), int64(1), int64(2), int64('D'), int64(3), int64(1500000), nil}, jb,
			Job{ID: 9, Queue: 1, Target: 2, State: job.Done, Est: 3, Ran: sql.NullInt64{Int64: 1500000, Valid: true}}, ""},
		{"job executing", []driver.Value{int64(9), int64(1), int64(2), int64('E'), nil, int64(100), "3 1 42 1"}, jb,
			Job{ID: 9, Queue: 1, Target: 2, State: job.Executing, Ran: sql.NullInt64{Int64: 100, Valid: true},
				Attempts: 3, Base: 1, Placeholder: 42, Prefetched: true}, ""},
		{"job, no state", []driver.Value{int64(9), int64(1), int64(2), nil, 1.0, nil, nil}, jb, nil, "job 9 has no valid state"},
		{"job, est text", []driver.Value{int64(9), int64(1), int64(2), int64('Q'), "x", nil, nil}, jb, nil, "is not a number"},
		{"job, short attempt", []driver.Value{int64(9), int64(1), int64(2), int64('E'), 1.0, nil, "3 1 42"}, jb, nil, `job 9: attempt fields "3 1 42"`},
		{"job, bad attempt", []driver.Value{int64(9), int64(1), int64(2), int64('E'), 1.0, nil, "3 x 42 0"}, jb, nil, "invalid syntax"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.dec(tt.row)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("%+v, want %+v", got, tt.want)
			}
		})
	}
}

func tgt(row []driver.Value) (any, error) {
	var r Target
	err := decodeTarget(row, &r)
	return r, err
}

func pre(row []driver.Value) (any, error) {
	var r Prereq
	err := decodePrereq(row, &r)
	return r, err
}

func jb(row []driver.Value) (any, error) {
	var r Job
	err := decodeJob(row, &r)
	return r, err
}

// TestPrereqList: jobs taken in id order get their own targets, none for
// a job without, and a job skipped does not shift the next one's.
func TestPrereqList(t *testing.T) {
	t.Parallel()
	var l PrereqList
	l.Add(2, 10)
	l.Add(2, 11)
	l.Add(3, 12) // never asked for
	l.Add(5, 13)
	for _, c := range []struct {
		id   int64
		want []dag.TargetID
	}{{1, nil}, {2, []dag.TargetID{10, 11}}, {4, nil}, {5, []dag.TargetID{13}}, {6, nil}} {
		if got := l.Next(c.id); !slices.Equal(got, c.want) {
			t.Errorf("Next(%d) = %v, want %v", c.id, got, c.want)
		}
	}
}

// TestPipe: a scan of many batches comes in order and whole, the release
// statement runs; a decode error late in the scan, or the consumer's
// error early, ends Each with that error, and Stop after it returns.
func TestPipe(t *testing.T) {
	t.Parallel()
	const n = 3*Batch*Depth + 17
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, q := range []string{
		"CREATE TABLE targets (id INTEGER PRIMARY KEY, name TEXT)",
		fmt.Sprintf("WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i < %d) INSERT INTO targets SELECT i, 't' || i FROM c", n),
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	src := Source{DB: db, Release: "PRAGMA shrink_memory"}
	stop := errors.New("enough")
	tests := []struct {
		name  string
		query string
		each  func(r *Target) error
		rows  int
		err   string
	}{
		{"whole", "SELECT id, name FROM targets ORDER BY id", nil, n, ""},
		{"bad row late", "SELECT CASE WHEN id = " + fmt.Sprint(n-5) + " THEN 0.5 ELSE id END, name FROM targets ORDER BY id", nil, (n - 6) / Batch * Batch, "is not an integer"}, // its batch never sent,
		{"consumer stops", "SELECT id, name FROM targets ORDER BY id", func(r *Target) error {
			if r.ID == 10 {
				return stop
			}
			return nil
		}, 9, "enough"},
		{"columns", "SELECT id FROM targets", nil, 0, "query returns 1 columns, want 2"},
		{"release fails", "SELECT id, name FROM targets ORDER BY id", nil, n, "no such table"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			src := src
			if tt.name == "release fails" {
				src.Release = "DELETE FROM missing"
			}
			p := Targets(context.Background(), src, tt.query)
			defer p.Stop()
			rows := 0
			err := p.Each(func(r *Target) error {
				if tt.each != nil {
					if err := tt.each(r); err != nil {
						return err
					}
				}
				rows++
				if want := fmt.Sprintf("t%d", rows); r.ID != dag.TargetID(rows) || r.Name != want {
					return fmt.Errorf("row %d is %+v", rows, *r)
				}
				return nil
			})
			p.Stop()
			if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Fatalf("Each = %v, want %q", err, tt.err)
			}
			if rows != tt.rows {
				t.Errorf("%d rows, want %d", rows, tt.rows)
			}
		})
	}
}
