package sqlscan

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"testing"

	_ "modernc.org/sqlite"
)

func open(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE t (id INTEGER, kind INTEGER, name TEXT);
		INSERT INTO t VALUES (3, 1, 'c'), (1, 0, 'a'), (2, 1, NULL)`); err != nil {
		t.Fatal(err)
	}
	return db
}

func TestInt64s(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	for _, tc := range []struct {
		query string
		args  []any
		want  []int64
		err   bool
	}{
		{"SELECT id FROM t ORDER BY id", nil, []int64{1, 2, 3}, false},
		{"SELECT id FROM t WHERE kind = ? ORDER BY id DESC", []any{1}, []int64{3, 2}, false},
		{"SELECT id FROM t WHERE id > 9", nil, nil, false},
		{"SELECT name FROM t ORDER BY id", nil, nil, true}, // a scan fails: 'a' is no integer
		{"SELECT id FROM nowhere", nil, nil, true},         // the query fails
	} {
		got, err := Int64s(db.QueryContext(ctx, tc.query, tc.args...))
		if (err != nil) != tc.err || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v %v, want %v (error %v)", tc.query, got, err, tc.want, tc.err)
		}
	}
	// A failed scan closed the rows: the one connection is free again.
	if _, err := Int64s(db.QueryContext(ctx, "SELECT id FROM t")); err != nil {
		t.Fatal(err)
	}
}

func TestAll(t *testing.T) {
	db := open(t)
	type row struct{ id, kind int64 }
	rows, err := db.Query("SELECT id, kind FROM t ORDER BY id")
	got, err := All(rows, err, func(r *sql.Rows, v *row) error {
		return r.Scan(&v.id, &v.kind)
	})
	if want := []row{{1, 0}, {2, 1}, {3, 1}}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("All = %v %v, want %v", got, err, want)
	}
	boom := errors.New("boom")
	rows, err = db.Query("SELECT id FROM t")
	_, err = All(rows, err, func(r *sql.Rows, v *int64) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("All with a failing scan: %v, want boom", err)
	}
	if _, err := All(nil, boom, func(r *sql.Rows, v *int64) error { return nil }); !errors.Is(err, boom) {
		t.Fatalf("All after a failed query: %v, want its error", err)
	}
}
