// Package placeholder is the agent that runs inside a placeholder (a batch
// job, or a process the CLS forks for the local site): it pulls jobs from
// the CLS, runs each with /bin/sh -c in its own process group, heartbeats
// their leases, reports how they ended, and pulls again. Local and remote
// placeholders run this same code; only the transport differs.
package placeholder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/mq-hpc/mq/client"
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
	Log         *slog.Logger

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
	return &Agent{cfg: cfg, log: cfg.Log, running: map[int64]*proc{}, held: map[int64]protocol.JobRef{}, hbEvery: time.Second}
}

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
	a.start = time.Now()
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
	err := a.work(ctx)
	stopHB()
	<-hbDone
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
	deadline := time.Now().Add(a.cfg.Reconnect)
	backoff := 50 * time.Millisecond
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
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the CLS has been unreachable for %s: %w", a.cfg.Reconnect, err)
		}
		a.log.Warn("cannot reach the CLS; retrying", "err", err, "in", backoff)
		// Unlocked while sleeping so ID() and friends do not block.
		a.mu.Unlock()
		select {
		case <-time.After(backoff + time.Duration(rand.Int64N(int64(backoff/2)+1))):
		case <-ctx.Done():
		}
		a.mu.Lock()
		if a.cl != nil {
			return a.cl, nil
		}
		backoff = min(backoff*2, 5*time.Second)
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
	var reg protocol.RegisterReply
	err = cl.Call(dctx, protocol.OpRegister, protocol.Register{
		ID: a.id, Site: a.cfg.Site, Host: a.cfg.Host, PID: os.Getpid(), Slots: a.cfg.Slots,
		OutDir: a.cfg.OutDir, Walltime: a.cfg.Walltime.Seconds(), Batch: a.cfg.BatchID,
	}, &reg)
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

// call runs one request, reconnecting until it goes through. Requests are
// idempotent on the CLS (reports carry attempt numbers), so resending one
// whose reply was lost is harmless.
func (a *Agent) call(ctx context.Context, op string, body func(id int64) any, out any) error {
	for {
		cl, err := a.session(ctx)
		if err != nil {
			return err
		}
		err = cl.Call(ctx, op, body(a.ID()), out)
		if err == nil {
			return nil
		}
		var pe *protocol.Error
		if errors.As(err, &pe) {
			if pe.Code == protocol.CodeNotFound {
				// The CLS lost track of us (new database): register again.
				a.dropped(cl)
				continue
			}
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		a.log.Warn("lost the CLS connection", "op", op, "err", err)
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
	left := a.cfg.Walltime - time.Since(a.start)
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

// work runs the slots from one loop. Each request reports every job that
// ended since the last one and asks for as many jobs as slots are free, so
// under load one round trip serves several jobs. While a long poll is out,
// a job that ends is reported with a separate request after reportHold, so
// waiting for work never delays a report for long.
func (a *Agent) work(ctx context.Context) error {
	type polled struct {
		reply protocol.NextReply
		err   error
	}
	ended := make(chan protocol.Report, a.cfg.Slots)
	progress := make(chan protocol.Report) // a bundle's jobs; unbuffered, so each is in before its slot frees
	quit := make(chan struct{})            // work has returned: nobody reads progress or unacked
	// Reports go out detached from ctx, so a job killed at shutdown is
	// still reported, until reportGrace after ctx ends.
	rctx, stopReporting := context.WithCancel(context.WithoutCancel(ctx))
	stopGrace := context.AfterFunc(ctx, func() { time.AfterFunc(reportGrace, stopReporting) })
	var reporters sync.WaitGroup
	defer func() {
		close(quit)
		stopGrace()
		stopReporting()
		reporters.Wait()
	}()
	free, running := a.cfg.Slots, 0
	// Prefetch: while jobs are short, hold one more job than the free
	// slots, so the round trip that reports a job and fetches the next
	// overlaps the job still running.
	var held []heldJob
	var reports []protocol.Report
	var meanRun time.Duration // moving average of job run times; 0 = none yet
	gotReport := func(r protocol.Report) {
		if r.ID == 0 {
			return // a bundle's end: its jobs reported through progress
		}
		reports = append(reports, r)
		if d := r.Finished.Sub(r.Started); meanRun == 0 {
			meanRun = max(d, time.Microsecond)
		} else {
			meanRun = max((4*meanRun+d)/5, time.Microsecond) // never 0 (unknown) again
		}
	}
	start := func(u []protocol.Assignment) {
		if a.cfg.NoOp && !isBundle(u) {
			// Ends as it starts: the report rides on the next request, and
			// no goroutine or channel stands between the two (the no-op
			// executor measures the scheduling path, not this loop).
			gotReport(a.run(ctx, u[0]))
			return
		}
		free--
		running++
		if isBundle(u) {
			// Its jobs report through progress; the empty report frees the slot.
			go func() { a.runBundle(ctx, u, progress, quit); ended <- protocol.Report{} }()
			return
		}
		go func() { ended <- a.run(ctx, u[0]) }()
	}
	startHeld := func() {
		for free > 0 && len(held) > 0 {
			h := held[0]
			held = held[1:]
			if isBundle(h.unit) || a.unhold(h.unit[0].ID) { // false if the CLS took it back meanwhile
				start(h.unit)
			}
		}
	}
	var poll chan polled // non-nil while a next request is out
	var pollSent time.Time
	asked := 0       // jobs the poll out asked for
	lastDry := false // the last poll's reply had fewer jobs than asked: the CLS is out of work
	pollDry := false // the poll out went after such a reply
	// Reports sent on their own stay this agent's until the CLS
	// acknowledges them: a batch that failed comes back through unacked
	// and goes out again.
	unacked := make(chan []protocol.Report)
	sending := 0 // report requests out
	idleSince := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	// sendReports reports on its own, without asking for work.
	sendReports := func() {
		if len(reports) == 0 {
			return
		}
		batch := reports
		reports = nil
		sending++
		reporters.Add(1)
		go func() {
			defer reporters.Done()
			// No deadline while the agent runs: a CLS that is slow or
			// stopped answers late, and a broken connection is re-dialled
			// and the batch sent again (a.call).
			err := a.call(rctx, protocol.OpReport, func(id int64) any {
				return protocol.ReportBatch{Placeholder: id, Reports: batch}
			}, nil)
			var back []protocol.Report
			if err != nil {
				if resend(err) {
					back = batch
				} else {
					a.log.Warn("the CLS refused a report", "err", err)
				}
			}
			select {
			case unacked <- back:
			case <-quit:
				if back != nil {
					a.log.Warn("could not report; the CLS will requeue after the lease", "err", err)
				}
			}
		}()
	}
	hold := time.NewTimer(time.Hour)
	hold.Stop()
	holding := false
	reportsDue := false   // reports have waited long enough: the next poll goes now
	pollPrefetch := false // the poll out only prefetches (it does not wait for work)
	prefetchDry := false  // a prefetch found nothing: no more until a job ends
	// scheduleReports decides when reports just gathered go out.
	scheduleReports := func() {
		var age time.Duration
		if poll != nil {
			age = time.Since(pollSent)
		}
		switch whenToReport(poll != nil && !pollPrefetch, age, pollDry, running) {
		case reportNow:
			sendReports()
		case reportSoon:
			if !holding {
				holding = true
				hold.Reset(reportHold)
			}
		case reportWithRefill:
			if !holding {
				holding = true
				hold.Reset(a.cfg.prefetchWindow / 2)
			}
		}
	}
	exiting := false
	stopped := ctx.Done()
	for {
		if !exiting && (ctx.Err() != nil || (a.cfg.ExitWhenOrphaned && os.Getppid() != a.ppid) ||
			(a.cfg.IdleTimeout > 0 && running == 0 && len(held) == 0 && time.Since(idleSince) >= a.cfg.IdleTimeout)) {
			exiting = true
		}
		if exiting && len(held) > 0 {
			reports = append(reports, a.giveBack(held)...)
			held = nil
		}
		if exiting && running == 0 && poll == nil && sending == 0 {
			if len(reports) == 0 {
				return nil
			}
			// Final report: deliver it even though ctx has ended.
			return a.call(rctx, protocol.OpReport, func(id int64) any {
				return protocol.ReportBatch{Placeholder: id, Reports: reports}
			}, nil)
		}
		depth := a.prefetchDepth(meanRun)
		want := free + depth - len(held)
		// Ask when a slot would idle otherwise, when half the prefetch is
		// used up, or when reports have waited half the window: under load one
		// request then carries many reports and fetches many jobs.
		starving := free > len(held)
		refill := want > depth/2 && !prefetchDry
		if reportsDue && poll == nil && want <= 0 {
			sendReports() // nothing to ask for: report on its own
			reportsDue = false
		}
		if poll == nil && !exiting && want > 0 && (starving || refill || reportsDue) {
			reportsDue = false
			if holding { // the poll carries the reports
				hold.Stop()
				holding = false
			}
			wait := 30 * time.Second
			if a.cfg.IdleTimeout > 0 {
				wait = min(wait, max(a.cfg.IdleTimeout-time.Since(idleSince), 10*time.Millisecond))
			}
			if a.cfg.ExitWhenOrphaned {
				wait = min(wait, 5*time.Second)
			}
			if !starving {
				// Only prefetching: take what is ready now. Parked, this poll
				// would catch jobs that arrive while every slot is busy, maybe
				// with a job that turned out long.
				wait = 0
			}
			pollPrefetch = !starving
			sent, n := reports, want
			if starving && !a.cfg.NoOp {
				// A long poll takes what arrives first, maybe a burst of long
				// jobs: ask for the free slots and one ahead, no deeper, so
				// other placeholders get their share. (No-op jobs take no
				// time, so a no-op agent never holds any: it asks for its
				// whole prefetch.)
				n = min(want, free-len(held)+1)
			}
			reports = nil
			poll, pollSent = make(chan polled, 1), time.Now()
			asked, pollDry = n, lastDry
			go func(ch chan polled) {
				var p polled
				p.err = a.call(ctx, protocol.OpNext, func(id int64) any {
					return protocol.Next{Placeholder: id, Reports: sent, Free: n, WalltimeLeft: a.walltimeLeft(), WaitMS: int(wait / time.Millisecond)}
				}, &p.reply)
				if p.err != nil {
					p.reply.Jobs = nil
					// Keep the reports: they go out with the next request.
					p.reply.Exit = false
					p.err = errWithReports{p.err, sent}
				}
				ch <- p
			}(poll)
		}
		select {
		case r := <-progress:
			gotReport(r)
			scheduleReports()
		case r := <-ended:
			free++
			running--
			prefetchDry = false
			gotReport(r)
		drain: // jobs often end together: one request for all of them
			for {
				select {
				case r := <-ended:
					free++
					running--
					gotReport(r)
				default:
					break drain
				}
			}
			idleSince = time.Now()
			startHeld()
			scheduleReports()
		case back := <-unacked:
			sending--
			// Not acknowledged: the next request carries it (a poll, or
			// the tick's report at the latest).
			reports = append(back, reports...)
		case <-hold.C:
			holding = false
			if poll != nil && !pollPrefetch {
				sendReports() // the poll out has parked
			} else if len(reports) > 0 {
				reportsDue = true // the next poll goes at once (see the top)
			}
		case p := <-poll:
			poll = nil
			if p.err != nil {
				var ewr errWithReports
				if errors.As(p.err, &ewr) {
					reports = append(ewr.reports, reports...)
				}
				if ctx.Err() != nil {
					exiting = true
					continue
				}
				// The CLS refused us or stayed unreachable: results could
				// never be reported, so stop the jobs too.
				a.killAll()
				return p.err
			}
			if p.reply.Exit {
				exiting = true
			}
			if pollPrefetch && len(p.reply.Jobs) == 0 {
				prefetchDry = true
			}
			lastDry = len(p.reply.Jobs) < asked
			for _, u := range units(p.reply.Jobs) {
				idleSince = time.Now()
				if isBundle(u) {
					a.holdAll(u) // runBundle takes each job out as it starts it
				}
				if free > 0 {
					start(u)
					continue
				}
				if !isBundle(u) {
					a.hold(u[0])
				}
				held = append(held, heldJob{u, time.Now()})
			}
		case <-tick.C:
			// A held job waiting long means the running ones are not short
			// after all: give it back so another placeholder can run it.
			var keep []heldJob
			for _, h := range held {
				if time.Since(h.since) > maxHold*a.cfg.prefetchWindow {
					reports = append(reports, a.giveBack([]heldJob{h})...)
				} else {
					keep = append(keep, h)
				}
			}
			held = keep
			sendReports() // a returned job must not wait for a slot or a long poll
		case <-stopped:
			exiting = true
			stopped = nil // closed for good: selecting it again would spin while jobs and reports finish
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
		return pe.Code == protocol.CodeInternal || pe.Code == protocol.CodeShutdown
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
			err := a.call(ctx, protocol.OpHeartbeat, func(id int64) any {
				return protocol.Heartbeat{Placeholder: id, Running: refs}
			}, &reply)
			if err == nil {
				for _, k := range reply.Kill {
					a.kill(k, protocol.ReasonKilled)
				}
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
