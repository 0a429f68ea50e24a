package metaqueue

import (
	"context"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// TestPrefetchedShownP: of the jobs a request asks for ahead of its free
// slots (Next.Ahead), those handed out are P, not E, in the listing, the
// summary and the progress counts (mqwait), until a message of the placeholder says it started them;
// the mark survives a restart; one handed back goes to Q and its attempt
// is listed as handed back, the next one numbered after it.
func TestPrefetchedShownP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	ids := e.submit(spec("a", "1"), spec("a", "2"), spec("a", "3"), spec("a", "4"))
	ph := e.register("s")
	r, err := e.s.Next(ctx, protocol.Next{Placeholder: ph, Free: 4, Ahead: 2})
	if err != nil || len(r.Jobs) != 4 {
		t.Fatalf("Next = %+v, %v", r, err)
	}
	as := map[int64]protocol.Assignment{}
	for i, a := range r.Jobs {
		as[a.ID] = a
		if a.Ahead != (i >= 2) {
			t.Errorf("job %d (handed out %d of 4) ahead %v", a.ID, i+1, a.Ahead)
		}
	}
	run, held := r.Jobs[:2], r.Jobs[2:]
	counts := func(wantE, wantP int) {
		t.Helper()
		c := e.summary()[protocol.DefaultQueue]
		if c["E"] != wantE || c["P"] != wantP {
			t.Fatalf("summary %v, want %d E and %d P", c, wantE, wantP)
		}
		// mqwait's counts and mqstat --summary -t: by queue, by ids, by
		// target (read off the core).
		for _, req := range []protocol.Progress{{Once: true}, {Once: true, Queue: protocol.DefaultQueue}, {Once: true, IDs: ids}, {Once: true, Target: "a"}} {
			var got protocol.ProgressReply
			if err := e.s.Progress().Stream(ctx, req, func(r protocol.ProgressReply) error { got = r; return nil }); err != nil {
				t.Fatalf("Progress(%+v): %v", req, err)
			}
			if got.Counts["E"] != wantE || got.Counts["P"] != wantP || got.Total != len(ids) {
				t.Fatalf("progress of %+v: %+v, want %d E and %d P of %d", req, got, wantE, wantP, len(ids))
			}
		}
	}
	counts(2, 2)
	for _, a := range run {
		e.mustBe(a.ID, job.Executing)
	}
	for _, a := range held {
		e.mustBe(a.ID, job.Prefetched)
	}
	if got := e.stat(protocol.Stat{States: "P"}); len(got) != 2 || got[0].ID != held[0].ID || got[0].State != "P" || got[0].Started != "" {
		t.Fatalf("mqstat -s P lists %+v, want the 2 held jobs", got)
	}
	if got := e.stat(protocol.Stat{States: "E"}); len(got) != 4 {
		t.Fatalf("mqstat -s E lists %d jobs, want every job handed out (4)", len(got))
	}

	// The heartbeat says one held job started: E. A job it never held,
	// or an attempt it does not run, changes nothing.
	refs := []protocol.JobRef{{ID: held[0].ID, Attempt: held[0].Attempt}, {ID: held[1].ID, Attempt: held[1].Attempt + 1}, {ID: ids[0], Attempt: 9}}
	all := []protocol.JobRef{}
	for _, a := range r.Jobs {
		all = append(all, protocol.JobRef{ID: a.ID, Attempt: a.Attempt})
	}
	if hb, err := e.s.Heartbeat(ctx, protocol.Heartbeat{Placeholder: ph, Running: all, Started: refs}); err != nil || len(hb.Kill) != 0 {
		t.Fatalf("Heartbeat = %+v, %v", hb, err)
	}
	e.mustBe(held[0].ID, job.Executing)
	e.mustBe(held[1].ID, job.Prefetched)
	counts(3, 1)
	e.check()

	// A restart (the store closed and opened again, as after kill -9:
	// every change above was committed) keeps the marks.
	e.reopen()
	integrity(t, e.opt.Path)
	e.mustBe(held[0].ID, job.Executing)
	e.mustBe(held[1].ID, job.Prefetched)
	counts(3, 1)

	// The last held job is handed back: Q, and its attempt is listed as
	// never run; the next attempt is numbered after it.
	back := held[1]
	e.report(ph, protocol.Report{ID: back.ID, Attempt: back.Attempt, Reason: protocol.ReasonReturned})
	e.mustBe(back.ID, job.Queued)
	counts(3, 0)
	again := e.next(ph, 1)
	if len(again) != 1 || again[0].ID != back.ID || again[0].Attempt != back.Attempt+1 || again[0].Ahead {
		t.Fatalf("after the hand-back: %+v, want job %d attempt %d, not ahead", again, back.ID, back.Attempt+1)
	}
	d := e.job(back.ID)
	if len(d.History) != 0 || len(d.Unstarted) != 1 || d.Unstarted[0].Attempt != back.Attempt || d.Unstarted[0].Reason != ReasonHandedBack ||
		d.Unstarted[0].Started != "" || d.Unstarted[0].Finished == "" || d.Unstarted[0].Host != "h-s" {
		t.Fatalf("history %+v, unstarted %+v; want no history and attempt %d %q at h-s, never started", d.History, d.Unstarted, back.Attempt, ReasonHandedBack)
	}
	// Handed back, it does not count: the job still has every attempt.
	e.report(ph, ok(again[0]))
	e.mustBe(back.ID, job.Done)

	// A report says the job started, whether or not Started did.
	e.report(ph, ok(held[0]), ok(run[0]))
	counts(1, 0)
	e.check()
}

// TestPrefetchBadInput: Ahead over Free and an over-long Started list
// are refused, changing nothing.
func TestPrefetchBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.submit(spec("a", "1"), spec("a", "2"))
	ph := e.register("s")
	for _, tc := range []struct {
		name string
		req  protocol.Next
	}{
		{"ahead over free", protocol.Next{Placeholder: ph, Free: 1, Ahead: 2}},
		{"ahead negative", protocol.Next{Placeholder: ph, Free: 1, Ahead: -1}},
		{"started too long", protocol.Next{Placeholder: ph, Free: 1, Started: make([]protocol.JobRef, protocol.MaxStarted+1)}},
	} {
		_, err := e.s.Next(ctx, tc.req)
		errCode(t, err, protocol.CodeBadRequest)
	}
	errCode(t, e.s.ReportBatch(ctx, protocol.ReportBatch{Placeholder: ph, Started: make([]protocol.JobRef, protocol.MaxStarted+1)}), protocol.CodeBadRequest)
	_, err := e.s.Heartbeat(ctx, protocol.Heartbeat{Placeholder: ph, Started: make([]protocol.JobRef, protocol.MaxStarted+1)})
	errCode(t, err, protocol.CodeBadRequest)
	if c := e.summary()[protocol.DefaultQueue]; c["Q"] != 2 {
		t.Fatalf("refusals changed the queue: %v", c)
	}
}

// TestClaimAheadSQL: the claim of jobs ahead is the claim's text with the
// mark set, and the same parameters; a mixed claim takes the list of
// those ahead as ?3.
func TestClaimAheadSQL(t *testing.T) {
	t.Parallel()
	a, c := claimSQL(3, claimAll), claimSQL(3, claimNone)
	if strings.Count(c, "prefetched = NULL") != 1 || a != strings.Replace(c, "prefetched = NULL", "prefetched = 1", 1) {
		t.Fatalf("claimSQL(3, claimAll) = %q\nclaimSQL(3, claimNone) = %q", a, c)
	}
	e := newEnv(t)
	if _, err := e.s.w.ExecContext(context.Background(), a, 1, 2, 10, 11, 12); err != nil {
		t.Fatalf("claimSQL(3, claimAll) with 5 arguments: %v", err)
	}
	if _, err := e.s.w.ExecContext(context.Background(), claimSQL(3, claimSome), 1, 2, ",11,", 10, 11, 12); err != nil {
		t.Fatalf("claimSQL(3, claimSome) with 6 arguments: %v", err)
	}
}
