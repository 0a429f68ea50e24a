package sqlfile

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
)

func testConn(t *testing.T) *Conn {
	t.Helper()
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	raw, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c := NewConn(raw)
	t.Cleanup(func() { c.Close() })
	if _, err := c.ExecContext(context.Background(), "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)"); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestConnCaches: a text is prepared once and kept, whichever way it runs;
// a text of several statements runs them all, uncached; a bad text fails
// as it would unprepared and is not kept.
func TestConnCaches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := testConn(t)
	for i := range 3 {
		if _, err := c.ExecContext(ctx, "INSERT INTO t VALUES (?, ?)", i, "v"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
		var v string
		if err := c.QueryRowContext(ctx, "SELECT v FROM t WHERE id = ?", i).Scan(&v); err != nil || v != "v"+strconv.Itoa(i) {
			t.Fatalf("row %d: %q, %v", i, v, err)
		}
	}
	if _, err := c.ExecContext(ctx, "INSERT INTO t VALUES (10, 'a'); INSERT INTO t VALUES (11, 'b');"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := c.QueryRowContext(ctx, "SELECT count(*) FROM t WHERE id >= 10").Scan(&n); err != nil || n != 2 {
		t.Fatalf("a text of two statements ran %d of them (%v)", n, err)
	}
	if _, err := c.ExecContext(ctx, "INSERT INTO nowhere VALUES (1)"); err == nil {
		t.Fatal("an insert into a missing table succeeded")
	}
	long := "SELECT count(*) FROM t WHERE id NOT IN (-1" + strings.Repeat(",-1", maxCachedText/3) + ")"
	if err := c.QueryRowContext(ctx, long).Scan(&n); err != nil || n != 5 {
		t.Fatalf("a long text: %d rows (%v)", n, err)
	}
	// The first CREATE, the insert, the select and the count: each once;
	// not the long text.
	if len(c.cache) != 4 {
		t.Errorf("%d texts kept, want 4", len(c.cache))
	}
}

// TestConnNested: a text run again while its rows are open runs
// unprepared, leaving the open rows whole; once they are closed it is the
// kept statement again.
func TestConnNested(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := testConn(t)
	for i := range 4 {
		if _, err := c.ExecContext(ctx, "INSERT INTO t VALUES (?, 'x')", i); err != nil {
			t.Fatal(err)
		}
	}
	const q = "SELECT id FROM t WHERE id >= ? ORDER BY id"
	outer, err := c.QueryContext(ctx, q, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for outer.Next() {
		var id int
		if err := outer.Scan(&id); err != nil {
			t.Fatal(err)
		}
		got = append(got, id)
		inner, err := c.QueryContext(ctx, q, 3) // the same text, while outer reads
		if err != nil {
			t.Fatal(err)
		}
		k := 0
		for inner.Next() {
			k++
		}
		if err := inner.Close(); err != nil || k != 1 {
			t.Fatalf("inner read %d rows (%v)", k, err)
		}
	}
	if err := outer.Err(); err != nil || len(got) != 4 || got[3] != 3 {
		t.Fatalf("outer read %v (%v)", got, err)
	}
	st := c.cache[q]
	again, err := c.QueryContext(ctx, q, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if c.cache[q] != st || st.rows != again {
		t.Error("after its rows closed, the text did not run its kept statement")
	}
}

// TestConnEvicts: past its bound, a text whose rows are closed makes room
// for a new one; when every kept text's rows are open, a new text runs
// unprepared.
func TestConnEvicts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := testConn(t) // keeps its CREATE
	c.max = 3
	var open []*sql.Rows
	for i := range 5 {
		rows, err := c.QueryContext(ctx, "SELECT "+strconv.Itoa(i)+" UNION ALL SELECT 9")
		if err != nil {
			t.Fatal(err)
		}
		if !rows.Next() {
			t.Fatalf("text %d: no row", i)
		}
		var v int
		if err := rows.Scan(&v); err != nil || v != i {
			t.Fatalf("text %d read %d (%v)", i, v, err)
		}
		open = append(open, rows)
		if len(c.cache) > c.max {
			t.Fatalf("%d texts kept, bound %d", len(c.cache), c.max)
		}
	}
	// Two texts fit beside the CREATE, which then made room for a third;
	// the last two ran unprepared, every kept text's rows being open.
	if len(c.cache) != 3 {
		t.Errorf("%d texts kept, want 3", len(c.cache))
	}
	for _, r := range open {
		r.Close()
	}
	if _, err := c.ExecContext(ctx, "INSERT INTO t VALUES (1, 'a')"); err != nil || len(c.cache) != 3 {
		t.Errorf("a new text once rows closed: %v, %d kept", err, len(c.cache))
	}
	if _, ok := c.cache["INSERT INTO t VALUES (1, 'a')"]; !ok {
		t.Error("the new text was not kept in a closed one's place")
	}
}
