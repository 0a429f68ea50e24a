package cls_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/internal/cls"
	"github.com/mq-hpc/mq/internal/placeholder/spool"
	"github.com/mq-hpc/mq/protocol"
)

// A local placeholder that lost its CLS spooled its reports (package
// spool): the next CLS on the home applies them as it starts, as that
// placeholder's own report. Job A, executing in its first attempt when
// the CLS stopped, ends Done in it; job B's spooled report is of its
// first attempt, which had failed and was run again (its second attempt
// runs on): that report is late and changes nothing. The spool file is
// gone once applied.
func TestSpooledReportsApplied(t *testing.T) {
	home := shortHome(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := cls.Config{Home: home, Lease: time.Hour, Version: "test"}
	first, stop := runCLS(t, ctx, cfg)
	cl, err := client.Dial(ctx, home, "", "cls-test")
	if err != nil {
		t.Fatal(err)
	}
	sub, err := client.Do(ctx, cl, protocol.OpSubmit, protocol.Submit{Jobs: []protocol.JobSpec{{Target: "a", Command: "true"}, {Target: "b", Command: "true"}}})
	if err != nil {
		t.Fatal(err)
	}
	a, b := sub.IDs[0], sub.IDs[1]
	rwc, err := client.DialSocket(ctx, first.Home())
	if err != nil {
		t.Fatal(err)
	}
	ph, err := client.New(ctx, rwc, protocol.RolePlaceholder, "fake-agent")
	if err != nil {
		t.Fatal(err)
	}
	reg, err := client.Do(ctx, ph, protocol.OpRegister, protocol.Register{Site: "local", Host: "h", PID: 1, Slots: 2, OutDir: filepath.Join(home, "output")})
	if err != nil {
		t.Fatal(err)
	}
	next := func(free int, reports ...protocol.Report) []protocol.Assignment {
		t.Helper()
		r, err := client.Do(ctx, ph, protocol.OpNext, protocol.Next{Placeholder: reg.ID, Free: free, Reports: reports})
		if err != nil {
			t.Fatal(err)
		}
		return r.Jobs
	}
	if jobs := next(2); len(jobs) != 2 {
		t.Fatalf("handed out %+v, want both jobs", jobs)
	}
	now := time.Now()
	if _, err := client.Do(ctx, ph, protocol.OpReport, protocol.ReportBatch{Placeholder: reg.ID, Reports: []protocol.Report{{ID: b, Attempt: 1, Exit: 1, Started: now, Finished: now}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Do(ctx, cl, protocol.OpRerun, protocol.Rerun{Select: protocol.Select{IDs: []int64{b}}}); err != nil {
		t.Fatal(err)
	}
	if jobs := next(1); len(jobs) != 1 || jobs[0].ID != b || jobs[0].Attempt != 2 {
		t.Fatalf("handed out %+v, want job %d's second attempt", jobs, b)
	}
	ph.Close()
	cl.Close()
	stop()

	// As the agent does when it gives up on its CLS.
	dir := filepath.Join(home, "output", spool.Dir)
	if _, err := spool.Write(dir, reg.ID, 0, []protocol.Report{
		{ID: a, Attempt: 1, Started: now, Finished: now},
		{ID: b, Attempt: 1, Started: now, Finished: now},
	}); err != nil {
		t.Fatal(err)
	}
	runCLS(t, ctx, cfg)
	cl, err = client.Dial(ctx, home, "", "cls-test")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	job := func(id int64) protocol.JobDetail {
		t.Helper()
		d, err := client.Do(ctx, cl, protocol.OpJob, protocol.JobQuery{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	// Applied before anything is served: no wait.
	if d := job(a); d.State != "D" || d.Attempts != 1 || len(d.History) != 0 {
		t.Errorf("job a: %s in %d attempts, history %+v; want done in its first", d.State, d.Attempts, d.History)
	}
	if d := job(b); d.State != "E" || d.Attempts != 2 {
		t.Errorf("job b: %s in %d attempts; want its second still executing", d.State, d.Attempts)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("left in the spool: %v", left)
	}
}

// runCLS runs a CLS with cfg until stop (or the test's end) stops it.
func runCLS(t *testing.T, ctx context.Context, cfg cls.Config) (c *cls.CLS, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	c, err := cls.New(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		c.Close()
	}
	t.Cleanup(stop)
	return c, stop
}
