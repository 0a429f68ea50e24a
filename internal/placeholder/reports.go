package placeholder

import (
	"context"
	"errors"
	"path/filepath"
	"time"

	"github.com/mq-hpc/mq/internal/placeholder/hung"
	"github.com/mq-hpc/mq/internal/placeholder/spool"
	"github.com/mq-hpc/mq/protocol"
)

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
		w.a.syncReports(w.rctx, batch)
		started := w.a.started.List(w.a.now())
		var err error
		if take > 0 {
			// take is free slots alone: nothing ahead.
			var reply protocol.NextReply
			err = call(w.rctx, w.a, protocol.OpNext, func(id int64) protocol.Next {
				return protocol.Next{Placeholder: id, Reports: batch, Free: take, WalltimeLeft: w.a.walltimeLeft(), Started: started, Clock: w.a.wall()}
			}, &reply)
			if err == nil {
				ans.jobs, ans.exit = reply.Jobs, reply.Exit
			}
		} else {
			err = call(w.rctx, w.a, protocol.OpReport, func(id int64) protocol.ReportBatch {
				return protocol.ReportBatch{Placeholder: id, Reports: batch, Started: started, Clock: w.a.wall()}
			}, nil)
		}
		switch {
		case err == nil:
			w.a.started.Sent(started)
			w.a.taken(batch)
		case resend(err):
			ans.back = batch
		default:
			w.a.log.Warn("the CLS refused a report", "err", err)
			w.a.taken(batch)
		}
		select {
		case w.unacked <- ans:
		case <-w.quit:
			w.late(ans.back, ans.jobs) // spooled
		}
	}()
}

// taken forgets the reports the CLS acknowledged, or refused (they are
// not sent again): their attempts are held no more, and their outputs
// keep their stream files no more.
func (a *Agent) taken(rs []protocol.Report) {
	a.holding.Done(rs)
	if a.streams != nil {
		a.streams.acked(rs)
	}
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
	if w.diskIsFull {
		return 0 // paused: reports ask for nothing
	}
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

// uncommitted reports whether err is the CLS's answer that it could not
// commit a request's batch (a full disk; the batch was rolled back whole)
// or was stopping: the same request may go again. A transport error is
// not one: call has re-dialled already, and gives up only when the CLS
// stayed unreachable.
func uncommitted(err error) bool {
	var pe *protocol.Error
	return errors.As(err, &pe) && (pe.Code == protocol.CodeInternal || pe.Code == protocol.CodeShutdown)
}

// spoolReports writes reports the CLS never acknowledged to the spool
// under the output directory (package spool), for the CLS to apply as
// this placeholder's own when it next serves the site: their jobs do not
// run again. A failure (a full disk) is logged, and the agent goes on.
func (a *Agent) spoolReports(reports []protocol.Report) {
	if len(reports) == 0 || a.ID() == 0 {
		return
	}
	// A remote agent's streams not shipped to the CLS it lost stay here:
	// the reports say where (syncReports, at once).
	ctx, lost := context.WithCancel(context.Background())
	if a.cfg.StageOutput {
		lost()
	}
	a.syncReports(ctx, reports)
	lost()
	dir := filepath.Join(a.cfg.OutDir, spool.Dir)
	if err := hung.Within(flushWait, "spooling reports", func() error { spool.Save(dir, a.ID(), time.Duration(a.clsAhead.Load()), reports, a.log); return nil }); err != nil {
		a.log.Error("could not spool the reports the CLS did not take: their jobs run again", "dir", dir, "err", err)
	}
}

type errWithReports struct {
	err     error
	reports []protocol.Report
}

func (e errWithReports) Error() string { return e.err.Error() }

func (e errWithReports) Unwrap() error { return e.err }

// late spools what a request brought back after work returned: reports
// it did not deliver, and jobs the CLS handed out, which go back unstarted
// rather than wait out their leases, an attempt counted.
func (w *workLoop) late(back []protocol.Report, jobs []protocol.Assignment) {
	now := time.Now()
	for _, asg := range jobs {
		back = append(back, protocol.Report{ID: asg.ID, Attempt: asg.Attempt, Started: now, Finished: now, Reason: protocol.ReasonReturned})
	}
	w.lostMu.Lock()
	spooled := w.spooled
	if !spooled {
		w.lost = append(w.lost, back...)
	}
	w.lostMu.Unlock()
	if spooled {
		w.a.spoolReports(back)
	}
}
