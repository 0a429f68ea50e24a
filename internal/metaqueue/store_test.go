package metaqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/internal/runs"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

func TestHappyPath(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.submit(protocol.JobSpec{Target: "t", Command: "echo hi", Cwd: "/work", Est: 5})[0]
	if id != 1 {
		t.Fatalf("first id = %d, want 1", id)
	}
	e.mustBe(id, job.Queued)
	ph := e.register("s1")
	as := e.next(ph, 4)
	if len(as) != 1 {
		t.Fatalf("got %d jobs, want 1", len(as))
	}
	a := as[0]
	want := protocol.Assignment{ID: id, Attempt: 1, Command: "echo hi", Cwd: "/work", Target: "t", Queue: protocol.DefaultQueue}
	if !reflect.DeepEqual(a, want) {
		t.Fatalf("assignment %+v, want %+v", a, want)
	}
	e.mustBe(id, job.Executing)
	d := e.job(id)
	if d.Site != "s1" || d.Host != "h-s1" || d.Placeholder != ph || d.Started == "" || d.Finished != "" {
		t.Fatalf("executing job detail %+v", d)
	}
	if d.Stdout == "" || d.Stderr == "" {
		t.Fatalf("no output paths for an executing job: %+v", d)
	}
	e.check()
	if more := e.next(ph, 4); len(more) != 0 {
		t.Fatalf("second Next handed out %v", ids(more))
	}
	e.clock.Advance(3 * time.Second)
	e.report(ph, ok(a))
	e.mustBe(id, job.Done)
	d = e.job(id)
	if d.Exit == nil || *d.Exit != 0 || d.Finished == "" || d.Attempts != 1 || d.Reason != "" {
		t.Fatalf("done job detail %+v", d)
	}
	if len(d.History) != 0 {
		t.Fatalf("a job done at the first attempt has history %+v", d.History)
	}
	e.check()
	if c := e.summary()[protocol.DefaultQueue]; c["D"] != 1 || c["E"] != 0 || c["Q"] != 0 {
		t.Fatalf("summary %v", c)
	}
}

func TestReportsInNext(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a1, a2 := e.submit1("t", "1"), e.submit1("t", "2")
	ph := e.register("s")
	as := e.next(ph, 1)
	if len(as) != 1 || as[0].ID != a1 {
		t.Fatalf("FCFS: got %v, want [%d]", ids(as), a1)
	}
	as = e.next(ph, 1, exit(as[0], 3))
	if len(as) != 1 || as[0].ID != a2 {
		t.Fatalf("got %v, want [%d]", ids(as), a2)
	}
	e.mustBe(a1, job.Failed)
	if d := e.job(a1); d.Exit == nil || *d.Exit != 3 || d.Reason != "exit status 3" {
		t.Fatalf("failed job: exit %v reason %q", d.Exit, d.Reason)
	}
	// Reports with Free 0 are applied and nothing is handed out.
	if more := e.next(ph, 0, ok(as[0])); len(more) != 0 {
		t.Fatal("Free 0 handed out jobs")
	}
	e.mustBe(a2, job.Done)
	e.check()
}

func TestDependencyOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.submit1("c", "c", "b")
	b1 := e.submit1("b", "b1", "a")
	a := e.submit1("a", "a")
	b2 := e.submit1("b", "b2", "a")
	ph := e.register("s")
	as := e.next(ph, 10)
	if !slices.Equal(ids(as), []int64{a}) {
		t.Fatalf("first round %v, want only %d", ids(as), a)
	}
	e.mustBe(b1, job.Waiting)
	e.mustBe(c, job.Waiting)
	e.check()
	as = e.next(ph, 10, ok(as[0]))
	if got := ids(as); !slices.Equal(got, []int64{b1, b2}) {
		t.Fatalf("second round %v, want [%d %d]", got, b1, b2)
	}
	e.mustBe(c, job.Waiting)
	as = e.next(ph, 10, ok(as[0]))
	if len(as) != 0 {
		t.Fatalf("c ran before all of b was done: %v", ids(as))
	}
	e.mustBe(c, job.Waiting)
	rep := e.job(c)
	if len(rep.WaitingOn) != 1 || rep.WaitingOn[0].Target != "b" || rep.WaitingOn[0].Complete || rep.WaitingOn[0].Counts["D"] != 1 {
		t.Fatalf("waiting_on %+v", rep.WaitingOn)
	}
	bAssign := protocol.Assignment{ID: b2, Attempt: 1}
	as = e.next(ph, 10, ok(bAssign))
	if !slices.Equal(ids(as), []int64{c}) {
		t.Fatalf("third round %v, want [%d]", ids(as), c)
	}
	e.check()
}

func TestFailureBlocksAndRerunUnblocks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.submit1("T1", "false")
	b := e.submit1("T2", "b", "T1")
	c := e.submit1("T3", "c", "T2")
	ph := e.register("s")
	as := e.next(ph, 1)
	e.report(ph, exit(as[0], 1))
	e.mustBe(a, job.Failed)
	e.mustBe(b, job.Blocked)
	e.mustBe(c, job.Blocked)
	e.check()
	r, err := e.s.Rerun(context.Background(), protocol.Select{IDs: []int64{a}})
	if err != nil || !slices.Equal(r.IDs, []int64{a}) || len(r.Errors) != 0 {
		t.Fatalf("Rerun = %+v, %v", r, err)
	}
	e.mustBe(a, job.Queued)
	e.mustBe(b, job.Waiting)
	e.mustBe(c, job.Waiting)
	e.check()
	as = e.next(ph, 1)
	if len(as) != 1 || as[0].ID != a || as[0].Attempt != 2 {
		t.Fatalf("rerun assignment %+v, want job %d attempt 2", as, a)
	}
	e.report(ph, ok(as[0]))
	e.mustBe(b, job.Queued)
	e.check()
}

// TestLeaseExpiry: a job whose placeholder stops heartbeating is requeued
// at each lost lease, the lost attempt kept in its history, until its
// queue's attempts are used up; then it fails, and a late report of the
// last attempt changes nothing.
func TestLeaseExpiry(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		queue       string
		maxAttempts int // 0: the default queue's, 3
		attempts    int
	}{
		{"DefaultMaxAttempts", "", 0, 3},
		{"RespectsMaxAttempts", "once", 1, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			if tc.maxAttempts > 0 {
				e.mustSetQueue(protocol.QueueSet{Name: tc.queue, MaxAttempts: &tc.maxAttempts})
			}
			id := e.submit(protocol.JobSpec{Queue: tc.queue, Target: "t", Command: "sleep 100"})[0]
			ph := e.register("s")
			for attempt := 1; attempt <= tc.attempts; attempt++ {
				as := e.next(ph, 1)
				if len(as) != 1 || as[0].ID != id || as[0].Attempt != attempt {
					t.Fatalf("attempt %d: got %+v", attempt, as)
				}
				e.expireLeases(id)
				d := e.job(id)
				if attempt < tc.attempts {
					if d.State != "Q" {
						t.Fatalf("after lost attempt %d the job is %s, want Q", attempt, d.State)
					}
					if len(d.History) != attempt {
						t.Fatalf("history %+v, want %d entries", d.History, attempt)
					}
					h := d.History[attempt-1]
					if h.Attempt != attempt || !strings.HasPrefix(h.Reason, "lost: no heartbeat from placeholder") ||
						h.Exit != nil || h.Started == "" || h.Finished == "" || h.Site != "s" {
						t.Fatalf("history entry %+v", h)
					}
					if d.Started != "" || d.Exit != nil || d.Reason != "" {
						t.Fatalf("a requeued job keeps its old attempt's facts: %+v", d.JobInfo)
					}
				}
				e.check()
			}
			e.mustBe(id, job.Failed)
			d := e.job(id)
			if d.State != "F" || !strings.HasPrefix(d.Reason, "lost:") || d.Attempts != tc.attempts || d.Exit != nil {
				t.Fatalf("after max attempts: %+v", d.JobInfo)
			}
			if len(d.History) != tc.attempts-1 {
				t.Fatalf("final history %+v, want attempts 1 to %d", d.History, tc.attempts-1)
			}
			// A late report of the last attempt changes nothing.
			e.report(ph, protocol.Report{ID: id, Attempt: tc.attempts, Exit: 0})
			e.mustBe(id, job.Failed)
			e.check()
		})
	}
}

// TestStallRenewsLeases: the clock jumps past every lease while the core
// did not run (the CLS was stopped): the placeholders' silence was the
// CLS's own, so every lease is renewed as after a restart and a job that
// ended meanwhile is reported Done on its first attempt. A placeholder
// that stays silent while the CLS runs still loses its job, one lease
// after the stall.
func TestStallRenewsLeases(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ph, silent := e.register("s"), e.register("o")
	ended, running := e.submit1("t", "ends during the stall"), e.submit1("t", "runs on")
	lost := e.submit1("u", "its placeholder is gone")
	as := e.next(ph, 2)
	if !slices.Equal(ids(as), []int64{ended, running}) {
		t.Fatalf("got %v", ids(as))
	}
	asLost := e.next(silent, 1)
	if !slices.Equal(ids(asLost), []int64{lost}) {
		t.Fatalf("got %v", ids(asLost))
	}
	e.advance(testLease / 2)
	// The stall: three leases pass at once, without a lease check.
	e.clock.Advance(3 * testLease)
	e.tick()
	for _, id := range []int64{ended, running, lost} {
		e.mustBe(id, job.Executing)
	}
	// The CLS runs again: the reports and heartbeats that waited arrive.
	e.report(ph, ok(as[0]))
	e.mustBe(ended, job.Done)
	if d := e.job(ended); d.Attempts != 1 || len(d.History) != 0 {
		t.Fatalf("job that ended during the stall: attempts %d, history %+v; want 1 and none", d.Attempts, d.History)
	}
	e.keepBeating(ph, 3, protocol.JobRef{ID: running, Attempt: 1})
	// A lease and a half of the CLS running: the silent placeholder's
	// renewed lease has run out; the heartbeating one's has not.
	e.mustBe(running, job.Executing)
	e.mustBe(lost, job.Queued)
	if h := e.job(lost).History; len(h) != 1 || !strings.HasPrefix(h[0].Reason, "lost: no heartbeat") {
		t.Fatalf("history of the silent placeholder's job %+v, want attempt 1 lost", h)
	}
	e.check()
}

// TestLeaseExpiresWithoutStall: the CLS runs normally (the core checks
// leases as the clock moves), so a placeholder silent for a lease loses
// its job, and a gap just under the stall threshold is not a stall.
func TestLeaseExpiresWithoutStall(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ph := e.register("s")
	id := e.submit1("t", "x")
	e.next(ph, 1)
	e.advance(testLease / 4)
	e.clock.Advance(testLease / 2) // a slow tick, not a stall
	e.tick()
	e.mustBe(id, job.Executing)
	e.clock.Advance(testLease / 4)
	e.tick()
	e.mustBe(id, job.Queued)
	e.check()
}

func TestLateAndDuplicateReports(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.submit1("t", "x")
	dep := e.submit1("u", "y", "t")
	ph := e.register("s")
	a1 := e.next(ph, 1)[0]
	e.expireLeases(id)
	e.mustBe(id, job.Queued)
	// The lost attempt reports late: ignored.
	e.report(ph, exit(a1, 0))
	e.mustBe(id, job.Queued)
	e.mustBe(dep, job.Waiting)
	a2 := e.next(ph, 1)[0]
	if a2.Attempt != 2 {
		t.Fatalf("second attempt numbered %d", a2.Attempt)
	}
	e.report(ph, exit(a1, 0)) // still late
	e.mustBe(id, job.Executing)
	e.report(ph, exit(a2, 7))
	e.mustBe(id, job.Failed)
	before := e.job(id)
	// Duplicate and contradicting reports after the end change nothing.
	e.report(ph, exit(a2, 0), exit(a2, 7), exit(a1, 0), protocol.Report{ID: 999, Attempt: 1})
	after := e.job(id)
	if after.State != "F" || *after.Exit != 7 || after.Finished != before.Finished || after.Reason != before.Reason {
		t.Fatalf("duplicate report changed the job: %+v -> %+v", before.JobInfo, after.JobInfo)
	}
	e.mustBe(dep, job.Blocked)
	if c := e.summary()[protocol.DefaultQueue]; c["F"] != 1 || c["B"] != 1 {
		t.Fatalf("counts %v", c)
	}
	e.check()
}

func TestReportOutcomes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		retry       bool
		report      func(a protocol.Assignment) protocol.Report
		want        job.State
		reason      string // prefix of the stored reason (final) or history reason (requeued)
		historyExit *int
	}{
		{"exit 0", false, func(a protocol.Assignment) protocol.Report { return ok(a) }, job.Done, "", nil},
		{"exit 1", false, func(a protocol.Assignment) protocol.Report { return exit(a, 1) }, job.Failed, "exit status 1", nil},
		{"exit 1 retried", true, func(a protocol.Assignment) protocol.Report { return exit(a, 1) }, job.Queued, "", intp(1)},
		{"start failure", false, func(a protocol.Assignment) protocol.Report {
			return protocol.Report{ID: a.ID, Attempt: a.Attempt, Exit: -1, Reason: "cannot start: no such file"}
		}, job.Failed, "cannot start", nil},
		{"ceiling", true, func(a protocol.Assignment) protocol.Report {
			return protocol.Report{ID: a.ID, Attempt: a.Attempt, Exit: -1, Reason: protocol.ReasonCeiling}
		}, job.Failed, "killed after running past the queue's ceiling of 60s", nil},
		{"interrupted", false, func(a protocol.Assignment) protocol.Report {
			return protocol.Report{ID: a.ID, Attempt: a.Attempt, Exit: -1, Reason: protocol.ReasonInterrupted}
		}, job.Queued, "interrupted: its placeholder was stopped", nil},
		{"exit 0 with a reason", false, func(a protocol.Assignment) protocol.Report {
			return protocol.Report{ID: a.ID, Attempt: a.Attempt, Exit: 0, Reason: protocol.ReasonKilled}
		}, job.Failed, "killed", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			ceil := 60.0
			e.mustSetQueue(protocol.QueueSet{Name: "q", RetryFailed: &tc.retry, Ceiling: &ceil})
			id := e.submit(protocol.JobSpec{Queue: "q", Target: "t", Command: "x"})[0]
			ph := e.register("s")
			as := e.nextWalltime(ph, 1, 0)
			if len(as) != 1 || as[0].Ceiling != 60 {
				t.Fatalf("assignment %+v: the queue's ceiling must pass through", as)
			}
			e.report(ph, tc.report(as[0]))
			d := e.job(id)
			if d.State != tc.want.String() {
				t.Fatalf("state %s, want %s (%+v)", d.State, tc.want, d.JobInfo)
			}
			if tc.want == job.Queued {
				if len(d.History) != 1 || !strings.HasPrefix(d.History[0].Reason, tc.reason) {
					t.Fatalf("history %+v, want one entry with reason %q", d.History, tc.reason)
				}
				if (d.History[0].Exit == nil) != (tc.historyExit == nil) || (tc.historyExit != nil && *d.History[0].Exit != *tc.historyExit) {
					t.Fatalf("history exit %v, want %v", d.History[0].Exit, tc.historyExit)
				}
			} else if !strings.HasPrefix(d.Reason, tc.reason) || (tc.reason == "" && d.Reason != "") {
				t.Fatalf("reason %q, want %q", d.Reason, tc.reason)
			}
			e.check()
		})
	}
}

func intp(i int) *int { return &i }

func TestRetryFailedUsesUpAttempts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	yes, two := true, 2
	e.mustSetQueue(protocol.QueueSet{Name: "r", RetryFailed: &yes, MaxAttempts: &two})
	id := e.submit(protocol.JobSpec{Queue: "r", Target: "t", Command: "x"})[0]
	ph := e.register("s")
	a := e.next(ph, 1)[0]
	e.report(ph, exit(a, 2))
	e.mustBe(id, job.Queued)
	a = e.next(ph, 1)[0]
	if a.Attempt != 2 {
		t.Fatalf("attempt %d", a.Attempt)
	}
	e.report(ph, exit(a, 2))
	d := e.job(id)
	if d.State != "F" || d.Reason != "exit status 2 (after 2 attempts)" {
		t.Fatalf("after retries: %s %q", d.State, d.Reason)
	}
	// The retried attempt says why it ended (mqstat -j), not "".
	if len(d.History) != 1 || d.History[0].Reason != "exit status 2; retried" {
		t.Fatalf("history after retries: %+v", d.History)
	}
	// A rerun gets a fresh budget.
	if _, err := e.s.Rerun(context.Background(), protocol.Select{IDs: []int64{id}}); err != nil {
		t.Fatal(err)
	}
	a = e.next(ph, 1)[0]
	e.report(ph, exit(a, 2))
	e.mustBe(id, job.Queued)
	e.check()
}

func TestHeartbeat(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	keep, del, lost := e.submit1("t", "keep"), e.submit1("t", "del"), e.submit1("t", "lost")
	ph := e.register("s")
	other := e.register("o")
	as := e.next(ph, 2)
	if !slices.Equal(ids(as), []int64{keep, del}) {
		t.Fatalf("got %v", ids(as))
	}
	asLost := e.next(other, 1)
	ctx := context.Background()
	// Renew every few seconds for three lease lengths: the jobs stay.
	e.keepBeating(ph, 6, protocol.JobRef{ID: keep, Attempt: 1}, protocol.JobRef{ID: del, Attempt: 1})
	e.mustBe(keep, job.Executing)
	e.mustBe(del, job.Executing)
	e.mustBe(lost, job.Queued) // other never heartbeat
	e.mustBe(asLost[0].ID, job.Queued)

	if r, err := e.s.Delete(ctx, protocol.Select{IDs: []int64{del}}); err != nil || !slices.Equal(r.IDs, []int64{del}) {
		t.Fatalf("Delete = %+v, %v", r, err)
	}
	hb, err := e.s.Heartbeat(ctx, protocol.Heartbeat{Placeholder: ph, Running: []protocol.JobRef{{ID: keep, Attempt: 1}, {ID: del, Attempt: 1}}})
	if err != nil || !slices.Equal(hb.Kill, []protocol.JobRef{{ID: del, Attempt: 1}}) {
		t.Fatalf("after delete, Heartbeat = %+v, %v; want kill of %d", hb, err, del)
	}
	// The requeued attempt of lost must be killed too.
	hb, err = e.s.Heartbeat(ctx, protocol.Heartbeat{Placeholder: other, Running: []protocol.JobRef{{ID: lost, Attempt: 1}, {ID: 424242, Attempt: 1}}})
	if err != nil || len(hb.Kill) != 2 {
		t.Fatalf("requeued job: Heartbeat = %+v, %v; want kill of %d and the unknown job", hb, err, lost)
	}
	e.mustBe(lost, job.Queued)
	_, err = e.s.Heartbeat(ctx, protocol.Heartbeat{Placeholder: 9999})
	errCode(t, err, protocol.CodeNotFound)
	e.check()
}

func TestDelete(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	ex := e.submit1("e", "e")
	d := e.submit1("d", "d")
	depOnE := e.submit1("after-e", "x", "e")
	ph := e.register("s")
	if as := e.next(ph, 2); !slices.Equal(ids(as), []int64{ex, d}) {
		t.Fatalf("setup dispatched %v", ids(as))
	}
	e.report(ph, protocol.Report{ID: d, Attempt: 1})
	q2 := e.submit1("q2", "q2")
	w := e.submit1("w", "w", "q2")
	other := e.submit(protocol.JobSpec{Queue: "other", Target: "o", Command: "o"})[0]
	e.mustBe(q2, job.Queued)
	e.mustBe(w, job.Waiting)
	e.mustBe(ex, job.Executing)

	r, err := e.s.Delete(ctx, protocol.Select{IDs: []int64{w, q2, ex, d, 777, other}, Queue: protocol.DefaultQueue})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.IDs, []int64{w, q2, ex}) {
		t.Fatalf("deleted %v, want [%d %d %d]", r.IDs, w, q2, ex)
	}
	wantErrs := []string{
		fmt.Sprintf("job %d has already ended (done)", d),
		"job 777 does not exist",
		fmt.Sprintf("job %d is not in queue default", other),
	}
	if !slices.Equal(r.Errors, wantErrs) {
		t.Fatalf("errors %q, want %q", r.Errors, wantErrs)
	}
	for _, id := range []int64{w, q2, ex} {
		e.mustBe(id, job.Deleted)
		jd := e.job(id)
		if !strings.HasPrefix(jd.Reason, "deleted by user") || jd.Finished == "" {
			t.Fatalf("deleted job %+v", jd.JobInfo)
		}
	}
	if e.job(ex).Reason != "deleted by user while executing" {
		t.Fatalf("reason %q", e.job(ex).Reason)
	}
	e.mustBe(depOnE, job.Blocked)
	e.mustBe(other, job.Queued)
	// Deleting again reports it ended.
	r, err = e.s.Delete(ctx, protocol.Select{IDs: []int64{w}})
	if err != nil || len(r.IDs) != 0 || len(r.Errors) != 1 || !strings.Contains(r.Errors[0], "already ended (deleted)") {
		t.Fatalf("second delete %+v, %v", r, err)
	}
	// The placeholder's report for the deleted executing job is ignored.
	e.report(ph, protocol.Report{ID: ex, Attempt: 1})
	e.mustBe(ex, job.Deleted)
	// The deleted job never runs: Next hands out only other.
	as := e.next(ph, 10)
	if !slices.Equal(ids(as), []int64{other}) {
		t.Fatalf("after delete Next handed out %v, want [%d]", ids(as), other)
	}
	e.check()

	_, err = e.s.Delete(ctx, protocol.Select{})
	errCode(t, err, protocol.CodeBadRequest)
	_, err = e.s.Delete(ctx, protocol.Select{Target: "nope"})
	errCode(t, err, protocol.CodeNotFound)
	_, err = e.s.Delete(ctx, protocol.Select{Target: "o", Queue: "nope"})
	errCode(t, err, protocol.CodeNotFound)
}

func TestDeleteByTarget(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	ids := e.submit(spec("t", "1"), spec("t", "2"), spec("t", "3"), spec("u", "4", "t"))
	ph := e.register("s")
	a := e.next(ph, 1)[0]
	e.report(ph, ok(a)) // ids[0] done
	r, err := e.s.Delete(ctx, protocol.Select{Target: "t"})
	if err != nil || !slices.Equal(r.IDs, ids[1:3]) || len(r.Errors) != 0 {
		t.Fatalf("Delete target = %+v, %v", r, err)
	}
	e.mustBe(ids[0], job.Done)
	e.mustBe(ids[3], job.Blocked)
	// Rerun by target revives the deleted ones (and the done one).
	r, err = e.s.Rerun(ctx, protocol.Select{Target: "t"})
	if err != nil || !slices.Equal(r.IDs, ids[0:3]) {
		t.Fatalf("Rerun target = %+v, %v", r, err)
	}
	e.mustBe(ids[3], job.Waiting)
	e.check()
}

func TestRerun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	f := e.submit1("f", "f")
	x := e.submit1("x", "x")
	d := e.submit1("d", "d")
	live := e.submit1("live", "l")
	blocked := e.submit1("b", "b", "f")
	waiting := e.submit1("w", "w", "nobody")
	ph := e.register("s")
	for _, a := range e.next(ph, 3) {
		switch a.ID {
		case f:
			e.report(ph, exit(a, 1))
		case d:
			e.report(ph, ok(a))
		case x:
			e.mustDelete(x)
		}
	}
	e.mustBe(blocked, job.Blocked)
	executing := e.next(ph, 1)[0].ID
	if executing != live {
		t.Fatalf("expected %d to run, got %d", live, executing)
	}
	// Live jobs first: rerunning f would unblock blocked.
	r, err := e.s.Rerun(ctx, protocol.Select{IDs: []int64{live, blocked, waiting, f, x, d, 555}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.IDs, []int64{f, x, d}) {
		t.Fatalf("rerun %v, want [%d %d %d]", r.IDs, f, x, d)
	}
	if len(r.Errors) != 4 ||
		!strings.Contains(r.Errors[0], "is executing; only ended jobs") ||
		!strings.Contains(r.Errors[1], "is blocked by a failed or deleted prerequisite") ||
		!strings.Contains(r.Errors[2], "is waiting; only ended jobs") ||
		r.Errors[3] != "job 555 does not exist" {
		t.Fatalf("errors %q", r.Errors)
	}
	for _, id := range []int64{f, x, d} {
		e.mustBe(id, job.Queued)
		jd := e.job(id)
		if jd.Exit != nil || jd.Reason != "" || jd.Finished != "" || jd.Started != "" {
			t.Fatalf("rerun job keeps its old end: %+v", jd.JobInfo)
		}
	}
	e.mustBe(blocked, job.Waiting)
	// The replaced attempt of the failed job is kept in its history.
	if h := e.job(f).History; len(h) != 1 || h[0].Attempt != 1 || h[0].Exit == nil || *h[0].Exit != 1 || !strings.HasPrefix(h[0].Reason, "exit status 1") {
		t.Fatalf("history after rerun %+v", h)
	}
	e.check()
	// Attempts keep counting across reruns.
	as := e.next(ph, 3)
	for _, a := range as {
		if a.ID == f && a.Attempt != 2 {
			t.Fatalf("rerun of f is attempt %d, want 2", a.Attempt)
		}
		if a.ID == x && a.Attempt != 2 {
			t.Fatalf("rerun of x is attempt %d, want 2", a.Attempt)
		}
	}
	// Wrong queue.
	r, err = e.s.Rerun(ctx, protocol.Select{IDs: []int64{d}, Queue: "elsewhere"})
	if err != nil || len(r.IDs) != 0 || len(r.Errors) != 1 {
		t.Fatalf("wrong queue: %+v, %v", r, err)
	}
	e.check()
}

func TestWait(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	a := e.submit1("a", "a")
	b := e.submit1("b", "b", "a")
	c := e.submit1("c", "c")
	x := e.submit1("x", "x")
	done := e.goWait(ctx, []int64{a, b, c, x}, 0)
	ph := e.register("s")
	as := e.next(ph, 2)
	if !slices.Equal(ids(as), []int64{a, c}) {
		t.Fatalf("got %v", ids(as))
	}
	e.report(ph, exit(as[0], 4))
	e.report(ph, ok(as[1]))
	noneWithin(t, done, 300*time.Millisecond, "Wait returned while x is queued")
	e.mustDelete(x)
	r := gotWithin(t, done, 10*time.Second, "Wait did not return after every job ended")
	if r.err != nil || len(r.r.Pending) != 0 || len(r.r.Jobs) != 4 {
		t.Fatalf("Wait = %+v, %v", r.r, r.err)
	}
	got := map[int64]protocol.JobEnd{}
	for _, j := range r.r.Jobs {
		got[j.ID] = j
	}
	if got[a].State != "F" || got[a].Exit == nil || *got[a].Exit != 4 || got[a].Reason != "exit status 4" {
		t.Fatalf("a: %+v", got[a])
	}
	if got[b].State != "B" || got[c].State != "D" || *got[c].Exit != 0 || got[x].State != "X" || got[x].Exit != nil {
		t.Fatalf("ends %+v", got)
	}
	// Where and when a job ran comes with its end (the driver asks no
	// more); a job that never ran has none.
	ran := func(je protocol.JobEnd) bool {
		return je.Attempt == 1 && je.Site == "s" && je.Host != "" && je.Started != "" && je.Finished >= je.Started
	}
	if !ran(got[a]) || !ran(got[c]) || got[x].Started != "" || got[x].Attempt != 0 || got[b].Site != "" {
		t.Fatalf("places and times in ends %+v", got)
	}
	// Already ended jobs answer at once.
	r2, err := e.s.Wait(ctx, []int64{c, b}, 0)
	if err != nil || len(r2.Jobs) != 2 || r2.Jobs[0].ID != c || r2.Jobs[1].State != "B" || !ran(r2.Jobs[0]) {
		t.Fatalf("Wait on ended = %+v, %v", r2, err)
	}
	_, err = e.s.Wait(ctx, nil, 0)
	errCode(t, err, protocol.CodeBadRequest)
	_, err = e.s.Wait(ctx, []int64{c, 12345}, 0)
	errCode(t, err, protocol.CodeNotFound)
}

func TestWaitTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	a, b, c := e.submit1("a", "a"), e.submit1("b", "b"), e.submit1("c", "c")
	ph := e.register("s")
	as := e.next(ph, 1)
	e.report(ph, ok(as[0]))
	done := e.goWait(ctx, []int64{a, b, c}, 5*time.Second)
	e.parkedAtLeast(0, 1)
	noneWithin(t, done, 300*time.Millisecond, "returned before its timeout")
	e.clock.Advance(6 * time.Second)
	out := gotWithin(t, done, 10*time.Second, "Wait did not time out")
	if out.err != nil {
		t.Error(out.err)
	}
	r := out.r
	slices.Sort(r.Pending)
	if len(r.Jobs) != 1 || r.Jobs[0].ID != a || !slices.Equal(r.Pending, []int64{b, c}) {
		t.Fatalf("timed-out Wait = %+v, want a ended and [b c] pending", r)
	}
	// The pending list must not grow after the reply was handed over.
	time.Sleep(300 * time.Millisecond)
	if len(r.Pending) != 2 {
		t.Fatalf("pending grew to %v", r.Pending)
	}
}

func TestWaitContextCanceled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.submit1("a", "a")
	ctx, cancel := context.WithCancel(context.Background())
	done := e.goWait(ctx, []int64{id}, 0)
	time.Sleep(100 * time.Millisecond)
	cancel()
	if r := gotWithin(t, done, 10*time.Second, "Wait ignored its context"); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("Wait after cancel: %v", r.err)
	}
	// The store keeps working, and ending the job does not trip on the
	// abandoned waiter.
	ph := e.register("s")
	e.report(ph, ok(e.next(ph, 1)[0]))
	e.mustBe(id, job.Done)
	e.check()
}

func TestSubmitValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	good := spec("t", "echo")
	tests := []struct {
		name   string
		specs  []protocol.JobSpec
		errHas string
	}{
		{"none", nil, "no jobs to submit"},
		{"missing command", []protocol.JobSpec{spec("t", "")}, "missing command"},
		{"command over the limit", []protocol.JobSpec{spec("t", strings.Repeat("x", job.MaxCommandBytes+1))}, fmt.Sprintf("the limit is %d", job.MaxCommandBytes)},
		{"huge command", []protocol.JobSpec{spec("t", strings.Repeat("x", 128<<10+1))}, fmt.Sprintf("the limit is %d", job.MaxCommandBytes)},
		{"bad target", []protocol.JobSpec{spec("a b", "x")}, "target name"},
		{"empty target", []protocol.JobSpec{spec("", "x")}, "empty target name"},
		{"bad queue", []protocol.JobSpec{{Queue: "q,1", Target: "t", Command: "x"}}, "queue name"},
		{"bad prereq", []protocol.JobSpec{spec("t", "x", "p q")}, "prerequisite target name"},
		{"relative cwd", []protocol.JobSpec{{Target: "t", Command: "x", Cwd: "here"}}, "not absolute"},
		{"negative est", []protocol.JobSpec{{Target: "t", Command: "x", Est: -5}}, "estimate"},
		{"second of three bad", []protocol.JobSpec{good, spec("t", ""), good}, "job 2: missing command"},
		{"self prereq", []protocol.JobSpec{spec("t", "x", "t")}, "own prerequisite"},
		{"cycle within", []protocol.JobSpec{spec("a", "x", "b"), spec("b", "x", "a")}, "would form a cycle"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.s.Submit(ctx, tc.specs)
			errCode(t, err, protocol.CodeBadRequest)
			if !strings.Contains(err.Error(), tc.errHas) {
				t.Errorf("%s: error %q does not say %q", tc.name, err, tc.errHas)
			}
		})
	}
	if n := len(e.stat(protocol.Stat{States: "WQEDFBX"})); n != 0 {
		t.Fatalf("rejected submissions added %d jobs", n)
	}
	// The store still works, and ids start at 1.
	if id := e.submit1("t", "x"); id != 1 {
		t.Fatalf("first good id %d", id)
	}
	// A cycle through existing edges is refused too.
	e.submit1("b", "x", "a")
	_, err := e.s.Submit(ctx, []protocol.JobSpec{spec("c", "x", "b"), spec("a", "x", "c")})
	errCode(t, err, protocol.CodeBadRequest)
	if !strings.Contains(err.Error(), "cycle") {
		t.Fatalf("err %v", err)
	}
	if n := len(e.stat(protocol.Stat{})); n != 2 {
		t.Fatalf("%d jobs after a refused cycle, want 2", n)
	}
	e.check()
}

// TestSubmitManyStored: a submission of more jobs than one insert batch
// holds gets ids contiguous from 1 and reads back as submitted. New
// targets go to the database in batches too, their names as JSON: names
// with quotes, backslashes and non-ASCII letters, in more than one full
// batch and a partial one, read back the same from the database (listing,
// and a reopened store resolving prerequisites).
func TestSubmitManyStored(t *testing.T) {
	t.Parallel()
	odd := []string{`q"uote`, `back\slash`, `\"`, "naïve-√", `{"json":1}`, `[x]`}
	tests := []struct {
		name    string
		n       int
		target  func(i int) string
		command func(i int) string
		prereq  func(i int) bool // job i needs job i-1's target
		reopen  bool
	}{
		{
			name: "TargetNamesStored",
			n:    targetRows + 300,
			target: func(i int) string {
				if i%1000 < len(odd) {
					return fmt.Sprintf("%s%d", odd[i%1000], i)
				}
				return fmt.Sprintf("t%d", i)
			},
			command: func(int) string { return "true" },
			prereq:  func(i int) bool { return i%2 == 1 },
			reopen:  true,
		},
		{
			name:    "IDsContiguous",
			n:       3*bulkRows + 5,
			target:  func(i int) string { return fmt.Sprintf("t%d", i) },
			command: func(i int) string { return fmt.Sprintf("cmd %d", i) },
			prereq:  func(i int) bool { return i > 0 && i%7 == 0 },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			var specs []protocol.JobSpec
			for i := 0; i < tc.n; i++ {
				var pre []string
				if tc.prereq(i) {
					pre = []string{specs[i-1].Target}
				}
				specs = append(specs, spec(tc.target(i), tc.command(i), pre...))
			}
			got := e.submit(specs...)
			for i, id := range got {
				if id != int64(i+1) {
					t.Fatalf("ids %v not contiguous from 1", got)
				}
			}
			if tc.reopen {
				e.reopen()
			}
			list := e.stat(protocol.Stat{})
			if len(list) != len(specs) {
				t.Fatalf("stat lists %d jobs, want %d", len(list), len(specs))
			}
			for i, j := range list {
				want, wantPre := "Q", []string{}
				if tc.prereq(i) {
					want, wantPre = "W", []string{specs[i-1].Target}
				}
				if j.Target != specs[i].Target || j.Command != specs[i].Command || !slices.Equal(j.Prereqs, wantPre) {
					t.Fatalf("job %d stored as %+v; want target %q, command %q, prereqs %q", j.ID, j, specs[i].Target, specs[i].Command, wantPre)
				}
				if j.State != want {
					t.Fatalf("job %d is %s, want %s", j.ID, j.State, want)
				}
			}
			e.check()
		})
	}
}

func TestBulk(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.submit1("existing", "x", "base")

	b := e.mustNewBulk()
	var chunk []protocol.JobSpec
	for i := 0; i < 150; i++ {
		chunk = append(chunk, spec("bulk", fmt.Sprintf("job %d", i), "existing"))
	}
	if err := b.Add(1, chunk[:100]); err != nil {
		t.Fatal(err)
	}
	if err := b.Add(101, chunk[100:]); err != nil {
		t.Fatal(err)
	}
	if b.Len() != 150 {
		t.Fatalf("Len = %d", b.Len())
	}
	first, err := b.Commit(ctx)
	if err != nil || first != 2 {
		t.Fatalf("Commit = %d, %v", first, err)
	}
	list := e.stat(protocol.Stat{Target: "bulk"})
	if len(list) != 150 || list[0].ID != 2 || list[149].ID != 151 || list[37].Command != "job 37" || list[0].Prereqs[0] != "existing" {
		t.Fatalf("bulk jobs wrong: %d listed", len(list))
	}
	for _, j := range list {
		if j.State != "W" {
			t.Fatalf("bulk job %d is %s, want W", j.ID, j.State)
		}
	}
	e.check()
}

// TestBulkCycleDeepInMillion: 500,000 two-stage pipelines (1,000,000 jobs,
// a{i} then b{i}) with one cycle hidden deep among them: a chain of 10,000
// targets whose first names the last. The whole submission is refused, the
// cycle named in one readable line, and nothing is added.
func TestBulkCycleDeepInMillion(t *testing.T) {
	t.Parallel()
	pipes := 500000
	if testing.Short() {
		pipes = 50000
	}
	e := newEnv(t)
	b := e.mustNewBulk()
	const chain = 10000
	specs := make([]protocol.JobSpec, 0, 4000)
	flush := func(force bool) {
		if len(specs) >= 4000 || force && len(specs) > 0 {
			if err := b.Add(b.Len()+1, specs); err != nil {
				t.Fatal(err)
			}
			specs = specs[:0]
		}
	}
	for i := 0; i < pipes; i++ {
		a, bb := "a"+strconv.Itoa(i), "b"+strconv.Itoa(i)
		pre := []string(nil)
		if k := i - pipes/2; k > 0 && k < chain { // c1 -> c0, c2 -> c1, ...
			pre = []string{"c" + strconv.Itoa(k-1)}
			a = "c" + strconv.Itoa(k)
		} else if k == 0 { // c0 -> c(chain-1): the cycle
			pre = []string{"c" + strconv.Itoa(chain-1)}
			a = "c0"
		}
		specs = append(specs, spec(a, "true", pre...), spec(bb, "true", a))
		flush(false)
	}
	flush(true)
	_, err := b.Commit(context.Background())
	errCode(t, err, protocol.CodeBadRequest)
	msg := err.Error()
	if !strings.Contains(msg, "would form a cycle: c") || !strings.Contains(msg, "(9981 more)") || len(msg) > 500 {
		t.Fatalf("error %d bytes: %.500q", len(msg), msg)
	}
	if n := len(e.stat(protocol.Stat{States: "WQEDFBX"})); n != 0 {
		t.Fatalf("a refused bulk left %d jobs", n)
	}
	e.check()
}

func TestBulkAllOrNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.submit1("b", "x", "a") // existing edge b -> a

	// A cycle closed through the existing edge rejects the whole bulk.
	b := e.mustNewBulk()
	var specs []protocol.JobSpec
	for i := 0; i < 200; i++ {
		specs = append(specs, spec(fmt.Sprintf("ok%d", i), "x"))
	}
	specs = append(specs, spec("a", "x", "c"), spec("c", "x", "b"))
	if err := b.Add(1, specs); err != nil {
		t.Fatal(err)
	}
	_, err := b.Commit(ctx)
	errCode(t, err, protocol.CodeBadRequest)
	if !strings.Contains(err.Error(), "cycle") {
		t.Fatalf("err %v", err)
	}
	if n := len(e.stat(protocol.Stat{States: "WQEDFBX"})); n != 1 {
		t.Fatalf("a rejected bulk left %d jobs, want 1", n)
	}
	if c := e.summary()[protocol.DefaultQueue]; c["Q"]+c["W"] != 1 {
		t.Fatalf("summary after rejected bulk %v", c)
	}
	e.check()

	// An invalid line is refused at Add, naming its line.
	b = e.mustNewBulk()
	err = b.Add(10, []protocol.JobSpec{spec("t", "x"), spec("t", "x"), {Target: "t", Command: "x", Cwd: "rel"}})
	errCode(t, err, protocol.CodeBadRequest)
	if !strings.HasPrefix(err.Error(), "line 12: ") {
		t.Fatalf("error %q does not name line 12", err)
	}
	b.Abort()

	// Empty commit.
	b = e.mustNewBulk()
	_, err = b.Commit(ctx)
	errCode(t, err, protocol.CodeBadRequest)

	// The store keeps working: a good bulk and a submit go through.
	b = e.mustNewBulk()
	if err := b.Add(1, []protocol.JobSpec{spec("a", "x"), spec("c", "x", "b")}); err != nil {
		t.Fatal(err)
	}
	first, err := b.Commit(ctx)
	if err != nil || first != 2 {
		t.Fatalf("good bulk after a rejected one: %d, %v", first, err)
	}
	e.submit1("d", "x", "c")
	ph := e.register("s")
	as := e.next(ph, 10)
	if !slices.Equal(ids(as), []int64{2}) {
		t.Fatalf("dispatched %v, want only a (job 2)", ids(as))
	}
	e.check()
}

func TestWalltimeFilter(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	long := e.submit(protocol.JobSpec{Target: "t", Command: "long", Est: 100})[0]
	short := e.submit(protocol.JobSpec{Target: "t", Command: "short", Est: 10})[0]
	unknown := e.submit(protocol.JobSpec{Target: "t", Command: "unknown"})[0]
	ph := e.register("s")
	as := e.nextWalltime(ph, 5, 50)
	if !slices.Equal(ids(as), []int64{short, unknown}) {
		t.Fatalf("walltime 50 got %v, want [%d %d] (no ceiling: unknown fits)", ids(as), short, unknown)
	}
	e.mustBe(long, job.Queued)
	if as := e.nextWalltime(ph, 5, 99.9); len(as) != 0 {
		t.Fatalf("walltime 99.9 got %v", ids(as))
	}
	as = e.nextWalltime(ph, 5, 0) // unlimited
	if !slices.Equal(ids(as), []int64{long}) {
		t.Fatalf("unlimited walltime got %v", ids(as))
	}
	// With a ceiling, a job with no estimate needs the whole ceiling.
	ceil := 3600.0
	e.mustSetQueue(protocol.QueueSet{Name: "c", Ceiling: &ceil})
	noEst := e.submit(protocol.JobSpec{Queue: "c", Target: "u", Command: "x"})[0]
	withEst := e.submit(protocol.JobSpec{Queue: "c", Target: "u", Command: "x", Est: 60})[0]
	as = e.nextWalltime(ph, 5, 100)
	if !slices.Equal(ids(as), []int64{withEst}) || as[0].Ceiling != 3600 {
		t.Fatalf("ceiling queue, walltime 100: %+v", as)
	}
	as = e.nextWalltime(ph, 5, 3600)
	if !slices.Equal(ids(as), []int64{noEst}) {
		t.Fatalf("walltime 3600: %v", ids(as))
	}
	e.check()
}

func TestWalltimeSkipsMoreThanAWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var specs []protocol.JobSpec
	for i := 0; i < policy.Window+10; i++ {
		specs = append(specs, protocol.JobSpec{Target: "t", Command: "big", Est: 1000})
	}
	specs = append(specs, protocol.JobSpec{Target: "t", Command: "small", Est: 1})
	got := e.submit(specs...)
	ph := e.register("s")
	// The small job lies beyond the policy.Window: it need not be found, but no
	// big job may be handed out and none may be lost.
	for _, a := range e.nextWalltime(ph, 5, 10) {
		if a.Command != "small" {
			t.Fatalf("handed out %+v past the walltime", a)
		}
	}
	as := e.nextWalltime(ph, 1000, 0)
	if len(as)+len(e.stat(protocol.Stat{States: "E"})) == 0 || len(e.stat(protocol.Stat{States: "Q"})) != 0 {
		t.Fatalf("jobs lost from the ready heap: handed %d of %d", len(as), len(got))
	}
	e.check()
}

func TestSetQueueAndPolicy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	ests := []float64{30, 10, 0, 20, 10}
	var specs []protocol.JobSpec
	for _, est := range ests {
		specs = append(specs, protocol.JobSpec{Queue: "q", Target: "t", Command: fmt.Sprint(est), Est: est})
	}
	got := e.submit(specs...)
	sjf := "sjf"
	info, err := e.s.SetQueue(ctx, protocol.QueueSet{Name: "q", Policy: &sjf})
	if err != nil || info.Policy != "sjf" || info.MaxAttempts != 3 || info.Ceiling != 0 {
		t.Fatalf("SetQueue = %+v, %v", info, err)
	}
	ph := e.register("s")
	var order []int64
	for range ests {
		as := e.next(ph, 1)
		if len(as) != 1 {
			t.Fatal("ran dry")
		}
		order = append(order, as[0].ID)
	}
	want := []int64{got[1], got[4], got[3], got[0], got[2]}
	if !slices.Equal(order, want) {
		t.Fatalf("sjf order %v, want %v", order, want)
	}
	// Jobs queued after the switch are ordered too, and back to fcfs works.
	more := e.submit(protocol.JobSpec{Queue: "q", Target: "t", Command: "a", Est: 50}, protocol.JobSpec{Queue: "q", Target: "t", Command: "b", Est: 5})
	if as := e.next(ph, 1); as[0].ID != more[1] {
		t.Fatalf("sjf after switch picked %d", as[0].ID)
	}
	fcfs := "fcfs"
	e.mustSetQueue(protocol.QueueSet{Name: "q", Policy: &fcfs})
	// The policy survives a restart.
	e.mustSetQueue(protocol.QueueSet{Name: "q", Policy: &sjf})
	e.reopen()
	qs, err := e.s.Queues(ctx)
	if err != nil || len(qs) != 1 || qs[0].Policy != "sjf" {
		t.Fatalf("Queues after reopen = %+v, %v", qs, err)
	}
	e.check()

	neg, nan, zero, big := -1.0, 0.0, 0, 1001
	nan = nan / nan
	bad := "lifo"
	refused := []struct {
		name string
		qs   protocol.QueueSet
	}{
		{"no name", protocol.QueueSet{Name: ""}},
		{"bad name", protocol.QueueSet{Name: "a b"}},
		{"unknown policy", protocol.QueueSet{Name: "q", Policy: &bad}},
		{"negative ceiling", protocol.QueueSet{Name: "q", Ceiling: &neg}},
		{"NaN ceiling", protocol.QueueSet{Name: "q", Ceiling: &nan}},
		{"zero attempts", protocol.QueueSet{Name: "q", MaxAttempts: &zero}},
		{"too many attempts", protocol.QueueSet{Name: "q", MaxAttempts: &big}},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.s.SetQueue(ctx, tc.qs)
			errCode(t, err, protocol.CodeBadRequest)
		})
	}
	if qs, _ := e.s.Queues(ctx); len(qs) != 1 {
		t.Fatalf("a refused SetQueue created a queue: %+v", qs)
	}
}

func TestRoundRobinAcrossQueues(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var specs []protocol.JobSpec
	for i := 0; i < 4; i++ {
		specs = append(specs, protocol.JobSpec{Queue: "a", Target: "ta", Command: "a"})
	}
	for i := 0; i < 4; i++ {
		specs = append(specs, protocol.JobSpec{Queue: "b", Target: "tb", Command: "b"})
	}
	e.submit(specs...)
	ph := e.register("s")
	as := e.next(ph, 4)
	na := 0
	for _, a := range as {
		if a.Queue == "a" {
			na++
		}
	}
	if na != 2 {
		t.Fatalf("round robin gave queue a %d of 4", na)
	}
}

func TestSummary(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.submit(spec("a", "1"), spec("a", "2"), spec("b", "3", "a"), spec("w", "4", "zz"))
	e.submit(protocol.JobSpec{Queue: "other", Target: "o", Command: "5"})
	ph := e.register("s")
	as := e.next(ph, 3)
	// Fail one of a: b is blocked.
	for _, a := range as {
		if a.Target == "a" {
			e.report(ph, exit(a, 1))
			break
		}
	}
	e.mustDelete(4)
	got := e.summary()
	want := map[string]map[string]int{
		protocol.DefaultQueue: {"W": 0, "Q": 0, "E": 1, "D": 0, "F": 1, "B": 1, "X": 1},
		"other":               {"W": 0, "Q": 0, "E": 1, "D": 0, "F": 0, "B": 0, "X": 0},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("summary %v, want %v", got, want)
	}
	e.check()
	e.reopen()
	if fmt.Sprint(e.summary()) != fmt.Sprint(want) {
		t.Fatalf("summary after reopen %v, want %v", e.summary(), want)
	}
	e.check()
}

func TestRestartRecovery(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	run1, run2, done, q := e.submit1("r", "1"), e.submit1("r", "2"), e.submit1("d", "3"), e.submit1("q", "4")
	w := e.submit1("w", "5", "r")
	ph := e.register("s")
	var a1, a2 protocol.Assignment
	for _, a := range e.next(ph, 3) {
		switch a.ID {
		case run1:
			a1 = a
		case run2:
			a2 = a
		case done:
			e.report(ph, ok(a))
		}
	}
	if a1.ID == 0 || a2.ID == 0 {
		t.Fatal("setup: r jobs not dispatched")
	}
	e.check()
	e.reopen()
	integrity(t, e.opt.Path)
	e.check()
	for id, want := range map[int64]job.State{run1: job.Executing, run2: job.Executing, done: job.Done, q: job.Queued, w: job.Waiting} {
		e.mustBe(id, want)
	}
	// The placeholder reports one attempt after the restart: accepted.
	e.report(ph, ok(a1))
	e.mustBe(run1, job.Done)
	// Fresh lease: just short of it, still executing.
	e.advance(testLease - time.Second)
	e.mustBe(run2, job.Executing)
	// Heartbeat works for the reloaded placeholder.
	hb, err := e.s.Heartbeat(ctx, protocol.Heartbeat{Placeholder: ph, Running: []protocol.JobRef{{ID: run2, Attempt: a2.Attempt}}})
	if err != nil || len(hb.Kill) != 0 {
		t.Fatalf("Heartbeat after restart = %+v, %v", hb, err)
	}
	e.expireLeases(run2)
	e.mustBe(run2, job.Queued)
	if h := e.job(run2).History; len(h) != 1 || h[0].Attempt != 1 {
		t.Fatalf("history after expiry %+v", h)
	}
	as := e.next(ph, 5)
	for _, a := range as {
		if a.ID == run2 && a.Attempt != 2 {
			t.Fatalf("attempt after restart expiry = %d", a.Attempt)
		}
	}
	e.check()
	// New ids continue after the old ones.
	if id := e.submit1("n", "6"); id != w+1 {
		t.Fatalf("id after restart %d, want %d", id, w+1)
	}
	e.reopen()
	integrity(t, e.opt.Path)
	e.check()
}

func TestRestartFixesInconsistentStates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.submit1("a", "a")
	b := e.submit1("b", "b", "a")
	c := e.submit1("c", "c")
	if err := e.s.Close(); err != nil {
		t.Fatal(err)
	}
	e.s = nil
	// Corrupt the stored pending states behind the store's back.
	db := openRaw(t, e.opt.Path)
	mustExec(t, db, "UPDATE jobs SET state = 'Q' WHERE id = ?", b)
	mustExec(t, db, "UPDATE jobs SET state = 'B' WHERE id = ?", c)
	db.Close()
	e.open()
	e.mustBe(a, job.Queued)
	e.mustBe(b, job.Waiting)
	e.mustBe(c, job.Queued)
	e.check()
	ph := e.register("s")
	if as := e.next(ph, 5); !slices.Equal(ids(as), []int64{a, c}) {
		t.Fatalf("after reconcile dispatched %v", ids(as))
	}
}

func TestStat(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.submit(spec("a", "1"), spec("a", "2"), spec("b", "3", "a", "z"))
	e.submit(protocol.JobSpec{Queue: "gpu", Target: "a", Command: "4", Cwd: "/x", Est: 2.5})
	ph := e.register("s")
	e.clock.Advance(1500 * time.Millisecond)
	a := e.next(ph, 1)[0]
	e.clock.Advance(250 * time.Millisecond)
	e.report(ph, ok(a))
	e.mustDelete(2)
	idsOf := func(js []protocol.JobInfo) []int64 {
		var out []int64
		for _, j := range js {
			out = append(out, j.ID)
		}
		return out
	}
	tests := []struct {
		name string
		st   protocol.Stat
		want []int64
	}{
		{"X hidden by default", protocol.Stat{}, []int64{1, 3, 4}},
		{"all states", protocol.Stat{States: "WQEDFBX"}, []int64{1, 2, 3, 4}},
		{"deleted", protocol.Stat{States: "X"}, []int64{2}},
		{"done or blocked", protocol.Stat{States: "DB"}, []int64{1, 3}},
		{"queue", protocol.Stat{Queue: "gpu"}, []int64{4}},
		{"no such queue", protocol.Stat{Queue: "none"}, nil},
		{"target", protocol.Stat{Target: "a"}, []int64{1, 4}},
		{"target queue states", protocol.Stat{Target: "a", Queue: protocol.DefaultQueue, States: "DX"}, []int64{1, 2}},
		{"target queue state", protocol.Stat{Target: "a", Queue: protocol.DefaultQueue, States: "D"}, []int64{1}},
		{"limit", protocol.Stat{Limit: 2}, []int64{1, 3}},
		{"ids", protocol.Stat{IDs: []int64{4, 2, 1}}, []int64{1, 4}},
		{"ids states limit", protocol.Stat{IDs: []int64{4, 2, 1}, States: "WQEDFBX", Limit: 2}, []int64{1, 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := idsOf(e.stat(tc.st)); !slices.Equal(got, tc.want) {
				t.Errorf("Stat(%+v) = %v, want %v", tc.st, got, tc.want)
			}
		})
	}
	err := e.s.Inspect().Stat(ctx, protocol.Stat{States: "QZ"}, 0, func([]protocol.JobInfo) error { return nil })
	errCode(t, err, protocol.CodeBadRequest)
	err = e.s.Inspect().Stat(ctx, protocol.Stat{IDs: make([]int64, 10001)}, 0, func([]protocol.JobInfo) error { return nil })
	errCode(t, err, protocol.CodeBadRequest)
	stop := errors.New("stop")
	if err := e.s.Inspect().Stat(ctx, protocol.Stat{}, 0, func([]protocol.JobInfo) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("emit error not returned: %v", err)
	}

	all := e.stat(protocol.Stat{States: "WQEDFBX"})
	j1, j3, j4 := all[0], all[2], all[3]
	if j3.State != "B" || !slices.Equal(j3.Prereqs, []string{"a", "z"}) && !slices.Equal(j3.Prereqs, []string{"z", "a"}) {
		t.Fatalf("job 3: %+v", j3)
	}
	if j4.Queue != "gpu" || j4.Cwd != "/x" || j4.Est != 2.5 || j4.Prereqs == nil || len(j4.Prereqs) != 0 {
		t.Fatalf("job 4: %+v", j4)
	}
	// Times: RFC 3339 with sub-second precision, from the store's clock.
	start := newClock().Now()
	for _, tc := range []struct {
		field string
		want  time.Time
	}{
		{j1.Submitted, start},
		{j1.Started, start.Add(1500 * time.Millisecond)},
		{j1.Finished, start.Add(1750 * time.Millisecond)},
	} {
		got, err := time.Parse(time.RFC3339Nano, tc.field)
		if err != nil {
			t.Fatalf("time %q is not RFC 3339: %v", tc.field, err)
		}
		if !got.Equal(tc.want.Truncate(time.Microsecond)) {
			t.Fatalf("time %q, want %v", tc.field, tc.want)
		}
		if !strings.Contains(tc.field, ".") {
			t.Fatalf("time %q has no fraction of a second", tc.field)
		}
	}
	if j4.Started != "" || j4.Finished != "" || j4.Exit != nil {
		t.Fatalf("a queued job has times: %+v", j4)
	}
	// JSON: exit and prereqs always present, times as strings.
	raw, err := json.Marshal(j4)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"exit":null`, `"prereqs":[]`, `"started":""`, `"submitted":"2024-`} {
		if !strings.Contains(string(raw), key) {
			t.Fatalf("JSON %s lacks %s", raw, key)
		}
	}
	raw, _ = json.Marshal(j1)
	var back struct{ Started, Finished string }
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if _, err := time.Parse(time.RFC3339, back.Finished); err != nil {
		t.Fatalf("finished %q: %v", back.Finished, err)
	}
}

// TestStatTargetPrefix: a prefix selects every target starting with it
// (one run of a workflow system), byte for byte, non-ASCII names too.
func TestStatTargetPrefix(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.submit(spec("smk.r1.a.1", "1"), spec("smk.r1.b.2", "2"), spec("smk.r2.a.1", "3"),
		spec("smk.r1", "4"), spec("smk.r", "5"), spec("smk.r1.é", "6"), spec("smk.r1\u00ff", "7"))
	tests := []struct {
		prefix string
		want   []int64
	}{
		{"smk.r1.", []int64{1, 2, 6}},
		{"smk.r1", []int64{1, 2, 4, 6, 7}},
		{"smk.r", []int64{1, 2, 3, 4, 5, 6, 7}},
		{"smk.r2.a.1", []int64{3}},
		{"smk.r3", nil},
		{"smk.r1.\u00e9", []int64{6}},
	}
	for _, tc := range tests {
		t.Run(tc.prefix, func(t *testing.T) {
			var got []int64
			for _, j := range e.stat(protocol.Stat{TargetPrefix: tc.prefix}) {
				got = append(got, j.ID)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Stat(TargetPrefix %q) = %v, want %v", tc.prefix, got, tc.want)
			}
		})
	}
	// With a target too, both must hold.
	if got := e.stat(protocol.Stat{TargetPrefix: "smk.r1.", Target: "smk.r2.a.1"}); len(got) != 0 {
		t.Errorf("prefix smk.r1. and target smk.r2.a.1 = %v, want none", got)
	}
}

func TestStatStreamsBatches(t *testing.T) {
	if testing.Short() {
		t.Skip("submits 2,500 jobs")
	}
	t.Parallel()
	e := newEnv(t)
	var specs []protocol.JobSpec
	for i := 0; i < 2500; i++ {
		specs = append(specs, spec("t", "x"))
	}
	e.submit(specs...)
	var sizes []int
	err := e.s.Inspect().Stat(context.Background(), protocol.Stat{}, 0, func(js []protocol.JobInfo) error {
		sizes = append(sizes, len(js))
		return nil
	})
	if err != nil || !slices.Equal(sizes, []int{1000, 1000, 500}) {
		t.Fatalf("batches %v, %v", sizes, err)
	}
}

func TestJobNotFound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, err := e.s.Inspect().Job(context.Background(), 1)
	errCode(t, err, protocol.CodeNotFound)
}

func TestRegister(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	badRegisters := []struct {
		name string
		r    protocol.Register
	}{
		{"no site", protocol.Register{Host: "h", Slots: 1}},
		{"no host", protocol.Register{Site: "s", Slots: 1}},
		{"no slots", protocol.Register{Site: "s", Host: "h", Slots: 0}},
		{"too many slots", protocol.Register{Site: "s", Host: "h", Slots: 4097}},
	}
	for _, tc := range badRegisters {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.s.Register(ctx, tc.r)
			errCode(t, err, protocol.CodeBadRequest)
		})
	}
	r1, err := e.s.Register(ctx, protocol.Register{Site: "s", Host: "h", Slots: 2})
	if err != nil {
		t.Fatal(err)
	}
	// Reconnecting with the same id, site and host keeps the id.
	r2, err := e.s.Register(ctx, protocol.Register{ID: r1.ID, Site: "s", Host: "h", Slots: 2})
	if err != nil || r2.ID != r1.ID {
		t.Fatalf("reconnect = %+v, %v", r2, err)
	}
	// Claiming another site's id gets a new one.
	r3, err := e.s.Register(ctx, protocol.Register{ID: r1.ID, Site: "other", Host: "h", Slots: 2})
	if err != nil || r3.ID == r1.ID {
		t.Fatalf("stolen id = %+v, %v", r3, err)
	}
	badNexts := []struct {
		name string
		n    protocol.Next
		code string
	}{
		{"Next unknown placeholder", protocol.Next{Placeholder: 999, Free: 1}, protocol.CodeNotFound},
		{"Next negative free", protocol.Next{Placeholder: r1.ID, Free: -1}, protocol.CodeBadRequest},
		{"Next too many free", protocol.Next{Placeholder: r1.ID, Free: 4097}, protocol.CodeBadRequest},
	}
	for _, tc := range badNexts {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.s.Next(ctx, tc.n)
			errCode(t, err, tc.code)
		})
	}
}

func TestNextLongPoll(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ph := e.register("s")
	got := e.goNext(protocol.Next{Placeholder: ph, Free: 2, WaitMS: 60000})
	noneWithin(t, got, 200*time.Millisecond, "Next returned with nothing to do")
	id := e.submit1("t", "x")
	if r := gotWithin(t, got, 10*time.Second, "parked Next not woken by a submit"); r.err != nil || !slices.Equal(ids(r.r.Jobs), []int64{id}) {
		t.Fatalf("long poll = %+v, %v", r.r, r.err)
	}
	// With nothing to do, it returns empty at its deadline.
	got = e.goNext(protocol.Next{Placeholder: ph, Free: 1, WaitMS: 5000})
	e.parkedAtLeast(1, 0)
	e.clock.Advance(6 * time.Second)
	if r := gotWithin(t, got, 10*time.Second, "parked Next not answered at its deadline"); r.err != nil || len(r.r.Jobs) != 0 {
		t.Fatalf("timed-out poll = %+v, %v", r.r, r.err)
	}
	e.check()
}

func TestNextCanceledContext(t *testing.T) {
	t.Parallel()
	// A placeholder whose connection closes while its Next is queued or
	// parked: its context is canceled. The core must answer it once and
	// carry on.
	e := newEnv(t)
	ph := e.register("s")
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			e.s.Next(ctx, protocol.Next{Placeholder: ph, Free: 1, WaitMS: 60000})
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i)*time.Millisecond)
			defer cancel()
			e.s.Next(ctx, protocol.Next{Placeholder: ph, Free: 1, WaitMS: 60000})
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	gotWithin(t, done, 20*time.Second, "canceled Next calls were never answered")
	// Still working.
	id := e.submit1("t", "x")
	if as := e.next(ph, 1); !slices.Equal(ids(as), []int64{id}) {
		t.Fatalf("after canceled polls Next = %v", ids(as))
	}
	e.check()
}

func TestPlaceholderGone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	a, b := e.submit1("t", "a"), e.submit1("t", "b")
	p1, p2 := e.register("one"), e.register("two")
	e.next(p1, 1)
	e.next(p2, 1)
	if err := e.s.PlaceholderGone(ctx, p1); err != nil {
		t.Fatal(err)
	}
	e.mustBe(a, job.Queued)
	e.mustBe(b, job.Executing)
	if h := e.job(a).History; len(h) != 1 || !strings.Contains(h[0].Reason, "ended while running it") {
		t.Fatalf("history %+v", h)
	}
	_, err := e.s.Next(ctx, protocol.Next{Placeholder: p1, Free: 1})
	errCode(t, err, protocol.CodeNotFound)
	e.check()
}

func TestConcurrentClients(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, func(o *Options) { o.Now = nil }) // long polls need real time
	ctx := context.Background()
	const submitters, per = 8, 40
	var wg sync.WaitGroup
	idc := make(chan int64, submitters*per)
	for i := 0; i < submitters; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < per; k++ {
				var pre []string
				if k > 0 {
					pre = []string{fmt.Sprintf("s%d-%d", i, k-1)}
				}
				got, err := e.s.Submit(ctx, []protocol.JobSpec{spec(fmt.Sprintf("s%d-%d", i, k), "x", pre...)})
				if err != nil {
					t.Error(err)
					return
				}
				idc <- got[0]
			}
		}()
	}
	// Placeholders run jobs while submissions arrive.
	var ran sync.Map
	stop := make(chan struct{})
	var pw sync.WaitGroup
	for p := 0; p < 4; p++ {
		ph := e.register(fmt.Sprintf("p%d", p))
		pw.Add(1)
		go func() {
			defer pw.Done()
			var reports []protocol.Report
			for {
				select {
				case <-stop:
					if len(reports) > 0 {
						e.s.Report(ctx, ph, reports)
					}
					return
				default:
				}
				r, err := e.s.Next(ctx, protocol.Next{Placeholder: ph, Free: 3, Reports: reports, WaitMS: 50})
				if err != nil {
					t.Error(err)
					return
				}
				reports = reports[:0]
				for _, a := range r.Jobs {
					if _, dup := ran.LoadOrStore(a.ID, true); dup {
						t.Errorf("job %d handed out twice", a.ID)
					}
					reports = append(reports, ok(a))
				}
			}
		}()
	}
	wg.Wait()
	close(idc)
	seen := map[int64]bool{}
	for id := range idc {
		if seen[id] {
			t.Fatalf("id %d given twice", id)
		}
		seen[id] = true
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		c := e.summary()[protocol.DefaultQueue]
		if c["D"] == submitters*per {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not all jobs ran: %v", c)
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	pw.Wait()
	e.check()
}

func TestCloseAnswersParked(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	ph := e.register("s")
	id := e.submit1("t", "x")
	e.next(ph, 1)
	nextDone := e.goNext(protocol.Next{Placeholder: ph, Free: 1, WaitMS: 60000})
	waitDone := e.goWait(ctx, []int64{id}, 0)
	time.Sleep(200 * time.Millisecond)
	if err := e.s.Close(); err != nil {
		t.Fatal(err)
	}
	gotWithin(t, nextDone, 10*time.Second, "Next not answered at Close")
	if r := gotWithin(t, waitDone, 10*time.Second, "Wait not answered at Close"); !errors.Is(r.err, ErrClosed) {
		t.Fatalf("Wait after Close: %v", r.err)
	}
	_, err := e.s.Submit(ctx, []protocol.JobSpec{spec("t", "x")})
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("Submit after Close: %v", err)
	}
	e.s = nil
	integrity(t, e.opt.Path)
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name   string
		opt    func(t *testing.T) Options
		errHas string
	}{
		{"unknown sync mode", func(t *testing.T) Options {
			return Options{Path: t.TempDir() + "/x.db", Sync: "sometimes"}
		}, ""},
		{"unopenable path", func(t *testing.T) Options {
			return Options{Path: t.TempDir() + "/no/such/dir/x.db"}
		}, ""},
		// A database of another schema version is refused.
		{"other schema version", func(t *testing.T) Options {
			path := t.TempDir() + "/v.db"
			s, err := Open(ctx, Options{Path: path})
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			db := openRaw(t, path)
			mustExec(t, db, "UPDATE meta SET value = '99' WHERE key = 'schema'")
			db.Close()
			return Options{Path: path}
		}, "schema version 99"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := Open(ctx, tc.opt(t))
			if err == nil {
				s.Close()
				t.Fatalf("%s accepted", tc.name)
			}
			if !strings.Contains(err.Error(), tc.errHas) {
				t.Fatalf("%s: %v, want an error saying %q", tc.name, err, tc.errHas)
			}
		})
	}
}

func TestStorageFailureRollsBackBatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	good := e.submit(protocol.JobSpec{Target: "t", Command: "good", Est: 100})[0]
	bad := e.submit(protocol.JobSpec{Target: "t", Command: "bad", Est: 100})[0]
	ph := e.register("s")
	// A placeholder parked from an earlier batch: the jobs do not fit its
	// walltime.
	parked := e.goNext(protocol.Next{Placeholder: ph, Free: 1, WalltimeLeft: 10, WaitMS: 60000})
	waited := e.goWait(ctx, []int64{good}, 0)
	e.parkedAtLeast(1, 1)
	// Remove a ready job's row behind the store's back: dispatching it fails
	// and the whole batch must roll back.
	db := openRaw(t, e.opt.Path)
	mustExec(t, db, "DELETE FROM jobs WHERE id = ?", bad)
	db.Close()
	_, err := e.s.Next(ctx, protocol.Next{Placeholder: ph, Free: 2})
	errCode(t, err, protocol.CodeInternal)
	// good was dispatched in the failed batch: it must be Queued again,
	// in memory as in storage.
	e.mustBe(good, job.Queued)
	e.check()
	// The earlier parked Next and Wait are still served.
	noneWithin(t, parked, 0, "parked Next answered by the failure")
	short := e.submit(protocol.JobSpec{Target: "u", Command: "short", Est: 1})[0]
	if r := gotWithin(t, parked, 10*time.Second, "parked Next lost by the recovery"); r.err != nil || !slices.Equal(ids(r.r.Jobs), []int64{short}) {
		t.Fatalf("parked Next after recovery = %+v, %v", r.r, r.err)
	}
	// The reload forgets placeholders with nothing running (Next says
	// not_found); they register again with their id, as agents do.
	if _, err := e.s.Next(ctx, protocol.Next{Placeholder: ph, Free: 0}); err != nil {
		errCode(t, err, protocol.CodeNotFound)
		r, err := e.s.Register(ctx, protocol.Register{ID: ph, Site: "s", Host: "h-s", Slots: 1})
		if err != nil || r.ID != ph {
			t.Fatalf("re-register = %+v, %v", r, err)
		}
	}
	as := e.next(ph, 5)
	if !slices.Equal(ids(as), []int64{good}) {
		t.Fatalf("after recovery Next = %v", ids(as))
	}
	e.report(ph, ok(as[0]))
	w := gotWithin(t, waited, 10*time.Second, "Wait lost by the recovery")
	if w.err != nil {
		t.Error(w.err)
	}
	if r := w.r; len(r.Jobs) != 1 || r.Jobs[0].State != "D" {
		t.Fatalf("Wait after recovery = %+v", r)
	}
	e.check()
}

func TestStorageFailureKeepsEarlierParkedCalls(t *testing.T) {
	t.Parallel()
	// Three placeholders parked from earlier batches; in the failing batch
	// the first is handed a job, the second fits nothing and the third hits
	// the failure. After the rollback every one of them must still be
	// parked (and the first get its job again), none lost or doubled.
	e := newEnv(t)
	ctx := context.Background()
	g := e.submit1("gate", "g")
	p0 := e.register("p0")
	if as := e.next(p0, 1); !slices.Equal(ids(as), []int64{g}) {
		t.Fatalf("setup: %v", ids(as))
	}
	j1 := e.submit(protocol.JobSpec{Target: "t", Command: "j1", Est: 20, Prereqs: []string{"gate"}})[0]
	j2 := e.submit(protocol.JobSpec{Target: "t", Command: "j2", Est: 100, Prereqs: []string{"gate"}})[0]
	db := openRaw(t, e.opt.Path)
	mustExec(t, db, "DELETE FROM jobs WHERE id = ?", j2)
	db.Close()

	nparked := 0
	park := func(ph int64, walltime float64) <-chan nextOutcome {
		ch := e.goNext(protocol.Next{Placeholder: ph, Free: 1, WalltimeLeft: walltime, WaitMS: 60000})
		nparked++
		e.parkedAtLeast(nparked, 0) // park in this order
		return ch
	}
	a := park(e.register("a"), 50)
	b := park(e.register("b"), 5)
	c := park(e.register("c"), 0)

	// Finishing the gate makes j1 and j2 ready in one batch.
	err := e.s.Report(ctx, p0, []protocol.Report{{ID: g, Attempt: 1}})
	errCode(t, err, protocol.CodeInternal)
	e.mustBe(g, job.Executing) // rolled back
	e.mustBe(j1, job.Waiting)
	e.check()
	for name, ch := range map[string]<-chan nextOutcome{"a": a, "b": b, "c": c} {
		noneWithin(t, ch, 0, "parked placeholder "+name+" answered by the failure")
	}
	// The gate's report again: now only j1 becomes ready, and it goes to
	// the first parked placeholder it fits.
	e.report(p0, protocol.Report{ID: g, Attempt: 1})
	if r := gotWithin(t, a, 10*time.Second, "a placeholder parked before the failure was never answered"); r.err != nil || !slices.Equal(ids(r.r.Jobs), []int64{j1}) {
		t.Fatalf("first parked placeholder got %+v, %v; want job %d", r.r, r.err, j1)
	}
	for name, ch := range map[string]<-chan nextOutcome{"b": b, "c": c} {
		noneWithin(t, ch, 0, "parked placeholder "+name+" answered")
	}
	e.check()
}

func TestWaitCanceledWhileJobEnds(t *testing.T) {
	t.Parallel()
	// A Wait whose caller gives up just as its job ends: the core may be
	// filling the reply while Wait returns. Run with -race.
	e := newEnv(t)
	ph := e.register("s")
	n := 100
	if testing.Short() {
		n = 20
	}
	for i := 0; i < n; i++ {
		id := e.submit1("t", "x")
		a := e.next(ph, 1)[0]
		ctx, cancel := context.WithCancel(context.Background())
		done := e.goWait(ctx, []int64{id}, 0)
		e.parkedAtLeast(0, 1)
		go cancel()
		e.report(ph, ok(a))
		if r := gotWithin(t, done, 10*time.Second, "Wait did not return"); r.err != nil && !errors.Is(r.err, context.Canceled) {
			t.Fatalf("Wait: %v", r.err)
		}
	}
	e.check()
}

func TestRequeueAfterPrerequisiteChanged(t *testing.T) {
	t.Parallel()
	// A job whose prerequisite target re-opens (or fails) while it runs
	// goes back to Waiting (or Blocked), not Queued, when its attempt is
	// lost: in storage as in memory.
	for _, how := range []string{"lease", "interrupted"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.submit1("a", "a")
			b := e.submit1("b", "b", "a")
			ph := e.register("s")
			e.report(ph, ok(e.next(ph, 1)[0]))
			ab := e.next(ph, 1)[0]
			if ab.ID != b {
				t.Fatalf("dispatched %d, want %d", ab.ID, b)
			}
			a2 := e.submit1("a", "a2") // re-opens a
			lose := func(as protocol.Assignment) {
				if how == "lease" {
					e.expireLeases(as.ID)
				} else {
					e.report(ph, protocol.Report{ID: as.ID, Attempt: as.Attempt, Exit: -1, Reason: protocol.ReasonInterrupted})
				}
			}
			lose(ab)
			e.mustBe(b, job.Waiting)
			e.check()
			// Only a2 may run now.
			as := e.next(ph, 5)
			if !slices.Equal(ids(as), []int64{a2}) {
				t.Fatalf("dispatched %v, want only %d", ids(as), a2)
			}
			e.report(ph, ok(as[0]))
			e.mustBe(b, job.Queued)
			// Now fail the prerequisite while b runs.
			ab = e.next(ph, 1)[0]
			a3 := e.submit1("a", "a3")
			e.report(ph, exit(e.next(ph, 1)[0], 1))
			e.mustBe(a3, job.Failed)
			lose(ab)
			e.mustBe(b, job.Blocked)
			e.check()
		})
	}
}

// TestPlaceholderOwnsItsJobs: a placeholder can neither report nor renew a
// job another placeholder holds; its heartbeat is told to kill it instead.
func TestPlaceholderOwnsItsJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.submit1("t", "x")
	holder, intruder := e.register("a"), e.register("b")
	as := e.next(holder, 1)
	if !slices.Equal(ids(as), []int64{id}) {
		t.Fatalf("got %v", ids(as))
	}
	ctx := context.Background()
	e.report(intruder, ok(as[0]))
	e.mustBe(id, job.Executing)
	hb, err := e.s.Heartbeat(ctx, protocol.Heartbeat{Placeholder: intruder, Running: []protocol.JobRef{{ID: id, Attempt: 1}}})
	if err != nil || !slices.Equal(hb.Kill, []protocol.JobRef{{ID: id, Attempt: 1}}) {
		t.Fatalf("intruder's heartbeat = %+v, %v; want it told to kill job %d", hb, err, id)
	}
	// The intruder's heartbeat did not renew the lease: it still expires.
	e.expireLeases(id)
	e.mustBe(id, job.Queued)
	if d := e.job(id); len(d.History) != 1 || !strings.Contains(d.History[0].Reason, "lost") {
		t.Fatalf("history %+v, want one lost attempt", d.History)
	}
	e.check()
}

// A path with URI metacharacters must open that very file (once, '#' cut
// the path short and two tests shared one database).
func TestOpenPathWithURICharacters(t *testing.T) {
	for _, name := range []string{"a#b", "a?b", "a%23b", "a b"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), name)
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "mq.db")
			s, err := Open(context.Background(), Options{Path: path, Sync: SyncNormal})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			s.Close()
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s: the database is not where asked: %v", name, err)
			}
		})
	}
}

// Under SyncSubmit exactly the calls that accept or change users' work
// (submit, bulk commit, delete, rerun, queue settings) commit fsync'd;
// placeholder traffic and reads do not, and run with synchronous=NORMAL.
func TestSyncSubmitFsyncsUsersWorkOnly(t *testing.T) {
	e := newEnvWith(t, func(o *Options) { o.Sync = SyncSubmit })
	ctx := context.Background()
	// synced reads the count of fsync'd batches, checking that the reading
	// batch itself (a plain call) ran with NORMAL.
	synced := func() int {
		t.Helper()
		var n, level int
		if err := e.s.do(ctx, func() error {
			n = e.s.synced
			return e.s.w.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&level)
		}); err != nil {
			t.Fatal(err)
		}
		if level != 1 {
			t.Fatalf("a plain call ran with synchronous=%d, want 1 (NORMAL)", level)
		}
		return n
	}
	fcfs := "fcfs"
	var ph int64
	steps := []struct {
		name    string
		durable bool
		run     func() error
	}{
		{"register", false, func() error { ph = e.register("s"); return nil }},
		{"submit", true, func() error { e.submit1("t", "true"); return nil }},
		{"next", false, func() error { e.next(ph, 1); return nil }},
		{"delete", true, func() error { _, err := e.s.Delete(ctx, protocol.Select{IDs: []int64{1}}); return err }},
		{"rerun", true, func() error { _, err := e.s.Rerun(ctx, protocol.Select{IDs: []int64{1}}); return err }},
		{"queue set", true, func() error { _, err := e.s.SetQueue(ctx, protocol.QueueSet{Name: "q", Policy: &fcfs}); return err }},
		{"bulk commit", true, func() error {
			b, err := e.s.NewBulk()
			if err != nil {
				return err
			}
			if err := b.Add(1, []protocol.JobSpec{{Target: "b", Command: "true", Cwd: "/"}}); err != nil {
				return err
			}
			_, err = b.Commit(ctx)
			return err
		}},
		{"summary", false, func() error { _, err := e.s.Summary(ctx); return err }},
	}
	for _, st := range steps {
		before := synced()
		if err := st.run(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		want := 0
		if st.durable {
			want = 1
		}
		if got := synced() - before; got != want {
			t.Errorf("%s: %d fsync'd batches, want %d", st.name, got, want)
		}
	}
}

// TestSJFRuntimes: in an SJF queue a job that declared no estimate is
// ordered by the mean runtime of its target's finished jobs; a target with
// none finished is unknown and goes last. Runtimes are learned in any
// queue and loaded from Done jobs at start, so a queue switched to SJF
// after a restart orders by what earlier runs saw.
func TestSJFRuntimes(t *testing.T) {
	t.Parallel()
	type ran struct {
		target string
		secs   int
	}
	q := func(target string, est float64) protocol.JobSpec {
		return protocol.JobSpec{Queue: "q", Target: target, Command: "x", Est: est}
	}
	tests := []struct {
		name    string
		restart bool // the queue turns SJF only after the runs and a restart
		ran     []ran
		submit  []protocol.JobSpec
		want    []int // submit's indexes in the order they must run
		why     string
	}{
		{"LearnsRuntimes", false, []ran{{"slow", 100}, {"fast", 2}},
			[]protocol.JobSpec{q("new", 0), q("slow", 0), q("fast", 0), q("slow", 1)},
			[]int{3, 2, 1, 0}, "declared 1 s, learned 2 s, learned 100 s, unknown"},
		{"RuntimesSurviveRestart", true, []ran{{"slow", 100}, {"fast", 2}, {"fast", 4}},
			[]protocol.JobSpec{q("slow", 0), q("fast", 0)},
			[]int{1, 0}, "after a restart: fast learned 3 s, slow 100 s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			sjf := "sjf"
			if !tc.restart {
				e.mustSetQueue(protocol.QueueSet{Name: "q", Policy: &sjf})
			}
			ph := e.register("s")
			t0 := time.Unix(1000, 0)
			for _, c := range tc.ran {
				e.submit(q(c.target, 0))
				as := e.next(ph, 1)
				r := ok(as[0])
				r.Started, r.Finished = t0, t0.Add(time.Duration(c.secs)*time.Second)
				e.report(ph, r)
			}
			if tc.restart {
				e.reopen()
				e.mustSetQueue(protocol.QueueSet{Name: "q", Policy: &sjf})
			}
			got := e.submit(tc.submit...)
			if tc.restart {
				ph = e.register("s")
			}
			var order, want []int64
			for range got {
				order = append(order, e.next(ph, 1)[0].ID)
			}
			for _, i := range tc.want {
				want = append(want, got[i])
			}
			if !slices.Equal(order, want) {
				t.Fatalf("sjf order %v, want %v (%s)", order, want, tc.why)
			}
		})
	}
}

// The schema's CHECK constraints are enforced when asked (the tests ask, so
// a bad write fails them) and skipped otherwise (a running CLS).
func TestCheckConstraintsOption(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		checks bool
	}{
		{"CheckConstraints", true},
		{"without CheckConstraints", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := Open(context.Background(), Options{Path: filepath.Join(t.TempDir(), "mq.db"), Sync: SyncNormal, CheckConstraints: tc.checks})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := s.Submit(context.Background(), []protocol.JobSpec{{Target: "t", Command: "x", Cwd: "/"}}); err != nil {
				t.Fatal(err)
			}
			err = s.do(context.Background(), func() error {
				if err := s.begin(); err != nil {
					return err
				}
				_, err := s.w.ExecContext(context.Background(), "UPDATE jobs SET state = 'Z'")
				return err
			})
			if tc.checks && (err == nil || !strings.Contains(err.Error(), "CHECK")) {
				t.Errorf("CheckConstraints: writing state Z gave %v, want a CHECK failure", err)
			}
			if !tc.checks && err != nil {
				t.Errorf("without CheckConstraints: %v", err)
			}
		})
	}
}

// A bulk committed again with its token (a client that lost the reply and
// uploaded again) adds nothing and gets the first commit's ids; the token's
// outcome can be asked without uploading.
func TestBulkToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	if _, _, found, err := e.s.BulkOutcome(ctx, "tok"); err != nil || found {
		t.Fatalf("BulkOutcome before commit = %v, %v; want not found", found, err)
	}
	commit := func() (int64, int) {
		t.Helper()
		b := e.mustNewBulk()
		var specs []protocol.JobSpec
		for i := 0; i < 50; i++ {
			specs = append(specs, spec("bulk", fmt.Sprintf("job %d", i)))
		}
		if err := b.Add(1, specs); err != nil {
			t.Fatal(err)
		}
		first, n, err := b.CommitToken(ctx, "tok")
		if err != nil {
			t.Fatal(err)
		}
		return first, n
	}
	first, n := commit()
	again, n2 := commit()
	if again != first || n2 != n || n != 50 {
		t.Fatalf("second commit = %d+%d, want the first's %d+%d", again, n2, first, n)
	}
	if got := len(e.stat(protocol.Stat{Target: "bulk"})); got != 50 {
		t.Fatalf("%d jobs, want 50", got)
	}
	if f, c, found, err := e.s.BulkOutcome(ctx, "tok"); err != nil || !found || f != first || c != 50 {
		t.Fatalf("BulkOutcome = %d, %d, %v, %v", f, c, found, err)
	}
	e.check()
}

// failCommits makes the store's commits fail (as on a full disk) until the
// returned func is called.
func (e *env) failCommits() (restore func()) {
	e.t.Helper()
	set := func(f func() error) {
		if err := e.s.do(context.Background(), func() error { e.s.commitFault = f; return nil }); err != nil {
			e.t.Fatal(err)
		}
	}
	set(func() error { return errors.New("database or disk is full (SQLITE_FULL)") })
	return func() { set(nil) }
}

func TestCommitFailureKeepsParkedNext(t *testing.T) {
	t.Parallel()
	// A placeholder's long poll is parked when a submit's commit fails
	// (a full disk): the failed batch handed it the new job before the
	// COMMIT. The poll must wait on and get the next job submitted once
	// commits work again.
	e := newEnv(t)
	ctx := context.Background()
	ph := e.register("s")
	got := e.nextAsync(ph)
	e.parkedAtLeast(1, 0)
	restore := e.failCommits()
	_, err := e.s.Submit(ctx, []protocol.JobSpec{spec("a", "true")})
	errCode(t, err, protocol.CodeInternal)
	restore()
	e.parkedAtLeast(1, 0)
	b := e.submit1("b", "true")
	as := gotWithin(t, got, 20*time.Second, "parked Next never answered after a failed commit")
	if !slices.Equal(ids(as), []int64{b}) {
		t.Fatalf("parked Next after the failed commit got %v, want [%d]", ids(as), b)
	}
	// Its placeholder is still known: it heartbeats and reports as before.
	if _, err := e.s.Heartbeat(ctx, protocol.Heartbeat{Placeholder: ph}); err != nil {
		t.Fatalf("Heartbeat after the failed commit: %v", err)
	}
	e.next(ph, 0, ok(as[0]))
	e.mustBe(b, job.Done)
	e.check()
}

// sqliteFull is an error with SQLite's code for "database or disk is full".
// sqliteErr stands in for the SQLite driver's errors, which carry a code.
type sqliteErr struct {
	code int
	msg  string
}

func (e sqliteErr) Error() string { return e.msg }
func (e sqliteErr) Code() int     { return e.code }

var (
	sqliteFull    = sqliteErr{13, "database or disk is full (13)"}
	sqliteIOWrite = sqliteErr{10 | 3<<8, "disk I/O error (778)"}
)

// TestDeleteOnFullDiskUsesReserve: the first commit fails for want of
// room, OnFull frees the reserve, and the delete goes through on its
// second try. SQLite reports a full disk as SQLITE_FULL, but a quota
// (EDQUOT) as an I/O error: a probe beside the database tells that one
// from an I/O error not for room, which frees nothing and is not tried
// again. Each answer says what happened.
func TestDeleteOnFullDiskUsesReserve(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		cause   sqliteErr
		probe   error // the room probe's answer
		retried bool
		says    string // the failed submit's answer has
	}{
		{name: "full", cause: sqliteFull, retried: true, says: "nothing was changed; free space on the filesystem of"},
		{name: "quota", cause: sqliteIOWrite, probe: syscall.EDQUOT, retried: true, says: "disk quota exceeded: nothing was changed; free space under your quota on the filesystem of"},
		{name: "full at fsync", cause: sqliteIOWrite, probe: syscall.ENOSPC, retried: true, says: "the disk is full: nothing was changed"},
		{name: "I/O error", cause: sqliteIOWrite, says: "metaqueue storage failure: disk I/O error (778)"},
		// Read-only: no reserve to free helps; refused like a full disk.
		{name: "read-only", cause: sqliteIOWrite, probe: syscall.EROFS, says: "is read-only (remounted so after errors?): nothing was changed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var released atomic.Int32
			e := newEnvWith(t, func(o *Options) {
				o.OnFull = func() bool { return released.Add(1) == 1 }
			})
			ctx := context.Background()
			id := e.submit1("t", "true")
			// The core's first tick prunes submit tokens in a commit of its
			// own, late on a busy machine: done now, so that the faults
			// below meet only the calls' commits.
			if err := e.s.do(ctx, e.s.pruneTokens); err != nil {
				t.Fatal(err)
			}
			fails := 2 // the submit's, then the delete's first try
			if err := e.s.do(ctx, func() error {
				e.s.room.Probe = func() error { return tc.probe }
				e.s.commitFault = func() error {
					if fails > 0 {
						fails--
						return tc.cause
					}
					return nil
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			_, err := e.s.Submit(ctx, []protocol.JobSpec{spec("u", "true")})
			if err == nil || !strings.Contains(err.Error(), tc.says) || !protocol.IsCode(err, protocol.CodeInternal) {
				t.Errorf("submit: %v; want it to say %q", err, tc.says)
			}
			released.Store(0) // the reserve is made again
			r, err := e.s.Delete(ctx, protocol.Select{IDs: []int64{id}})
			if !tc.retried {
				if err == nil || released.Load() != 0 {
					t.Fatalf("Delete = %+v, %v, OnFull called %d times; want it failed, nothing freed", r, err, released.Load())
				}
				e.mustBe(id, job.Queued)
				e.check()
				return
			}
			if err != nil || !slices.Equal(r.IDs, []int64{id}) || len(r.Errors) > 0 {
				t.Fatalf("Delete on a full disk = %+v, %v; want job %d deleted", r, err, id)
			}
			if released.Load() != 1 {
				t.Errorf("OnFull called %d times, want 1", released.Load())
			}
			e.mustBe(id, job.Deleted)
			e.check()
		})
	}
}

// nextOutcome is what a Next call run in the background returned.
type nextOutcome struct {
	r   protocol.NextReply
	err error
}

// goNext runs req in the background (a long poll, when it waits) and
// delivers its outcome on the returned channel.
func (e *env) goNext(req protocol.Next) <-chan nextOutcome {
	ch := make(chan nextOutcome, 1)
	go func() {
		r, err := e.s.Next(context.Background(), req)
		ch <- nextOutcome{r, err}
	}()
	return ch
}

// waitOutcome is what a Wait call run in the background returned.
type waitOutcome struct {
	r   protocol.WaitReply
	err error
}

// goWait runs Wait in the background and delivers its outcome on the
// returned channel.
func (e *env) goWait(ctx context.Context, ids []int64, timeout time.Duration) <-chan waitOutcome {
	ch := make(chan waitOutcome, 1)
	go func() {
		r, err := e.s.Wait(ctx, ids, timeout)
		ch <- waitOutcome{r, err}
	}()
	return ch
}

// gotWithin returns what ch delivers, failing the test with msg if nothing
// comes in d: a busy machine gets a generous d, never a fixed sleep.
func gotWithin[T any](t *testing.T, ch <-chan T, d time.Duration, msg string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatal(msg)
	}
	var zero T
	return zero
}

// noneWithin fails the test with msg and what ch delivered if it delivers
// anything in d (or, for d 0, has something ready now).
func noneWithin[T any](t *testing.T, ch <-chan T, d time.Duration, msg string) {
	t.Helper()
	if d == 0 {
		select {
		case v := <-ch:
			t.Fatalf("%s: %+v", msg, v)
		default:
		}
		return
	}
	select {
	case v := <-ch:
		t.Fatalf("%s: %+v", msg, v)
	case <-time.After(d):
	}
}

// mustSetQueue applies qs, failing the test if the store refuses it.
func (e *env) mustSetQueue(qs protocol.QueueSet) {
	e.t.Helper()
	if _, err := e.s.SetQueue(context.Background(), qs); err != nil {
		e.t.Fatalf("SetQueue(%+v): %v", qs, err)
	}
}

// mustDelete deletes the jobs ids, failing the test if the call fails.
func (e *env) mustDelete(ids ...int64) {
	e.t.Helper()
	if _, err := e.s.Delete(context.Background(), protocol.Select{IDs: ids}); err != nil {
		e.t.Fatalf("Delete(%v): %v", ids, err)
	}
}

// mustNewBulk starts a bulk submission, failing the test if it cannot.
func (e *env) mustNewBulk() *Bulk {
	e.t.Helper()
	b, err := e.s.NewBulk()
	if err != nil {
		e.t.Fatalf("NewBulk: %v", err)
	}
	return b
}

// keepBeating moves the clock on by half a lease n times, each time
// renewing ph's leases on refs as a healthy placeholder does; every
// heartbeat must succeed and be told to kill nothing.
func (e *env) keepBeating(ph int64, n int, refs ...protocol.JobRef) {
	e.t.Helper()
	for i := 0; i < n; i++ {
		e.advance(testLease / 2)
		hb, err := e.s.Heartbeat(context.Background(), protocol.Heartbeat{Placeholder: ph, Running: refs})
		if err != nil || len(hb.Kill) != 0 {
			e.t.Fatalf("Heartbeat = %+v, %v", hb, err)
		}
	}
}

// TestDiskFullNotCounted: an attempt stopped because others filled its
// placeholder's output disk (protocol.ReasonDiskFull) requeues its job
// without counting: the history keeps it (without an exit status), and
// after two such stops a job of two attempts still has both (an
// interruption requeues it once more).
func TestDiskFullNotCounted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	two := 2
	e.mustSetQueue(protocol.QueueSet{Name: "q", MaxAttempts: &two})
	id := e.submit(protocol.JobSpec{Queue: "q", Target: "t", Command: "x"})[0]
	ph := e.register("s")
	for i := range 2 {
		a := e.next(ph, 1)
		if len(a) != 1 || a[0].ID != id {
			t.Fatalf("round %d: got %+v, want job %d", i, a, id)
		}
		e.report(ph, protocol.Report{ID: id, Attempt: a[0].Attempt, Exit: 143, Reason: protocol.ReasonDiskFull + " (10 bytes free)"})
		e.mustBe(id, job.Queued)
		d := e.job(id)
		if len(d.History) != i+1 || !protocol.DiskFull(d.History[i].Reason) || d.History[i].Exit != nil {
			t.Fatalf("round %d: history %+v, want the stop kept without exit status", i, d.History)
		}
	}
	a := e.next(ph, 1)
	if len(a) != 1 {
		t.Fatalf("the job did not run again: %+v", a)
	}
	e.report(ph, protocol.Report{ID: id, Attempt: a[0].Attempt, Exit: -1, Reason: protocol.ReasonInterrupted})
	if d := e.job(id); d.State != "Q" {
		t.Fatalf("after two stops for the disk and one interruption the job is %s (%q): the stops were counted", d.State, d.Reason)
	}
	a = e.next(ph, 1)
	if len(a) != 1 {
		t.Fatalf("the job did not run again: %+v", a)
	}
	e.report(ph, ok(a[0]))
	e.mustBe(id, job.Done)
	e.check()
}

// TestHandedBackForEverCounts: a placeholder that takes a job and hands
// it back unstarted, again and again (a compromised site key), grows its
// history only until runs.MaxUncounted attempts: from then on each
// return counts as lost, and the job fails when its attempts are spent.
func TestHandedBackForEverCounts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	two := 2
	e.mustSetQueue(protocol.QueueSet{Name: "q", MaxAttempts: &two})
	id := e.submit(protocol.JobSpec{Queue: "q", Target: "t", Command: "x"})[0]
	ph := e.register("s")
	for i := 1; ; i++ {
		a := e.next(ph, 1)
		if len(a) == 0 {
			break
		}
		if i > runs.MaxUncounted+10 {
			t.Fatalf("job %d handed out %d times: its returns never count", id, i)
		}
		reason := protocol.ReasonReturned
		if i%2 == 0 {
			reason = protocol.ReasonDiskFull
		}
		e.report(ph, protocol.Report{ID: id, Attempt: a[0].Attempt, Exit: 143, Reason: reason})
	}
	d := e.job(id)
	if d.State != "F" || d.Attempts > runs.MaxUncounted+2 {
		t.Fatalf("job %s after %d attempts (%q), want Failed within %d", d.State, d.Attempts, d.Reason, runs.MaxUncounted+2)
	}
	e.check()
}
