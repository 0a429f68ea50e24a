package copies

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/internal/modtest"

	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/protocol"

	_ "modernc.org/sqlite"
)

// TestImports: the module imports the standard library, the public
// job and protocol packages and internal leaf packages only: never the
// metaqueue core nor another of its modules.
func TestImports(t *testing.T) { modtest.Imports(t) }

func TestLimit(t *testing.T) {
	for _, tc := range []struct {
		replicates bool
		maxCopies  int
		on         bool
		most       int
	}{
		{false, 0, false, 0},
		{false, 1, false, 1},
		{false, 2, true, 2},
		{false, 5, true, 5},
		{true, 0, true, 0}, // a policy that replicates copies without bound
		{true, 1, false, 1},
		{true, 3, true, 3},
	} {
		on, most := Limit(tc.replicates, tc.maxCopies)
		if on != tc.on || most != tc.most {
			t.Errorf("Limit(%v, %d) = %v, %d; want %v, %d", tc.replicates, tc.maxCopies, on, most, tc.on, tc.most)
		}
	}
}

func TestReplicator(t *testing.T) {
	if _, ok := Replicator(nil).(policy.WQR); !ok {
		t.Errorf("a queue that copies by max_copies alone gets %T, want WQR", Replicator(nil))
	}
	sa := func() policy.Replicator { return policy.StorageAffinity{MaxReplicas: 2} }
	if r, ok := Replicator(sa).(policy.StorageAffinity); !ok || r.MaxReplicas != 2 {
		t.Errorf("Replicator(its policy's) = %#v", Replicator(sa))
	}
}

// testDB is a metaqueue's tables as far as the module reads them.
func testDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "mq.db"))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	for _, q := range []string{
		"CREATE TABLE jobs (id INTEGER PRIMARY KEY, state TEXT NOT NULL, placeholder_id INTEGER)",
		"CREATE TABLE placeholders (id INTEGER PRIMARY KEY, site TEXT, host TEXT, out_dir TEXT)",
		`CREATE TABLE attempts (job_id INTEGER, attempt INTEGER, placeholder_id INTEGER, started INTEGER, finished INTEGER,
			exit INTEGER, reason TEXT, cpu_user REAL, cpu_sys REAL, max_rss INTEGER, killed_copy INTEGER NOT NULL DEFAULT 0,
			PRIMARY KEY (job_id, attempt))`,
		"CREATE TABLE job_copies (job_id INTEGER, attempt INTEGER, placeholder_id INTEGER, started INTEGER, PRIMARY KEY (job_id, attempt))",
		"CREATE TABLE job_apart (job_id INTEGER PRIMARY KEY, attempt INTEGER)",
		"CREATE TABLE job_no_replicate (job_id INTEGER PRIMARY KEY)",
		"CREATE TABLE transfers (job_id INTEGER, to_site TEXT, bytes INTEGER, error TEXT NOT NULL DEFAULT '')",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

// TestTables runs every query of copies.sql through the module: copies
// started, left and loaded back, apartness set and cleared, opt-outs,
// attempts ended and killed, a late report and the waste.
func TestTables(t *testing.T) {
	ctx := context.Background()
	db := testDB(t)
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatal(err)
		}
	}
	exec("INSERT INTO jobs (id, state, placeholder_id) VALUES (1, 'E', 10), (2, 'E', 10), (3, 'D', 10)")
	exec("INSERT INTO placeholders (id, site, host, out_dir) VALUES (10, 's1', 'h1', ''), (11, 's2', 'h2', '/out')")
	c := New()
	t0 := time.UnixMicro(1_000_000)
	for _, r := range []Run{{1, 2, 11, t0}, {1, 3, 10, t0}, {2, 2, 11, t0}, {3, 2, 11, t0}} {
		if err := c.Started(ctx, db, r, Job{ID: r.Job}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Left(ctx, db, Job{ID: 1}, 3); err != nil {
		t.Fatal(err)
	}
	if err := c.AllLeft(ctx, db, Job{ID: 2}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetApart(ctx, db, Job{ID: 1, Row: 1, Runs: 2}, true); err != nil {
		t.Fatal(err)
	}
	if err := c.SetApart(ctx, db, Job{ID: 2, Row: 1, Runs: 1}, true); err != nil {
		t.Fatal(err)
	}
	if err := c.SetApart(ctx, db, Job{ID: 2, Row: 1, Runs: 1}, false); err != nil {
		t.Fatal(err)
	}
	if err := c.OptOut(ctx, db, 2); err != nil {
		t.Fatal(err)
	}
	cs, err := Running(ctx, db, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Attempt != 2 || cs[0].Site != "s2" || cs[0].OutDir != "/out" || cs[0].Started.Int64 != 1_000_000 {
		t.Fatalf("copies of job 1: %+v", cs)
	}
	if w, err := Waste(ctx, db); err != nil || w != nil {
		t.Fatalf("waste before any kill: %+v, %v", w, err)
	}
	// Attempt 1 of job 1 is killed for copy 2 at s2; bytes went to s2 for it.
	exec("UPDATE jobs SET placeholder_id = 11 WHERE id = 1")
	exec("INSERT INTO transfers (job_id, to_site, bytes) VALUES (1, 's1', 500), (1, 's2', 70)")
	ran := time.UnixMicro(3_000_000)
	started, finished, err := c.End(ctx, db, Run{1, 1, 10, t0}, protocol.Report{Reason: KilledReason(2)}, true, ran)
	if err != nil || !started.Equal(t0) || !finished.Equal(ran) {
		t.Fatalf("End = %v, %v, %v", started, finished, err)
	}
	late := protocol.Report{ID: 1, Attempt: 1}
	late.CPUUser, late.CPUSys, late.MaxRSS = 1.5, 0.5, 1<<20
	if err := c.LateUsage(ctx, db, late); err != nil {
		t.Fatal(err)
	}
	w, err := Waste(ctx, db)
	if err != nil || w == nil || w.Killed != 1 || w.CPUSeconds != 2 || w.WallSeconds != 2 || w.Bytes != 500 {
		t.Fatalf("waste: %+v, %v", w, err)
	}
	// A restart reads back the copies of executing jobs, the apart rows
	// and the opt-outs.
	d := New()
	runs, err := d.Load(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Run{{1, 2, 11, t0}}; !slices.Equal(runs, want) {
		t.Errorf("loaded %+v, want %+v", runs, want)
	}
	if !d.Apart(1, 1) || d.Apart(1, 2) || d.Apart(2, 1) {
		t.Errorf("loaded apart: job 1 attempt 1 %v, attempt 2 %v; job 2 %v", d.Apart(1, 1), d.Apart(1, 2), d.Apart(2, 1))
	}
	if !d.OptedOut(2) || d.OptedOut(1) {
		t.Errorf("loaded opt-outs: job 2 %v, job 1 %v", d.OptedOut(2), d.OptedOut(1))
	}
}

// TestEnd: what an attempt that ended beside others leaves in attempts.
func TestEnd(t *testing.T) {
	ctx := context.Background()
	t0, now := time.UnixMicro(1_000_000), time.UnixMicro(9_000_000)
	for _, tc := range []struct {
		name   string
		r      protocol.Report
		killed bool
		exit   sql.NullInt64
		reason string
		cpu    bool
	}{
		{"failed", protocol.Report{Exit: 3}, false, sql.NullInt64{Int64: 3, Valid: true}, "exit status 3 while another attempt ran on", false},
		{"failed with reason", protocol.Report{Exit: 1, Reason: "could not start"}, false, sql.NullInt64{Int64: 1, Valid: true}, "could not start", false},
		{"killed", protocol.Report{Reason: KilledReason(4)}, true, sql.NullInt64{}, "killed: attempt 4 of the job finished first", false},
		{"lost", protocol.Report{Reason: "lost: no heartbeat"}, false, sql.NullInt64{}, "lost: no heartbeat", false},
		{"interrupted", protocol.Report{Reason: protocol.ReasonInterrupted}, false, sql.NullInt64{}, protocol.ReasonInterrupted, false},
		{"measured", protocol.Report{Exit: 2, Usage: protocol.Usage{CPUUser: 1, CPUSys: 1, MaxRSS: 1}}, false, sql.NullInt64{Int64: 2, Valid: true}, "exit status 2 while another attempt ran on", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := testDB(t)
			c := New()
			if _, _, err := c.End(ctx, db, Run{7, 2, 10, t0}, tc.r, tc.killed, now); err != nil {
				t.Fatal(err)
			}
			var exit sql.NullInt64
			var reason string
			var cpu sql.NullFloat64
			var killed bool
			var started, finished int64
			if err := db.QueryRow("SELECT exit, reason, cpu_user, killed_copy, started, finished FROM attempts WHERE job_id = 7 AND attempt = 2").
				Scan(&exit, &reason, &cpu, &killed, &started, &finished); err != nil {
				t.Fatal(err)
			}
			if exit != tc.exit || reason != tc.reason || cpu.Valid != tc.cpu || killed != tc.killed {
				t.Errorf("exit %v, reason %q, cpu %v, killed %v; want %v, %q, %v, %v", exit, reason, cpu, killed, tc.exit, tc.reason, tc.cpu, tc.killed)
			}
			if started != t0.UnixMicro() || finished != now.UnixMicro() {
				t.Errorf("ran %d..%d, want %d..%d", started, finished, t0.UnixMicro(), now.UnixMicro())
			}
		})
	}
}

func TestKilled(t *testing.T) {
	c := New()
	ref := protocol.JobRef{ID: 1, Attempt: 2}
	if !c.Kill(ref, 10) {
		t.Fatal("first kill not kept")
	}
	if c.TakeKilled(ref, 11) {
		t.Error("another placeholder's report taken for the killed copy")
	}
	if !c.TakeKilled(ref, 10) {
		t.Error("the killed copy's report not taken")
	}
	if c.TakeKilled(ref, 10) {
		t.Error("a second report taken")
	}
	for i := range MaxKilledKept {
		c.Kill(protocol.JobRef{ID: int64(i + 10), Attempt: 1}, 10)
	}
	if c.Kill(protocol.JobRef{ID: 1, Attempt: 3}, 10) {
		t.Error("a kill past the bound kept")
	}
}

// TestApartSync: the index holds a job while its row's attempt runs
// apart, in the bucket of its attempts running; an attempt that stops
// takes its apartness with it.
func TestApartSync(t *testing.T) {
	ctx := context.Background()
	db := testDB(t)
	c := New()
	want := map[int64]Entry{}
	check := func(step string) {
		t.Helper()
		if err := c.Check(want); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	sync := func(id int64, row int, q int32, runs int) {
		c.Sync(Job{ID: id, Row: row, Queue: q, Runs: runs})
	}
	for id := int64(1); id <= 6; id++ {
		if err := c.SetApart(ctx, db, Job{ID: id, Row: 1, Queue: int32(id % 2), Runs: 1}, id <= 5); err != nil {
			t.Fatal(err)
		}
		if id <= 5 {
			want[id] = Entry{Queue: int32(id % 2), Runs: 1}
		}
	}
	check("five apart, one not")
	sync(6, 1, 0, 2) // copies only beside an attempt apart
	check("job 6 not apart")
	sync(2, 1, 0, 3)
	want[2] = Entry{Queue: 0, Runs: 3}
	check("copies of job 2")
	sync(3, 1, 0, 1) // another queue
	want[3] = Entry{Queue: 0, Runs: 1}
	check("job 3 moved queue")
	if err := c.SetApart(ctx, db, Job{ID: 4, Row: 1, Queue: 0, Runs: 1}, false); err != nil {
		t.Fatal(err)
	}
	delete(want, 4)
	check("job 4 won")
	sync(5, 0, 0, 0) // its attempt stopped
	delete(want, 5)
	check("job 5 stopped")
	if c.Apart(5, 1) {
		t.Error("job 5's stopped attempt still apart")
	}
	c.Reverse()
	check("reversed")
	c.Rebuild()
	want = map[int64]Entry{}
	check("rebuilt")
}

// ask is a core as the choice sees it: the jobs it allows, their local
// bytes and estimates, and how often local bytes and inputs were asked.
type ask struct {
	no             map[int64]bool
	away           map[int64]bool // inputs not at the asker's place
	local          map[int64]int64
	ready          map[int32]bool // queues with a ready job
	computed, read int
}

func (a *ask) Inputs(id int64) []string {
	a.read++
	return []string{"/f" + strconv.FormatInt(id, 10)}
}

func (a *ask) Copyable(_ int32, id int64) bool { return !a.no[id] }
func (a *ask) Here(id int64) (bool, error)     { return !a.away[id], nil }
func (a *ask) LocalBytes(id int64) int64 {
	a.computed++
	return a.local[id]
}
func (a *ask) Est(int64) float32  { return 1 }
func (a *ask) Ready(q int32) bool { return a.ready[q] }

// pick is a Replicator that takes the last candidate shown.
type pick struct{}

func (pick) Replicate(_ string, rs []policy.Running) (int64, bool) {
	slices.SortFunc(rs, func(a, b policy.Running) int { return int(a.ID - b.ID) })
	return rs[len(rs)-1].ID, true
}

func TestChoose(t *testing.T) {
	ctx := context.Background()
	db := testDB(t)
	// Jobs 1..6 of queue 7, with runs attempts each; jobs 1-3 read a, 4-6 b.
	runs := map[int64]int{1: 2, 2: 1, 3: 1, 4: 1, 5: 3, 6: 1}
	setup := func() *Copies {
		c := New()
		for id := int64(1); id <= 6; id++ {
			if err := c.SetApart(ctx, db, Job{ID: id, Row: 1, Queue: 7, Runs: runs[id]}, true); err != nil {
				t.Fatal(err)
			}
		}
		return c
	}
	wqr := policy.WQR{}
	sa := policy.StorageAffinity{}
	for _, tc := range []struct {
		name  string
		q     Queue
		no    []int64
		skip  []int64
		local map[int64]int64
		want  int64
	}{
		{"wqr: fewest attempts, lowest id", Queue{ID: 7, Rep: wqr}, nil, nil, nil, 2},
		{"wqr: not copyable", Queue{ID: 7, Rep: wqr}, []int64{2}, nil, nil, 3},
		{"wqr: skipped", Queue{ID: 7, Rep: wqr}, nil, []int64{2, 3}, nil, 4},
		{"wqr: next bucket", Queue{ID: 7, Rep: wqr}, []int64{2, 3, 4, 6}, nil, nil, 1},
		{"wqr: bound", Queue{ID: 7, Rep: wqr, Most: 2}, []int64{2, 3, 4, 6}, nil, nil, 0},
		{"wqr: replicas bound", Queue{ID: 7, Rep: policy.WQR{MaxReplicas: 2}}, []int64{2, 3, 4, 6}, nil, nil, 0},
		{"another queue", Queue{ID: 8, Rep: wqr}, nil, nil, nil, 0},
		{"sa: most local bytes", Queue{ID: 7, Rep: sa, NeedsFiles: true}, nil, nil, map[int64]int64{2: 10, 3: 30, 6: 30}, 3},
		{"sa: none local", Queue{ID: 7, Rep: sa, NeedsFiles: true}, nil, nil, nil, 0},
		{"sa: without files", Queue{ID: 7, Rep: sa}, nil, nil, map[int64]int64{2: 10}, 0},
		{"any: shown every candidate under the bound", Queue{ID: 7, Rep: pick{}, Most: 3}, nil, nil, nil, 6},
		{"any: not copyable", Queue{ID: 7, Rep: pick{}, Most: 3}, []int64{6}, nil, nil, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := setup()
			a := &ask{no: map[int64]bool{}, local: tc.local}
			for _, id := range tc.no {
				a.no[id] = true
			}
			l := c.Look(Where{Site: 1}, "s1", 0)
			for _, id := range tc.skip {
				l.Skip(id)
			}
			if got := c.Choose(&l, tc.q, a); got != tc.want {
				t.Errorf("chose %d, want %d", got, tc.want)
			}
		})
	}
}

// TestLocalCache: local bytes are computed once per candidate and asking
// site, again after a move of a file it reads or an untold change.
func TestLocalCache(t *testing.T) {
	ctx := context.Background()
	db := testDB(t)
	c := New()
	for id := int64(1); id <= 2; id++ {
		if err := c.SetApart(ctx, db, Job{ID: id, Row: 1, Queue: 1, Runs: 1}, true); err != nil {
			t.Fatal(err)
		}
	}
	q := Queue{ID: 1, Rep: policy.StorageAffinity{}, NeedsFiles: true}
	a := &ask{local: map[int64]int64{1: 5, 2: 9}}
	for _, tc := range []struct {
		name     string
		before   func()
		where    Where
		untold   uint64
		computed int
	}{
		{"first look", nil, Where{Site: 1}, 0, 2},
		{"cached", nil, Where{Site: 1}, 0, 0},
		{"another site", nil, Where{Site: 2}, 0, 2},
		{"first site still cached", nil, Where{Site: 1}, 0, 0},
		{"a file read moved", func() { c.Moved("/f2") }, Where{Site: 1}, 0, 1},
		{"a file nobody reads moved", func() { c.Moved("/g") }, Where{Site: 1}, 0, 0},
		{"an untold change", nil, Where{Site: 1}, 1, 2},
	} {
		if tc.before != nil {
			tc.before()
		}
		a.computed = 0
		l := c.Look(tc.where, "s", tc.untold)
		if got := c.Choose(&l, q, a); got != 2 {
			t.Fatalf("%s: chose %d, want 2 (most local bytes)", tc.name, got)
		}
		if a.computed != tc.computed {
			t.Errorf("%s: local bytes computed %d times, want %d", tc.name, a.computed, tc.computed)
		}
	}
	if a.read != 2 {
		t.Errorf("inputs asked %d times for 2 candidates, want once each", a.read)
	}
}

func TestCopyingAndGen(t *testing.T) {
	c := New()
	if c.On() {
		t.Fatal("on with no queue")
	}
	c.SetQueues([]Setting{{ID: 1, MaxCopies: 2}, {ID: 2, MaxCopies: 1}, {ID: 3, MaxCopies: 3}})
	if !c.On() {
		t.Fatal("off with two queues copying")
	}
	g := c.Gen()
	c.Changed()
	if c.Gen() == g {
		t.Fatal("Changed did not move the generation")
	}
	c.Reset()
	if c.On() {
		t.Fatal("on after Reset")
	}
}

// TestRace: what a win, a stop and a promotion leave in the tables and the
// index.
func TestRace(t *testing.T) {
	ctx := context.Background()
	t0, now := time.UnixMicro(1_000_000), time.UnixMicro(5_000_000)
	type counts struct{ copies, apart, killed, ended int }
	for _, tc := range []struct {
		name string
		// the job row's attempt 1 runs apart with copies 2 and 3
		do      func(c *Copies, db *sql.DB) ([]Spent, error)
		ends    int
		want    counts
		indexed bool // job 1 still a candidate
		apart   int  // the attempt apart after, 0 none
	}{
		{"copy 3 wins", func(c *Copies, db *sql.DB) ([]Spent, error) {
			return c.Win(ctx, db, Job{ID: 1, Row: 3, Queue: 1, Runs: 1}, 3, []Run{{1, 1, 10, t0}, {1, 2, 11, t0}}, now)
		}, 2, counts{0, 0, 2, 2}, false, 0},
		{"the row's attempt ends", func(c *Copies, db *sql.DB) ([]Spent, error) {
			return c.Stop(ctx, db, Job{ID: 1, Row: 1, Queue: 1, Runs: 1}, []Run{{1, 2, 11, t0}, {1, 3, 12, t0}}, "stopped", now)
		}, 2, counts{0, 0, 2, 2}, false, 0},
		{"the row's attempt fails, copy 2 goes on as the row", func(c *Copies, db *sql.DB) ([]Spent, error) {
			_, _, err := c.EndAlone(ctx, db, Job{ID: 1, Row: 2, Queue: 1, Runs: 2}, Run{1, 1, 10, t0}, protocol.Report{Exit: 1}, true, true, now)
			return nil, err
		}, 0, counts{1, 1, 0, 1}, true, 2},
		{"copy 3 fails", func(c *Copies, db *sql.DB) ([]Spent, error) {
			_, _, err := c.EndAlone(ctx, db, Job{ID: 1, Row: 1, Queue: 1, Runs: 2}, Run{1, 3, 12, t0}, protocol.Report{Exit: 1}, true, false, now)
			return nil, err
		}, 0, counts{1, 1, 0, 1}, true, 1},
		{"copy 3 handed back unstarted", func(c *Copies, db *sql.DB) ([]Spent, error) {
			_, _, err := c.EndAlone(ctx, db, Job{ID: 1, Row: 1, Queue: 1, Runs: 2}, Run{1, 3, 12, t0}, protocol.Report{Reason: protocol.ReasonReturned}, false, false, now)
			return nil, err
		}, 0, counts{1, 1, 0, 0}, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := testDB(t)
			c := New()
			if err := c.SetApart(ctx, db, Job{ID: 1, Row: 1, Queue: 1, Runs: 1}, true); err != nil {
				t.Fatal(err)
			}
			for i, a := range []int{2, 3} {
				if err := c.Started(ctx, db, Run{1, a, int64(11 + i), t0}, Job{ID: 1, Row: 1, Queue: 1, Runs: 2 + i}); err != nil {
					t.Fatal(err)
				}
			}
			gen := c.Gen()
			ends, err := tc.do(c, db)
			if err != nil {
				t.Fatal(err)
			}
			if len(ends) != tc.ends {
				t.Fatalf("%d ended, want %d", len(ends), tc.ends)
			}
			for _, e := range ends {
				if !e.Kept || !e.Started.Equal(t0) || !e.Finished.Equal(now) {
					t.Errorf("ended %+v", e)
				}
				if !c.TakeKilled(protocol.JobRef{ID: 1, Attempt: e.Run.Attempt}, e.Run.Placeholder) {
					t.Errorf("killed attempt %d not awaited", e.Run.Attempt)
				}
			}
			var got counts
			if err := db.QueryRow(`SELECT (SELECT count(*) FROM job_copies), (SELECT count(*) FROM job_apart),
				(SELECT count(*) FROM attempts WHERE killed_copy = 1), (SELECT count(*) FROM attempts)`).Scan(&got.copies, &got.apart, &got.killed, &got.ended); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("rows %+v, want %+v", got, tc.want)
			}
			want := map[int64]Entry{}
			if tc.indexed {
				want[1] = Entry{Queue: 1, Runs: 2}
			}
			if err := c.Check(want); err != nil {
				t.Error(err)
			}
			for a := 1; a <= 3; a++ {
				if c.Apart(1, a) != (a == tc.apart) {
					t.Errorf("attempt %d apart: %v", a, c.Apart(1, a))
				}
			}
			if c.Gen() == gen {
				t.Error("the generation did not move")
			}
		})
	}
}
