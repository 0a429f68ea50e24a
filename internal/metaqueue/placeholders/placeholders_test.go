package placeholders

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/batchfail"
	"github.com/mq-hpc/mq/internal/metaqueue/internal/modtest"

	"github.com/mq-hpc/mq/protocol"

	_ "modernc.org/sqlite"
)

// TestImports: the module imports the standard library, the public job
// and protocol packages and internal leaf packages only: never the
// metaqueue core nor another of its modules.
func TestImports(t *testing.T) { modtest.Imports(t) }

// TestQueriesUsed: every query of the module's .sql files is asked for by
// name in the package, and every name asked for is there.
func TestQueriesUsed(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	var src strings.Builder
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			src.Write(b)
		}
	}
	// The core prepares the registration's two statements by name (Query).
	used := map[string]bool{"InsertPlaceholder": true, "TouchPlaceholder": true}
	for _, m := range regexp.MustCompile(`SQL\.Get\("(\w+)"\)`).FindAllStringSubmatch(src.String(), -1) {
		used[m[1]] = true
	}
	var all []string
	for file, q := range Queries() {
		for _, n := range q.Names() {
			all = append(all, n)
			if !used[n] {
				t.Errorf("%s: query %s is never used", file, n)
			}
		}
	}
	for n := range used {
		if !slices.Contains(all, n) {
			t.Errorf("the code asks for %s, in no file", n)
		}
	}
}

// newDB is a database with the tables the module reads and writes, as the
// migrations leave them.
func newDB(t *testing.T) (*sql.DB, Stmts) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "mq.db"))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	for _, ddl := range []string{
		`CREATE TABLE placeholders (id INTEGER PRIMARY KEY, site TEXT NOT NULL, host TEXT NOT NULL,
			pid INTEGER NOT NULL, out_dir TEXT NOT NULL, slots INTEGER NOT NULL, started INTEGER NOT NULL,
			last_seen INTEGER NOT NULL, identity TEXT NOT NULL DEFAULT '')`,
		"CREATE TABLE jobs (id INTEGER PRIMARY KEY, placeholder_id INTEGER)",
		"CREATE TABLE attempts (job_id INTEGER, attempt INTEGER, placeholder_id INTEGER)",
		"CREATE TABLE job_copies (job_id INTEGER, attempt INTEGER, placeholder_id INTEGER NOT NULL)",
		"CREATE TABLE sites (name TEXT PRIMARY KEY, spec TEXT NOT NULL, created INTEGER NOT NULL)",
		"CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
		`CREATE TABLE broken_placeholders (placeholder_id INTEGER PRIMARY KEY, site TEXT NOT NULL, host TEXT NOT NULL,
			why TEXT NOT NULL, at INTEGER NOT NULL)`,
	} {
		if _, err := db.Exec(ddl); err != nil {
			t.Fatal(err)
		}
	}
	var st Stmts
	if st.Insert, err = db.Prepare(Query("InsertPlaceholder")); err != nil {
		t.Fatal(err)
	}
	if st.Touch, err = db.Prepare(Query("TouchPlaceholder")); err != nil {
		t.Fatal(err)
	}
	return db, st
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    protocol.Register
		want string // in the error; "" is none
	}{
		{"ok", protocol.Register{Site: "a", Host: "h", Slots: 1}, ""},
		{"most slots", protocol.Register{Site: "a", Host: "h", Slots: MaxSlots, Walltime: 3600}, ""},
		{"no site", protocol.Register{Host: "h", Slots: 1}, "needs a site and a host"},
		{"no host", protocol.Register{Site: "a", Slots: 1}, "needs a site and a host"},
		{"no slots", protocol.Register{Site: "a", Host: "h"}, "slots must be 1..4096, not 0"},
		{"too many slots", protocol.Register{Site: "a", Host: "h", Slots: MaxSlots + 1}, "not 4097"},
		{"negative walltime", protocol.Register{Site: "a", Host: "h", Slots: 1, Walltime: -1}, "walltime_s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.r)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			var pe *protocol.Error
			if !errors.As(err, &pe) || pe.Code != protocol.CodeBadRequest || !strings.Contains(pe.Msg, tc.want) {
				t.Fatalf("Check = %v, want a bad request saying %q", err, tc.want)
			}
		})
	}
}

// TestRegister: a reconnect reclaims its id only with the same site, host
// and identity; otherwise it is a new placeholder.
func TestRegister(t *testing.T) {
	_, st := newDB(t)
	var g Registry
	now := time.Unix(1000, 0)
	first, err := g.Register(st, protocol.Register{Site: "a", Host: "h", Slots: 2}, "key1", now)
	if err != nil || first == 0 {
		t.Fatalf("Register = %d, %v", first, err)
	}
	for _, tc := range []struct {
		name     string
		r        protocol.Register
		identity string
		same     bool
	}{
		{"same", protocol.Register{ID: first, Site: "a", Host: "h", Slots: 4}, "key1", true},
		{"other identity", protocol.Register{ID: first, Site: "a", Host: "h", Slots: 1}, "key2", false},
		{"other host", protocol.Register{ID: first, Site: "a", Host: "h2", Slots: 1}, "key1", false},
		{"other site", protocol.Register{ID: first, Site: "b", Host: "h", Slots: 1}, "key1", false},
		{"unknown id", protocol.Register{ID: 999, Site: "a", Host: "h", Slots: 1}, "key1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := g.Register(st, tc.r, tc.identity, now)
			if err != nil {
				t.Fatal(err)
			}
			if (id == first) != tc.same {
				t.Errorf("id %d, first %d: same = %v, want %v", id, first, id == first, tc.same)
			}
			if !g.Known(id) {
				t.Errorf("%d not known after registering", id)
			}
		})
	}
	g.Forget(first)
	if g.Known(first) {
		t.Errorf("%d known after Forget", first)
	}
	g.Reset()
	g.Know(7)
	if !g.Known(7) || g.Known(first) {
		t.Errorf("after Reset and Know(7): Known(7) %v, Known(%d) %v", g.Known(7), first, g.Known(first))
	}
}

// TestGone: a placeholder of this run that never worked is gone for good
// a lease after its last connection closed, unless parked; the look is
// made at most once a lease.
func TestGone(t *testing.T) {
	const lease = 10 * time.Second
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		name   string
		events func(g *Registry, id int64)
		at     time.Duration // after t0
		parked bool
		gone   bool
	}{
		{"connected", func(g *Registry, id int64) {}, 2 * lease, false, false},
		{"left a lease ago", func(g *Registry, id int64) { g.Disconnected(id, t0) }, lease, false, true},
		{"left less than a lease ago", func(g *Registry, id int64) { g.Disconnected(id, t0) }, lease - time.Second, false, false},
		{"left but parked", func(g *Registry, id int64) { g.Disconnected(id, t0) }, 2 * lease, true, false},
		{"worked", func(g *Registry, id int64) { g.Worked(id); g.Disconnected(id, t0) }, 2 * lease, false, false},
		{"on a second connection", func(g *Registry, id int64) {
			g.registered(id, false)
			g.Disconnected(id, t0)
		}, 2 * lease, false, false},
		{"both connections closed", func(g *Registry, id int64) {
			g.registered(id, false)
			g.Disconnected(id, t0)
			g.Disconnected(id, t0)
		}, 2 * lease, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, st := newDB(t)
			var g Registry
			id, err := g.Register(st, protocol.Register{Site: "a", Host: "h", Slots: 1}, "", t0)
			if err != nil {
				t.Fatal(err)
			}
			tc.events(&g, id)
			now := t0.Add(tc.at)
			// One that worked is not looked for at all.
			var gone []int64
			if g.Due(now, lease) {
				if g.Due(now.Add(lease-time.Nanosecond), lease) {
					t.Error("due again within a lease")
				}
				gone = g.Gone(now, lease, map[int64]bool{id: tc.parked})
			}
			if got := slices.Contains(gone, id); got != tc.gone {
				t.Fatalf("gone %v, want %v", gone, tc.gone)
			}
			if err := g.Delete(context.Background(), db, gone); err != nil {
				t.Fatal(err)
			}
			var n int
			if err := db.QueryRow("SELECT count(*) FROM placeholders").Scan(&n); err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 0, false: 1}[tc.gone]; n != want || g.Known(id) != !tc.gone {
				t.Errorf("%d rows, known %v; want %d rows", n, g.Known(id), want)
			}
		})
	}
}

// TestLoadOld: rows of earlier runs that no job, attempt or copy names are
// gone a lease after open unless they register again.
func TestLoadOld(t *testing.T) {
	const lease = 10 * time.Second
	db, st := newDB(t)
	t0 := time.Unix(1000, 0)
	var ids []int64
	var earlier Registry
	for range 5 {
		id, err := earlier.Register(st, protocol.Register{Site: "a", Host: "h", Slots: 1}, "", t0)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for _, q := range []string{
		"INSERT INTO jobs (id, placeholder_id) VALUES (1, ?)",
		"INSERT INTO attempts (job_id, attempt, placeholder_id) VALUES (1, 1, ?)",
		"INSERT INTO job_copies (job_id, attempt, placeholder_id) VALUES (1, 2, ?)",
	} {
		if _, err := db.Exec(q, ids[len(ids)-1]); err != nil {
			t.Fatal(err)
		}
		ids = ids[:len(ids)-1]
	}
	var g Registry
	if err := g.LoadOld(context.Background(), db, t0); err != nil {
		t.Fatal(err)
	}
	back, err := g.Register(st, protocol.Register{ID: ids[0], Site: "a", Host: "h", Slots: 1}, "", t0)
	if err != nil || back != ids[0] {
		t.Fatalf("reconnect = %d, %v; want %d", back, err, ids[0])
	}
	now := t0.Add(lease)
	if !g.Due(now, lease) {
		t.Fatal("not due")
	}
	gone := g.Gone(now, lease, nil)
	slices.Sort(gone)
	if !slices.Equal(gone, ids[1:]) {
		t.Errorf("gone %v, want %v (not the three named, not the one back)", gone, ids[1:])
	}
}

func TestSites(t *testing.T) {
	db, _ := newDB(t)
	ctx := context.Background()
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		name string
		op   func() error
		code string // the refusal's; "" is none
	}{
		{"add b", func() error { return AddSite(ctx, db, protocol.SiteSpec{Name: "b", Price: 2}, now) }, ""},
		{"add a", func() error { return AddSite(ctx, db, protocol.SiteSpec{Name: "a"}, now) }, ""},
		{"add b again", func() error { return AddSite(ctx, db, protocol.SiteSpec{Name: "b"}, now) }, protocol.CodeBadRequest},
		{"update a", func() error { return UpdateSite(ctx, db, protocol.SiteSpec{Name: "a", Price: 3}) }, ""},
		{"update c", func() error { return UpdateSite(ctx, db, protocol.SiteSpec{Name: "c"}) }, protocol.CodeNotFound},
		{"add c", func() error { return AddSite(ctx, db, protocol.SiteSpec{Name: "c"}, now) }, ""},
		{"remove c", func() error { return RemoveSite(ctx, db, "c") }, ""},
		{"remove c again", func() error { return RemoveSite(ctx, db, "c") }, protocol.CodeNotFound},
	} {
		err := tc.op()
		var pe *protocol.Error
		switch {
		case tc.code == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.code != "" && (!errors.As(err, &pe) || pe.Code != tc.code || batchfail.IsStore(err)):
			t.Errorf("%s: %v, want a %s refusal", tc.name, err, tc.code)
		}
	}
	specs, err := Sites(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 2 || specs[0].Name != "a" || specs[0].Price != 3 || specs[1].Name != "b" || specs[1].Price != 2 {
		t.Errorf("Sites = %+v, want a (price 3), b (price 2)", specs)
	}
	// A spec that does not parse: Sites names it, EachSite skips it.
	if _, err := db.Exec("INSERT INTO sites (name, spec, created) VALUES ('bad', '{', 0)"); err != nil {
		t.Fatal(err)
	}
	if _, err := Sites(ctx, db); err == nil || !strings.Contains(err.Error(), "site bad: stored settings unreadable") || batchfail.IsStore(err) {
		t.Errorf("Sites with a bad spec: %v", err)
	}
	var names []string
	if err := EachSite(ctx, db, func(name string, _ protocol.SiteSpec) { names = append(names, name) }); err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"a", "b"}) {
		t.Errorf("EachSite saw %v", names)
	}
	// The database's failure is a batchfail.Store, for the core to roll back.
	db.Close()
	if err := RemoveSite(ctx, db, "a"); !batchfail.IsStore(err) {
		t.Errorf("RemoveSite on a closed database: %v, want a batchfail.Store", err)
	}
}

// TestSweep: the transaction is opened only when a placeholder is gone,
// and the parked ones are asked only when the sweep is due.
func TestSweep(t *testing.T) {
	const lease = 10 * time.Second
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		name     string
		at       time.Duration // after t0
		beginErr error
		gone     bool
		begun    int
		asked    bool
	}{
		{"not due", lease / 2, nil, false, 0, false},
		{"gone", 2 * lease, nil, true, 1, true},
		{"the transaction fails", 2 * lease, errors.New("disk gone"), false, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, st := newDB(t)
			var g Registry
			id, err := g.Register(st, protocol.Register{Site: "a", Host: "h", Slots: 1}, "", t0)
			if err != nil {
				t.Fatal(err)
			}
			g.swept = t0 // looked at when it registered
			g.Disconnected(id, t0)
			begun, asked := 0, false
			gone, err := g.Sweep(context.Background(), db, t0.Add(tc.at), lease,
				func() map[int64]bool { asked = true; return nil },
				func() error { begun++; return tc.beginErr })
			if !errors.Is(err, tc.beginErr) {
				t.Fatalf("Sweep: %v, want %v", err, tc.beginErr)
			}
			if slices.Contains(gone, id) != tc.gone || begun != tc.begun || asked != tc.asked {
				t.Errorf("gone %v, begun %d, parked asked %v; want gone %v, begun %d, asked %v", gone, begun, asked, tc.gone, tc.begun, tc.asked)
			}
			var n int
			if err := db.QueryRow("SELECT count(*) FROM placeholders").Scan(&n); err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 0, false: 1}[tc.gone]; n != want {
				t.Errorf("%d rows, want %d", n, want)
			}
		})
	}
}

// TestStarted: starts said while there is no room are kept, bounded, and
// all go, with the asking placeholder's, on the first call with room.
func TestStarted(t *testing.T) {
	t.Parallel()
	ref := func(id int64) protocol.JobRef { return protocol.JobRef{ID: id, Attempt: 1} }
	var g Registry
	if got := g.Started(1, nil, false); got != nil {
		t.Errorf("no starts with room: %v, want none", got)
	}
	if got := g.Started(1, []protocol.JobRef{ref(10)}, false); len(got) != 1 || !slices.Equal(got[1], []protocol.JobRef{ref(10)}) {
		t.Errorf("a start with room: %v, want it at once", got)
	}
	for _, c := range []struct {
		ph   int64
		refs []protocol.JobRef
	}{{1, []protocol.JobRef{ref(11)}}, {2, []protocol.JobRef{ref(20), ref(21)}}, {1, nil}, {3, make([]protocol.JobRef, MaxKeptStarts)}} {
		if got := g.Started(c.ph, c.refs, true); got != nil {
			t.Errorf("placeholder %d's starts without room: %v, want none now", c.ph, got)
		}
	}
	got := g.Started(2, []protocol.JobRef{ref(22)}, false)
	want := map[int64][]protocol.JobRef{1: {ref(11)}, 2: {ref(20), ref(21), ref(22)}} // 3's were past the bound
	if len(got) != len(want) || !slices.Equal(got[1], want[1]) || !slices.Equal(got[2], want[2]) {
		t.Errorf("the first call with room: %v, want %v", got, want)
	}
	if got := g.Started(1, nil, false); got != nil {
		t.Errorf("after they went: %v, want none kept", got)
	}
}

// TestSweptIDNotGivenAgain: a new placeholder never gets the id of one
// swept in the same run, though SQLite would give the highest row's id
// plus one.
func TestSweptIDNotGivenAgain(t *testing.T) {
	db, st := newDB(t)
	var g Registry
	t0 := time.Unix(1000, 0)
	seen := map[int64]bool{}
	for range 3 {
		id, err := g.Register(st, protocol.Register{Site: "a", Host: "h", Slots: 1}, "", t0)
		if err != nil {
			t.Fatal(err)
		}
		if seen[id] {
			t.Fatalf("id %d given again after its placeholder was swept", id)
		}
		seen[id] = true
		g.Disconnected(id, t0)
		if err := g.Delete(context.Background(), db, []int64{id}); err != nil {
			t.Fatal(err)
		}
	}
}
