package tokens

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/internal/modtest"

	"github.com/mq-hpc/mq/protocol"

	_ "modernc.org/sqlite"
)

// TestImports: the module imports the standard library, the public
// job and protocol packages and internal leaf packages only: never the
// metaqueue core nor another of its modules.
func TestImports(t *testing.T) { modtest.Imports(t) }

// TestQueriesUsed: every query of tokens.sql is asked for by name in the
// package, and every name asked for is there.
func TestQueriesUsed(t *testing.T) {
	modtest.QueriesUsed(t, "tokens.sql", queries.Names(), modtest.Asked)
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		token string
		ok    bool
	}{
		{"", true}, {"drv-1-1", true}, {strings.Repeat("t", MaxLen), true}, {strings.Repeat("t", MaxLen+1), false},
	} {
		err := Check(tc.token)
		if (err == nil) != tc.ok || (err != nil && !protocol.IsCode(err, protocol.CodeBadRequest)) {
			t.Errorf("Check(%d bytes) = %v, want ok %v", len(tc.token), err, tc.ok)
		}
	}
}

func TestPrunerDue(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	var p Pruner
	for i, tc := range []struct {
		at   time.Duration // after t0
		want bool
	}{
		{0, true}, // the first tick prunes
		{time.Minute, false},
		{59 * time.Minute, false},
		{time.Hour, true},
		{time.Hour + time.Second, false},
		{3 * time.Hour, true},
	} {
		if got := p.Due(t0.Add(tc.at)); got != tc.want {
			t.Errorf("tick %d at +%v: Due %v, want %v", i, tc.at, got, tc.want)
		}
	}
}

// TestTables saves tokens, finds them, and prunes the old ones.
func TestTables(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "mq.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE submits (token TEXT PRIMARY KEY, first INTEGER NOT NULL,
		count INTEGER NOT NULL, created INTEGER NOT NULL) WITHOUT ROWID`); err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_000_000, 0)
	for _, s := range []struct {
		token string
		first int64
		n     int
		at    time.Duration
	}{
		{"", 1, 1, 0}, // no token: nothing kept
		{"old", 2, 3, 0},
		{"new", 5, 1, 2 * time.Hour},
	} {
		if err := Save(ctx, db, s.token, s.first, s.n, t0.Add(s.at)); err != nil {
			t.Fatal(err)
		}
	}
	if err := Save(ctx, db, "old", 9, 1, t0); err == nil {
		t.Error("a token saved twice")
	}
	ids := func(token string) []int64 {
		t.Helper()
		ids, err := IDs(ctx, db, token)
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	for _, tc := range []struct {
		token string
		want  []int64
	}{
		{"", nil}, {"old", []int64{2, 3, 4}}, {"new", []int64{5}}, {"none", nil},
	} {
		if got := ids(tc.token); !slices.Equal(got, tc.want) {
			t.Errorf("IDs(%q) = %v, want %v", tc.token, got, tc.want)
		}
	}
	// A day after the first, only the second is kept.
	if err := Prune(ctx, db, t0.Add(TTL+time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := ids("old"); got != nil {
		t.Errorf("a token past its time still maps to %v", got)
	}
	if got := ids("new"); !slices.Equal(got, []int64{5}) {
		t.Errorf("a token within its time maps to %v", got)
	}
}
