package metaqueue

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/schema"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// TestOldBuildsDatabases opens databases that older builds of main left,
// killed (kill -9) while a job ran: testdata/*.dump, each the sqlite3
// .dump of one (text: small, and reviewable), named by its schema version
// and the commit that wrote it. 70c9c5b wrote version 4,
// the last before the numbered migration files; a680e95 wrote 21 for its
// job resources step (now 022; the held state's 021 came after it) and
// 3461734 wrote 27 for its sparse indexes (now 028; the queue output
// cap's 027 came after). The files named -485eff0 are the last two after
// 485eff0, a build without the repair of renumbered steps, failed to
// start on them: it had skipped the step and recorded its last version.
// Every job keeps its state, ended jobs are waited for, the executing one
// is deleted, and the later steps' features work: a job is held (the
// widened state check, which the store's writer here enforces), a queue's
// output cap is set.
//
// To remake a fixture: git worktree add --detach /tmp/old COMMIT; go build
// -o /tmp/old/bin/ ./cmd/... there; MQ_HOME=$(mktemp -d) /tmp/old/bin/cls
// serve --local 1 &; then mqsub ok true; mqsub bad false; mqsub run sleep
// 1000; mqsub q1 sleep 1; mqsub -p run w1 echo hi; and, with 3461734,
// mqsub -H held echo h; mqsub --array 1-5%2 arr sleep 300; mqsub
// --after-any bad aa echo after (with the others: mqsub -q other q2 echo
// x, a680e95 with -e 5); kill -9 the CLS and write sqlite3
// $MQ_HOME/mq.db .dump > testdata/schemaV-COMMIT.dump (for -485eff0,
// first run that build's cls serve on the MQ_HOME once).
func TestOldBuildsDatabases(t *testing.T) {
	t.Parallel()
	D, F, E, Q, W, H := job.Done, job.Failed, job.Executing, job.Queued, job.Waiting, job.Held
	fixtures := []struct {
		file   string
		states []job.State // of jobs 1, 2, ...
	}{
		{"schema4-70c9c5b.dump", []job.State{D, F, E, Q, W, Q}},
		{"schema21-a680e95.dump", []job.State{D, F, E, Q, W, Q}},
		{"schema21-a680e95-485eff0.dump", []job.State{D, F, E, Q, W, Q}},
		{"schema27-3461734.dump", []job.State{D, F, E, Q, W, H, Q, Q, Q, Q, Q, Q}},
		{"schema27-3461734-485eff0.dump", []job.State{D, F, E, Q, W, H, Q, Q, Q, Q, Q, Q}},
	}
	for _, fx := range fixtures {
		t.Run(fx.file, func(t *testing.T) {
			t.Parallel()
			dump, err := os.ReadFile(filepath.Join("testdata", fx.file))
			if err != nil {
				t.Fatal(err)
			}
			e := &env{t: t, clock: newClock()}
			e.clock.t = time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC)
			e.opt = Options{Path: filepath.Join(t.TempDir(), "mq.db"), Sync: SyncNormal, Lease: testLease, Now: e.clock.Now, CheckConstraints: true}
			db := openRaw(t, e.opt.Path)
			mustExec(t, db, string(dump))
			db.Close()
			e.open()
			t.Cleanup(func() { e.s.Close() })

			for i, want := range fx.states {
				e.mustBe(int64(i+1), want)
			}
			if d := e.job(5); len(d.WaitingOn) != 1 || d.WaitingOn[0].Target != "run" {
				t.Fatalf("job 5 waits on %+v, want target run", d.WaitingOn)
			}
			if id := e.submit1("new", "true"); id != int64(len(fx.states)+1) {
				t.Fatalf("a new job got id %d after %d", id, len(fx.states))
			}
			ctx := context.Background()
			if _, err := e.s.Hold(ctx, protocol.Select{IDs: []int64{4}, Atomic: true}); err != nil {
				t.Fatalf("hold: %v", err)
			}
			e.mustBe(4, H)
			if _, err := e.s.Release(ctx, protocol.Select{IDs: []int64{4}, Atomic: true}); err != nil {
				t.Fatalf("release: %v", err)
			}
			e.mustBe(4, Q)
			// mqwait on jobs that ended under the old build, mqdel on the
			// one it left executing.
			if w, err := e.s.Wait(ctx, []int64{1, 2}, time.Second); err != nil || len(w.Jobs) != 2 || len(w.Pending) != 0 ||
				w.Jobs[0].State != "D" || w.Jobs[1].State != "F" {
				t.Fatalf("wait 1 2: %+v, %v", w, err)
			}
			if _, err := e.s.Delete(ctx, protocol.Select{IDs: []int64{3}, Atomic: true}); err != nil {
				t.Fatalf("delete: %v", err)
			}
			e.mustBe(3, job.Deleted)
			maxOut := int64(1 << 20)
			if q, err := e.s.SetQueue(ctx, protocol.QueueSet{Name: protocol.DefaultQueue, MaxOutput: &maxOut}); err != nil || q.MaxOutput != maxOut {
				t.Fatalf("queue set --max-output: %+v, %v", q, err)
			}
			var v string
			var idx int
			if err := e.s.rdb.QueryRow("SELECT value FROM meta WHERE key = 'schema'").Scan(&v); err != nil || v != strconv.Itoa(schema.Version()) {
				t.Fatalf("schema %q, %v", v, err)
			}
			if err := e.s.rdb.QueryRow("SELECT count(*) FROM sqlite_schema WHERE name IN ('jobs_bundled', 'targets_purged', 'jobs_target', 'job_priority')").Scan(&idx); err != nil || idx != 4 {
				t.Fatalf("%d of the indexes and tables, %v", idx, err)
			}
			e.check()
		})
	}
}
