package metaqueue

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/bundles"
	"github.com/mq-hpc/mq/internal/metaqueue/tokens"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

func (e *env) submitReq(req protocol.Submit) []int64 {
	e.t.Helper()
	ids, err := e.s.SubmitRequest(context.Background(), req)
	if err != nil {
		e.t.Fatalf("SubmitRequest: %v", err)
	}
	return ids
}

func bundleOf(cmds ...string) protocol.Submit {
	req := protocol.Submit{Bundle: true}
	for _, c := range cmds {
		req.Jobs = append(req.Jobs, spec("b", c))
	}
	return req
}

// TestBundleDispatchedWhole: a bundle goes to one placeholder, in order, in
// one slot; loose jobs fill the other slots; each job reports its own exit.
func TestBundleDispatchedWhole(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	loose1 := e.submit1("l", "loose1")
	b := e.submitReq(bundleOf("b1", "b2", "b3", "b4"))
	loose2 := e.submit1("l", "loose2")
	e.check()
	p1, p2 := e.register("a"), e.register("b")
	got := e.next(p1, 2) // two slots: loose1 and the whole bundle
	if fmt.Sprint(ids(got)) != fmt.Sprint([]int64{loose1, b[0], b[1], b[2], b[3]}) {
		t.Fatalf("assignments %v, want loose1 then the bundle in order", ids(got))
	}
	for i, a := range got[1:] {
		if a.Bundle != b[0] || a.Seq != i || a.Command != fmt.Sprint("b", i+1) {
			t.Errorf("bundle job %d: %+v", i, a)
		}
	}
	if got[0].Bundle != 0 {
		t.Errorf("a loose job has bundle %d", got[0].Bundle)
	}
	if bundles.SlotsUsed(got) != 2 {
		t.Errorf("slotsUsed = %d, want 2", bundles.SlotsUsed(got))
	}
	// Nothing of the bundle is left for the other placeholder.
	if g2 := e.next(p2, 4); fmt.Sprint(ids(g2)) != fmt.Sprint([]int64{loose2}) {
		t.Fatalf("second placeholder got %v, want only loose2", ids(g2))
	}
	// Each job of the bundle ends with its own status.
	e.report(p1, ok(got[1]), exit(got[2], 3))
	e.mustBe(b[0], job.Done)
	e.mustBe(b[1], job.Failed)
	e.mustBe(b[2], job.Executing)
	e.report(p1, exit(got[3], 0), exit(got[4], 9))
	r, err := e.s.Wait(context.Background(), b, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]int{b[0]: 0, b[1]: 3, b[2]: 0, b[3]: 9}
	for _, je := range r.Jobs {
		if je.Exit == nil || *je.Exit != want[je.ID] {
			t.Errorf("job %d: %+v, want exit %d", je.ID, je, want[je.ID])
		}
	}
	e.check()
	var n int
	e.s.do(context.Background(), func() error { n = e.s.bundles.Len(); return nil })
	if n != 0 {
		t.Errorf("ended bundle still in memory (%d entries)", n)
	}
}

// TestBundleHeldWhileWaiting: a bundle with a job still Waiting is not
// dispatched at all; it goes whole once that job is ready.
func TestBundleHeldWhileWaiting(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	req := protocol.Submit{Bundle: true, Jobs: []protocol.JobSpec{spec("b", "first"), spec("b", "second", "pre")}}
	b := e.submitReq(req)
	e.mustBe(b[0], job.Queued)
	e.mustBe(b[1], job.Waiting)
	ph := e.register("a")
	if got := e.next(ph, 4); len(got) != 0 {
		t.Fatalf("dispatched %v while a job of the bundle waits", ids(got))
	}
	pre := e.submit1("pre", "pre")
	got := e.next(ph, 4)
	if fmt.Sprint(ids(got)) != fmt.Sprint([]int64{pre}) {
		t.Fatalf("got %v, want only the prerequisite", ids(got))
	}
	e.report(ph, ok(got[0]))
	got = e.next(ph, 4)
	if fmt.Sprint(ids(got)) != fmt.Sprint(b) {
		t.Fatalf("got %v, want the whole bundle %v", ids(got), b)
	}
	e.check()
}

// TestBundleRequeuedWhole: a bundle whose placeholder vanishes is requeued
// and dispatched whole again, in order; it survives a restart.
func TestBundleRequeuedWhole(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.submitReq(bundleOf("x", "y", "z"))
	p1 := e.register("a")
	got := e.next(p1, 1)
	if len(got) != 3 {
		t.Fatalf("got %v", ids(got))
	}
	e.report(p1, ok(got[0])) // x done; y and z lost with the placeholder
	e.expireLeases(b[1])
	e.mustBe(b[1], job.Queued)
	e.mustBe(b[2], job.Queued)
	e.reopen()
	e.check()
	p2 := e.register("b")
	got = e.next(p2, 1)
	if fmt.Sprint(ids(got)) != fmt.Sprint(b[1:]) {
		t.Fatalf("after the requeue got %v, want %v", ids(got), b[1:])
	}
	for _, a := range got {
		if a.Bundle != b[0] || a.Attempt != 2 {
			t.Errorf("requeued bundle job: %+v", a)
		}
	}
	e.report(p2, ok(got[0]), ok(got[1]))
	e.mustBe(b[2], job.Done)
	e.check()
}

func TestBundleRefusesInnerPrerequisites(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	req := protocol.Submit{Bundle: true, Jobs: []protocol.JobSpec{spec("one", "a"), spec("two", "b", "one")}}
	_, err := e.s.SubmitRequest(context.Background(), req)
	errCode(t, err, protocol.CodeBadRequest)
	// Not a bundle: fine.
	req.Bundle = false
	e.submitReq(req)
}

// TestSubmitToken: a resent submit (same token) adds nothing and returns
// the first one's ids.
func TestSubmitToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	req := protocol.Submit{Token: "drv-1-1", Jobs: []protocol.JobSpec{spec("t", "a"), spec("t", "b")}}
	first := e.submitReq(req)
	again := e.submitReq(req)
	if fmt.Sprint(first) != fmt.Sprint(again) {
		t.Fatalf("resent submit: ids %v, first %v", again, first)
	}
	e.reopen()
	if again := e.submitReq(req); fmt.Sprint(first) != fmt.Sprint(again) {
		t.Fatalf("resent after a restart: ids %v, first %v", again, first)
	}
	req.Token = "drv-1-2"
	if other := e.submitReq(req); other[0] != first[1]+1 {
		t.Fatalf("a new token: ids %v", other)
	}
	if n := e.summary()["default"]["Q"]; n != 4 {
		t.Errorf("%d queued jobs, want 4", n)
	}
	long := protocol.Submit{Token: string(make([]byte, 129)), Jobs: []protocol.JobSpec{spec("t", "a")}}
	_, err := e.s.SubmitRequest(context.Background(), long)
	errCode(t, err, protocol.CodeBadRequest)
}

// TestWaitAny: a wait with Any returns when the first job ends, with the
// others pending.
func TestWaitAny(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b, c := e.submit1("t", "a"), e.submit1("t", "b"), e.submit1("t", "c")
	ph := e.register("p")
	got := e.next(ph, 3)
	done := make(chan protocol.WaitReply, 1)
	go func() {
		r, err := e.s.WaitFor(context.Background(), protocol.Wait{IDs: []int64{a, b, c}, Any: true})
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	time.Sleep(50 * time.Millisecond)
	select {
	case r := <-done:
		t.Fatalf("returned before any job ended: %+v", r)
	default:
	}
	e.report(ph, ok(got[0]), exit(got[1], 2))
	var r protocol.WaitReply
	select {
	case r = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("wait with any did not return")
	}
	if len(r.Jobs) != 2 || fmt.Sprint(r.Pending) != fmt.Sprint([]int64{c}) {
		t.Fatalf("reply %+v, want a and b ended, c pending", r)
	}
	// Already ended jobs: at once.
	r, err := e.s.WaitFor(context.Background(), protocol.Wait{IDs: []int64{a, c}, Any: true})
	if err != nil || len(r.Jobs) != 1 || r.Jobs[0].ID != a || fmt.Sprint(r.Pending) != fmt.Sprint([]int64{c}) {
		t.Fatalf("reply %+v %v", r, err)
	}
}

// TestMigrateFrom1: a version 1 database gains bundles, tokens and
// placeholder identities.
func TestMigrateFrom1(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.submit1("t", "old job")
	e.downgrade("DROP INDEX jobs_bundled", "ALTER TABLE jobs DROP COLUMN bundle", "DROP TABLE submits",
		"ALTER TABLE placeholders DROP COLUMN identity", // the first version 1 had none
		"UPDATE meta SET value = '1' WHERE key = 'schema'")
	e.mustBe(id, job.Queued)
	b := e.submitReq(protocol.Submit{Bundle: true, Token: "x", Jobs: []protocol.JobSpec{spec("t", "a"), spec("t", "b")}})
	got := e.next(e.register("p"), 1)
	if len(got) != 1 || got[0].ID != id {
		t.Fatalf("got %v", ids(got))
	}
	got = e.next(e.register("q"), 1)
	if fmt.Sprint(ids(got)) != fmt.Sprint(b) {
		t.Fatalf("got %v, want the bundle %v", ids(got), b)
	}
	e.check()
}

// TestBundleFitsWalltime: a bundle's jobs run one after another, so a
// placeholder takes only as many as fit its walltime together; the rest
// stay Queued for the next request.
func TestBundleFitsWalltime(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	req := bundleOf("b1", "b2", "b3", "b4")
	for i := range req.Jobs {
		req.Jobs[i].Est = 40
	}
	b := e.submitReq(req)
	p := e.register("a")
	got := e.nextWalltime(p, 1, 100)
	if fmt.Sprint(ids(got)) != fmt.Sprint(b[:2]) {
		t.Fatalf("walltime 100 s, jobs of 40 s: got %v, want the first two of %v", ids(got), b)
	}
	e.mustBe(b[2], job.Queued)
	got = e.nextWalltime(p, 1, 1000)
	if fmt.Sprint(ids(got)) != fmt.Sprint(b[2:]) {
		t.Fatalf("then, with room: got %v, want %v", ids(got), b[2:])
	}
	e.check()
}

// TestSubmitTokenPruned: tokens are forgotten after tokens.TTL, so the table
// does not grow with every driver request forever.
func TestSubmitTokenPruned(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	req := protocol.Submit{Token: "drv-1-1", Jobs: []protocol.JobSpec{spec("t", "a")}}
	first := e.submitReq(req)
	e.clock.Advance(tokens.TTL + 2*time.Hour)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := e.s.rdb.QueryRow("SELECT count(*) FROM submits").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d tokens left a day after their submit", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if again := e.submitReq(req); again[0] == first[0] {
		t.Fatalf("a token past its time still maps to ids %v", again)
	}
}
