package purge

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/internal/modtest"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"

	_ "modernc.org/sqlite"
)

// TestImports: the module imports the standard library, the public
// job and protocol packages and internal leaf packages only: never the
// metaqueue core nor another of its modules.
func TestImports(t *testing.T) { modtest.Imports(t) }

// TestNewScope: the selection is checked before any name is resolved.
func TestNewScope(t *testing.T) {
	for _, tc := range []struct {
		name   string
		req    protocol.Purge
		states string // want, when no error
		err    string
	}{
		{"all", protocol.Purge{Select: protocol.Select{All: true}}, protocol.PurgeStates, ""},
		{"states", protocol.Purge{Select: protocol.Select{States: "FX"}}, "FX", ""},
		{"live state", protocol.Purge{Select: protocol.Select{States: "DQ"}}, "", "only ended jobs"},
		{"bad state", protocol.Purge{Select: protocol.Select{States: "Z"}}, "", "Z"},
		{"range", protocol.Purge{Select: protocol.Select{First: 3, Last: 9}}, protocol.PurgeStates, ""},
		{"reversed range", protocol.Purge{Select: protocol.Select{First: 9, Last: 3}}, "", "bad id range 9..3"},
		{"negative range", protocol.Purge{Select: protocol.Select{First: -1, Last: 3}}, "", "bad id range"},
		{"ids", protocol.Purge{Select: protocol.Select{IDs: []int64{4}}}, protocol.PurgeStates, ""},
		{"ids and target", protocol.Purge{Select: protocol.Select{IDs: []int64{4}, Target: "a"}}, "", "not both"},
		{"ids and all", protocol.Purge{Select: protocol.Select{IDs: []int64{4}, All: true}}, "", "not both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := NewScope(tc.req)
			switch {
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one saying %q", err, tc.err)
				}
				if e, ok := err.(*protocol.Error); !ok || e.Code != protocol.CodeBadRequest {
					t.Errorf("err = %#v, want a bad request", err)
				}
			case err != nil:
				t.Fatal(err)
			case sc.States != tc.states:
				t.Errorf("states %q, want %q", sc.States, tc.states)
			}
		})
	}
}

// TestCandidatesQuery: each selector adds its condition and arguments,
// in order, before the ORDER BY and LIMIT, and the query prepares.
func TestCandidatesQuery(t *testing.T) {
	w := modtest.NewDB(t)
	base := []any{"DFX", int64(7), int64(100)}
	for _, tc := range []struct {
		name  string
		sc    Scope
		ids   []int64
		conds []string
		args  []any
	}{
		{"none", Scope{}, nil, nil, nil},
		{"target", Scope{Target: 2}, nil, []string{"target_id = ?"}, []any{int64(2)}},
		{"queue", Scope{Queue: 3}, nil, []string{"queue_id = ?"}, []any{int64(3)}},
		{"range", Scope{First: 4, Last: 5}, nil, []string{"id BETWEEN ? AND ?"}, []any{int64(4), int64(5)}},
		{"ids", Scope{}, []int64{8, 9}, []string{"id IN (?,?)"}, []any{int64(8), int64(9)}},
		{"all", Scope{Target: 2, Queue: 3, First: 4, Last: 5}, []int64{8},
			[]string{"target_id = ?", "queue_id = ?", "id BETWEEN ? AND ?", "id IN (?)"},
			[]any{int64(2), int64(3), int64(4), int64(5), int64(8)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.sc.States, tc.sc.Cutoff = "DFX", 100
			q, args := candidatesQuery(tc.sc, 7, tc.ids, 50)
			if !strings.HasSuffix(q, " ORDER BY id LIMIT 50") {
				t.Errorf("query %q: want it to end in ORDER BY id LIMIT 50", q)
			}
			if st, err := w.PrepareContext(context.Background(), q); err != nil {
				t.Errorf("%q: %v", q, err)
			} else {
				st.Close()
			}
			at := 0
			for _, c := range tc.conds {
				i := strings.Index(q[at:], " AND "+c)
				if i < 0 {
					t.Errorf("query %q lacks %q after offset %d", q, c, at)
					continue
				}
				at += i + 1
			}
			if want := append(slices.Clone(base), tc.args...); !slices.Equal(args, want) {
				t.Errorf("args %v, want %v", args, want)
			}
		})
	}
}

func TestCutoff(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		ended float64
		want  int64
	}{{0, 1000_000_000}, {1.5, 998_500_000}, {3600, (1000 - 3600) * 1_000_000}} {
		if got := Cutoff(now, tc.ended); got != tc.want {
			t.Errorf("Cutoff(%v) = %d, want %d", tc.ended, got, tc.want)
		}
	}
}

func exec(t *testing.T, w *sql.Conn, q string, args ...any) {
	t.Helper()
	if _, err := w.ExecContext(context.Background(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// fakeState is the core's memory as a plan sees it.
type fakeState struct {
	live    map[int64]bool
	waited  map[dag.TargetID]bool
	bundles map[int64]bool
}

func (f fakeState) Live(id int64) bool         { return f.live[id] }
func (f fakeState) Waited(t dag.TargetID) bool { return f.waited[t] }
func (f fakeState) BundleLive(b int64) bool    { return f.bundles[b] }
func (f fakeState) LiveIn(first, last int64) bool {
	for id := range f.live {
		if id >= first && id <= last {
			return true
		}
	}
	return false
}

// TestPlanBatch: a candidate goes unless rerun since the snapshot, its
// target is waited on or named by a held or executing job, or its array
// or bundle has live members.
func TestPlanBatch(t *testing.T) {
	w := modtest.NewDB(t)
	exec(t, w, "INSERT INTO arrays (id, first_job, last_job) VALUES (1, 10, 12), (2, 20, 22)")
	for _, tc := range []struct {
		name string
		row  Row
		st   fakeState
		sc   Scope
		goes bool
	}{
		{"free", Row{ID: 1, Target: 1}, fakeState{}, Scope{}, true},
		{"rerun", Row{ID: 1, Target: 1}, fakeState{live: map[int64]bool{1: true}}, Scope{}, false},
		{"waited", Row{ID: 1, Target: 1}, fakeState{waited: map[dag.TargetID]bool{1: true}}, Scope{}, false},
		{"named", Row{ID: 1, Target: 1}, fakeState{}, Scope{Named: map[dag.TargetID]bool{1: true}}, false},
		{"live bundle", Row{ID: 1, Target: 1, Bundle: 5}, fakeState{bundles: map[int64]bool{5: true}}, Scope{}, false},
		{"ended bundle", Row{ID: 1, Target: 1, Bundle: 5}, fakeState{}, Scope{}, true},
		{"live array", Row{ID: 11, Target: 1}, fakeState{live: map[int64]bool{12: true}}, Scope{}, false},
		{"ended array", Row{ID: 11, Target: 1}, fakeState{live: map[int64]bool{13: true}}, Scope{}, true},
		{"second array live", Row{ID: 21, Target: 1}, fakeState{live: map[int64]bool{22: true}}, Scope{}, false},
		{"between arrays", Row{ID: 15, Target: 1}, fakeState{live: map[int64]bool{12: true, 20: true}}, Scope{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := PlanBatch(context.Background(), w, tc.st, tc.sc, []Row{tc.row})
			if err != nil {
				t.Fatal(err)
			}
			if goes := len(p.Go) == 1; goes != tc.goes {
				t.Errorf("goes = %v, want %v (plan %+v)", goes, tc.goes, p)
			}
			var wantKept int64 // a rerun job is neither gone nor kept
			if !tc.goes && !tc.st.live[tc.row.ID] {
				wantKept = 1
			}
			if p.Kept != wantKept {
				t.Errorf("kept = %d, want %d", p.Kept, wantKept)
			}
		})
	}
}

// TestDelete: a batch removes its ended jobs and their other rows, counts
// them to their targets, drops an array left empty, keeps a job rerun
// since the plan, and records the next id.
func TestDelete(t *testing.T) {
	ctx := context.Background()
	w := modtest.NewDB(t)
	exec(t, w, "INSERT INTO targets (id, name) VALUES (1, 'a'), (2, 'b')")
	exec(t, w, "INSERT INTO arrays (id, first_job, last_job) VALUES (1, 1, 2)")
	for _, j := range []struct {
		id, target int64
		state      string
		finished   int64
	}{{1, 1, "D", 10}, {2, 1, "F", 10}, {3, 2, "X", 10}, {4, 2, "W", 10}, {5, 2, "D", 500}} {
		exec(t, w, "INSERT INTO jobs (id, queue_id, target_id, state, command, cwd, submitted, finished) VALUES (?, 1, ?, ?, 'true', '/', 1, ?)",
			j.id, j.target, j.state, j.finished)
		exec(t, w, "INSERT INTO job_prereqs (job_id, target_id) VALUES (?, 1)", j.id)
	}
	sc := Scope{Cutoff: 100}
	// 4 was rerun since the plan, 5 ended after the cutoff: both stay.
	p, err := PlanBatch(ctx, w, fakeState{}, sc, []Row{{ID: 1, Target: 1}, {ID: 2, Target: 1}, {ID: 3, Target: 2}, {ID: 4, Target: 2}, {ID: 5, Target: 2}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := Delete(ctx, w, p, sc, 42)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(d.Gone); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Errorf("gone %v, want [1 2 3]", got)
	}
	want := []Ended{{1, 1, 1, job.Done}, {2, 1, 1, job.Failed}, {3, 1, 2, job.Deleted}}
	if !slices.Equal(d.Ended, want) {
		t.Errorf("ended %v, want %v", d.Ended, want)
	}
	count := func(q string) int {
		var n int
		if err := w.QueryRowContext(ctx, q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count("SELECT count(*) FROM jobs"); n != 2 {
		t.Errorf("%d jobs left, want 2", n)
	}
	if n := count("SELECT count(*) FROM job_prereqs"); n != 2 {
		t.Errorf("%d prereq rows left, want those of the 2 jobs left", n)
	}
	if n := count("SELECT count(*) FROM arrays"); n != 0 {
		t.Errorf("%d arrays left, want the emptied one dropped", n)
	}
	l, err := Load(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	if wantL := []Purged{{1, 1, 1}, {2, 0, 1}}; !slices.Equal(l.Targets, wantL) || l.NextID != 42 {
		t.Errorf("loaded %+v, want targets %v and next id 42", l, wantL)
	}
}

// TestRemoveOutput: every attempt's stdout and stderr go (a dry run only
// measures them); other files and symlinks stay.
func TestRemoveOutput(t *testing.T) {
	for _, dry := range []bool{true, false} {
		t.Run(strconv.FormatBool(dry), func(t *testing.T) {
			dir := t.TempDir()
			var files []string
			for a := 1; a <= 2; a++ {
				out, errPath := job.OutputPaths(dir, 7, a)
				files = append(files, out, errPath)
			}
			for i, f := range files {
				if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(f, make([]byte, i+1), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			other, _ := job.OutputPaths(dir, 8, 1)
			os.MkdirAll(filepath.Dir(other), 0o755)
			if err := os.Symlink(files[0], other); err != nil {
				t.Fatal(err)
			}
			if got := RemoveOutput(dir, []Row{{ID: 7, Attempts: 2}, {ID: 8, Attempts: 1}}, dry); got != 1+2+3+4 {
				t.Errorf("bytes %d, want 10", got)
			}
			for _, f := range files {
				if _, err := os.Stat(f); (err == nil) != dry {
					t.Errorf("%s: stat %v after dry=%v", f, err, dry)
				}
			}
			if _, err := os.Lstat(other); err != nil {
				t.Errorf("symlink %s removed: %v", other, err)
			}
			if RemoveOutput("", []Row{{ID: 7, Attempts: 2}}, dry) != 0 {
				t.Error("no output dir: want 0 bytes")
			}
		})
	}
}

// fakeNames is the core's names and clock as a request sees them.
type fakeNames struct {
	now  time.Time
	jobs []dag.Node
}

func (f fakeNames) Now() time.Time { return f.now }
func (f fakeNames) Each(fn func(int64, dag.Node)) {
	for i, j := range f.jobs {
		fn(int64(i+1), j)
	}
}
func (f fakeNames) Lookup(name string) (dag.TargetID, bool) { return 4, name == "a" }
func (f fakeNames) Queue(name string) (int64, bool)         { return 6, name == "q" }

// TestResolve: the cutoff is the core's now less the age; names resolve
// or fail as not found; held and executing jobs' prerequisites are named,
// a waiting job's are not (the graph's Waited answers for those).
func TestResolve(t *testing.T) {
	now := time.Unix(5000, 0)
	jobs := []dag.Node{
		{State: job.Held, Prereqs: []dag.TargetID{1}},
		{State: job.Executing, Prereqs: []dag.TargetID{2}},
		{State: job.Waiting, Prereqs: []dag.TargetID{3}},
	}
	for _, tc := range []struct {
		name          string
		sel           protocol.Select
		target, queue int64
		err           string
	}{
		{"all", protocol.Select{All: true}, 0, 0, ""},
		{"target", protocol.Select{Target: "a"}, 4, 0, ""},
		{"queue", protocol.Select{Queue: "q"}, 0, 6, ""},
		{"no target", protocol.Select{Target: "b"}, 0, 0, "target b does not exist"},
		{"no queue", protocol.Select{Queue: "r"}, 0, 0, "queue r does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sc Scope
			err := sc.resolve(protocol.Purge{EndedBefore: 60, Select: tc.sel}, fakeNames{now, jobs})
			if tc.err != "" {
				if e, ok := err.(*protocol.Error); !ok || e.Code != protocol.CodeNotFound || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want not found: %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sc.Target != tc.target || sc.Queue != tc.queue {
				t.Errorf("target %d queue %d, want %d %d", sc.Target, sc.Queue, tc.target, tc.queue)
			}
			if want := now.Add(-time.Minute).UnixMicro(); sc.Cutoff != want {
				t.Errorf("cutoff %d, want %d", sc.Cutoff, want)
			}
			if !sc.Named[1] || !sc.Named[2] || sc.Named[3] {
				t.Errorf("named %v, want 1 and 2 only", sc.Named)
			}
		})
	}
}
