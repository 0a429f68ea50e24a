package placeholder

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/mq-hpc/mq/internal/backoff"
	"github.com/mq-hpc/mq/internal/diskroom"
	"github.com/mq-hpc/mq/internal/logguard"
	"github.com/mq-hpc/mq/internal/placeholder/hung"
	"github.com/mq-hpc/mq/internal/resource"
	"github.com/mq-hpc/mq/protocol"
)

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

// loseCLS records that a heartbeat found the CLS unreachable past
// Config.Reconnect (err): the agent gives up on it as when a poll finds it
// so. No poll need be out then (every slot busy, the jobs fetched ahead
// held), and the held jobs must not start once the agent knows: their
// reports could reach the CLS only through the spool, after their leases
// may have lapsed. The work loop gives them back instead (noticeLost).
func (a *Agent) loseCLS(err error) {
	if a.lostCLS.CompareAndSwap(nil, &err) {
		select {
		case a.lostKick <- struct{}{}:
		default:
		}
	}
}

// noticeLost takes a heartbeat's finding that the CLS stayed unreachable
// (Agent.loseCLS) as a failed poll's: decide drains the agent, giving
// back the held jobs.
func (w *workLoop) noticeLost() {
	if p := w.a.lostCLS.Load(); p != nil && w.nextErr == nil && !w.exiting {
		w.nextErr = *p
	}
}

// loopState is what the work loop's next move depends on: a snapshot taken
// at the top of each round.
type loopState struct {
	Exiting   bool // already draining (told to exit, or decided before)
	Cancelled bool // the agent's context ended
	Orphaned  bool // ExitWhenOrphaned, and the parent process changed
	Broken    bool // this node cannot run jobs (Agent.markBroken)
	// WalltimeOver: the agent's walltime (Config.Walltime) has passed.
	WalltimeOver bool
	// NextFailed: the last next request failed for good (the CLS refused
	// the agent or stayed unreachable); Unreachable: for the latter.
	NextFailed, Unreachable bool
	IdleTimeout             time.Duration // Config.IdleTimeout (0 = never)
	IdleFor                 time.Duration // since a job last started or ended
	Orphanable              bool          // Config.ExitWhenOrphaned: a poll must return to look
	NoOp                    bool

	Free, Running int  // cores free, jobs (or bundles) running
	Held          int  // units fetched ahead, not started
	Depth         int  // how many to hold beyond the free slots (prefetchDepth)
	Sending       int  // report requests out on their own
	PollOut       bool // a next request is out
	PrefetchDry   bool // a prefetch found nothing: no more until a job ends
	ReportsDue    bool // reports have waited long enough for a poll to carry them
	// DiskFull: the output disk has less free than the output reserve
	// (workLoop.diskFull): no jobs are asked for, held ones go back.
	DiskFull bool
}

// move is what the work loop does next, in this order.
type move struct {
	Exiting     bool // drain: take no more jobs, end when everything out is back
	StopJobs    bool // the walltime is over: stop the running jobs, as interrupted
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
	if s.NextFailed && !s.Cancelled && !(s.Unreachable && s.Running > 0) {
		// Results could never be reported: stop the jobs too.
		return move{Exiting: true, Abort: true}
	}
	// Unreachable, the jobs run on (drain): their reports go to the CLS
	// if it is back by their end, else to the spool (reports.go).
	s.Exiting = s.Exiting || s.NextFailed
	m.Exiting = s.Exiting || s.Cancelled || s.Orphaned || s.WalltimeOver || s.Broken ||
		(s.IdleTimeout > 0 && s.Running == 0 && s.Held == 0 && s.IdleFor >= s.IdleTimeout)
	// Past its walltime the batch system is about to kill the placeholder
	// with its jobs (SGE with SIGKILL, so nothing is reported and the
	// jobs are found lost only when the lease runs out): stopped now, they
	// are reported as stopped for the walltime, and run again elsewhere.
	m.StopJobs = s.WalltimeOver && s.Running > 0
	held := s.Held
	if (m.Exiting || s.DiskFull) && held > 0 {
		m.GiveBack = true
		held = 0
	}
	if m.Exiting && s.Running == 0 && !s.PollOut && s.Sending == 0 {
		m.Finish = true
		return m
	}
	want := s.Free + s.Depth - held
	if s.DiskFull {
		// Output would stop any job at once, and fail none: pause,
		// reporting what runs, until there is room.
		want = 0
	}
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

	ended     chan endedUnit       // a job (or bundle: an empty report) ended, with what it held
	progress  chan protocol.Report // a bundle's jobs; unbuffered, so each is in before its slot frees
	quit      chan struct{}        // work has returned: nobody reads progress or unacked
	unacked   chan reported        // a report request's answer: its batch back if the CLS did not take it, jobs it took
	reporters sync.WaitGroup
	lostMu    sync.Mutex
	lost      []protocol.Report // batches back after quit: spooled
	spooled   bool              // lost was: what comes back later is spooled on its own

	// pool is what the placeholder holds and has free; free is its free
	// cores, the "slots" the loop asks for work with.
	pool          *resource.Pool
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
	// pctx is the polls' context: ctx's, ended too as work returns.
	pctx      context.Context
	stopPolls context.CancelFunc
	polling   sync.WaitGroup // the poll out

	hold        *time.Timer // bounds how long gathered reports wait for a poll
	holding     bool
	reportsDue  bool // reports have waited long enough: the next poll goes now
	exiting     bool
	stoppedJobs bool // the jobs were stopped for the walltime (move.StopJobs): logged
	diskIsFull  bool // the output disk was below the reserve when last looked at
}

// state is the snapshot decide works from.
func (w *workLoop) state() loopState {
	a := w.a
	s := loopState{
		Exiting:      w.exiting,
		Cancelled:    w.ctx.Err() != nil,
		NextFailed:   w.nextErr != nil,
		Unreachable:  errors.As(w.nextErr, new(unreachable)),
		IdleTimeout:  a.cfg.IdleTimeout,
		IdleFor:      a.now().Sub(w.idleSince),
		Orphanable:   a.cfg.ExitWhenOrphaned,
		Broken:       a.broken.Load() != nil,
		WalltimeOver: a.pastWalltime(),
		NoOp:         a.cfg.NoOp,
		Free:         w.free,
		Running:      w.running,
		Held:         len(w.held),
		Depth:        a.prefetchDepth(w.meanRun),
		Sending:      w.sending,
		PollOut:      w.poll != nil,
		PrefetchDry:  w.prefetchDry,
		ReportsDue:   w.reportsDue,
		DiskFull:     w.diskFull(),
	}
	if !w.exiting {
		s.Orphaned = a.orphaned()
	}
	return s
}

// orphaned says whether the agent is to exit for its parent process
// changed (Config.ExitWhenOrphaned): the CLS that started it has stopped.
func (a *Agent) orphaned() bool {
	return a.cfg.ExitWhenOrphaned && a.getppid() != a.ppid
}

// diskFull says whether the free space on the output directory's
// filesystem is below the output reserve, or writes of jobs' output there
// are refused for want of room (a quota statfs does not show: room.go),
// looked at again at each turn of the loop (before it decides whether to
// ask for work), at least at each tick: a paused agent neither spins nor
// sleeps a fixed time. It logs once when the agent pauses and once when
// it resumes.
func (w *workLoop) diskFull() bool {
	a := w.a
	if a.cfg.NoOp || w.exiting {
		return w.diskIsFull
	}
	refused := a.room.Short(time.Now(), func(refused error) error {
		dir := a.refusedDir(refused)
		return a.probeGate.Within(min(a.fsWait, statWait), "a write in "+dir, func() error { return diskroom.Probe(dir, a.create) })
	})
	var free diskroom.Free
	full := false
	if a.cfg.OutputReserve > 0 {
		var err error
		free, err = a.statfsWithin(a.cfg.OutDir)
		full = err == nil && (free.Bytes < a.cfg.OutputReserve || free.InodesShort()) // unknown: as the output limit, not full
	}
	switch {
	case full && !w.diskIsFull:
		a.log.Warn("the output disk is nearly full: taking no new jobs until there is room (cls serve --output-reserve)",
			"dir", a.cfg.OutDir, "free", free.Bytes, "reserve", a.cfg.OutputReserve, "inodes_free", free.Inodes, "inodes_kept", free.Keep, "running", w.running)
	case refused != nil && !w.diskIsFull:
		a.log.Warn("writing jobs' output is refused ("+diskroom.Why(refused)+"): taking no new jobs until a write goes through",
			"dir", a.cfg.OutDir, "err", refused, "running", w.running)
	case !full && refused == nil && w.diskIsFull:
		// At the pause's level: where the pause shows, its end does.
		a.log.Warn("room on the output disk again: taking jobs", "dir", a.cfg.OutDir, "free", free.Bytes, "reserve", a.cfg.OutputReserve, "inodes_free", free.Inodes)
	}
	full = full || refused != nil
	w.diskIsFull = full
	a.diskFull.Store(full)
	return full
}

func (w *workLoop) gotReport(r protocol.Report) {
	if r.ID == 0 {
		return // a bundle's end: its jobs reported through progress
	}
	// Whatever a job's files or errors put in it, the report is one the
	// CLS takes (escaped, clipped): never a refusal that costs the batch.
	protocol.CleanReport(&r)
	w.reports = append(w.reports, r)
	w.a.started.Ended(r.ID, r.Attempt) // the report says it started
	if d := r.Finished.Sub(r.Started); w.meanRun == 0 {
		w.meanRun = max(d, time.Microsecond)
	} else {
		w.meanRun = max((4*w.meanRun+d)/5, time.Microsecond) // never 0 (unknown) again
	}
}

// endedUnit is a unit's end: its report (empty for a bundle, whose jobs
// report through progress) and what it held; stuck: processes of it that
// did not end after SIGKILL hold that still (unkillable.go).
type endedUnit struct {
	rep   protocol.Report
	grant resource.Grant
	stuck bool
}

// tryStart starts a unit if what it was granted fits what is free.
func (w *workLoop) tryStart(u []protocol.Assignment) bool {
	a := w.a
	if a.cfg.NoOp && !isBundle(u) {
		// Ends as it starts: the report rides on the next request, and
		// no goroutine or channel stands between the two (the no-op
		// executor measures the scheduling path, not this loop).
		w.gotReport(a.run(w.ctx, u[0]))
		return true
	}
	g, ok := w.admit(u)
	if !ok {
		return false
	}
	w.start(u, g)
	return true
}

// start runs a unit that holds g.
func (w *workLoop) start(u []protocol.Assignment, g resource.Grant) {
	a := w.a
	w.free -= g.CPUs
	w.running++
	a.started.Add(u, a.now())
	if isBundle(u) {
		// Its jobs report through progress; the empty report frees what
		// it holds.
		go func() {
			stuck := a.runBundle(w.ctx, u, g, w.progress, w.quit)
			select {
			case w.ended <- endedUnit{grant: g, stuck: stuck}:
			case <-w.quit:
			}
		}()
		return
	}
	go func() {
		r, stuck := a.runGranted(w.ctx, u[0], &g)
		select {
		case w.ended <- endedUnit{r, g, stuck}:
		case <-w.quit: // work returned (aborted): nobody reads ended
		}
	}()
}

// startHeld starts the held units that fit what is free now, in the
// order they came; the others wait on.
func (w *workLoop) startHeld() {
	if w.free == 0 || len(w.held) == 0 || w.stopped() { // decide gives them back
		return
	}
	keep := w.held[:0]
	for _, h := range w.held {
		if w.free == 0 {
			keep = append(keep, h)
			continue
		}
		g, ok := w.admit(h.unit)
		switch {
		case !ok:
			keep = append(keep, h)
		case isBundle(h.unit) || w.a.unhold(h.unit[0].ID):
			w.start(h.unit, g)
		default: // the CLS took it back meanwhile
			w.pool.Give(g)
		}
	}
	clear(w.held[len(keep):])
	w.held = keep
}

// stopped says no job may start now: the output disk is full, the node
// cannot run jobs (Agent.markBroken), the agent gave up on its CLS
// (Agent.loseCLS; the work loop may not have seen it yet), or was stopped
// (a job started then is killed at once, an attempt counted).
func (w *workLoop) stopped() bool {
	return w.diskIsFull || w.a.broken.Load() != nil || w.a.lostCLS.Load() != nil || w.ctx.Err() != nil
}

// unitEnded frees what a unit held and takes its report.
func (w *workLoop) unitEnded(e endedUnit) {
	w.running--
	if !e.stuck { // else never free again: the agent is broken, and drains
		w.free += e.grant.CPUs
		w.pool.Give(e.grant)
	}
	w.gotReport(e.rep)
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
	// Unbuffered: a poll that ends after work returned knows (late).
	w.poll, w.pollSent = make(chan polled), w.a.now()
	w.asked, w.pollDry = n, w.lastDry
	w.pollCovers = min(n, max(0, w.free-len(w.held)))
	// The jobs beyond the free slots are held when they come: the CLS
	// shows them P until they start (package started). A no-op agent runs
	// every job as it comes.
	ahead := n - w.pollCovers
	if w.a.cfg.NoOp {
		ahead = 0
	}
	avail := w.available()
	started := w.a.started.List(w.a.now())
	w.polling.Add(1)
	go func(ch chan polled) {
		defer w.polling.Done()
		var p polled
		w.a.syncReports(w.ctx, sent)
		again := backoff.Backoff{Min: 50 * time.Millisecond, Max: 5 * time.Second, Jitter: 0.5}
		var warn logguard.Gate
		for {
			p.err = call(w.pctx, w.a, protocol.OpNext, func(id int64) protocol.Next {
				return protocol.Next{Placeholder: id, Reports: sent, Free: n, Ahead: ahead, WalltimeLeft: w.a.walltimeLeft(), WaitMS: int(wait / time.Millisecond), Available: avail, Started: started, Clock: w.a.wall()}
			}, &p.reply)
			if !uncommitted(p.err) {
				break
			}
			// The CLS could not commit the poll's batch (a full disk):
			// nothing of it was done, and the agent and its jobs wait
			// for the CLS rather than stop.
			if warn.Open(w.a.now()) {
				w.a.log.Warn("the CLS could not take a poll; asking again", "err", p.err)
			}
			if again.Wait(w.pctx) != nil {
				break
			}
		}
		if p.err == nil {
			w.a.started.Sent(started)
			w.a.taken(sent)
		}
		if p.err != nil {
			p.reply.Jobs = nil
			// Keep the reports: they go out with the next request.
			p.reply.Exit = false
			p.err = errWithReports{p.err, sent}
		}
		select {
		case ch <- p:
		case <-w.quit: // an abort: the CLS may have answered just before
			if p.err == nil {
				sent = nil
			}
			w.late(sent, p.reply.Jobs)
		}
	}(w.poll)
}

// ended takes the report of a slot's job, and of any others that ended
// with it: jobs often end together, and one request serves them all.
func (w *workLoop) onEnded(e endedUnit) {
	w.prefetchDry = false
	w.unitEnded(e)
drain:
	for {
		select {
		case e := <-w.ended:
			w.unitEnded(e)
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
		if why := w.never(u); why != "" {
			w.refuse(u, why)
			continue
		}
		if isBundle(u) {
			w.a.holdAll(u) // runBundle takes each job out as it starts it
		}
		if !w.stopped() && !w.a.orphaned() && w.tryStart(u) {
			continue
		}
		// Held: no slot for it yet, or no room for its output (a poll
		// out when the disk filled), or the node broke, or the agent was
		// orphaned while its poll was out (the poll, cut by its CLS's
		// exit, was sent again to the next one): then decide gives it
		// back.
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
	pool, err := resource.NewPool(a.cfg.Capacity)
	if err != nil {
		return err
	}
	w := &workLoop{
		a: a, ctx: ctx, pool: pool,
		ended:     make(chan endedUnit, a.cfg.Slots),
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
	w.pctx, w.stopPolls = context.WithCancel(ctx)
	defer func() {
		close(w.quit)
		w.stopPolls()
		stopGrace()
		stopReporting()
		w.reporters.Wait()
		// Stopped, a poll ends at once, unless it waits for a dial: unsent.
		if hung.Within(flushWait, "a poll", func() error { w.polling.Wait(); return nil }) != nil {
			a.log.Warn("stopping with a poll out: what it brings is spooled if it comes before the agent exits")
		}
		w.lostMu.Lock()
		lost := w.lost
		w.spooled = true
		w.lostMu.Unlock()
		a.spoolReports(append(w.reports, lost...)) // the CLS never took them
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	stopped := ctx.Done()
	for {
		w.noticeLost()
		m := decide(w.state())
		w.exiting = m.Exiting
		if m.Abort {
			// The held jobs go back with the reports, to the spool if
			// the CLS never takes them: requeued unstarted, not lapsed.
			w.reports = append(w.reports, a.giveBack(w.held)...)
			w.held = nil
			a.killAll(protocol.ReasonInterrupted)
			return w.nextErr
		}
		if w.nextErr != nil && w.ctx.Err() == nil {
			a.log.Warn("taking no more jobs; the running ones go on, and their reports go to the CLS if it is back by their end, else to the spool", "err", w.nextErr, "running", w.running)
		}
		w.nextErr = nil // seen: the agent is stopping anyway
		if m.StopJobs {
			if !w.stoppedJobs {
				w.stoppedJobs = true
				a.log.Info("walltime over: stopping the running jobs", "walltime", a.cfg.Walltime, "jobs", w.running)
			}
			// At every turn: a job that was starting as the last call ran is
			// stopped too (a job is signalled once however often asked).
			a.killAll(protocol.WalltimeReason(a.cfg.Walltime))
		}
		if m.GiveBack {
			w.reports = append(w.reports, a.giveBack(w.held)...)
			w.held = nil
			if !m.Exiting {
				w.scheduleReports() // paused for the disk: they go out alone
			}
		}
		if m.Finish {
			if len(w.reports) == 0 {
				return nil
			}
			// Final report: deliver it even though ctx has ended.
			a.syncReports(rctx, w.reports)
			err := call(rctx, a, protocol.OpReport, func(id int64) protocol.ReportBatch {
				return protocol.ReportBatch{Placeholder: id, Reports: w.reports, Started: a.started.List(a.now()), Clock: a.wall()}
			}, nil)
			if err == nil || !resend(err) {
				a.taken(w.reports)
				w.reports = nil // taken, or refused: not spooled
			}
			return err
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
		case e := <-w.ended:
			w.onEnded(e)
		case ans := <-w.unacked:
			w.onReported(ans)
		case <-w.hold.C:
			w.onHoldExpired()
		case p := <-w.poll:
			w.onPoll(p)
		case <-tick.C:
			w.onTick()
		case <-a.lostKick: // noticeLost, at the top
		case <-stopped:
			stopped = nil // closed for good: selecting it again would spin while jobs and reports finish; decide sees ctx ended
		}
	}
}
