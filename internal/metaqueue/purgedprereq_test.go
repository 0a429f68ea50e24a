package metaqueue

import (
	"context"
	"testing"
	"time"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// TestPurgedPrereqsInDetail: a job whose prerequisite target's jobs were
// all purged is told apart from one waiting for a target with no jobs
// yet. Its detail counts the purged jobs (done ones complete the target,
// failed ones keep it failed), and a job blocked by purged failed jobs,
// directly or through a blocked target, names that target, with no job
// left to name.
func TestPurgedPrereqsInDetail(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := e.submit1("f", "false")
	d := e.submit1("d", "true")
	ph := e.register("s")
	e.runAll(ph, f)
	e.mustBe(f, job.Failed)
	e.mustBe(d, job.Done)
	e.advance(time.Hour)
	if r := e.purge(protocol.Purge{EndedBefore: 60, Select: protocol.Select{All: true}}); r.Purged != 2 {
		t.Fatalf("purge = %+v, want f and d", r)
	}
	late := e.submit1("late", "x", "f")
	e.mustBe(late, job.Blocked)
	next := e.submit1("next", "x", "late")
	e.mustBe(next, job.Blocked)
	after := e.submit1("after", "x", "d")
	e.mustBe(after, job.Queued)

	detail := func(id int64) protocol.JobDetail {
		t.Helper()
		dt, err := e.s.Inspect().Job(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return dt
	}
	for _, id := range []int64{late, next} {
		if b := detail(id).BlockedBy; b == nil || b.Job != 0 || b.Target != "f" {
			t.Errorf("job %d: blocked by %+v, want target f (its failed job purged)", id, b)
		}
	}
	if w := detail(late).WaitingOn; len(w) != 1 || w[0].PurgedBad != 1 || w[0].PurgedDone != 0 || w[0].Complete {
		t.Errorf("late waits on %+v, want f with 1 purged failed job, not complete", w)
	}
	if w := detail(after).WaitingOn; len(w) != 1 || w[0].PurgedDone != 1 || !w[0].Complete {
		t.Errorf("after waits on %+v, want d complete with 1 purged done job", w)
	}
}
