package metaqueue

import (
	"context"
	"testing"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// Reports a placeholder spooled when it lost its CLS, applied after a
// restart (the store reloaded), end its job as its own report would, in
// the attempt it ran; applied again (a crash between the commit and the
// spool file's removal) they change nothing. Reports of a placeholder of
// another site than the spool serves are refused (forbidden), and change
// nothing either.
func TestReportSpooled(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	id := e.submit1("t", "true")
	ph := e.register("remote")
	as := e.next(ph, 1)
	if len(as) != 1 {
		t.Fatalf("handed out %v", as)
	}
	e.reopen()
	e.mustBe(id, job.Executing)
	reps := []protocol.Report{ok(as[0])}
	only := func(site string) func(string) bool { return func(s string) bool { return s == site } }
	errCode(t, e.s.ReportSpooled(ctx, ph, reps, only("local")), protocol.CodeForbidden)
	e.mustBe(id, job.Executing)
	for range 2 {
		if err := e.s.ReportSpooled(ctx, ph, reps, only("remote")); err != nil {
			t.Fatal(err)
		}
		if d := e.job(id); d.State != "D" || d.Attempts != 1 || len(d.History) != 0 {
			t.Fatalf("job %s in %d attempts, history %+v; want done in its first", d.State, d.Attempts, d.History)
		}
	}
	e.check()
}
