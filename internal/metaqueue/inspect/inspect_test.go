package inspect

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/metaqueue/internal/modtest"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

func TestAccounting(t *testing.T) {
	t.Parallel()
	cost := 2.5
	for _, tc := range []struct {
		name              string
		u                 Usage
		started, finished sql.NullInt64
		want              protocol.Accounting
	}{
		{"nothing", Usage{}, sql.NullInt64{}, sql.NullInt64{}, protocol.Accounting{}},
		{"elapsed", Usage{}, sql.NullInt64{Int64: 1e6, Valid: true}, sql.NullInt64{Int64: 3.5e6, Valid: true},
			protocol.Accounting{Elapsed: 2.5}},
		{"finished before started", Usage{}, sql.NullInt64{Int64: 5e6, Valid: true}, sql.NullInt64{Int64: 1e6, Valid: true},
			protocol.Accounting{}},
		{"not finished", Usage{}, sql.NullInt64{Int64: 5e6, Valid: true}, sql.NullInt64{}, protocol.Accounting{}},
		{"measured", Usage{User: sql.NullFloat64{Float64: 1.5, Valid: true}, Sys: sql.NullFloat64{Float64: 0.5, Valid: true},
			RSS: sql.NullInt64{Int64: 4096, Valid: true}}, sql.NullInt64{}, sql.NullInt64{},
			protocol.Accounting{Usage: protocol.Usage{CPUUser: 1.5, CPUSys: 0.5, MaxRSS: 4096}}},
		{"no rss: not measured", Usage{User: sql.NullFloat64{Float64: 1.5, Valid: true}, RSS: sql.NullInt64{Valid: true}},
			sql.NullInt64{}, sql.NullInt64{}, protocol.Accounting{}},
		{"charged", Usage{Cost: sql.NullFloat64{Float64: cost, Valid: true}}, sql.NullInt64{}, sql.NullInt64{},
			protocol.Accounting{Cost: &cost}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.u.Accounting(tc.started, tc.finished)
			if got.Elapsed != tc.want.Elapsed || got.Usage != tc.want.Usage ||
				(got.Cost == nil) != (tc.want.Cost == nil) || (got.Cost != nil && *got.Cost != *tc.want.Cost) {
				t.Errorf("Accounting = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestMicros(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 1, 12, 0, 0, 123456000, time.Local)
	for _, tc := range []struct {
		v    sql.NullInt64
		want string
	}{
		{sql.NullInt64{}, ""},
		{sql.NullInt64{Int64: at.UnixMicro(), Valid: true}, at.Format(TimeFormat)},
	} {
		if got := Micros(tc.v); got != tc.want {
			t.Errorf("Micros(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
	if got := Micros(sql.NullInt64{Int64: at.UnixMicro(), Valid: true}); !strings.Contains(got, ".123456") {
		t.Errorf("Micros keeps microseconds: %q", got)
	}
}

func TestStatQuery(t *testing.T) {
	t.Parallel()
	many := make([]int64, maxStatIDs+1)
	for _, tc := range []struct {
		name   string
		st     protocol.Stat
		after  int64
		has    []string // clauses the query must hold
		hasNot []string
		args   []any
		gap    int // where the gap's bounds are in args (-1: none); 0: not checked
		err    bool
	}{
		{name: "default states", st: protocol.Stat{}, has: []string{"j.state IN (?,?,?,?,?,?,?)", "ORDER BY j.id"},
			hasNot: []string{"LIMIT"}, args: []any{"W", "Q", "H", "E", "D", "F", "B"}},
		{name: "every state: no condition", st: protocol.Stat{States: "WQHEDFBX"}, hasNot: []string{"WHERE"}},
		{name: "after and queue", st: protocol.Stat{Queue: "q", States: "WQHEDFBX"}, after: 7,
			has: []string{"j.id > ?", "q.name = ?"}, args: []any{int64(7), "q"}},
		{name: "target: its id, then its jobs by index", st: protocol.Stat{Target: "t", States: "WQHEDFBX"},
			has: []string{"j.target_id = (SELECT id FROM targets WHERE name = ?)"}, hasNot: []string{"t.name = ?"}, args: []any{"t"}},
		{name: "prefix", st: protocol.Stat{TargetPrefix: "a.", States: "E"}, has: []string{"t.name >= ? AND t.name < ?"},
			args: []any{"a.", "a.\xff", "E"}},
		{name: "range, ids, limit", st: protocol.Stat{From: 2, To: 4, IDs: []int64{3}, Limit: 9, States: "WQHEDFBX"},
			has: []string{"j.id BETWEEN ? AND ?", "j.id IN (?)", "LIMIT ?"}, args: []any{int64(2), int64(4), int64(3), 9}},
		{name: "collapse: one gap between arrays", st: protocol.Stat{Collapse: true, States: "WQHEDFBX", Limit: 5}, after: 2,
			has: []string{"WHERE j.id > ? AND j.id BETWEEN ? AND ?", "ORDER BY j.id LIMIT ?"}, hasNot: []string{"EXISTS", "UNION"},
			args: []any{int64(2), int64(math.MinInt64), int64(math.MaxInt64), 5}, gap: 1},
		{name: "collapse, latest", st: protocol.Stat{Collapse: true, States: "WQHEDFBX", Last: 3},
			has: []string{"WHERE j.id BETWEEN ? AND ? ORDER BY j.id DESC LIMIT ?) ORDER BY 1"}, args: []any{int64(math.MinInt64), int64(math.MaxInt64), 3}},
		{name: "collapse named ids: each one's array looked up", st: protocol.Stat{Collapse: true, States: "WQHEDFBX", IDs: []int64{4}},
			has: []string{"WHERE j.id IN (?) AND NOT EXISTS (", "SELECT 1 FROM arrays a"}, hasNot: []string{"BETWEEN"}, args: []any{int64(4)}, gap: -1},
		{name: "every state and P: no condition", st: protocol.Stat{States: "WQHPEDFBX"}, hasNot: []string{"WHERE"}},
		{name: "P alone: stored E, marked", st: protocol.Stat{States: "P"}, has: []string{"j.state IN (?)", "j.prefetched = 1"}, args: []any{"E"}},
		{name: "QP: the mark only on E", st: protocol.Stat{States: "QP"}, has: []string{"(j.state IN (?,?) AND (j.state <> 'E' OR j.prefetched = 1))"}, args: []any{"Q", "E"}},
		{name: "E lists P too", st: protocol.Stat{States: "E"}, hasNot: []string{"prefetched"}, args: []any{"E"}},
		{name: "PE: as E", st: protocol.Stat{States: "PE"}, hasNot: []string{"prefetched"}, args: []any{"E"}},
		{name: "bad state", st: protocol.Stat{States: "Z"}, err: true},
		{name: "too many ids", st: protocol.Stat{IDs: many}, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, args, gap, err := statQuery(tc.st, tc.after)
			if tc.err {
				var pe *protocol.Error
				if !errors.As(err, &pe) || pe.Code != protocol.CodeBadRequest {
					t.Fatalf("err = %v, want a bad request", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(strings.TrimPrefix(q, "SELECT * FROM ("), statSelect) { // Last wraps it
				t.Errorf("query does not start with the listing's select")
			}
			for _, h := range tc.has {
				if !strings.Contains(q, h) {
					t.Errorf("query lacks %q:\n%s", h, q)
				}
			}
			for _, h := range tc.hasNot {
				if strings.Contains(q[len(statSelect):], h) {
					t.Errorf("query has %q:\n%s", h, q)
				}
			}
			if tc.args != nil && !slices.Equal(args, tc.args) {
				t.Errorf("args = %v, want %v", args, tc.args)
			}
			if n := strings.Count(q, "?"); n != len(args) {
				t.Errorf("%d parameters, %d arguments", n, len(args))
			}
			if tc.gap != 0 && gap != tc.gap {
				t.Errorf("gap at %d, want %d", gap, tc.gap)
			}
		})
	}
}

func TestPlace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		p    place
		want string
	}{
		{place{"local", ""}, "local"},
		{place{"hpc", "n1"}, "hpc:n1"},
	} {
		if got := tc.p.String(); got != tc.want {
			t.Errorf("%+v = %q, want %q", tc.p, got, tc.want)
		}
	}
}

// TestTargetGraph walks a small graph: a <- b <- d, a <- c <- d (d is
// reached twice but listed once), with limits that cut it.
func TestTargetGraph(t *testing.T) {
	t.Parallel()
	g := dag.New()
	a, b, c, d := g.AddTarget("a"), g.AddTarget("b"), g.AddTarget("c"), g.AddTarget("d")
	g.AddEdges(a, []dag.TargetID{b, c})
	g.AddEdges(b, []dag.TargetID{d})
	g.AddEdges(c, []dag.TargetID{d})
	g.AddJob(1, dag.Node{Target: d})
	g.AddJob(2, dag.Node{Target: d})
	g.AddJob(3, dag.Node{Target: a, Prereqs: []dag.TargetID{b, c}})
	if _, err := g.Set(1, job.Executing); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Set(1, job.Done); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		root      string
		limit     int
		want      []TargetNode
		truncated bool
		err       bool
	}{
		{name: "whole", root: "a", want: []TargetNode{
			{Name: "a", Total: 1, Prereqs: []int{1, 2}},
			{Name: "b", Prereqs: []int{3}, Depth: 1},
			{Name: "c", Prereqs: []int{3}, Depth: 1},
			{Name: "d", Total: 2, Done: 1, Depth: 2},
		}},
		{name: "cut", root: "a", limit: 2, truncated: true, want: []TargetNode{
			{Name: "a", Total: 1, Prereqs: []int{1}},
			{Name: "b", Depth: 1},
		}},
		{name: "leaf", root: "d", want: []TargetNode{{Name: "d", Total: 2, Done: 1}}},
		{name: "unknown", root: "z", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, truncated, err := TargetGraph(g, tc.root, tc.limit)
			if tc.err {
				var pe *protocol.Error
				if !errors.As(err, &pe) || pe.Code != protocol.CodeNotFound {
					t.Fatalf("err = %v, want not found", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if truncated != tc.truncated {
				t.Errorf("truncated = %v, want %v", truncated, tc.truncated)
			}
			if !slices.EqualFunc(got, tc.want, func(x, y TargetNode) bool {
				return x.Name == y.Name && x.Total == y.Total && x.Done == y.Done && x.Bad == y.Bad &&
					x.Depth == y.Depth && slices.Equal(x.Prereqs, y.Prereqs)
			}) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestQueriesUsed: every query of inspect.sql is used by the package and
// every query it names is in the file.
func TestQueriesUsed(t *testing.T) {
	t.Parallel()
	modtest.QueriesUsed(t, "inspect.sql", queries.Names(), regexp.MustCompile(`(?:Get|base)\("([A-Z][A-Za-z]+)"\)`))
}

func TestCounts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		c          [128]int
		prefetched int
		want       map[string]int
	}{
		{"none held", [128]int{job.Queued: 2, job.Done: 1}, 0,
			map[string]int{"W": 0, "Q": 2, "E": 0, "D": 1, "F": 0, "X": 0, "B": 0}},
		{"some held", [128]int{job.Held: 3}, 0,
			map[string]int{"W": 0, "Q": 0, "H": 3, "E": 0, "D": 0, "F": 0, "X": 0, "B": 0}},
		// 4 handed out, 2 of them not started: 2 E, 2 P
		{"some prefetched", [128]int{job.Executing: 4}, 2,
			map[string]int{"W": 0, "Q": 0, "P": 2, "E": 2, "D": 0, "F": 0, "X": 0, "B": 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Counts(&tc.c, tc.prefetched); !maps.Equal(got, tc.want) {
				t.Errorf("Counts = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestTargetListingPlan: listing a target's jobs looks the target up and
// reads its jobs through jobs_target, never every job (target names have
// no index: "t.name = ?" scanned the jobs in id order).
func TestTargetListingPlan(t *testing.T) {
	t.Parallel()
	w := modtest.NewDB(t)
	for _, tc := range []struct {
		name  string
		after int64
	}{{"first page", 0}, {"next page", 100}} {
		q, args, _, err := statQuery(protocol.Stat{Target: "t", Limit: 101}, tc.after)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := w.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		all := strings.Join(plan, "\n")
		if !strings.Contains(all, "SEARCH j USING INDEX jobs_target (target_id=?") || strings.Contains(all, "SCAN j") ||
			strings.Contains(all, "TEMP B-TREE") {
			t.Errorf("%s: the listing of a target's jobs is planned as\n%s", tc.name, all)
		}
	}
}

// countingDB counts the queries run.
type countingDB struct {
	DB
	n int
}

func (c *countingDB) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	c.n++
	return c.DB.QueryContext(ctx, q, args...)
}

// TestWaitingOnManyTargets: a gather job's prerequisite targets are
// counted in one query however many they are (a query each made a job
// with 5,000 of them take 10 s in mqstat -j and on its dashboard page),
// with each target's jobs per state, after-any ones last, and a target
// without jobs neither complete nor ended.
func TestWaitingOnManyTargets(t *testing.T) {
	t.Parallel()
	w := modtest.NewDB(t)
	ctx := t.Context()
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := w.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	const n = 300
	const gather = 1000
	exec("BEGIN")
	var prereqs []string
	jobID := int64(1)
	addJob := func(target int, state string) {
		exec("INSERT INTO jobs (id, queue_id, target_id, state, command, cwd, submitted) VALUES (?, 1, ?, ?, 'true', '/', 0)", jobID, target, state)
		jobID++
	}
	for i := range n {
		id := i + 1
		exec("INSERT INTO targets (id, name) VALUES (?, ?)", id, fmt.Sprintf("p%d", i))
		exec("INSERT INTO job_prereqs (job_id, target_id, kind) VALUES (?, ?, 0)", gather, id)
		prereqs = append(prereqs, fmt.Sprintf("p%d", i))
		addJob(id, "D")
		if i%3 == 0 {
			addJob(id, "F")
		}
	}
	exec("INSERT INTO targets (id, name) VALUES (?, 'empty'), (?, 'after')", n+1, n+2)
	exec("INSERT INTO job_prereqs (job_id, target_id, kind) VALUES (?, ?, 0), (?, ?, 1)", gather, n+1, gather, n+2)
	addJob(n+2, "F")
	exec("COMMIT")
	prereqs = append(prereqs, "empty")

	db := &countingDB{DB: w}
	r := New(db, "", nil)
	got, err := r.waitingOn(ctx, gather, prereqs, []string{"after"})
	if err != nil {
		t.Fatal(err)
	}
	if db.n != 1 {
		t.Errorf("%d queries for %d prerequisite targets, want 1", db.n, n+2)
	}
	if len(got) != n+2 {
		t.Fatalf("%d targets, want %d", len(got), n+2)
	}
	for i, ts := range got[:n] {
		want := map[string]int{"D": 1}
		if i%3 == 0 {
			want["F"] = 1
		}
		if ts.Target != prereqs[i] || !maps.Equal(ts.Counts, want) || ts.Complete != (i%3 != 0) || !ts.Ended || ts.AfterAny {
			t.Errorf("target %d: %+v", i, ts)
		}
	}
	if e := got[n]; e.Target != "empty" || len(e.Counts) != 0 || e.Complete || e.Ended {
		t.Errorf("a target without jobs: %+v", e)
	}
	if a := got[n+1]; a.Target != "after" || !a.AfterAny || !a.Ended || a.Complete || a.Counts["F"] != 1 {
		t.Errorf("the after-any target: %+v", a)
	}
}
