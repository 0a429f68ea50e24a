package metaqueue

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/arrays"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

func (e *env) purge(req protocol.Purge) protocol.PurgeReply {
	e.t.Helper()
	r, err := e.s.Purger().Run(context.Background(), req)
	if err != nil {
		e.t.Fatalf("Purge(%+v): %v", req, err)
	}
	return r
}

// runAll runs every ready job to its end: exit 0 unless fail names it.
func (e *env) runAll(ph int64, fail ...int64) {
	e.t.Helper()
	for {
		as := e.next(ph, 64)
		if len(as) == 0 {
			return
		}
		var rs []protocol.Report
		for _, a := range as {
			if slices.Contains(fail, a.ID) {
				rs = append(rs, exit(a, 1))
			} else {
				rs = append(rs, ok(a))
			}
		}
		e.report(ph, rs...)
	}
}

func (e *env) gone(id int64) {
	e.t.Helper()
	if _, err := e.s.Inspect().Job(context.Background(), id); !protocol.IsCode(err, protocol.CodeNotFound) {
		e.t.Fatalf("job %d after purge: %v, want not found", id, err)
	}
}

func (e *env) rowCount(table string, id int64) int {
	e.t.Helper()
	var n int
	err := e.s.do(context.Background(), func() error {
		return e.s.w.QueryRowContext(context.Background(), "SELECT count(*) FROM "+table+" WHERE job_id = ?", id).Scan(&n)
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// TestPurgeDoneCountsForDependents: a purged Done job's target stays
// complete, in memory and across a reopen, so a dependent submitted later
// runs; its rows and output files go; its id is never given again.
func TestPurgeDoneCountsForDependents(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	e := newEnvWith(t, func(o *Options) { o.OutputDir = out })
	a := e.submit1("a", "a")
	ph := e.register("s")
	e.runAll(ph)
	e.mustBe(a, job.Done)
	stdout, stderr := job.OutputPaths(out, a, 1)
	os.MkdirAll(filepath.Dir(stdout), 0o700)
	os.WriteFile(stdout, []byte("hello\n"), 0o600)
	os.WriteFile(stderr, []byte("e"), 0o600)

	if r := e.purge(protocol.Purge{EndedBefore: 3600, Select: protocol.Select{All: true}}); r.Purged != 0 {
		t.Fatalf("a job ended just now was purged with a cutoff of an hour: %+v", r)
	}
	e.advance(2 * time.Hour)
	dry := e.purge(protocol.Purge{EndedBefore: 3600, DryRun: true, Select: protocol.Select{All: true}})
	if dry.Purged != 1 || dry.Bytes != 7 {
		t.Fatalf("dry run = %+v, want 1 job and 7 bytes", dry)
	}
	e.mustBe(a, job.Done)
	r := e.purge(protocol.Purge{EndedBefore: 3600, Select: protocol.Select{All: true}})
	if r.Purged != 1 || r.Kept != 0 || r.Bytes != 7 || r.Batches != 1 {
		t.Fatalf("purge = %+v, want 1 purged, 7 bytes", r)
	}
	e.gone(a)
	for _, p := range []string{stdout, stderr, filepath.Dir(stdout)} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s after purge: %v", p, err)
		}
	}
	if n := e.rowCount("attempts", a); n != 0 {
		t.Errorf("%d attempts rows left", n)
	}
	e.check()

	for round := range 2 {
		b := e.submit1("b", "b", "a")
		if b <= a {
			t.Fatalf("new job got id %d, not past the purged %d", b, a)
		}
		e.mustBe(b, job.Queued)
		e.runAll(ph)
		e.mustBe(b, job.Done)
		e.advance(2 * time.Hour)
		if r := e.purge(protocol.Purge{EndedBefore: 3600, Select: protocol.Select{Target: "b"}}); r.Purged != 1 {
			t.Fatalf("round %d: purge of b = %+v", round, r)
		}
		e.reopen() // the counts and the next id come back from storage
		e.check()
		ph = e.register("s")
		a = b
	}
}

// TestPurgeKeeps: jobs a live job waits on, and members of arrays and
// bundles with live members, are kept and counted; failed jobs purged
// still count as bad, so a later dependent is blocked, not waiting for
// ever.
func TestPurgeKeeps(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := e.submit1("f", "false")
	ph := e.register("s")
	e.runAll(ph, f)
	e.mustBe(f, job.Failed)
	dep := e.submit1("dep", "x", "f")
	e.mustBe(dep, job.Blocked)
	first := e.submitArray("arr", 4, 0)
	bundle, err := e.s.SubmitRequest(context.Background(), protocol.Submit{Bundle: true, Jobs: []protocol.JobSpec{spec("bun", "1"), spec("bun", "2")}})
	if err != nil {
		t.Fatal(err)
	}
	// One array member and one bundle member end; the others are held back.
	as := e.next(ph, 64)
	var rs []protocol.Report
	for _, a := range as {
		if a.ID == first || a.ID == bundle[0] {
			rs = append(rs, ok(a))
		}
	}
	e.report(ph, rs...)
	e.mustBe(first, job.Done)
	e.mustBe(bundle[0], job.Done)
	e.advance(time.Hour)

	r := e.purge(protocol.Purge{EndedBefore: 60, Select: protocol.Select{All: true}})
	if r.Purged != 0 || r.Kept != 3 {
		t.Fatalf("purge = %+v, want 0 purged and 3 kept (f waited on, an array's and a bundle's member)", r)
	}
	// A held job is not among the graph's waiting jobs, yet it waits.
	e.submit1("d", "d")
	e.runAll(ph)
	held := e.submit1("h", "x", "d")
	if _, err := e.s.Hold(context.Background(), protocol.Select{IDs: []int64{held}}); err != nil {
		t.Fatal(err)
	}
	e.reopen()
	ph = e.register("s")
	e.advance(time.Hour)
	if r := e.purge(protocol.Purge{EndedBefore: 60, Select: protocol.Select{Target: "d"}}); r.Purged != 0 || r.Kept != 1 {
		t.Fatalf("purge of a held job's prerequisite = %+v, want it kept", r)
	}
	e.mustBe(f, job.Failed)
	if _, err := e.s.Delete(context.Background(), protocol.Select{IDs: []int64{dep}}); err != nil {
		t.Fatal(err)
	}
	e.advance(time.Hour)
	r = e.purge(protocol.Purge{EndedBefore: 60, Select: protocol.Select{States: "FX"}})
	if r.Purged != 2 {
		t.Fatalf("purge -s FX = %+v, want f and dep", r)
	}
	e.gone(f)
	e.reopen()
	late := e.submit1("late", "x", "f")
	e.mustBe(late, job.Blocked)
	e.check()
}

// TestPurgeBatches: a purge in batches of 3 commits each batch apart and
// removes an array's row once its members are all gone; named ids that
// cannot go are each named.
func TestPurgeBatches(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.submitArray("arr", 10, 0)
	ph := e.register("s")
	e.runAll(ph)
	live := e.submit1("live", "x", "never")
	e.advance(time.Hour)

	r := e.purge(protocol.Purge{EndedBefore: 60, Batch: 3, Select: protocol.Select{IDs: []int64{first, live, 99999}}})
	if r.Purged != 1 || r.ErrorCount != 2 {
		t.Fatalf("purge of named ids = %+v, want 1 purged and 2 named", r)
	}
	r = e.purge(protocol.Purge{EndedBefore: 60, Batch: 3, Select: protocol.Select{All: true}})
	if r.Purged != 9 || r.Batches != 3 {
		t.Fatalf("purge = %+v, want 9 jobs in 3 batches", r)
	}
	arrays, err := arrays.List(context.Background(), e.s.ReadDB(), e.s, protocol.ArrayQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(arrays) != 0 {
		t.Errorf("arrays after purging every member: %+v", arrays)
	}
	e.mustBe(live, job.Waiting)
	if got := e.summary()["default"]["D"]; got != 0 {
		t.Errorf("summary counts %d done after the purge", got)
	}
	e.check()
}

// TestPurgeBadRequests: each bad request is refused with nothing changed.
func TestPurgeBadRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.submit1("a", "a")
	for _, tc := range []struct {
		name string
		req  protocol.Purge
		code string
	}{
		{"negative age", protocol.Purge{EndedBefore: -5}, protocol.CodeBadRequest},
		{"a live state", protocol.Purge{Select: protocol.Select{States: "Q"}}, protocol.CodeBadRequest},
		{"huge batch", protocol.Purge{Batch: 1e9}, protocol.CodeBadRequest},
		{"unknown target", protocol.Purge{Select: protocol.Select{Target: "zz"}}, protocol.CodeNotFound},
		{"unknown queue", protocol.Purge{Select: protocol.Select{Queue: "zz"}}, protocol.CodeNotFound},
		{"bad range", protocol.Purge{Select: protocol.Select{First: 5, Last: 2}}, protocol.CodeBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.s.Purger().Run(context.Background(), tc.req)
			errCode(t, err, tc.code)
		})
	}
}

// addPurged adds the purged jobs' counts kept on targets to a target's
// stored counts (check).
func (e *env) addPurged(total, done, bad map[int32]int) error {
	rows, err := e.s.w.QueryContext(context.Background(), "SELECT id, purged_done, purged_bad FROM targets")
	if err != nil {
		return err
	}
	for rows.Next() {
		var t int32
		var d, b int
		if err := rows.Scan(&t, &d, &b); err != nil {
			rows.Close()
			return err
		}
		total[t] += d + b
		done[t] += d
		bad[t] += b
	}
	return closeRows(rows)
}

// cancelOnCommit cancels a purge's context at the first fsync'd commit
// after it is armed: the purge stops between batches, as if killed there.
type cancelOnCommit struct {
	mu     sync.Mutex
	cancel context.CancelFunc
}

func (c *cancelOnCommit) Dispatched(latency, wait time.Duration) {}
func (c *cancelOnCommit) Ended(to job.State)                     {}
func (c *cancelOnCommit) Committed(d time.Duration, durable bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if durable && c.cancel != nil {
		c.cancel()
		c.cancel = nil
	}
}

// TestPurgeStoppedBetweenBatches: a purge stopped after its first batch
// leaves that batch whole and the rest untouched, consistent across a
// reopen; purging again finishes it.
func TestPurgeStoppedBetweenBatches(t *testing.T) {
	t.Parallel()
	obs := &cancelOnCommit{}
	e := newEnvWith(t, func(o *Options) { o.Observer = obs; o.Sync = SyncSubmit })
	var all []int64
	for i := range 6 {
		all = append(all, e.submit1(fmt.Sprintf("t%d", i%2), "x"))
	}
	ph := e.register("s")
	e.runAll(ph)
	e.advance(time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	obs.mu.Lock()
	obs.cancel = cancel
	obs.mu.Unlock()
	if _, err := e.s.Purger().Run(ctx, protocol.Purge{EndedBefore: 60, Batch: 2, Select: protocol.Select{All: true}}); err == nil {
		t.Fatal("a purge whose context ended after one batch reported success")
	}
	e.reopen()
	e.check()
	for i, id := range all {
		if i < 2 {
			e.gone(id)
		} else {
			e.mustBe(id, job.Done)
		}
	}
	if got := e.summary()["default"]["D"]; got != 4 {
		t.Errorf("summary counts %d done, want 4", got)
	}
	if r := e.purge(protocol.Purge{EndedBefore: 60, Batch: 2, Select: protocol.Select{All: true}}); r.Purged != 4 || r.Batches != 2 {
		t.Fatalf("second purge = %+v, want 4 in 2 batches", r)
	}
	late := e.submit1("late", "x", "t0", "t1")
	e.mustBe(late, job.Queued)
	e.check()
}

// TestPurgeDryRunCountsStreams: a dry run counts the stream files the
// purge then frees, those only the purged jobs' outputs are in, and
// removes nothing; the purge frees the same bytes.
func TestPurgeDryRunCountsStreams(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	e := newEnvWith(t, func(o *Options) { o.OutputDir = out })
	ph := e.register("s")
	theirs, shared := protocol.StreamFileName(ph, 0), protocol.StreamFileName(ph, 1)
	var ids []int64
	for i, file := range []string{theirs, theirs, shared} {
		id := e.submit1(fmt.Sprint("t", i), "echo hi")
		a := e.next(ph, 1)[0]
		e.report(ph, protocol.Report{ID: id, Attempt: a.Attempt, Streamed: []protocol.Streamed{{Stream: "stdout", File: file, Last: 8, Bytes: 3}}})
		ids = append(ids, id)
	}
	dir := filepath.Join(out, protocol.StreamDir)
	os.MkdirAll(dir, 0o700)
	old := time.Now().Add(-time.Hour) // past purge.StreamGrace
	for _, f := range []string{theirs, shared} {
		p := filepath.Join(dir, f)
		os.WriteFile(p, []byte("MQSTRM01hi\n"), 0o600)
		os.Chtimes(p, old, old)
	}
	e.advance(2 * time.Hour)
	req := protocol.Purge{EndedBefore: 3600, Select: protocol.Select{IDs: ids[:2]}} // shared's job stays
	dry := req
	dry.DryRun = true
	if r := e.purge(dry); r.Purged != 2 || r.Bytes != 11 {
		t.Fatalf("dry run = %+v, want 2 jobs and the 11 bytes of %s", r, theirs)
	}
	if _, err := os.Stat(filepath.Join(dir, theirs)); err != nil {
		t.Fatalf("the dry run removed %s: %v", theirs, err)
	}
	if r := e.purge(req); r.Purged != 2 || r.Bytes != 11 {
		t.Fatalf("purge = %+v, want 2 jobs and 11 bytes, as the dry run said", r)
	}
	if _, err := os.Stat(filepath.Join(dir, theirs)); !os.IsNotExist(err) {
		t.Errorf("%s after the purge: %v", theirs, err)
	}
	if _, err := os.Stat(filepath.Join(dir, shared)); err != nil {
		t.Errorf("%s, which a kept job's output is in: %v", shared, err)
	}
}
