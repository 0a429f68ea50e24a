package inspect

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/mq-hpc/mq/internal/metaqueue/internal/modtest"
)

// prepCountDB counts the queries run unprepared and the statements
// prepared on a connection.
type prepCountDB struct {
	*sql.Conn
	raw, prepared int
}

func (c *prepCountDB) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	c.raw++
	return c.Conn.QueryContext(ctx, q, args...)
}

func (c *prepCountDB) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	c.raw++
	return c.Conn.QueryRowContext(ctx, q, args...)
}

func (c *prepCountDB) PrepareContext(ctx context.Context, q string) (*sql.Stmt, error) {
	c.prepared++
	return c.Conn.PrepareContext(ctx, q)
}

// A Reader prepares each query once: reading a job again prepares
// nothing and runs nothing unprepared; past maxStmts distinct queries,
// the others run unprepared and still answer.
func TestStmtCache(t *testing.T) {
	t.Parallel()
	w := modtest.NewDB(t)
	fillJobs(t, w, 10)
	db := &prepCountDB{Conn: w}
	r := New(db, "", nil)
	ctx := context.Background()
	if _, err := r.JobOutput(ctx, 1); err != nil {
		t.Fatal(err)
	}
	prepared := db.prepared
	if db.raw != 0 || prepared == 0 {
		t.Fatalf("first read: %d queries unprepared, %d prepared; want none, some", db.raw, prepared)
	}
	for id := int64(1); id <= 10; id++ {
		if d, err := r.JobOutput(ctx, id); err != nil || d.ID != id {
			t.Fatalf("job %d: %+v, %v", id, d.JobInfo, err)
		}
	}
	if db.raw != 0 || db.prepared != prepared {
		t.Errorf("reads again: %d queries unprepared, %d more prepared; want none", db.raw, db.prepared-prepared)
	}
	c := r.db.(*stmtCache)
	for i := range maxStmts + 10 {
		var n int
		if err := c.QueryRowContext(ctx, fmt.Sprintf("SELECT %d + ?", i), 1).Scan(&n); err != nil || n != i+1 {
			t.Fatalf("query %d: %d, %v", i, n, err)
		}
	}
	if len(c.stmts) != maxStmts || db.raw == 0 {
		t.Errorf("%d statements kept, %d queries unprepared; want %d kept, the rest unprepared", len(c.stmts), db.raw, maxStmts)
	}
}
