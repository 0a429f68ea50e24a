package placeholder

import (
	"cmp"
	"context"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/diskroom"
	"github.com/mq-hpc/mq/internal/jobexec"
	"github.com/mq-hpc/mq/internal/placeholder/memlimit"
	"github.com/mq-hpc/mq/internal/resource"
	"github.com/mq-hpc/mq/internal/runs"
	"github.com/mq-hpc/mq/protocol"
)

// holdReaps makes the leaders of the attempts held accepts (nil: all)
// survive SIGKILL as a process in uninterruptible sleep does: their exit
// is not seen until release, which the test's end calls too. A real
// D-state process needs a hung filesystem and root; the killed process
// here is a zombie the agent does not see end. Set before the agent runs.
func holdReaps(t *testing.T, a *Agent, held func(protocol.JobRef) bool) (release func()) {
	gate := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	a.awaitExit = func(ref protocol.JobRef, pidfd int) bool {
		if held == nil || held(ref) {
			<-gate
		}
		return jobexec.AwaitExit(pidfd)
	}
	return release
}

// stuckNote is what a report and the agent's broken error say of
// processes given d after SIGKILL.
func stuckNote(d string) string {
	return "its processes did not end " + d + "s after SIGKILL (uninterruptible sleep: a hung filesystem?)"
}

// overMemory is a memory limiter whose watch finds every job over its
// grant at once and SIGKILLs its group, as the RSS watchdog does after
// its grace.
type overMemory struct{}

func (overMemory) Prepare(*syscall.SysProcAttr, int64) (memlimit.Watch, error) {
	return overMemory{}, nil
}

func (overMemory) Watch(_ context.Context, pgid int) (string, bool) {
	syscall.Kill(-pgid, syscall.SIGKILL)
	return "max RSS 2 GiB over its request of 1 GiB", true
}

func (overMemory) Peak() int64  { return 0 }
func (overMemory) Close() error { return nil }

// waitFor polls cond until it holds, failing the test after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s after a minute", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A job whose processes do not die of SIGKILL (a hung filesystem) is
// reported ended Agent.unkillable after it, however it was killed, with
// the end that kill gives at the CLS and words that say why; the agent
// marks itself broken. It waited for ever: the slot held, the job
// executing at the CLS whatever mqdel, its limits or the CLS's stop said.
func TestUnkillableJobReported(t *testing.T) {
	t.Parallel()
	walltime := protocol.WalltimeReason(time.Hour)
	for _, tc := range []struct {
		name string
		asg  protocol.Assignment
		cmd  string // "": sleep 600
		// setup readies the agent; kill kills the running job, unless its
		// limit does; plain is the reason such a kill gives a job that
		// dies.
		setup func(a *Agent)
		kill  func(a *Agent, ref protocol.JobRef, cancel func())
		plain string
	}{
		{name: "ceiling", asg: protocol.Assignment{Ceiling: 0.2}, plain: protocol.ReasonCeiling},
		{name: "time limit", asg: protocol.Assignment{Env: []string{protocol.EnvTimeLimit + "=0.2"}}, plain: protocol.TimeLimitReason(0.2)},
		{name: "deleted", kill: func(a *Agent, ref protocol.JobRef, _ func()) { a.kill(ref, protocol.ReasonKilled) }, plain: protocol.ReasonKilled},
		{name: "stopped", kill: func(_ *Agent, _ protocol.JobRef, cancel func()) { cancel() }, plain: protocol.ReasonInterrupted},
		{name: "walltime", kill: func(a *Agent, _ protocol.JobRef, _ func()) { a.killAll(walltime) }, plain: walltime},
		{name: "memory", asg: protocol.Assignment{Grant: &protocol.Capacity{CPUs: 1, Mem: 1 << 30}}, setup: func(a *Agent) { a.cfg.MemLimiter = overMemory{} },
			plain: protocol.MemoryReason("max RSS 2 GiB over its request of 1 GiB")},
		{name: "output cap", asg: protocol.Assignment{Queue: "q", MaxOutput: 1000}, cmd: "exec yes",
			plain: "output: stdout and stderr passed the cap of 1000 bytes per job (queue q's --max-output); the job was stopped"},
		{name: "disk others filled", cmd: "exec yes", setup: func(a *Agent) {
			a.cfg.OutputReserve = 1 << 20
			a.statfs = func(string) (diskroom.Free, error) { return diskroom.Free{Bytes: 1000}, nil }
		}, plain: protocol.ReasonDiskFull},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := runner(t, "")
			if tc.setup != nil {
				tc.setup(a)
			}
			a.unkillable = 300 * time.Millisecond
			holdReaps(t, a, nil)
			asg := tc.asg
			asg.ID, asg.Attempt, asg.Command, asg.Target = 9, 2, cmp.Or(tc.cmd, "sleep 600"), "t"
			ref := protocol.JobRef{ID: asg.ID, Attempt: asg.Attempt}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan protocol.Report, 1)
			go func() { done <- a.run(ctx, asg) }()
			if tc.kill != nil {
				waitFor(t, "the job to run", func() bool { return slices.Contains(a.runningRefs(), ref) })
				tc.kill(a, ref, cancel)
			}
			var rep protocol.Report
			select {
			case rep = <-done:
			case <-time.After(time.Minute):
				t.Fatal("the agent still waits for a job that did not die of SIGKILL")
			}
			note := stuckNote("0.3")
			if rep.Exit != 128+int(syscall.SIGKILL) || rep.Finished.Before(rep.Started) {
				t.Errorf("report %+v; want exit 137 and its times", rep)
			}
			plain := protocol.Report{Exit: rep.Exit, Reason: tc.plain}
			if got, want := runs.OutcomeOf(rep), runs.OutcomeOf(plain); got != want {
				t.Errorf("reason %q ends it as %v; a kill for %q as %v", rep.Reason, got, tc.plain, want)
			}
			if _, stopped := protocol.WalltimeStopped(rep.Reason); stopped != (tc.plain == walltime) {
				t.Errorf("reason %q: stopped for the walltime %v", rep.Reason, stopped)
			}
			if !strings.HasPrefix(rep.Reason, tc.plain) || !strings.Contains(rep.Reason+rep.OutputLost, note) {
				t.Errorf("reason %q, output lost %q; want %q and why: %q", rep.Reason, rep.OutputLost, tc.plain, note)
			}
			if err := a.brokenErr(); err == nil || !strings.Contains(err.Error(), note) {
				t.Errorf("the agent is not broken, saying why: %v", err)
			}
			if slices.Contains(a.runningRefs(), ref) {
				t.Error("the attempt reported is still named running")
			}
		})
	}
}

// A unit whose processes did not end after SIGKILL gives back nothing:
// they hold its cores, memory and GPUs still.
func TestStuckUnitKeepsGrant(t *testing.T) {
	t.Parallel()
	pool, err := resource.NewPool(resource.Capacity{CPUs: 2, Mem: 4 << 30})
	if err != nil {
		t.Fatal(err)
	}
	g, ok := pool.Take(resource.Request{CPUs: 1, Mem: 1 << 30})
	if !ok {
		t.Fatal("no grant")
	}
	w := &workLoop{a: New(Config{}), pool: pool, free: 1, running: 1}
	w.unitEnded(endedUnit{rep: protocol.Report{ID: 1, Attempt: 1}, grant: g, stuck: true})
	if w.running != 0 || w.free != 1 || pool.Free().CPUs != 1 || pool.Free().Mem != 3<<30 {
		t.Errorf("after a stuck unit: %d running, %d free, pool free %+v; want 0, 1 and what it held still taken", w.running, w.free, pool.Free())
	}
}

// A job past its ceiling whose processes do not die is reported once,
// failed for the ceiling, at the CLS; the agent takes no more jobs and
// exits once its other job ends, saying why. When the processes end at
// last, nothing more is reported and the job stays as it was.
func TestAgentUnkillableJob(t *testing.T) {
	t.Parallel()
	c := newCLS(t)
	ctx := context.Background()
	c.ceiling("short", 0.5)
	dir := t.TempDir()
	other := c.submit(protocol.JobSpec{Target: "b", Command: "exec sleep 600", Cwd: dir})[0]
	var logs logBuffer
	cfg := agentConfig(t, 2)
	cfg.Dial, cfg.Log = c.dial, slog.New(slog.NewTextHandler(&logs, nil))
	a := New(cfg)
	a.unkillable = 500 * time.Millisecond
	release := holdReaps(t, a, func(r protocol.JobRef) bool { return r.ID != other })
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	waitFor(t, "the other job to run", func() bool { return stateOf(t, c, other) == "E" })
	stuck := c.submit(protocol.JobSpec{Queue: "short", Target: "a", Command: "exec sleep 600", Cwd: dir})[0]
	e := c.wait(stuck)[stuck]
	if e.State != "F" || !strings.Contains(e.Reason, "ceiling") {
		t.Fatalf("the job past its ceiling ended %+v; want failed for the ceiling", e)
	}
	if err := a.brokenErr(); err == nil || !strings.Contains(err.Error(), stuckNote("0.5")) {
		t.Fatalf("the agent is not broken, saying why: %v", err)
	}
	later := c.submit(protocol.JobSpec{Target: "c", Command: "true", Cwd: dir})[0]
	before, _ := c.store.Inspect().Job(ctx, stuck)
	reports := c.count(carried, false)
	release() // the processes end at last
	waitFor(t, "the late end to be seen", func() bool { return strings.Contains(logs.String(), "reported as not ending after SIGKILL ended") })
	after, _ := c.store.Inspect().Job(ctx, stuck)
	if n := c.count(carried, false); n != reports {
		t.Errorf("%d more requests carried reports after the late end", n-reports)
	}
	if !reflect.DeepEqual(after, before) {
		t.Errorf("after the late end the job is %+v; was %+v", after, before)
	}
	if s := stateOf(t, c, later); s != "Q" {
		t.Errorf("a job submitted to the broken agent is %s; want Q", s)
	}
	if s := stateOf(t, c, other); s != "E" {
		t.Errorf("the other job is %s; want it running on", s)
	}
	cancel()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "cannot run them") {
			t.Errorf("the agent ended with %v; want why its node cannot run jobs", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the agent did not stop")
	}
	if s := stateOf(t, c, other); s != "Q" {
		t.Errorf("the other job, stopped with the agent, is %s; want Q", s)
	}
}

// The agent's own end does not hang on a job that does not die: stopped
// (SIGTERM to the placeholder), it gives such a job less than its last
// reports' grace and reports it interrupted, requeued; past its walltime
// it reports it stopped for the walltime. Either way it exits, broken.
func TestAgentStopsWithUnkillableJob(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		stop func(cancel func(), clock *fakeClock)
		want func(reason string) bool
	}{
		// The default timeout: longer than the test waits.
		{"stopped", func(cancel func(), _ *fakeClock) { cancel() }, func(r string) bool { return r == protocol.ReasonInterrupted+": "+stuckNote("5") }},
		{"walltime", func(_ func(), clock *fakeClock) { clock.advance(time.Hour) }, func(r string) bool {
			w, ok := protocol.WalltimeStopped(r)
			return ok && w == time.Hour && strings.HasSuffix(r, "; "+stuckNote("0.5"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCLS(t)
			id := c.submit(protocol.JobSpec{Target: "t", Command: "exec sleep 600", Cwd: t.TempDir()})[0]
			clock := &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
			cfg := agentConfig(t, 1)
			cfg.Dial, cfg.Walltime, cfg.Now = c.dial, time.Hour, clock.Now
			// Shown if it fails: it failed once under load, saying too
			// little to tell why.
			var logs logBuffer
			cfg.Log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			defer func() {
				if t.Failed() {
					t.Logf("the agent's log:\n%s", logs.String())
				}
			}()
			a := New(cfg)
			if tc.name == "walltime" {
				a.unkillable = 500 * time.Millisecond
			}
			holdReaps(t, a, nil)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- a.Run(ctx) }()
			waitFor(t, "the job to run", func() bool { return stateOf(t, c, id) == "E" })
			tc.stop(cancel, clock)
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), "did not end") {
					t.Errorf("the agent ended with %v; want why its node cannot run jobs", err)
				}
			case <-time.After(40 * time.Second):
				t.Fatal("the agent does not stop: it waits for a job that did not die of SIGKILL")
			}
			d, err := c.store.Inspect().Job(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if d.State != "Q" || len(d.History) != 1 || !tc.want(d.History[0].Reason) {
				t.Fatalf("job %s, history %+v; want Q, its attempt stopped and why it did not end", d.State, d.History)
			}
		})
	}
}
