package sqlfile

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
)

// TestStmts: Prepare names a bad query in its error; Keyed prepares a
// key's statement once and returns it after; Close closes them all.
func TestStmts(t *testing.T) {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	var st Stmts
	if _, err := st.Prepare(ctx, db, "Bad", "SELEC 1"); err == nil || !strings.HasPrefix(err.Error(), "prepare Bad: ") {
		t.Errorf("a bad query: %v, want an error naming it", err)
	}
	one, err := st.Prepare(ctx, db, "One", "SELECT 1")
	if err != nil {
		t.Fatal(err)
	}
	made := 0
	query := func(n int) string { made++; return "SELECT " + strconv.Itoa(n) }
	for _, c := range []struct{ key, n, want, made int }{
		{1, 7, 7, 1},
		{2, 9, 9, 2},
		{1, 8, 7, 2}, // kept: not prepared again
	} {
		s, err := st.Keyed(ctx, db, c.key, query, c.n)
		if err != nil {
			t.Fatal(err)
		}
		var got int
		if err := s.QueryRow().Scan(&got); err != nil || got != c.want || made != c.made {
			t.Errorf("key %d: got %d (%v), %d prepared; want %d, %d", c.key, got, err, made, c.want, c.made)
		}
	}
	st.Close()
	var x int
	if err := one.QueryRow().Scan(&x); err == nil {
		t.Error("a statement still works after Close")
	}
}
