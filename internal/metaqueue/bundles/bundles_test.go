package bundles

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
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

// TestQueriesUsed: every query of bundles.sql is asked for by name in the
// package, and every name asked for is there.
func TestQueriesUsed(t *testing.T) {
	modtest.QueriesUsed(t, "bundles.sql", queries.Names(), modtest.Asked)
}

func TestCheck(t *testing.T) {
	js := func(target string, prereqs ...string) protocol.JobSpec {
		return protocol.JobSpec{Target: target, Command: "x", Prereqs: prereqs}
	}
	many := make([]protocol.JobSpec, MaxJobs+1)
	for _, tc := range []struct {
		name string
		req  protocol.Submit
		bad  string // part of the error; "" for none
	}{
		{"no bundle", protocol.Submit{Jobs: []protocol.JobSpec{js("a"), js("b", "a")}}, ""},
		{"a bundle", protocol.Submit{Bundle: true, Jobs: []protocol.JobSpec{js("a", "z"), js("b", "z")}}, ""},
		{"too many jobs", protocol.Submit{Bundle: true, Jobs: many}, "the limit is 10000"},
		{"too many, not a bundle", protocol.Submit{Jobs: many}, ""},
		{"waits on itself", protocol.Submit{Bundle: true, Jobs: []protocol.JobSpec{js("a"), js("b", "a")}}, "job 2: a job of a bundle cannot wait on target a"},
	} {
		err := Check(tc.req)
		switch {
		case tc.bad == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad) || !protocol.IsCode(err, protocol.CodeBadRequest)):
			t.Errorf("%s: %v, want a bad request with %q", tc.name, err, tc.bad)
		}
	}
}

// jobs is the core's view of jobs for Expand.
type jobs map[int64]struct {
	st   job.State
	need float64
}

func (j jobs) State(id int64) (job.State, bool) { x, ok := j[id]; return x.st, ok }
func (j jobs) Need(id int64) float64            { return j[id].need }

func TestExpand(t *testing.T) {
	type jb = struct {
		st   job.State
		need float64
	}
	q := func(need float64) jb { return jb{job.Queued, need} }
	for _, tc := range []struct {
		name     string
		jobs     jobs // bundle 10 is jobs 10..13; job 5 is alone
		id       int64
		walltime float64
		ids      []int64
		bundle   int64
	}{
		{"a job in no bundle goes alone", jobs{5: q(1)}, 5, 0, []int64{5}, 0},
		{"the whole bundle in order", jobs{10: q(1), 11: q(1), 12: q(1), 13: q(1)}, 12, 0, []int64{10, 11, 12, 13}, 10},
		{"only its Queued jobs", jobs{10: {job.Done, 1}, 11: q(1), 12: {job.Executing, 1}, 13: {job.Blocked, 1}}, 11, 0, []int64{11}, 10},
		{"held back while one waits", jobs{10: q(1), 11: {job.Waiting, 1}, 12: q(1), 13: q(1)}, 10, 0, nil, 10},
		{"held back while one is held", jobs{10: q(1), 11: q(1), 12: q(1), 13: {job.Held, 1}}, 10, 0, nil, 10},
		{"a job the core lost is left out", jobs{10: q(1), 12: q(1), 13: q(1)}, 10, 0, []int64{10, 12, 13}, 10},
		{"as many as fit the walltime, the picked one first", jobs{10: q(3), 11: q(4), 12: q(2), 13: q(1)}, 12, 6, []int64{10, 12, 13}, 10},
		{"the picked one alone when nothing else fits", jobs{10: q(5), 11: q(5), 12: q(5), 13: q(5)}, 11, 6, []int64{11}, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := New()
			b.members[10] = []int64{10, 11, 12, 13}
			for _, id := range b.members[10] {
				b.of[id] = 10
			}
			ids, bundle := b.Expand(tc.id, tc.walltime, tc.jobs)
			if !slices.Equal(ids, tc.ids) || bundle != tc.bundle {
				t.Errorf("Expand(%d, %v) = %v, %d; want %v, %d", tc.id, tc.walltime, ids, bundle, tc.ids, tc.bundle)
			}
		})
	}
}

func TestSlotsUsed(t *testing.T) {
	as := func(bundles ...int64) []protocol.Assignment {
		var out []protocol.Assignment
		for _, b := range bundles {
			out = append(out, protocol.Assignment{Bundle: b})
		}
		return out
	}
	for _, tc := range []struct {
		jobs []protocol.Assignment
		want int
	}{
		{nil, 0},
		{as(0), 1},
		{as(0, 0, 0), 3},
		{as(7, 7, 7), 1},
		{as(0, 7, 7, 0, 9, 9), 4},
		{as(7, 7, 9), 2},
	} {
		if got := SlotsUsed(tc.jobs); got != tc.want {
			t.Errorf("SlotsUsed(%v) = %d, want %d", tc.jobs, got, tc.want)
		}
	}
}

// TestTables adds bundles, loads the live ones back and forgets ended jobs.
func TestTables(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "mq.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, q := range []string{
		"CREATE TABLE jobs (id INTEGER PRIMARY KEY, state TEXT NOT NULL, bundle INTEGER NOT NULL DEFAULT 0)",
		"INSERT INTO jobs (id, state) VALUES (1, 'Q'), (2, 'Q'), (3, 'D'), (4, 'Q'), (5, 'E'), (6, 'Q')",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	b := New()
	if err := b.Add(ctx, db, 1, 3); err != nil {
		t.Fatal(err)
	}
	if err := b.Add(ctx, db, 4, 2); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(b.Members(1), b.Members(4), b.Len()); got != "[1 2 3] [4 5] 7" {
		t.Errorf("added: %s", got)
	}
	// A restart reads back the live jobs' bundles only (job 3 is Done).
	l := New()
	if err := l.Load(ctx, db); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(l.Members(1), l.Members(4), l.Len()); got != "[1 2] [4 5] 6" {
		t.Errorf("loaded: %s", got)
	}
	if bid, ok := l.Of(6); ok {
		t.Errorf("job 6 is in bundle %d", bid)
	}
	for _, id := range []int64{1, 4, 5, 6, 5} {
		l.Drop(id)
	}
	if bid, ok := l.Of(2); !ok || bid != 1 {
		t.Errorf("job 2's bundle: %d, %v", bid, ok)
	}
	if got := fmt.Sprint(l.Members(1), l.Members(4), l.Len()); got != "[2] [] 2" {
		t.Errorf("after ends: %s", got)
	}
}
