package sqlfile

import (
	"database/sql"
	"testing"

	_ "modernc.org/sqlite"
)

// TestBatch: rows added to a batch are all inserted, whether they fill
// it, fill it twice or leave a partial one; Add says when it is full.
func TestBatch(t *testing.T) {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // one in-memory database
	if _, err := db.Exec("CREATE TABLE t (a INTEGER, b INTEGER)"); err != nil {
		t.Fatal(err)
	}
	const query = "INSERT INTO t (a, b) VALUES (?, ?);"
	many, err := db.Prepare(MultiRow(query, 4))
	if err != nil {
		t.Fatal(err)
	}
	one, err := db.Prepare(query)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 3, 4, 8, 9} {
		if _, err := db.Exec("DELETE FROM t"); err != nil {
			t.Fatal(err)
		}
		b := Batch{Width: 2, Rows: 4}
		fulls := 0
		for i := range n {
			if b.Add(int64(i), int64(2*i)) {
				fulls++
				if err := b.Flush(many, one); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := b.Flush(many, one); err != nil {
			t.Fatal(err)
		}
		var rows, sum int
		if err := db.QueryRow("SELECT count(*), coalesce(sum(b - 2*a), 0) FROM t").Scan(&rows, &sum); err != nil {
			t.Fatal(err)
		}
		if rows != n || sum != 0 || fulls != n/4 {
			t.Errorf("%d rows: inserted %d (mismatched values: %d), full %d times; want %d, 0, %d", n, rows, sum, fulls, n, n/4)
		}
	}
}
