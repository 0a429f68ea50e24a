package metaqueue

import (
	"context"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// TestAfterAny: a failing job's after-any cleanup runs while its after-ok
// dependent is Blocked; the kinds survive a restart and a rerun, and
// mqstat -j's data names them apart.
func TestAfterAny(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	ids := e.submit(
		spec("a", "exit 1"),
		protocol.JobSpec{Target: "clean", Command: "echo clean", AfterAny: []string{"a"}},
		spec("next", "echo next", "a"),
		// A target needed both ways is needed Done.
		protocol.JobSpec{Target: "both", Command: "true", Prereqs: []string{"a"}, AfterAny: []string{"a"}},
		// Waiting on a target nobody submitted yet is fine: it waits.
		protocol.JobSpec{Target: "late", Command: "true", AfterAny: []string{"nobody-yet"}},
	)
	a, clean, next, both, late := ids[0], ids[1], ids[2], ids[3], ids[4]
	e.mustBe(clean, job.Waiting)
	e.mustBe(late, job.Waiting)
	if d := e.job(clean); len(d.AfterAny) != 1 || d.AfterAny[0] != "a" || len(d.Prereqs) != 0 ||
		len(d.WaitingOn) != 1 || !d.WaitingOn[0].AfterAny || d.WaitingOn[0].Ended {
		t.Fatalf("clean before a ran: %+v", d)
	}
	if d := e.job(both); len(d.Prereqs) != 1 || len(d.AfterAny) != 0 {
		t.Fatalf("both: prereqs %v after-any %v", d.Prereqs, d.AfterAny)
	}

	e.reopen() // the kinds are loaded back
	e.mustBe(clean, job.Waiting)
	ph := e.register("s")
	as := e.next(ph, 4)
	if len(as) != 1 || as[0].ID != a {
		t.Fatalf("assigned %+v, want only job %d", as, a)
	}
	e.report(ph, exit(as[0], 1))
	e.mustBe(a, job.Failed)
	e.mustBe(clean, job.Queued)
	e.mustBe(next, job.Blocked)
	e.mustBe(both, job.Blocked)
	if d := e.job(clean); len(d.WaitingOn) != 1 || !d.WaitingOn[0].Ended || d.WaitingOn[0].Counts["F"] != 1 {
		t.Fatalf("clean after a failed: %+v", d.WaitingOn)
	}
	if d := e.job(next); d.BlockedBy == nil || d.BlockedBy.Job != a {
		t.Fatalf("next: blocked by %+v", d.BlockedBy)
	}
	e.check()

	e.reopen() // a Queued after-any job stays so
	e.mustBe(clean, job.Queued)
	ph = e.register("s")
	as = e.next(ph, 4)
	if len(as) != 1 || as[0].ID != clean {
		t.Fatalf("assigned %+v, want only the cleanup %d", as, clean)
	}
	e.report(ph, ok(as[0]))
	e.mustBe(clean, job.Done)

	// Rerun the cleanup before a is mended: it still needs only a ended.
	if _, err := e.s.RerunWith(ctx, protocol.Rerun{Select: protocol.Select{IDs: []int64{clean}}}); err != nil {
		t.Fatalf("rerun clean: %v", err)
	}
	e.mustBe(clean, job.Queued)
	// Mending a reopens its target: the cleanup waits again.
	if _, err := e.s.RerunWith(ctx, protocol.Rerun{Select: protocol.Select{IDs: []int64{a}}, Command: "true"}); err != nil {
		t.Fatalf("rerun a: %v", err)
	}
	e.mustBe(clean, job.Waiting)
	e.mustBe(next, job.Waiting)
	e.reopen()
	e.mustBe(clean, job.Waiting)
	e.check()
}

// TestAfterAnyRefused: an after-any edge closes a cycle like an after-ok
// one, and a target cannot wait on itself.
func TestAfterAnyRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.submit(spec("x", "true", "y"))
	for _, tc := range []struct {
		name string
		js   protocol.JobSpec
		want string
	}{
		{"cycle through an after-any edge", protocol.JobSpec{Target: "y", Command: "true", AfterAny: []string{"x"}}, "cycle"},
		{"itself", protocol.JobSpec{Target: "z", Command: "true", AfterAny: []string{"z"}}, "own after-any"},
	} {
		_, err := e.s.Submit(context.Background(), []protocol.JobSpec{tc.js})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	if n := e.stat(protocol.Stat{}); len(n) != 1 {
		t.Errorf("after refusals %d jobs, want 1", len(n))
	}
	e.check()
}

// TestAfterAnyBulk: the bulk path spools and stores the after-any list.
func TestAfterAnyBulk(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b, err := e.s.NewBulk()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Add(1, []protocol.JobSpec{
		spec("a", "exit 1"),
		{Target: "clean", Command: "true", Prereqs: []string{"b"}, AfterAny: []string{"a"}},
		spec("b", "true"),
	}); err != nil {
		t.Fatal(err)
	}
	first, err := b.Commit(context.Background())
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	if d := e.job(first + 1); len(d.Prereqs) != 1 || d.Prereqs[0] != "b" || len(d.AfterAny) != 1 || d.AfterAny[0] != "a" {
		t.Fatalf("bulk job: prereqs %v after-any %v", d.Prereqs, d.AfterAny)
	}
	e.reopen()
	if d := e.job(first + 1); len(d.AfterAny) != 1 || d.State != "W" {
		t.Fatalf("after reopen: %+v", d)
	}
	e.check()
}

// TestPrereqKindMigration: version 24 adds job_prereqs.kind to a database
// without it; every stored prerequisite stays after-ok.
func TestPrereqKindMigration(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.submit1("a", "exit 1")
	b := e.submit1("b", "true", "a")
	e.downgrade(
		"ALTER TABLE job_prereqs DROP COLUMN kind",
		"UPDATE meta SET value = '23' WHERE key = 'schema'",
	)
	e.mustBe(a, job.Queued)
	e.mustBe(b, job.Waiting)
	if d := e.job(b); len(d.Prereqs) != 1 || len(d.AfterAny) != 0 {
		t.Fatalf("job %d: prereqs %v after-any %v", b, d.Prereqs, d.AfterAny)
	}
	c := e.submit(protocol.JobSpec{Target: "c", Command: "true", AfterAny: []string{"a"}})[0]
	ph := e.register("s")
	as := e.next(ph, 1)
	if len(as) != 1 || as[0].ID != a {
		t.Fatalf("assigned %+v", as)
	}
	e.report(ph, exit(as[0], 1))
	e.mustBe(b, job.Blocked)
	e.mustBe(c, job.Queued)
	e.check()
}
