// Package placeholder is the agent that runs inside a placeholder (a batch
// job, or a process the CLS forks for the local site): it pulls jobs from
// the CLS, runs each with /bin/sh -c (or directly, when the line is one
// plain command) in its own process group, heartbeats their leases,
// reports how they ended, and pulls again. Local and remote placeholders
// run this same code; only the transport differs.
package placeholder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/internal/backoff"
	"github.com/mq-hpc/mq/protocol"
)

// Config configures an Agent.
type Config struct {
	// Dial opens a transport to the CLS.
	Dial func(ctx context.Context) (io.ReadWriteCloser, error)
	Site string
	Host string
	// BatchID is the batch job this placeholder is, if a batch system
	// started it (see BatchJobID).
	BatchID string
	// Slots is how many jobs run at once (default 1).
	Slots int
	// OutDir receives jobs' stdout and stderr files.
	OutDir string
	// MaxOutput is the most a job attempt may write to stdout and stderr
	// together (0: DefaultMaxOutput; negative: no cap). OutputReserve is
	// the free space kept on OutDir's filesystem (0: none). A job that
	// would go past either is killed and fails with the reason: its output
	// must not fill the disk the CLS's database may share.
	MaxOutput     int64
	OutputReserve int64
	// Walltime is the placeholder's own time limit (0 = none): it never
	// takes a job expected to outlast it.
	Walltime time.Duration
	// IdleTimeout ends the agent after this long without work (0 = never).
	IdleTimeout time.Duration
	// Reconnect is how long to keep trying to reach a lost CLS before giving
	// up (default 10 min); running jobs go on meanwhile.
	Reconnect time.Duration
	// ExitWhenOrphaned ends the agent, once idle, if its parent process
	// changes: a local placeholder whose CLS died must not outlive it forever.
	ExitWhenOrphaned bool
	// NoOp reports every job as succeeded without running it: it measures
	// the scheduling path alone (dispatch, report, commit).
	NoOp bool
	// StageOutput copies each job's stdout and stderr to the CLS (op
	// output) before reporting it, so users read them on the CLS host. Remote
	// placeholders set it; local ones write where the CLS reads.
	StageOutput bool
	// DataRoot is where this site keeps the files staged to it (absolute):
	// a declared path P is at DataRoot+P, and a job submitted in directory
	// C runs in DataRoot+C. "" = the CLS host's filesystem is shared, and
	// paths are used as they are. See data.go.
	DataRoot string
	Log      *slog.Logger
	// Now is the clock of the agent's time-based decisions: the walltime
	// left, the reconnect deadline, the idle timeout, how long a poll has
	// been out and a job held (default time.Now; tests move it). It may be
	// called from several goroutines. Jobs' own times (their reports, how
	// long they run) are the real clock's.
	Now func() time.Time

	// prefetchWindow overrides the package's, and with it what counts as
	// short and how long a job may be held (tests: a slow machine must not
	// turn short jobs into long ones).
	prefetchWindow time.Duration
}

// BatchJobID is the id of the batch job the calling process runs in, as
// its submit command printed it: Slurm's SLURM_JOB_ID, PBS's PBS_JOBID,
// Grid Engine's JOB_ID (most specific first: JOB_ID is a common name).
func BatchJobID(getenv func(string) string) string {
	for _, v := range []string{"SLURM_JOB_ID", "PBS_JOBID", "JOB_ID"} {
		if id := getenv(v); id != "" {
			return id
		}
	}
	return ""
}

// Agent is one placeholder.
type Agent struct {
	cfg   Config
	start time.Time
	ppid  int
	log   *slog.Logger

	mu      sync.Mutex
	cl      *client.Client
	id      int64
	hbEvery time.Duration

	runMu   sync.Mutex
	running map[int64]*proc
	held    map[int64]protocol.JobRef // fetched ahead, not started

	dirs sync.Map // output shard dirs already made
	// create opens a job's output file; nil is createOutput (tests make
	// writes fail with it).
	create  func(path string) (io.WriteCloser, error)
	devNull *os.File // jobs' stdin, opened once rather than per job
}

// New returns an agent; Run starts it.
func New(cfg Config) *Agent {
	if cfg.Slots < 1 {
		cfg.Slots = 1
	}
	if cfg.Reconnect <= 0 {
		cfg.Reconnect = 10 * time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.prefetchWindow <= 0 {
		cfg.prefetchWindow = prefetchWindow
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Agent{cfg: cfg, log: cfg.Log, running: map[int64]*proc{}, held: map[int64]protocol.JobRef{}, hbEvery: time.Second}
}

func (a *Agent) now() time.Time { return a.cfg.Now() }

// ID is the placeholder id the CLS gave this agent (0 before it registered).
func (a *Agent) ID() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.id
}

// Run pulls and runs jobs until ctx ends, the CLS says exit, the idle
// timeout passes, or the CLS stays unreachable. When ctx ends, running jobs
// are killed and reported as interrupted.
func (a *Agent) Run(ctx context.Context) error {
	a.start = a.now()
	a.ppid = os.Getppid()
	if err := os.MkdirAll(a.cfg.OutDir, 0o700); err != nil {
		return fmt.Errorf("placeholder output directory: %w", err)
	}
	if !a.cfg.NoOp {
		f, err := os.Open(os.DevNull)
		if err != nil {
			return err
		}
		defer f.Close()
		a.devNull = f
	}
	if _, err := a.session(ctx); err != nil {
		return err
	}
	hbCtx, stopHB := context.WithCancel(context.WithoutCancel(ctx))
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		a.heartbeats(hbCtx)
	}()
	liveDone := make(chan struct{})
	go func() {
		defer close(liveDone)
		if a.cfg.StageOutput && !a.cfg.NoOp {
			a.shipLive(hbCtx) // live.go
		}
	}()
	filesDone := make(chan struct{})
	go func() {
		defer close(filesDone)
		if a.cfg.DataRoot != "" && !a.cfg.NoOp {
			a.serveFiles(hbCtx) // files.go
		}
	}()
	err := a.work(ctx)
	stopHB()
	<-hbDone
	<-liveDone
	<-filesDone
	a.mu.Lock()
	if a.cl != nil {
		a.cl.Close()
	}
	a.mu.Unlock()
	return err
}

// session returns the current connection, (re)connecting and registering
// with backoff while the CLS is unreachable.
func (a *Agent) session(ctx context.Context) (*client.Client, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cl != nil {
		select {
		case <-a.cl.Done():
			a.cl = nil
		default:
			return a.cl, nil
		}
	}
	deadline := a.now().Add(a.cfg.Reconnect)
	retry := backoff.Backoff{Min: 50 * time.Millisecond, Max: 5 * time.Second, Jitter: 0.5}
	for {
		cl, err := a.connect(ctx)
		if err == nil {
			a.cl = cl
			return cl, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var pe *protocol.Error
		if errors.As(err, &pe) && (pe.Code == protocol.CodeBadRequest || pe.Code == protocol.CodeForbidden || pe.Code == protocol.CodeUnsupported) {
			return nil, fmt.Errorf("the CLS refused this placeholder: %w", err)
		}
		if client.Permanent(err) { // an impostor, or a key the CLS does not take
			return nil, err
		}
		if a.now().After(deadline) {
			return nil, fmt.Errorf("the CLS has been unreachable for %s: %w", a.cfg.Reconnect, err)
		}
		d := retry.Next()
		a.log.Warn("cannot reach the CLS; retrying", "err", err, "in", d)
		// Unlocked while sleeping so ID() and friends do not block. An
		// ended ctx is seen by the next connect.
		a.mu.Unlock()
		backoff.Sleep(ctx, d)
		a.mu.Lock()
		if a.cl != nil {
			return a.cl, nil
		}
	}
}

func (a *Agent) connect(ctx context.Context) (*client.Client, error) {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rwc, err := a.cfg.Dial(dctx)
	if err != nil {
		return nil, err
	}
	cl, err := client.New(dctx, rwc, protocol.RolePlaceholder, "mq-placeholder")
	if err != nil {
		rwc.Close()
		return nil, err
	}
	reg, err := client.Do(dctx, cl, protocol.OpRegister, protocol.Register{
		ID: a.id, Site: a.cfg.Site, Host: a.cfg.Host, PID: os.Getpid(), Slots: a.cfg.Slots,
		OutDir: a.cfg.OutDir, Walltime: a.cfg.Walltime.Seconds(), Batch: a.cfg.BatchID,
	})
	if err != nil {
		cl.Close()
		return nil, err
	}
	if a.id != 0 && reg.ID != a.id {
		a.log.Warn("the CLS did not know this placeholder; registered anew", "old", a.id, "new", reg.ID)
	}
	a.id = reg.ID
	if reg.HeartbeatS > 0 {
		a.hbEvery = protocol.Duration(reg.HeartbeatS)
	}
	a.log.Info("connected to the CLS", "placeholder", a.id)
	return cl, nil
}

// dropped marks a connection broken so the next session() reconnects.
func (a *Agent) dropped(cl *client.Client) {
	a.mu.Lock()
	if a.cl == cl {
		a.cl = nil
	}
	a.mu.Unlock()
	cl.Close()
}

// call runs one typed request, reconnecting until it goes through. Requests are
// idempotent on the CLS (reports carry attempt numbers), so resending one
// whose reply was lost is harmless.
func call[Req, Resp any](ctx context.Context, a *Agent, op protocol.Op[Req, Resp], body func(id int64) Req, out *Resp) error {
	busy := backoff.Backoff{Min: 5 * time.Millisecond, Max: 500 * time.Millisecond, Jitter: 0.5}
	for {
		cl, err := a.session(ctx)
		if err != nil {
			return err
		}
		var resp Resp
		resp, err = client.Do(ctx, cl, op, body(a.ID()))
		if err == nil {
			if out != nil {
				*out = resp
			}
			return nil
		}
		var pe *protocol.Error
		if errors.As(err, &pe) {
			if pe.Code == protocol.CodeNotFound {
				// The CLS lost track of us (new database): register again.
				a.dropped(cl)
				continue
			}
			if pe.Code == protocol.CodeBusy {
				// Too many such requests in progress on the connection (the
				// agent stays within the bound, with a margin; a CLS with a
				// lower one is met here): the request is fine, later.
				if err := busy.Wait(ctx); err != nil {
					return err
				}
				continue
			}
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		a.log.Warn("lost the CLS connection", "op", op.Name, "err", err)
		a.dropped(cl)
	}
}

// CheckTimes checks an agent's time settings as its command line gives
// them (--walltime, --idle, --reconnect): 0 (none, or the default) or a
// positive duration the protocol can carry.
func CheckTimes(walltime, idle, reconnect time.Duration) error {
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"walltime", walltime}, {"idle", idle}, {"reconnect", reconnect}} {
		if f.d < 0 || f.d.Seconds() > protocol.MaxSeconds {
			return fmt.Errorf("--%s must be 0..%v, not %v", f.name, time.Duration(protocol.MaxSeconds)*time.Second, f.d)
		}
	}
	return nil
}

func (a *Agent) walltimeLeft() float64 {
	if a.cfg.Walltime <= 0 {
		return 0
	}
	left := a.cfg.Walltime - a.now().Sub(a.start)
	if left < time.Second {
		return 1e-3 // nothing fits; 0 would mean unlimited
	}
	return left.Seconds()
}

// Prefetch settings. While jobs average under prefetchBelow windows, an
// agent holds jobs beyond its free slots: about prefetchWindow of work per
// slot (at least one job, at most maxPrefetch), and refills when half of
// that is used, so one round trip reports and fetches many short jobs. A
// held job is given back after maxHold windows. Both are multiples of the
// window, so a wider one (a test on a slow machine) keeps them consistent:
// held work stays well under maxHold.
const (
	prefetchWindow = 20 * time.Millisecond
	prefetchBelow  = 25 // windows: 500 ms
	maxPrefetch    = 64
	maxHold        = 100 // windows: 2 s
)

// prefetchDepth is how many jobs to hold beyond the free slots when jobs
// run meanRun on average (0 = not known yet) and the longest running one
// has run longest.
func (a *Agent) prefetchDepth(meanRun time.Duration) int {
	below := prefetchBelow * a.cfg.prefetchWindow
	if meanRun <= 0 || meanRun >= below || a.longestRunning() >= below {
		return 0
	}
	d := int(a.cfg.prefetchWindow * time.Duration(a.cfg.Slots) / max(meanRun, time.Microsecond))
	return min(max(d, 1), maxPrefetch)
}

type heldJob struct {
	unit  []protocol.Assignment // one job, or a bundle's jobs
	since time.Time
}

// hold records a job fetched ahead of a free slot, so heartbeats renew its
// lease and the CLS can take it back.
func (a *Agent) hold(asg protocol.Assignment) {
	a.runMu.Lock()
	a.held[asg.ID] = protocol.JobRef{ID: asg.ID, Attempt: asg.Attempt}
	a.runMu.Unlock()
}

// unhold removes a held job before it starts; false if the CLS took it back.
func (a *Agent) unhold(id int64) bool {
	a.runMu.Lock()
	defer a.runMu.Unlock()
	_, ok := a.held[id]
	delete(a.held, id)
	return ok
}

// giveBack returns held jobs unstarted: the CLS requeues them without
// counting an attempt.
func (a *Agent) giveBack(hs []heldJob) []protocol.Report {
	var out []protocol.Report
	now := time.Now()
	for _, h := range hs {
		for _, asg := range h.unit {
			if a.unhold(asg.ID) {
				out = append(out, protocol.Report{ID: asg.ID, Attempt: asg.Attempt, Started: now, Finished: now, Reason: protocol.ReasonReturned})
			}
		}
	}
	return out
}

// reportHold is how long a report waits for the outstanding poll to carry
// it before it is sent on its own. With no poll out, it may wait half the
// prefetch window for the refill that carries it (see prefetchDepth).
const reportHold = 2 * time.Millisecond

// parkedAfter is how long a long poll must have been out to count as
// parked at the CLS (no work for it): a report then goes at once, since it
// may be what makes work ready (a dependent job), and the parked poll is
// what would take that work. A poll that returns with work comes back in
// well under this on a loaded machine's loopback.
const parkedAfter = 5 * time.Millisecond

// reportTiming is when reports just gathered go out.
type reportTiming int

const (
	reportNow        reportTiming = iota // on their own, at once
	reportSoon                           // with the poll out if it returns within reportHold, else on their own
	reportWithRefill                     // with the next poll, within half the prefetch window
)

// whenToReport decides when reports just gathered go out, from whether a
// long poll (one that may park at the CLS) is out and for how long, whether
// the reply before it found the CLS dry (fewer jobs than asked for), and
// how many jobs still run here.
func whenToReport(longPollOut bool, pollAge time.Duration, afterDry bool, running int) reportTiming {
	switch {
	case longPollOut && running == 0:
		// Nothing else is running: no request is coming soon.
		return reportNow
	case longPollOut && (pollAge >= parkedAfter || afterDry):
		// The poll has parked, or will: the CLS has no work for it (the
		// reply before it took all there was), and these reports may make
		// some (a dependent job), which that very poll would take.
		// Reporting now makes a dependency hop one round trip. (Two
		// pipelines' stages ending a moment apart: the first report's
		// dependent comes back on the parked poll, the next poll goes out,
		// and the second report must not wait for it to return.)
		return reportNow
	case longPollOut:
		// Under load it returns at once and the next request carries
		// these reports; if it parked, they go on their own soon.
		return reportSoon
	default:
		// No poll out, or a prefetch that returns at once: the next poll
		// carries them, when the prefetch runs low; bound the wait.
		return reportWithRefill
	}
}

// loopState is what the work loop's next move depends on: a snapshot taken
// at the top of each round.
type loopState struct {
	Exiting   bool // already draining (told to exit, or decided before)
	Cancelled bool // the agent's context ended
	Orphaned  bool // ExitWhenOrphaned, and the parent process changed
	// NextFailed: the last next request failed for good (the CLS refused
	// the agent or stayed unreachable).
	NextFailed  bool
	IdleTimeout time.Duration // Config.IdleTimeout (0 = never)
	IdleFor     time.Duration // since a job last started or ended
	Orphanable  bool          // Config.ExitWhenOrphaned: a poll must return to look
	NoOp        bool

	Free, Running int  // slots free, jobs (or bundles) running
	Held          int  // units fetched ahead, not started
	Depth         int  // how many to hold beyond the free slots (prefetchDepth)
	Sending       int  // report requests out on their own
	PollOut       bool // a next request is out
	PrefetchDry   bool // a prefetch found nothing: no more until a job ends
	ReportsDue    bool // reports have waited long enough for a poll to carry them
}

// move is what the work loop does next, in this order.
type move struct {
	Exiting     bool // drain: take no more jobs, end when everything out is back
	Abort       bool // next failed for good: kill the jobs and return its error
	GiveBack    bool // hand the held jobs back unstarted
	Finish      bool // nothing is out: send the last reports and return
	ReportAlone bool // send the reports on their own: there is nothing to ask for
	// Poll asks for Want jobs, waiting up to Wait for them at the CLS (a
	// long poll that may park); a Prefetch (Wait 0) takes what is ready.
	Poll     bool
	Want     int
	Wait     time.Duration
	Prefetch bool
}

// decide is the work loop's policy, a pure function of its state: when to
// stop, and whether to ask for jobs, how many and how long to wait for
// them. (When reports go out once gathered is whenToReport.)
//
// Ask when a slot would idle otherwise (starving), when half the prefetch
// is used up (refill), or when reports have waited long enough: under load
// one request then carries many reports and fetches many jobs. Only a poll
// for an idle slot may park at the CLS, and it asks for the free slots plus
// one: a parked poll takes what arrives first, perhaps a burst of long jobs
// that other placeholders should share.
func decide(s loopState) move {
	var m move
	if s.NextFailed && !s.Cancelled {
		// Results could never be reported: stop the jobs too.
		return move{Exiting: true, Abort: true}
	}
	m.Exiting = s.Exiting || s.Cancelled || s.Orphaned ||
		(s.IdleTimeout > 0 && s.Running == 0 && s.Held == 0 && s.IdleFor >= s.IdleTimeout)
	held := s.Held
	if m.Exiting && held > 0 {
		m.GiveBack = true
		held = 0
	}
	if m.Exiting && s.Running == 0 && !s.PollOut && s.Sending == 0 {
		m.Finish = true
		return m
	}
	want := s.Free + s.Depth - held
	starving := s.Free > held
	refill := want > s.Depth/2 && !s.PrefetchDry
	if s.ReportsDue && !s.PollOut && want <= 0 {
		m.ReportAlone = true
		return m
	}
	if s.PollOut || m.Exiting || want <= 0 || !(starving || refill || s.ReportsDue) {
		return m
	}
	m.Poll, m.Want = true, want
	if !starving {
		// Only prefetching: take what is ready now. Parked, this poll
		// would catch jobs that arrive while every slot is busy, maybe
		// with a job that turned out long.
		m.Prefetch = true
		return m
	}
	m.Wait = 30 * time.Second
	if s.IdleTimeout > 0 {
		m.Wait = min(m.Wait, max(s.IdleTimeout-s.IdleFor, 10*time.Millisecond))
	}
	if s.Orphanable {
		m.Wait = min(m.Wait, 5*time.Second)
	}
	if !s.NoOp {
		// A long poll takes what arrives first, maybe a burst of long
		// jobs: ask for the free slots and one ahead, no deeper, so other
		// placeholders get their share. (No-op jobs take no time, so a
		// no-op agent never holds any: it asks for its whole prefetch.)
		m.Want = min(want, s.Free-held+1)
	}
	return m
}

type polled struct {
	reply protocol.NextReply
	err   error
}

// workLoop is the state of Agent.work: the slots, the jobs held ahead, the
// reports not yet sent, the poll out and the timer that bounds how long
// reports wait. Only work's goroutine touches it; the goroutines it starts
// (jobs, polls, report requests) answer through its channels.
type workLoop struct {
	a    *Agent
	ctx  context.Context // the agent's: jobs and polls end with it
	rctx context.Context // reports: detached from ctx until reportGrace after it ends

	ended     chan protocol.Report // a slot's job (or bundle: an empty report) ended
	progress  chan protocol.Report // a bundle's jobs; unbuffered, so each is in before its slot frees
	quit      chan struct{}        // work has returned: nobody reads progress or unacked
	unacked   chan reported        // a report request's answer: its batch back if the CLS did not take it, jobs it took
	reporters sync.WaitGroup

	free, running int
	// Prefetch: while jobs are short, hold jobs beyond the free slots, so
	// the round trip that reports a job and fetches the next overlaps the
	// jobs still running.
	held      []heldJob
	reports   []protocol.Report
	meanRun   time.Duration // moving average of job run times; 0 = none yet
	sending   int           // report requests out
	asking    int           // of those, the ones that ask for work (next requests)
	idleSince time.Time

	poll         chan polled // non-nil while a next request is out
	pollSent     time.Time
	pollPrefetch bool  // the poll out only prefetches (it does not wait for work)
	asked        int   // jobs the poll out asked for
	pollCovers   int   // free slots the poll out asks for (it may ask one more, ahead)
	taking       int   // free slots the report requests out ask for (see uncovered)
	lastDry      bool  // the last poll's reply had fewer jobs than asked: the CLS is out of work
	pollDry      bool  // the poll out went after such a reply
	prefetchDry  bool  // a prefetch found nothing: no more until a job ends
	nextErr      error // the last poll's failure, until decide has seen it

	hold       *time.Timer // bounds how long gathered reports wait for a poll
	holding    bool
	reportsDue bool // reports have waited long enough: the next poll goes now
	exiting    bool
}

// state is the snapshot decide works from.
func (w *workLoop) state() loopState {
	a := w.a
	s := loopState{
		Exiting:     w.exiting,
		Cancelled:   w.ctx.Err() != nil,
		NextFailed:  w.nextErr != nil,
		IdleTimeout: a.cfg.IdleTimeout,
		IdleFor:     a.now().Sub(w.idleSince),
		Orphanable:  a.cfg.ExitWhenOrphaned,
		NoOp:        a.cfg.NoOp,
		Free:        w.free,
		Running:     w.running,
		Held:        len(w.held),
		Depth:       a.prefetchDepth(w.meanRun),
		Sending:     w.sending,
		PollOut:     w.poll != nil,
		PrefetchDry: w.prefetchDry,
		ReportsDue:  w.reportsDue,
	}
	if !w.exiting && a.cfg.ExitWhenOrphaned {
		s.Orphaned = os.Getppid() != a.ppid
	}
	return s
}

func (w *workLoop) gotReport(r protocol.Report) {
	if r.ID == 0 {
		return // a bundle's end: its jobs reported through progress
	}
	// Whatever a job's files or errors put in it, the report is one the
	// CLS takes (escaped, clipped): never a refusal that costs the batch.
	protocol.CleanReport(&r)
	w.reports = append(w.reports, r)
	if d := r.Finished.Sub(r.Started); w.meanRun == 0 {
		w.meanRun = max(d, time.Microsecond)
	} else {
		w.meanRun = max((4*w.meanRun+d)/5, time.Microsecond) // never 0 (unknown) again
	}
}

func (w *workLoop) start(u []protocol.Assignment) {
	a := w.a
	if a.cfg.NoOp && !isBundle(u) {
		// Ends as it starts: the report rides on the next request, and
		// no goroutine or channel stands between the two (the no-op
		// executor measures the scheduling path, not this loop).
		w.gotReport(a.run(w.ctx, u[0]))
		return
	}
	w.free--
	w.running++
	if isBundle(u) {
		// Its jobs report through progress; the empty report frees the slot.
		go func() {
			a.runBundle(w.ctx, u, w.progress, w.quit)
			select {
			case w.ended <- protocol.Report{}:
			case <-w.quit:
			}
		}()
		return
	}
	go func() {
		r := a.run(w.ctx, u[0])
		select {
		case w.ended <- r:
		case <-w.quit: // work returned (aborted): nobody reads ended
		}
	}()
}

func (w *workLoop) startHeld() {
	for w.free > 0 && len(w.held) > 0 {
		h := w.held[0]
		w.held = w.held[1:]
		if isBundle(h.unit) || w.a.unhold(h.unit[0].ID) { // false if the CLS took it back meanwhile
			w.start(h.unit)
		}
	}
}

// reported is a report request's answer: the batch back if the CLS did
// not take it (it goes out again), and the jobs it handed out with it.
type reported struct {
	back  []protocol.Report
	took  int // free slots the request asked for
	jobs  []protocol.Assignment
	exit  bool
	asked bool // the request asked for work (a next); false: a plain report
}

// sendReports reports on its own, without waiting for work. The batch
// stays this agent's until the CLS acknowledges it: one that failed comes
// back through unacked and goes out again.
//
// take > 0 asks the CLS to hand over, with the acknowledgement, up to take
// jobs ready at once (a next request that does not wait): the jobs these
// very reports may make ready (a dependent), when the long poll that would
// take them was answered already and the next one is still on its way.
// A poll parked at the CLS was there first and is served first, so this
// takes only what no parked poll wanted: a dependency hop costs one round
// trip however the reports and polls interleave.
func (w *workLoop) sendReports(take int) {
	if len(w.reports) == 0 {
		return
	}
	take = reportTake(take, w.asking)
	batch := w.reports
	w.reports = nil
	w.sending++
	w.taking += take
	if take > 0 {
		w.asking++
	}
	w.reporters.Add(1)
	go func() {
		defer w.reporters.Done()
		// No deadline while the agent runs: a CLS that is slow or
		// stopped answers late, and a broken connection is re-dialled
		// and the batch sent again (call).
		ans := reported{took: take, asked: take > 0}
		var err error
		if take > 0 {
			var reply protocol.NextReply
			err = call(w.rctx, w.a, protocol.OpNext, func(id int64) protocol.Next {
				return protocol.Next{Placeholder: id, Reports: batch, Free: take, WalltimeLeft: w.a.walltimeLeft()}
			}, &reply)
			if err == nil {
				ans.jobs, ans.exit = reply.Jobs, reply.Exit
			}
		} else {
			err = call(w.rctx, w.a, protocol.OpReport, func(id int64) protocol.ReportBatch {
				return protocol.ReportBatch{Placeholder: id, Reports: batch}
			}, nil)
		}
		if err != nil {
			if resend(err) {
				ans.back = batch
			} else {
				w.a.log.Warn("the CLS refused a report", "err", err)
			}
		}
		select {
		case w.unacked <- ans:
		case <-w.quit:
			if ans.back != nil {
				w.a.log.Warn("could not report; the CLS will requeue after the lease", "err", err)
			}
			// Jobs it handed out now are never started: their leases
			// expire and the CLS runs them elsewhere.
		}
	}()
}

// reportTake is how many jobs a report request may ask for, wanting take,
// with asking such requests out already: none once they, the long poll
// and one more would fill the CLS's bound on next requests per
// connection. The one more is a margin: the CLS counts a request until
// its handler returns, which may be just after its answer arrived here.
// Past the bound the report goes as a plain report (a refused one would
// wait for its resend), and the work it makes ready goes to the long poll.
func reportTake(take, asking int) int {
	if take <= 0 || asking+3 > protocol.NextsPerConn {
		return 0
	}
	return take
}

// onReported takes a report request's answer.
func (w *workLoop) onReported(ans reported) {
	w.sending--
	w.taking -= ans.took
	if ans.asked {
		w.asking--
	}
	// Not acknowledged: the next request carries it (a poll, or the
	// tick's report at the latest).
	w.reports = append(ans.back, w.reports...)
	if ans.exit {
		w.exiting = true
	}
	w.take(ans.jobs)
}

// uncovered is how many free slots no request out asks work for (see
// slotsUncovered).
func (w *workLoop) uncovered() int {
	longPollOut := w.poll != nil && !w.pollPrefetch && !w.exiting && !w.a.cfg.NoOp
	return slotsUncovered(longPollOut, w.free, len(w.held), w.pollCovers, w.taking)
}

// slotsUncovered is how many of the free slots no request out asks work
// for: a long poll out covers the free slots it asked for, report requests
// out the ones they asked for, held jobs fill theirs. Only with a long
// poll out: without one, the next poll carries the reports and asks; a
// prefetch returns at once.
func slotsUncovered(longPollOut bool, free, held, pollCovers, taking int) int {
	if !longPollOut {
		return 0
	}
	return max(0, free-held-pollCovers-taking)
}

// scheduleReports decides when reports just gathered go out.
func (w *workLoop) scheduleReports() {
	var age time.Duration
	if w.poll != nil {
		age = w.a.now().Sub(w.pollSent)
	}
	switch whenToReport(w.poll != nil && !w.pollPrefetch, age, w.pollDry, w.running) {
	case reportNow:
		w.sendReports(w.uncovered())
	case reportSoon:
		w.holdReports(reportHold)
	case reportWithRefill:
		w.holdReports(w.a.cfg.prefetchWindow / 2)
	}
}

func (w *workLoop) holdReports(d time.Duration) {
	if !w.holding {
		w.holding = true
		w.hold.Reset(d)
	}
}

// sendPoll sends a next request carrying the reports gathered so far.
func (w *workLoop) sendPoll(m move) {
	w.reportsDue = false
	if w.holding { // the poll carries the reports
		w.hold.Stop()
		w.holding = false
	}
	w.pollPrefetch = m.Prefetch
	sent, n, wait := w.reports, m.Want, m.Wait
	w.reports = nil
	w.poll, w.pollSent = make(chan polled, 1), w.a.now()
	w.asked, w.pollDry = n, w.lastDry
	w.pollCovers = min(n, max(0, w.free-len(w.held)))
	go func(ch chan polled) {
		var p polled
		p.err = call(w.ctx, w.a, protocol.OpNext, func(id int64) protocol.Next {
			return protocol.Next{Placeholder: id, Reports: sent, Free: n, WalltimeLeft: w.a.walltimeLeft(), WaitMS: int(wait / time.Millisecond)}
		}, &p.reply)
		if p.err != nil {
			p.reply.Jobs = nil
			// Keep the reports: they go out with the next request.
			p.reply.Exit = false
			p.err = errWithReports{p.err, sent}
		}
		ch <- p
	}(w.poll)
}

// ended takes the report of a slot's job, and of any others that ended
// with it: jobs often end together, and one request serves them all.
func (w *workLoop) onEnded(r protocol.Report) {
	w.free++
	w.running--
	w.prefetchDry = false
	w.gotReport(r)
drain:
	for {
		select {
		case r := <-w.ended:
			w.free++
			w.running--
			w.gotReport(r)
		default:
			break drain
		}
	}
	w.idleSince = w.a.now()
	w.startHeld()
	w.scheduleReports()
}

func (w *workLoop) onHoldExpired() {
	w.holding = false
	if w.poll != nil && !w.pollPrefetch {
		w.sendReports(w.uncovered()) // the poll out has parked
	} else if len(w.reports) > 0 {
		w.reportsDue = true // the next poll goes at once (see decide)
	}
}

func (w *workLoop) onPoll(p polled) {
	w.poll = nil
	if p.err != nil {
		var ewr errWithReports
		if errors.As(p.err, &ewr) {
			w.reports = append(ewr.reports, w.reports...)
			var pe *protocol.Error
			if len(ewr.reports) > 0 && errors.As(ewr.err, &pe) && pe.Code == protocol.CodeBadRequest {
				// Refused, perhaps for what a report says (a CLS that
				// refuses a whole batch for one bad item): the reports go
				// on their own (dropped if refused again: their jobs'
				// leases run out) and the agent polls on. A poll refused
				// with no reports on it still stops the agent.
				w.a.log.Warn("the CLS refused a poll carrying reports; sending them apart", "reports", len(ewr.reports), "err", p.err)
				w.sendReports(0)
				return
			}
		}
		w.nextErr = p.err
		return
	}
	if p.reply.Exit {
		w.exiting = true
	}
	w.lastDry = len(p.reply.Jobs) < w.asked
	if w.pollPrefetch && len(p.reply.Jobs) == 0 {
		w.prefetchDry = true
	}
	w.take(p.reply.Jobs)
}

// take starts the jobs a request brought, or holds those beyond the free
// slots.
func (w *workLoop) take(jobs []protocol.Assignment) {
	for _, u := range units(jobs) {
		w.idleSince = w.a.now()
		if isBundle(u) {
			w.a.holdAll(u) // runBundle takes each job out as it starts it
		}
		if w.free > 0 {
			w.start(u)
			continue
		}
		if !isBundle(u) {
			w.a.hold(u[0])
		}
		w.held = append(w.held, heldJob{u, w.a.now()})
	}
}

// onTick gives back a held job that waited long: the running ones are not
// short after all, and another placeholder can run it.
func (w *workLoop) onTick() {
	var keep []heldJob
	for _, h := range w.held {
		if w.a.now().Sub(h.since) > maxHold*w.a.cfg.prefetchWindow {
			w.reports = append(w.reports, w.a.giveBack([]heldJob{h})...)
		} else {
			keep = append(keep, h)
		}
	}
	w.held = keep
	w.sendReports(0) // a returned job must not wait for a slot or a long poll
}

// work runs the slots from one loop. Each request reports every job that
// ended since the last one and asks for as many jobs as slots are free, so
// under load one round trip serves several jobs. While a long poll is out,
// a job that ends is reported with a separate request after reportHold, so
// waiting for work never delays a report for long. What to ask for is
// decide's; when reports go, whenToReport's.
func (a *Agent) work(ctx context.Context) error {
	w := &workLoop{
		a: a, ctx: ctx,
		ended:     make(chan protocol.Report, a.cfg.Slots),
		progress:  make(chan protocol.Report),
		quit:      make(chan struct{}),
		unacked:   make(chan reported),
		free:      a.cfg.Slots,
		idleSince: a.now(),
		hold:      time.NewTimer(time.Hour),
	}
	w.hold.Stop()
	// Reports go out detached from ctx, so a job killed at shutdown is
	// still reported, until reportGrace after ctx ends.
	rctx, stopReporting := context.WithCancel(context.WithoutCancel(ctx))
	w.rctx = rctx
	stopGrace := context.AfterFunc(ctx, func() { time.AfterFunc(reportGrace, stopReporting) })
	defer func() {
		close(w.quit)
		stopGrace()
		stopReporting()
		w.reporters.Wait()
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	stopped := ctx.Done()
	for {
		m := decide(w.state())
		w.exiting = m.Exiting
		if m.Abort {
			a.killAll()
			return w.nextErr
		}
		w.nextErr = nil // seen: the agent is stopping anyway
		if m.GiveBack {
			w.reports = append(w.reports, a.giveBack(w.held)...)
			w.held = nil
		}
		if m.Finish {
			if len(w.reports) == 0 {
				return nil
			}
			// Final report: deliver it even though ctx has ended.
			return call(rctx, a, protocol.OpReport, func(id int64) protocol.ReportBatch {
				return protocol.ReportBatch{Placeholder: id, Reports: w.reports}
			}, nil)
		}
		if m.ReportAlone {
			w.sendReports(0)
			w.reportsDue = false
		}
		if m.Poll {
			w.sendPoll(m)
		}
		select {
		case r := <-w.progress:
			w.gotReport(r)
			w.scheduleReports()
		case r := <-w.ended:
			w.onEnded(r)
		case ans := <-w.unacked:
			w.onReported(ans)
		case <-w.hold.C:
			w.onHoldExpired()
		case p := <-w.poll:
			w.onPoll(p)
		case <-tick.C:
			w.onTick()
		case <-stopped:
			stopped = nil // closed for good: selecting it again would spin while jobs and reports finish; decide sees ctx ended
		}
	}
}

// reportGrace is how long reports may still take once the agent is told
// to stop.
const reportGrace = 10 * time.Second

// resend reports whether a report that failed with err may yet be taken:
// anything but the CLS refusing it (a bad request stays bad).
func resend(err error) bool {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		// Busy: too many requests in progress on the connection; the
		// batch is fine and goes again.
		return pe.Code == protocol.CodeInternal || pe.Code == protocol.CodeShutdown || pe.Code == protocol.CodeBusy
	}
	return true
}

type errWithReports struct {
	err     error
	reports []protocol.Report
}

func (e errWithReports) Error() string { return e.err.Error() }
func (e errWithReports) Unwrap() error { return e.err }

// heartbeatEvery is the interval the CLS asked for (it may change at a
// reconnect, under a.mu).
func (a *Agent) heartbeatEvery() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.hbEvery
}

// heartbeats renews leases and kills jobs the CLS no longer wants.
func (a *Agent) heartbeats(ctx context.Context) {
	t := time.NewTimer(a.heartbeatEvery())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		refs := a.runningRefs()
		if len(refs) > 0 {
			var reply protocol.HeartbeatReply
			err := call(ctx, a, protocol.OpHeartbeat, func(id int64) protocol.Heartbeat {
				return protocol.Heartbeat{Placeholder: id, Running: refs}
			}, &reply)
			if err == nil {
				for _, k := range reply.Kill {
					a.kill(k, protocol.ReasonKilled)
				}
				a.setFollowed(reply.Follow) // live.go
			}
		}
		t.Reset(a.heartbeatEvery())
	}
}

// OneProc runs the Go scheduler on one thread (GOMAXPROCS=1) unless the
// environment sets GOMAXPROCS. Commands that run an agent call it first:
// the agent coordinates, it does not compute, and with a scheduler thread
// per core each job's goroutines (start, wait, output, report) hop between
// threads. Measured with `true` jobs: 11 -> 3-4 context switches and 450
// -> 290 us of agent CPU per job.
func OneProc() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}
