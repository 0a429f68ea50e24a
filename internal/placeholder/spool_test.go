package placeholder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue"
	"github.com/mq-hpc/mq/internal/placeholder/spool"
	"github.com/mq-hpc/mq/protocol"
)

// lockedLog is a log an agent writes while the test reads it.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// unreachableCLS is a CLS that goes away for good once down is set: each
// dial fails, moving the agent's clock 4 minutes on.
func unreachableCLS(c *cls, clock *fakeClock, down *atomic.Bool) func(ctx context.Context) (io.ReadWriteCloser, error) {
	return func(ctx context.Context) (io.ReadWriteCloser, error) {
		if down.Load() {
			clock.advance(4 * time.Minute)
			return nil, fmt.Errorf("dial unix /nowhere: %w", syscall.ECONNREFUSED)
		}
		return c.dial(ctx)
	}
}

// deliverOnce applies what the agent spooled in out as its CLS would
// when it next serves the site, and checks it held one report.
func deliverOnce(t *testing.T, c *cls, a *Agent, out string) {
	t.Helper()
	deliver(t, c, a, out, 1)
}

// deliver applies what the agent spooled in out as its CLS would when it
// next serves the site, and checks it held want reports.
func deliver(t *testing.T, c *cls, a *Agent, out string, want int) {
	t.Helper()
	n, err := spool.Deliver(spool.OS{}, filepath.Join(out, spool.Dir), os.Getuid(), func(f spool.File) error {
		if f.Placeholder != a.ID() {
			t.Errorf("spooled for placeholder %d, not %d", f.Placeholder, a.ID())
		}
		return c.store.ReportBatch(context.Background(), protocol.ReportBatch{Placeholder: f.Placeholder, Reports: f.Reports})
	}, slog.New(slog.DiscardHandler))
	if err != nil || n != want {
		t.Fatalf("Deliver: %d reports, %v; want %d", n, err, want)
	}
}

// TestAgentDrainsUnreachable: an agent with a slot free, whose poll
// waits at the CLS, gives up on it when it stays unreachable past
// Reconnect, but not on its running job: it takes no more, lets the job
// run to its end and spools its report, which ends it Done in its first
// attempt.
func TestAgentDrainsUnreachable(t *testing.T) {
	t.Parallel()
	c := newCLSLease(t, time.Hour)
	d := newSpoolingAgent(t, c, 2)
	d.drain(t, c)
	deliverOnce(t, c, d.a, d.cfg.OutDir)
	ranOnce(t, c, d.id, d.dir)
}

// TestAgentSpoolsReports: the CLS goes away while a job runs and stays
// away past Reconnect (by the agent's clock, moved 4 minutes a failed
// dial); the job ends meanwhile, and the agent, giving up, writes its
// report to the spool under its output directory. Applied as that
// placeholder's report (what the CLS does when it next serves the site),
// it ends the job Done in its first attempt; applied again, it changes
// nothing.
func TestAgentSpoolsReports(t *testing.T) {
	t.Parallel()
	c := newCLSLease(t, time.Hour)
	clock := &fakeClock{now: time.Now()}
	var down atomic.Bool
	dial := func(ctx context.Context) (io.ReadWriteCloser, error) {
		if down.Load() {
			clock.advance(4 * time.Minute)
			return nil, fmt.Errorf("dial unix /nowhere: %w", syscall.ECONNREFUSED)
		}
		return c.dial(ctx)
	}
	dir := t.TempDir()
	ids := c.submit(protocol.JobSpec{Target: "t", Command: "touch started; while [ ! -e release ]; do sleep 0.02; done; echo ran >> ran.txt", Cwd: dir})
	cfg := agentConfig(t, 1)
	cfg.Dial, cfg.Now, cfg.Reconnect = dial, clock.Now, 10*time.Minute
	a := New(cfg)
	done := make(chan error, 1)
	go func() { done <- a.Run(context.Background()) }()
	waitStarted(t, dir)
	down.Store(true)
	c.cut()
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	runEnds(t, done, time.Minute, "unreachable for 10m0s")
	spooled := filepath.Join(cfg.OutDir, spool.Dir)
	apply := func(f spool.File) error {
		if f.Placeholder != a.ID() {
			t.Errorf("spooled for placeholder %d, not %d", f.Placeholder, a.ID())
		}
		return c.store.ReportBatch(context.Background(), protocol.ReportBatch{Placeholder: f.Placeholder, Reports: f.Reports})
	}
	for range 2 {
		// A second time: as the CLS may after a crash between its commit
		// and the file's removal.
		files, _ := filepath.Glob(filepath.Join(spooled, "*"+spool.Suffix))
		for _, f := range files {
			if err := os.Link(f, f+".again"); err != nil {
				t.Fatal(err)
			}
		}
		n, err := spool.Deliver(spool.OS{}, spooled, os.Getuid(), apply, slog.New(slog.DiscardHandler))
		if err != nil || n != 1 {
			t.Fatalf("Deliver: %d reports, %v; want the job's one", n, err)
		}
		for _, f := range files {
			if err := os.Rename(f+".again", f); err != nil {
				t.Fatal(err)
			}
		}
		ranOnce(t, c, ids[0], dir)
	}
}

// TestAgentOutputWhileDialHangs: the connection drops while a job runs,
// and the agent's next dial hangs (a network that drops packets: it
// holds a.mu up to its 30 s timeout). The job ends meanwhile: its output
// reaches the stream file at once, not after the dial, and once the CLS
// is reached again the job is Done in one attempt with its output whole.
// (Its output took the placeholder's id under a.mu and waited out the
// dial: reported "output: not written in time", and lost.)
func TestAgentOutputWhileDialHangs(t *testing.T) {
	t.Parallel()
	c := newCLSLease(t, time.Hour)
	var hang atomic.Bool
	release, dialing := make(chan struct{}), make(chan struct{}, 1)
	dial := func(ctx context.Context) (io.ReadWriteCloser, error) {
		if hang.Load() {
			select {
			case dialing <- struct{}{}:
			default:
			}
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return c.dial(ctx)
	}
	dir := t.TempDir()
	ids := c.submit(protocol.JobSpec{Target: "t", Command: "touch started; while [ ! -e release ]; do sleep 0.02; done; echo ran >> ran.txt; echo finished", Cwd: dir})
	cfg := agentConfig(t, 1)
	cfg.Dial, cfg.Streams = dial, true
	startAgentCfg(t, c, cfg)
	waitStarted(t, dir)
	hang.Store(true)
	c.cut()
	select {
	case <-dialing:
	case <-time.After(time.Minute):
		t.Fatal("the agent did not dial again after the cut")
	}
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Well within the dial's 30 s: the output is in a stream file while
	// the dial still hangs.
	waitUntil(t, 20*time.Second, func() error {
		files, _ := filepath.Glob(filepath.Join(cfg.OutDir, "streams", "*.mqs"))
		for _, f := range files {
			if b, _ := os.ReadFile(f); strings.Contains(string(b), "finished") {
				return nil
			}
		}
		return errors.New("the job's output is not in a stream file")
	})
	hang.Store(false)
	close(release)
	ranOnce(t, c, ids[0], dir)
	d, err := c.store.Inspect().Job(context.Background(), ids[0])
	if err != nil || d.OutputLost != "" {
		t.Fatalf("job %+v, %v: output lost", d, err)
	}
}

// heldAgent is an agent at one slot that runs a job (first: until the
// file release appears in dir) and holds another fetched ahead (held: it
// appends to dir/held.txt), with a CLS that goes away for good once down
// is set.
type heldAgent struct {
	c           *cls
	a           *Agent
	out, dir    string
	down        atomic.Bool
	log         lockedLog
	done        chan error
	first, held int64
}

func startHeldAgent(t *testing.T) *heldAgent {
	t.Helper()
	h := &heldAgent{c: newCLSLease(t, time.Hour), dir: t.TempDir(), done: make(chan error, 1)}
	clock := &fakeClock{now: time.Now()}
	cfg := agentConfig(t, 1)
	// A wide window: jobs of seconds count as short, so the agent fetches
	// ahead, and a held job is not given back for waiting long, even by
	// the clock the failed dials move.
	cfg.Dial, cfg.Now, cfg.Reconnect, cfg.prefetchWindow = unreachableCLS(h.c, clock, &h.down), clock.Now, 10*time.Minute, time.Hour
	cfg.Log = slog.New(slog.NewTextHandler(&h.log, nil))
	h.a, h.out = New(cfg), cfg.OutDir
	warm := h.c.submit(slices.Repeat([]protocol.JobSpec{{Target: "warm", Command: "true", Cwd: h.dir}}, 20)...)
	go func() { h.done <- h.a.Run(context.Background()) }()
	h.c.wait(warm...)
	both := h.c.submit(protocol.JobSpec{Target: "first", Command: "touch started; while [ ! -e release ]; do sleep 0.02; done; echo ran >> ran.txt", Cwd: h.dir},
		protocol.JobSpec{Target: "held", Command: "echo ran >> held.txt", Cwd: h.dir})
	h.first, h.held = both[0], both[1]
	waitState(t, h.c, "the first job running, the other held", func(st map[int64]string) bool {
		return st[h.first] == "E" && st[h.held] == "P" && exists(filepath.Join(h.dir, "started"))
	}, h.first, h.held)
	return h
}

// handedBack checks that the agent, its first job released, gave up on
// its CLS without starting the held job, and spooled both jobs' reports.
// Applied, they end the first job Done in one attempt and requeue the
// held one, its attempt not counted (listed handed back unstarted), for
// another agent to run.
func (h *heldAgent) handedBack(t *testing.T) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(h.dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-h.done:
		if err == nil || !strings.Contains(err.Error(), "unreachable for 10m0s") {
			t.Fatalf("Run: %v, want the CLS unreachable for 10m0s", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the agent did not end once its job did")
	}
	if exists(filepath.Join(h.dir, "held.txt")) {
		t.Fatal("the held job started after the agent gave up on its CLS")
	}
	deliver(t, h.c, h.a, h.out, 2)
	ranOnce(t, h.c, h.first, h.dir)
	d, err := h.c.store.Inspect().Job(context.Background(), h.held)
	if err != nil {
		t.Fatal(err)
	}
	if d.State != "Q" || len(d.History) != 0 || len(d.Unstarted) != 1 || d.Unstarted[0].Attempt != 1 || d.Unstarted[0].Reason != metaqueue.ReasonHandedBack {
		t.Fatalf("held job: state %s, history %+v, unstarted %+v; want Q, attempt 1 handed back unstarted, no history", d.State, d.History, d.Unstarted)
	}
	startAgent(t, h.c, 1)
	if e := h.c.wait(h.held)[h.held]; e.State != "D" {
		t.Fatalf("held job ended %+v", e)
	}
	if d, err := h.c.store.Inspect().Job(context.Background(), h.held); err != nil || d.Attempts != 2 || len(d.History) != 0 {
		t.Fatalf("held job %+v, %v: want it run on attempt 2, no attempt counted", d, err)
	}
	if b, _ := os.ReadFile(filepath.Join(h.dir, "held.txt")); string(b) != "ran\n" {
		t.Fatalf("held.txt = %q: the held job ran other than once", b)
	}
}

// TestAgentHandsBackHeldWhenUnreachable: an agent runs a job and holds
// another fetched ahead when its CLS goes away, and stays away past
// Reconnect (found by the running job's heartbeats: no poll is out while
// every slot is busy and a job is held). The agent takes no more work,
// lets the running job end and hands the held one back unstarted, in the
// spool with the other's report (handedBack). (The heartbeats' finding
// was ignored: the agent started the held job when the first ended, its
// CLS gone, and gave up only when a poll failed in turn.)
func TestAgentHandsBackHeldWhenUnreachable(t *testing.T) {
	t.Parallel()
	h := startHeldAgent(t)
	h.down.Store(true)
	h.c.cut()
	waitUntil(t, time.Minute, func() error {
		if !strings.Contains(h.log.String(), "taking no more jobs; the running ones go on") {
			return fmt.Errorf("the agent did not give up on its CLS and drain:\n%s", h.log.String())
		}
		return nil
	})
	h.handedBack(t)
}

// TestAgentHandsBackHeldOnAbort: the running job ends just as a heartbeat
// finds the CLS gone, before the work loop wakes to it (set here without
// waking it): the held job does not start, and with nothing left running
// the agent stops at once (decide's abort). The held job goes to the
// spool handed back, as when the agent drains (handedBack). (It was
// dropped: its lease would lapse, an attempt counted as lost.)
func TestAgentHandsBackHeldOnAbort(t *testing.T) {
	t.Parallel()
	h := startHeldAgent(t)
	h.down.Store(true)
	h.c.cut()
	err := error(unreachable{errors.New("the CLS has been unreachable for 10m0s")})
	h.a.lostCLS.Store(&err)
	h.handedBack(t)
}

// slowCloser dials connections whose agent's end, once held is set,
// waits in Close for release (a transport slow to close): meanwhile the
// agent still reads what the CLS writes. closing is closed at the first
// such Close.
type slowCloser struct {
	held             atomic.Bool
	once, freed      sync.Once
	closing, release chan struct{}
}

func newSlowCloser(t *testing.T) *slowCloser {
	s := &slowCloser{closing: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(s.free)
	return s
}

func (s *slowCloser) free() { s.freed.Do(func() { close(s.release) }) }

func (s *slowCloser) dial(c *cls) func(ctx context.Context) (io.ReadWriteCloser, error) {
	return func(ctx context.Context) (io.ReadWriteCloser, error) {
		rwc, err := c.dial(ctx)
		return slowClose{rwc, s}, err
	}
}

type slowClose struct {
	io.ReadWriteCloser
	s *slowCloser
}

func (c slowClose) Close() error {
	if c.s.held.Load() {
		c.s.once.Do(func() { close(c.s.closing) })
		<-c.s.release
	}
	return c.ReadWriteCloser.Close()
}

// closingAfterPoll waits for the agent to send a poll, holds its
// connections' Close, calls stop, and waits for the agent to close one.
func (s *slowCloser) closingAfterPoll(t *testing.T, c *cls, stop func()) {
	t.Helper()
	waitUntil(t, time.Minute, func() error {
		if c.count(protocol.OpNext.Name, false) == 0 {
			return errors.New("the agent sent no poll")
		}
		return nil
	})
	s.held.Store(true)
	stop()
	select {
	case <-s.closing:
	case <-time.After(time.Minute):
		t.Fatal("the agent did not close its connection")
	}
}

// slowClosingAgent is an agent of one slot, cfg, whose connections to
// its CLS c (an hour's lease) are slow to close, as sc holds them.
func slowClosingAgent(t *testing.T) (c *cls, sc *slowCloser, cfg Config, a *Agent) {
	t.Helper()
	c = newCLSLease(t, time.Hour)
	sc = newSlowCloser(t)
	cfg = agentConfig(t, 1)
	cfg.Dial = sc.dial(c)
	return c, sc, cfg, New(cfg)
}

// handedBackUnstarted checks that job id, which would write dir/ran.txt,
// never ran and is queued again, its first attempt handed back unstarted.
func handedBackUnstarted(c *cls, id int64, dir string) error {
	if exists(filepath.Join(dir, "ran.txt")) {
		return errors.New("the job started")
	}
	d, err := c.store.Inspect().Job(context.Background(), id)
	if err != nil {
		return err
	}
	if d.State != "Q" || len(d.History) != 0 || len(d.Unstarted) != 1 || d.Unstarted[0].Attempt != 1 || d.Unstarted[0].Reason != metaqueue.ReasonHandedBack {
		return fmt.Errorf("job %d: state %s, history %+v, unstarted %+v; want Q, attempt 1 handed back unstarted, no history", id, d.State, d.History, d.Unstarted)
	}
	return nil
}

// spoolingAgent is an agent whose CLS becomes unreachable for good
// (down) once its one job, id, which runs in dir until dir/release is
// there, has started: drain runs it until it has drained to its spool.
type spoolingAgent struct {
	a    *Agent
	cfg  Config
	id   int64
	dir  string
	down atomic.Bool
	log  lockedLog
}

// newSpoolingAgent submits the job to c and makes the agent, of slots
// slots, which has 10 minutes to reach its CLS again before it gives up
// on it; each failed dial moves its clock 4 minutes on.
func newSpoolingAgent(t *testing.T, c *cls, slots int) *spoolingAgent {
	t.Helper()
	s := &spoolingAgent{dir: t.TempDir()}
	clock := &fakeClock{now: time.Now()}
	s.id = c.submit(protocol.JobSpec{Target: "t", Command: "touch started; while [ ! -e release ]; do sleep 0.02; done; echo ran >> ran.txt", Cwd: s.dir})[0]
	s.cfg = agentConfig(t, slots)
	s.cfg.Dial, s.cfg.Now, s.cfg.Reconnect = unreachableCLS(c, clock, &s.down), clock.Now, 10*time.Minute
	s.cfg.Log = slog.New(slog.NewTextHandler(&s.log, nil))
	s.a = New(s.cfg)
	return s
}

func (s *spoolingAgent) drain(t *testing.T, c *cls) {
	t.Helper()
	drainToSpool(t, c, s.a, &s.down, &s.log, s.dir)
}

// drainToSpool runs a, whose CLS c becomes unreachable for good (down) once
// its job in dir has started, until it has given up on c (log says so),
// its job released has ended, and it has ended, the job's report spooled.
func drainToSpool(t *testing.T, c *cls, a *Agent, down *atomic.Bool, log *lockedLog, dir string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- a.Run(context.Background()) }()
	waitStarted(t, dir)
	down.Store(true)
	c.cut()
	waitUntil(t, time.Minute, func() error {
		if !strings.Contains(log.String(), "taking no more jobs; the running ones go on") {
			return fmt.Errorf("the agent did not give up on its CLS and drain:\n%s", log.String())
		}
		return nil
	})
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	runEnds(t, done, time.Minute, "unreachable for 10m0s")
}

// TestAgentHandsBackLateJobs: an idle agent's poll waits at the CLS when
// the agent gives up on it (a heartbeat's finding: decide aborts with the
// poll out), and the CLS then answers that poll with a job. The agent
// never starts it and hands it back unstarted, in the spool: applied, it
// requeues the job, its attempt not counted, and another agent runs it.
// (The work loop had returned: the reply went to a channel nobody read,
// and the job stayed handed out, never run nor handed back, until its
// lease lapsed, an attempt counted.)
func TestAgentHandsBackLateJobs(t *testing.T) {
	t.Parallel()
	c, sc, cfg, a := slowClosingAgent(t)
	done := make(chan error, 1)
	go func() { done <- a.Run(context.Background()) }()
	// The connection closes once the work loop has returned.
	sc.closingAfterPoll(t, c, func() { a.loseCLS(unreachable{errors.New("the CLS has been unreachable for 10m0s")}) })
	dir := t.TempDir()
	id := c.submit(protocol.JobSpec{Target: "late", Command: "echo ran >> ran.txt", Cwd: dir})[0]
	waitUntil(t, time.Minute, func() error {
		if !slices.Contains(a.holding.List(), protocol.JobRef{ID: id, Attempt: 1}) {
			return errors.New("the agent did not read the reply handing the job out")
		}
		return nil
	})
	sc.free()
	runEnds(t, done, time.Minute, "unreachable for 10m0s")
	waitUntil(t, time.Minute, func() error {
		if files, _ := filepath.Glob(filepath.Join(cfg.OutDir, spool.Dir, "*"+spool.Suffix)); len(files) == 0 {
			return errors.New("the agent spooled nothing")
		}
		return nil
	})
	deliverOnce(t, c, a, cfg.OutDir)
	if err := handedBackUnstarted(c, id, dir); err != nil {
		t.Fatal(err)
	}
	startAgent(t, c, 1)
	if e := c.wait(id)[id]; e.State != "D" {
		t.Fatalf("late job ended %+v", e)
	}
	if d, err := c.store.Inspect().Job(context.Background(), id); err != nil || d.Attempts != 2 || len(d.History) != 0 {
		t.Fatalf("late job %+v, %v: want it run on attempt 2, no attempt counted", d, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "ran.txt")); string(b) != "ran\n" {
		t.Fatalf("ran.txt = %q: the late job ran other than once", b)
	}
}

// TestAgentHandsBackJobsAfterStop: an idle agent's poll waits at the CLS
// when the agent is told to stop, its connection slow to close, and the
// CLS then hands that poll a job. The agent starts it not (it would kill
// it at once, an attempt counted) and hands it back unstarted with its
// last report. (The client had given the poll up as the agent's context
// ended and dropped the reply, read on the connection still open: the job
// stayed handed out to an agent that had stopped.)
func TestAgentHandsBackJobsAfterStop(t *testing.T) {
	t.Parallel()
	c, sc, _, a := slowClosingAgent(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	sc.closingAfterPoll(t, c, cancel)
	dir := t.TempDir()
	id := c.submit(protocol.JobSpec{Target: "late", Command: "echo ran >> ran.txt", Cwd: dir})[0]
	waitUntil(t, time.Minute, func() error { return handedBackUnstarted(c, id, dir) })
	sc.free()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the agent did not stop")
	}
	if err := handedBackUnstarted(c, id, dir); err != nil {
		t.Fatal(err)
	}
}

// waitStarted waits for the job running in dir to say it started (it
// touches dir/started).
func waitStarted(t *testing.T, dir string) {
	t.Helper()
	waitUntil(t, 20*time.Second, func() error {
		if !exists(filepath.Join(dir, "started")) {
			return errors.New("job never started")
		}
		return nil
	})
}

// runEnds waits up to within for the agent's Run, whose error it sends on
// done, to end with an error that says want.
func runEnds(t *testing.T, done <-chan error, within time.Duration, want string) {
	t.Helper()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("the agent ended with %v; want an error saying %q", err, want)
		}
	case <-time.After(within):
		t.Fatalf("the agent did not end within %s (want an error saying %q)", within, want)
	}
}
