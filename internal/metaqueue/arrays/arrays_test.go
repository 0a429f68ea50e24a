package arrays

import (
	"context"
	"database/sql"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/internal/metaqueue/internal/modtest"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"

	_ "modernc.org/sqlite"
)

// TestImports: the module imports the standard library, the public
// job and protocol packages and internal leaf packages only: never the
// metaqueue core nor another of its modules.
func TestImports(t *testing.T) { modtest.Imports(t) }

// TestQueriesUsed: every query of arrays.sql is asked for by name in the
// package, and every name asked for is there.
func TestQueriesUsed(t *testing.T) {
	modtest.QueriesUsed(t, "arrays.sql", queries.Names(), regexp.MustCompile(`(?:queries\.Get|baseQuery)\("(\w+)"\)`))
}

func TestOf(t *testing.T) {
	var a Arrays
	// Added out of order (a load reads them sorted; this checks the sort),
	// and one with no limit, which is not kept.
	for _, ar := range []*array{{id: 2, first: 20, last: 29, limit: 2}, {id: 1, first: 5, last: 9, limit: 1}, {id: 3, first: 30, last: 39}} {
		a.add(ar)
	}
	for _, tc := range []struct {
		id   int64
		want int64 // the array's id, 0 for none
	}{
		{1, 0}, {4, 0}, {5, 1}, {9, 1}, {10, 0}, {19, 0}, {20, 2}, {29, 2}, {30, 0}, {35, 0}, {100, 0},
	} {
		var got int64
		if ar := a.of(tc.id); ar != nil {
			got = ar.id
		}
		if got != tc.want {
			t.Errorf("of(%d) = array %d, want %d", tc.id, got, tc.want)
		}
	}
}

// ready is the core's answer to Leave: the jobs Queued in a known queue.
type ready map[int64]bool

func (r ready) Queued(id int64) bool { return r[id] }

// TestCap runs one array of ids 1..5 with a limit of 2 through starts,
// picks at the cap and stops, checking what is held and given back.
func TestCap(t *testing.T) {
	type step struct {
		op   string // "start" (Enter), "pick" (Capped), "stop" (Leave)
		id   int64
		want any // Capped's bool, Leave's ids
	}
	for _, tc := range []struct {
		name  string
		ready ready // members ready when given back
		steps []step
	}{
		{"below the cap nothing waits", ready{}, []step{
			{"pick", 1, false}, {"start", 1, nil}, {"pick", 2, false}, {"start", 2, nil},
			{"stop", 1, []int64{}}, {"pick", 3, false},
		}},
		{"held at the cap, given back first held first", ready{3: true, 4: true, 5: true}, []step{
			{"start", 1, nil}, {"start", 2, nil},
			{"pick", 3, true}, {"pick", 4, true}, {"pick", 5, true},
			{"stop", 1, []int64{3}}, {"start", 3, nil},
			{"stop", 2, []int64{4}}, {"stop", 3, []int64{5}},
		}},
		{"stale entries take no place", ready{5: true}, []step{
			{"start", 1, nil}, {"start", 2, nil},
			{"pick", 3, true}, {"pick", 4, true}, {"pick", 5, true},
			{"stop", 1, []int64{5}}, {"stop", 2, []int64{}},
		}},
		{"two free places give two back", ready{3: true, 4: true, 5: true}, []step{
			{"start", 1, nil}, {"start", 2, nil}, {"pick", 3, true}, {"pick", 4, true}, {"pick", 5, true},
			{"stop", 1, []int64{3}}, {"stop", 2, []int64{4, 5}},
		}},
		{"a job in no array is never capped", ready{}, []step{
			{"start", 1, nil}, {"start", 2, nil}, {"pick", 7, false}, {"stop", 7, []int64{}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a Arrays
			a.add(&array{id: 1, first: 1, last: 5, limit: 2})
			for i, s := range tc.steps {
				switch s.op {
				case "start":
					a.Enter(s.id)
				case "pick":
					if got := a.Capped(s.id); got != s.want {
						t.Fatalf("step %d: Capped(%d) = %v, want %v", i, s.id, got, s.want)
					}
				case "stop":
					if got := a.Leave(s.id, tc.ready); !slices.Equal(got, s.want.([]int64)) {
						t.Fatalf("step %d: Leave(%d) = %v, want %v", i, s.id, got, s.want)
					}
				}
				n, _ := a.Running(1)
				if full := a.Full(1); full != (n >= 2) {
					t.Fatalf("step %d: Full %v with %d running", i, full, n)
				}
			}
		})
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		spec  string
		limit int
		ok    bool
	}{
		{"1-10%2", 2, true},
		{"", 0, true},
		{strings.Repeat("x", MaxSpec), MaxLimit, true},
		{strings.Repeat("x", MaxSpec+1), 0, false},
		{"1-3", -1, false},
		{"1-3", MaxLimit + 1, false},
	} {
		err := Check(tc.spec, tc.limit)
		if (err == nil) != tc.ok {
			t.Errorf("Check(%d bytes, %d) = %v, want ok %v", len(tc.spec), tc.limit, err, tc.ok)
		}
		if err != nil && !protocol.IsCode(err, protocol.CodeBadRequest) {
			t.Errorf("Check(%d bytes, %d): %v is not a bad request", len(tc.spec), tc.limit, err)
		}
	}
}

// testDB is a metaqueue's tables as far as the module reads them.
func testDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "mq.db"))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(2) // List's snapshot and the counter's reads
	t.Cleanup(func() { db.Close() })
	for _, q := range []string{
		"CREATE TABLE queues (id INTEGER PRIMARY KEY, name TEXT)",
		"CREATE TABLE targets (id INTEGER PRIMARY KEY, name TEXT)",
		"CREATE TABLE jobs (id INTEGER PRIMARY KEY, state TEXT NOT NULL, queue_id INTEGER, target_id INTEGER, prefetched INTEGER)",
		`CREATE TABLE arrays (id INTEGER PRIMARY KEY, first_job INTEGER NOT NULL, last_job INTEGER NOT NULL,
			max_running INTEGER NOT NULL DEFAULT 0, spec TEXT NOT NULL DEFAULT '')`,
		"INSERT INTO queues VALUES (1, 'default'), (2, 'big')",
		"INSERT INTO targets VALUES (1, 'a'), (2, 'b')",
		// Array 1..3 of a in default (one Done), 4..5 of b in big (both Queued), job 6 alone.
		"INSERT INTO jobs (id, state, queue_id, target_id) VALUES (1, 'D', 1, 1), (2, 'Q', 1, 1), (3, 'E', 1, 1), (4, 'Q', 2, 2), (5, 'Q', 2, 2), (6, 'Q', 1, 1)",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

// TestTables saves arrays, loads the limited ones back and lists them.
func TestTables(t *testing.T) {
	ctx := context.Background()
	db := testDB(t)
	var a Arrays
	if err := a.Save(ctx, db, 1, 3, "1-3%1", 1); err != nil {
		t.Fatal(err)
	}
	if err := a.Save(ctx, db, 4, 5, "1-2", 0); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.Running(4); ok {
		t.Error("an array with no limit is counted")
	}
	var b Arrays
	if err := b.Load(ctx, db); err != nil {
		t.Fatal(err)
	}
	if n, ok := b.Running(2); !ok || n != 0 {
		t.Errorf("loaded array of job 2: %d running, %v", n, ok)
	}
	if _, ok := b.Running(5); ok {
		t.Error("loaded an array with no limit")
	}
	for _, tc := range []struct {
		q    protocol.ArrayQuery
		want string // first ids and counts
	}{
		{protocol.ArrayQuery{}, "1 map[D:1 E:1 Q:1]; 4 map[Q:2]"},
		{protocol.ArrayQuery{Queue: "big"}, "4 map[Q:2]"},
		{protocol.ArrayQuery{Target: "a"}, "1 map[D:1 E:1 Q:1]"},
		{protocol.ArrayQuery{Queue: "big", Target: "a"}, ""},
		{protocol.ArrayQuery{States: "E"}, "1 map[D:1 E:1 Q:1]"},
		{protocol.ArrayQuery{States: "F"}, ""},
		{protocol.ArrayQuery{Job: 5, States: "F"}, "4 map[Q:2]"}, // a job's array is listed whatever its states
		{protocol.ArrayQuery{Job: 6}, ""},
	} {
		got, err := List(ctx, db, tableCounter{db}, tc.q)
		if err != nil {
			t.Fatalf("%+v: %v", tc.q, err)
		}
		var s []string
		for _, ai := range got {
			s = append(s, strconv.FormatInt(ai.First, 10)+" "+fmtCounts(ai.Counts))
		}
		if strings.Join(s, "; ") != tc.want {
			t.Errorf("List(%+v) = %q, want %q", tc.q, strings.Join(s, "; "), tc.want)
		}
	}
	if _, err := List(ctx, db, tableCounter{db}, protocol.ArrayQuery{States: "Z"}); !protocol.IsCode(err, protocol.CodeBadRequest) {
		t.Errorf("an unknown state: %v", err)
	}
}

func fmtCounts(m map[string]int) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, k+":"+strconv.Itoa(m[k]))
	}
	return "map[" + strings.Join(parts, " ") + "]"
}

// TestListPrefetched: a member handed out ahead and not started counts as
// P, and an array of such members is listed for E as for P.
func TestListPrefetched(t *testing.T) {
	ctx := context.Background()
	db := testDB(t)
	var a Arrays
	if err := a.Save(ctx, db, 4, 5, "1-2", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("UPDATE jobs SET state = 'E', prefetched = 1 WHERE id = 4"); err != nil {
		t.Fatal(err)
	}
	for _, states := range []string{"", "E", "P", "QP"} {
		got, err := List(ctx, db, tableCounter{db}, protocol.ArrayQuery{States: states})
		if err != nil || len(got) != 1 || fmtCounts(got[0].Counts) != "map[P:1 Q:1]" {
			t.Errorf("-s %q: %+v, %v; want the array with 1 P and 1 Q", states, got, err)
		}
	}
	if _, err := db.Exec("UPDATE jobs SET state = 'D', prefetched = 1 WHERE id = 5"); err != nil {
		t.Fatal(err)
	}
	if got, err := List(ctx, db, tableCounter{db}, protocol.ArrayQuery{States: "E"}); err != nil || len(got) != 1 || fmtCounts(got[0].Counts) != "map[D:1 P:1]" {
		t.Errorf("-s E: %+v, %v; want the array of a P member and a done one", got, err)
	}
}

// tableCounter counts as the core does (Counter): the arrays loaded from
// db, every job row entering its array's counts as at a load (Count), the
// prefetched Executing ones not started (Counts).
type tableCounter struct{ db *sql.DB }

func (c tableCounter) ArrayCounts(ctx context.Context, firsts []int64) ([]map[string]int, error) {
	var a Arrays
	if err := a.Load(ctx, c.db); err != nil {
		return nil, err
	}
	rows, err := c.db.QueryContext(ctx, "SELECT id, state, coalesce(prefetched, 0) FROM jobs ORDER BY id")
	if err != nil {
		return nil, err
	}
	var unstarted []int64
	for rows.Next() {
		var id, pre int64
		var st string
		if err := rows.Scan(&id, &st, &pre); err != nil {
			rows.Close()
			return nil, err
		}
		a.Count(id, 0, job.State(st[0]))
		if st == "E" && pre == 1 {
			unstarted = append(unstarted, id)
		}
	}
	if err := closeRows(rows); err != nil {
		return nil, err
	}
	return a.Counts(firsts, slices.Values(unstarted)), nil
}

// TestCount: members move between states in their array's counts, enter
// (from 0) and leave (to 0) them; jobs in no array, or between arrays,
// count nowhere; P is told apart from E only when listed.
func TestCount(t *testing.T) {
	var a Arrays
	a.add(&array{first: 10, last: 14})
	a.add(&array{first: 1, last: 3, limit: 2}) // out of order: kept by first id
	a.add(&array{first: 20, last: 20})
	for id := int64(1); id <= 25; id++ {
		a.Count(id, 0, job.Waiting)
	}
	steps := []struct {
		id       int64
		from, to job.State
	}{
		{2, job.Waiting, job.Queued},
		{2, job.Queued, job.Executing},
		{3, job.Waiting, job.Executing},
		{11, job.Waiting, job.Done},
		{12, job.Waiting, job.Failed},
		{12, job.Failed, 0}, // purged
		{13, job.Waiting, job.Deleted},
		{14, job.Waiting, job.Held},
		{15, job.Waiting, job.Done}, // in no array
		{20, job.Waiting, job.Blocked},
		{1, job.Waiting, job.Queued},
		{10, job.Waiting, job.Queued},
	}
	for _, s := range steps {
		a.Count(s.id, s.from, s.to)
	}
	got := a.Counts([]int64{1, 10, 20, 15, 2}, slices.Values([]int64{3, 15}))
	want := []string{
		"map[E:1 P:1 Q:1]",
		"map[D:1 H:1 Q:1 X:1]",
		"map[B:1]",
		"map[]", // no array begins at 15
		"map[]", // nor at 2
	}
	for i := range want {
		if fmtCounts(got[i]) != want[i] {
			t.Errorf("Counts[%d] = %s, want %s", i, fmtCounts(got[i]), want[i])
		}
	}
	if a.of(2) == nil || a.of(11) != nil {
		t.Error("the limited arrays are not those with a limit")
	}
}
