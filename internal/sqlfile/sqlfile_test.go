package sqlfile

import (
	"sort"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	src := `-- jobs: the job table's queries.

-- name: SetState
UPDATE jobs SET state = ?
WHERE id = ?;

-- name: Count
-- a comment inside a query stays with it
SELECT count(*) FROM jobs;
`
	q, err := Parse("jobs.sql", src)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := q.Get("SetState"), "UPDATE jobs SET state = ?\nWHERE id = ?;"; got != want {
		t.Errorf("SetState = %q, want %q", got, want)
	}
	if got := q.Get("Count"); !strings.HasPrefix(got, "-- a comment") || !strings.HasSuffix(got, "FROM jobs;") {
		t.Errorf("Count = %q", got)
	}
	names := q.Names()
	sort.Strings(names)
	if strings.Join(names, ",") != "Count,SetState" {
		t.Errorf("Names = %v", names)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"SELECT 1;\n-- name: A\nSELECT 2;", "before the first"},
		{"-- name: A\nSELECT 1;\n-- name: A\nSELECT 2;", "named twice"},
		{"-- name: A\n\n-- name: B\nSELECT 2;", "A is empty"},
		{"-- name: B\n", "B is empty"},
		{"-- name: 1x\nSELECT 1;", "not a query name"},
		{"-- name: a b\nSELECT 1;", "not a query name"},
		{"-- name:\nSELECT 1;", "not a query name"},
	} {
		_, err := Parse("f.sql", tc.src)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "f.sql:") {
			t.Errorf("Parse(%q) = %v, want an error naming the file and saying %q", tc.src, err, tc.want)
		}
	}
}

func TestGetUnknownPanics(t *testing.T) {
	q := MustParse("f.sql", "-- name: A\nSELECT 1;")
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "f.sql has no query B") {
			t.Errorf("recover() = %v", r)
		}
	}()
	q.Get("B")
}

func FuzzParse(f *testing.F) {
	f.Add("-- name: A\nSELECT 1;\n-- name: B\nSELECT 2;")
	f.Add("-- x\n\n-- name: A\n  -- name: B\nx")
	f.Fuzz(func(t *testing.T, src string) {
		q, err := Parse("f.sql", src)
		if err != nil {
			return
		}
		for _, n := range q.Names() {
			if !isIdent(n) || strings.TrimSpace(q.Get(n)) == "" {
				t.Fatalf("query %q: %q", n, q.Get(n))
			}
		}
	})
}

// TestBuilders: the queries shaped at run time from a file's complete
// statement.
func TestBuilders(t *testing.T) {
	q := MustParse("b.sql", "-- name: Ins\nINSERT INTO t (a, b) VALUES (?, ?);\n\n-- name: In\nDELETE FROM t WHERE a IN (/*SLICE:ids*/?) AND b = ?;\n")
	for _, tc := range []struct{ name, got, want string }{
		{"Base", q.Base("Ins"), "INSERT INTO t (a, b) VALUES (?, ?)"},
		{"MultiRow 1", MultiRow(q.Get("Ins"), 1), "INSERT INTO t (a, b) VALUES (?, ?)"},
		{"MultiRow 3", MultiRow(q.Get("Ins"), 3), "INSERT INTO t (a, b) VALUES (?, ?),(?, ?),(?, ?)"},
		{"InList 1", InList(q.Get("In"), "ids", 1), "DELETE FROM t WHERE a IN (?) AND b = ?;"},
		{"InList 3", InList(q.Get("In"), "ids", 3), "DELETE FROM t WHERE a IN (?,?,?) AND b = ?;"},
		{"InList other name", InList(q.Get("In"), "keys", 3), q.Get("In")},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}
