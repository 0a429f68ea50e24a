package metaqueue

import (
	"context"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// A failed job rerun with a new command (mqsub --rerun ID --command) runs
// it in its place: same id and target, its blocked dependents waiting on
// it again and running after it; its earlier attempt keeps the command it
// ran; a restart keeps the new one. A request naming more than one job, or
// a job that has not ended, changes nothing.
func TestRerunWithCommand(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	f := e.submit1("f", "exit 1")
	dep := e.submit1("dep", "echo dep", "f")
	other := e.submit1("other", "sleep 1")
	ph := e.register("s")
	for _, a := range e.next(ph, 2) {
		switch a.ID {
		case f:
			e.report(ph, exit(a, 1))
		case other:
			// stays executing
		default:
			t.Fatalf("assigned %d", a.ID)
		}
	}
	e.mustBe(dep, job.Blocked)

	for _, tc := range []struct {
		name string
		req  protocol.Rerun
		want string // in the error or the refusal
	}{
		{"two jobs", protocol.Rerun{Select: protocol.Select{IDs: []int64{f, dep}}, Command: "true"}, "names one job"},
		{"a range", protocol.Rerun{Select: protocol.Select{First: f, Last: dep}, Command: "true"}, "names one job"},
		{"a target", protocol.Rerun{Select: protocol.Select{Target: "f"}, Command: "true"}, "names one job"},
		{"NUL", protocol.Rerun{Select: protocol.Select{IDs: []int64{f}}, Command: "a\x00b"}, "NUL"},
		{"executing", protocol.Rerun{Select: protocol.Select{IDs: []int64{other}}, Command: "true"}, "only ended jobs"},
	} {
		r, err := e.s.RerunWith(ctx, tc.req)
		got := ""
		if err != nil {
			got = err.Error()
		} else if len(r.Errors) > 0 {
			got = r.Errors[0]
		}
		if !strings.Contains(got, tc.want) || len(r.IDs) != 0 {
			t.Errorf("%s: %+v, %v; want %q", tc.name, r, err, tc.want)
		}
	}
	e.mustBe(f, job.Failed)
	if c := e.job(other).Command; c != "sleep 1" {
		t.Fatalf("a refused rerun changed the command to %q", c)
	}

	r, err := e.s.RerunWith(ctx, protocol.Rerun{Select: protocol.Select{IDs: []int64{f}}, Command: "echo mended"})
	if err != nil || len(r.IDs) != 1 || r.IDs[0] != f {
		t.Fatalf("mend: %+v, %v", r, err)
	}
	e.mustBe(f, job.Queued)
	e.mustBe(dep, job.Waiting)
	d := e.job(f)
	if d.Command != "echo mended" || d.Target != "f" {
		t.Fatalf("mended job: command %q, target %q", d.Command, d.Target)
	}
	if len(d.History) != 1 || d.History[0].Command != "exit 1" || !strings.Contains(d.History[0].Reason, "with a new command") {
		t.Fatalf("history %+v", d.History)
	}
	e.reopen()
	ph = e.register("s")
	as := e.next(ph, 1)
	if len(as) != 1 || as[0].ID != f || as[0].Command != "echo mended" || as[0].Attempt != 2 {
		t.Fatalf("after a restart: %+v", as)
	}
	e.report(ph, ok(as[0]))
	e.mustBe(dep, job.Queued)
	e.check()
}
