package copies

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mq-hpc/mq/internal/runs"
	"github.com/mq-hpc/mq/protocol"
)

// A job's attempts: the core keeps every attempt running (its lease, its
// placeholder) and tells the module of each event of a job's attempts
// with one call, Apply, which records replication's part (job_copies,
// job_apart, attempts ended beside others, the killed copies awaited,
// the candidates index) and returns the facts the core acts on.

// Run is an attempt of a job running at a placeholder.
type Run struct {
	Job         int64
	Attempt     int
	Placeholder int64
	Started     time.Time
}

// Attempts is a job's attempts running, as the core keeps them: the one
// its row describes and the copies beside it, oldest first.
type Attempts struct {
	Job    int64
	Queue  int32
	Row    Run
	Copies []Run
}

// Event is what happened to one of a job's attempts.
type Event int

const (
	// Ended: the attempt ended as Change says. Alone (no copies) the job
	// moves on with it. Beside others, one that finished 0 wins: every
	// other attempt is killed and the job moves on with it; one that
	// failed, was lost or was handed back ends alone, and if it was the
	// row's, the oldest copy takes the row.
	Ended Event = iota
	// Claimed: the attempt's agent claimed first (before moving outputs
	// into place): it wins, and the job runs on with it alone.
	Claimed
	// Stopped: the job stops executing for another reason (deleted):
	// every copy is killed, for Change.Reason.
	Stopped
)

// Change is one event of a job's attempts.
type Change struct {
	Event     Event
	Attempt   int             // the attempt it happened to (not Stopped)
	Succeeded bool            // Ended: it finished 0
	Returned  bool            // Ended: handed back unstarted; nothing to record
	Report    protocol.Report // Ended: how
	Reason    string          // Stopped: why the copies are killed
	// Now is the core's clock, read only when NeedsNow says an attempt
	// is recorded without a time of its own.
	Now time.Time
}

// Facts is what the core does after a Change.
type Facts struct {
	// Won: the job moves on with the attempt (Ended alone or first,
	// Claimed); false when it ended alone and another runs on.
	Won      bool
	Row      Run   // the attempt the job row describes now
	RowMoved bool  // another than before: the core writes it to the row
	Copies   []Run // the copies running beside it now, oldest first
	// Spent are the attempts this change ended, in order (those killed,
	// then one that ended alone): each is charged as it ran, unless not
	// Charge; a Kept one's reservation is held until its late report.
	Spent []Spent
}

// Spent is an attempt that ended beside others, as the core charges it:
// its run, when it ran, whether to charge it and whether its late report
// is awaited (Kept; past MaxKilledKept a killed copy is charged up to the
// kill only).
type Spent struct {
	Run               Run
	Started, Finished time.Time
	Charge, Kept      bool
}

// NeedsNow says whether Apply reads Change.Now for ch over a: the core
// reads its clock only then.
func NeedsNow(a Attempts, ch Change) bool {
	switch {
	case ch.Event == Stopped:
		return len(a.Copies) > 0
	case len(a.Copies) == 0 && (ch.Event == Claimed || a.Row.Attempt == ch.Attempt):
		return false // alone: nothing is recorded here
	case ch.Event == Claimed || ch.Succeeded:
		return true // the losers are killed now
	}
	return !ch.Returned && ch.Report.Finished.IsZero()
}

// Apply records ch, an event of the attempts a of a job, in the module's
// state and tables, and returns what the core must do about it: it is
// replication's whole part of the event.
func (c *Copies) Apply(ctx context.Context, ex Execer, a Attempts, ch Change) (Facts, error) {
	var f Facts
	var err error
	var j Job
	switch {
	case ch.Event == Stopped:
		f, j = Facts{Row: a.Row}, Job{ID: a.Job, Row: a.Row.Attempt, Queue: a.Queue, Runs: 1}
		f.Spent, err = c.stop(ctx, ex, j, a.Copies, ch.Reason, ch.Now)
	case len(a.Copies) == 0 && (ch.Event == Claimed || a.Row.Attempt == ch.Attempt):
		// It ran alone: it no longer runs apart (a copy that started
		// beside a claimed attempt could claim and win again).
		f, j = Facts{Won: true, Row: a.Row}, Job{ID: a.Job, Row: a.Row.Attempt, Queue: a.Queue, Runs: 1}
		err = c.setApart(ctx, ex, j, false)
	case ch.Event == Claimed || ch.Succeeded:
		f, j, err = c.won(ctx, ex, a, ch)
	default:
		f, j, err = c.alone(ctx, ex, a, ch)
	}
	c.Sync(j)
	return f, err
}

// won is Apply for a winner: the losers are the row's attempt (unless it
// won) and every other copy, in that order.
func (c *Copies) won(ctx context.Context, ex Execer, a Attempts, ch Change) (Facts, Job, error) {
	f := Facts{Won: true, Row: a.Row}
	var losers []Run
	if a.Row.Attempt != ch.Attempt {
		if a.Row.Attempt != 0 {
			losers = append(losers, a.Row)
		}
		f.RowMoved = true
	}
	for _, r := range a.Copies {
		if r.Attempt == ch.Attempt {
			f.Row = r
		} else {
			losers = append(losers, r)
		}
	}
	j := Job{ID: a.Job, Row: ch.Attempt, Queue: a.Queue, Runs: 1}
	spent, err := c.stop(ctx, ex, j, losers, KilledReason(ch.Attempt), ch.Now)
	f.Spent = spent
	return f, j, err
}

// alone is Apply for an attempt that ended while another runs on: a copy
// leaves the copies; the row's own gives way to the oldest copy, which
// runs apart from now on.
func (c *Copies) alone(ctx context.Context, ex Execer, a Attempts, ch Change) (Facts, Job, error) {
	f := Facts{Row: a.Row, Copies: a.Copies}
	ended := a.Row
	promoted := false
	if i := slices.IndexFunc(a.Copies, func(r Run) bool { return r.Attempt == ch.Attempt }); i >= 0 {
		ended = a.Copies[i]
		f.Copies = slices.Delete(slices.Clone(a.Copies), i, i+1)
	} else if a.Row.Attempt == ch.Attempt && len(a.Copies) > 0 {
		f.Row, f.Copies, f.RowMoved, promoted = a.Copies[0], a.Copies[1:], true, true
	} else {
		return f, Job{ID: a.Job}, fmt.Errorf("attempt %d of job %d ended, but it does not run", ch.Attempt, a.Job)
	}
	if len(f.Copies) == 0 {
		f.Copies = nil
	}
	if r := ch.Report.Reason; !ch.Returned && !protocol.IsInterrupted(r) && !strings.HasPrefix(r, "lost") {
		c.failed[a.Job] = true // its command failed: copies of it would too
	}
	j := Job{ID: a.Job, Row: f.Row.Attempt, Queue: a.Queue, Runs: 1 + len(f.Copies)}
	now := ch.Report.Finished
	if now.IsZero() {
		now = ch.Now
	}
	s, err := c.endAlone(ctx, ex, j, ended, ch.Report, !ch.Returned, promoted, now)
	f.Spent = []Spent{s}
	return f, j, err
}

// Apart says whether attempt of job id, the one its row describes, runs
// apart: copies may run beside it.
func (c *Copies) Apart(id int64, attempt int) bool {
	a, ok := c.apart[id]
	return ok && a == attempt
}

// FailedBeside says whether an attempt of job id failed by itself while
// another ran on: no new copy of it starts until it stops running.
func (c *Copies) FailedBeside(id int64) bool { return c.failed[id] }

// SetApart records whether j.Row, the attempt job j's row describes,
// runs apart (job_apart: a restart must know), and syncs j's entry in the
// index. Only a change is written, so jobs of queues that never copy cost
// nothing.
func (c *Copies) SetApart(ctx context.Context, ex Execer, j Job, apart bool) error {
	err := c.setApart(ctx, ex, j, apart)
	c.Sync(j)
	return err
}

// setApart is SetApart without the index.
func (c *Copies) setApart(ctx context.Context, ex Execer, j Job, apart bool) error {
	// Any attempt's row goes: the attempt that wins a race is a copy
	// whose job row described another until now.
	_, was := c.apart[j.ID]
	var err error
	switch {
	case apart && j.Row != 0:
		c.apart[j.ID] = j.Row
		_, err = ex.ExecContext(ctx, queries.Get("SetApart"), j.ID, j.Row)
	case !apart && was:
		delete(c.apart, j.ID)
		delete(c.failed, j.ID)
		_, err = ex.ExecContext(ctx, queries.Get("ClearApart"), j.ID)
	}
	if err != nil {
		return fmt.Errorf("job %d apart: %w", j.ID, err)
	}
	return nil
}

// Started records a copy r that starts beside job j's other attempts
// (j counts it).
func (c *Copies) Started(ctx context.Context, ex Execer, r Run, j Job) error {
	c.gen++
	c.Sync(j)
	if _, err := ex.ExecContext(ctx, queries.Get("InsertCopy"), r.Job, r.Attempt, r.Placeholder, r.Started.UnixMicro()); err != nil {
		return fmt.Errorf("copy %d of job %d: %w", r.Attempt, r.Job, err)
	}
	return nil
}

// Left records that copy attempt of job j no longer runs beside the
// row's: it ended, or the row describes it now (j counts it no more).
func (c *Copies) Left(ctx context.Context, ex Execer, j Job, attempt int) error {
	c.Sync(j)
	return c.left(ctx, ex, j, attempt)
}

func (c *Copies) left(ctx context.Context, ex Execer, j Job, attempt int) error {
	c.gen++
	if _, err := ex.ExecContext(ctx, queries.Get("DeleteCopy"), j.ID, attempt); err != nil {
		return fmt.Errorf("copy %d of job %d: %w", attempt, j.ID, err)
	}
	return nil
}

// AllLeft records that no copy of job j runs any more (one won, or the
// job stopped).
func (c *Copies) AllLeft(ctx context.Context, ex Execer, j Job) error {
	c.Sync(j)
	return c.allLeft(ctx, ex, j)
}

func (c *Copies) allLeft(ctx context.Context, ex Execer, j Job) error {
	c.gen++
	if _, err := ex.ExecContext(ctx, queries.Get("DeleteCopies"), j.ID); err != nil {
		return fmt.Errorf("copies of job %d: %w", j.ID, err)
	}
	return nil
}

// Promote records that copy j.Row of job j, the oldest, is the attempt
// the row describes now that the row's own ended: it leaves job_copies
// and runs apart, so copies may start beside it.
func (c *Copies) Promote(ctx context.Context, ex Execer, j Job) error {
	err := c.promote(ctx, ex, j)
	c.Sync(j)
	return err
}

func (c *Copies) promote(ctx context.Context, ex Execer, j Job) error {
	if err := c.left(ctx, ex, j, j.Row); err != nil {
		return err
	}
	return c.setApart(ctx, ex, j, true)
}

// EndAlone records attempt a of job j, which ended as r says while
// another attempt runs on (record false: handed back unstarted, there is
// nothing to record). A copy leaves job_copies; with promoted, a was the
// row's own and copy j.Row, the oldest, is the row's now. It returns when
// a ran, for the charge of what it spent.
func (c *Copies) EndAlone(ctx context.Context, ex Execer, j Job, a Run, r protocol.Report, record, promoted bool, now time.Time) (started, finished time.Time, err error) {
	s, err := c.endAlone(ctx, ex, j, a, r, record, promoted, now)
	c.Sync(j)
	return s.Started, s.Finished, err
}

func (c *Copies) endAlone(ctx context.Context, ex Execer, j Job, a Run, r protocol.Report, record, promoted bool, now time.Time) (Spent, error) {
	s := Spent{Run: a, Charge: record}
	if record {
		var err error
		if s.Started, s.Finished, err = c.End(ctx, ex, a, r, false, now); err != nil {
			return s, err
		}
	}
	if promoted {
		return s, c.promote(ctx, ex, j)
	}
	return s, c.left(ctx, ex, j, a.Attempt)
}

// KilledReason is why the attempts that lost to attempt won were killed.
func KilledReason(won int) string {
	return fmt.Sprintf("killed: attempt %d of the job finished first", won)
}

// End records attempt a, which ended as r (checked: protocol.Report.Kept)
// says while the job goes on, or
// was killed for another (attempts, with killed_copy). It returns when
// the attempt ran, r's times or a's start and now, for the charge of
// what it spent.
func (c *Copies) End(ctx context.Context, ex Execer, a Run, r protocol.Report, killed bool, now time.Time) (started, finished time.Time, err error) {
	started, finished = r.Started, r.Finished
	if started.IsZero() {
		started = a.Started
	}
	if finished.IsZero() {
		finished = now
	}
	var exit, cpuUser, cpuSys, maxRSS any
	if !killed && !protocol.IsInterrupted(r.Reason) && !strings.HasPrefix(r.Reason, "lost") {
		exit = r.Exit
	}
	if r.Usage.Measured() {
		cpuUser, cpuSys, maxRSS = r.CPUUser, r.CPUSys, r.MaxRSS
	}
	reason := r.Reason
	if reason == "" {
		reason = fmt.Sprintf("exit status %d while another attempt ran on", r.Exit)
	}
	if _, err := ex.ExecContext(ctx, queries.Get("EndAttempt"), a.Job, a.Attempt, a.Placeholder, started.UnixMicro(), finished.UnixMicro(),
		exit, reason, cpuUser, cpuSys, maxRSS, killed); err != nil {
		return started, finished, fmt.Errorf("attempt %d of job %d ended: %w", a.Attempt, a.Job, err)
	}
	return started, finished, nil
}

// Win records that attempt won of job j (j.Row is it now): no copy may
// start beside it any more (a later one could claim and win again), and
// the losers, every other attempt that ran, are ended as killed copies.
// It returns them, in order, for the core to charge.
func (c *Copies) Win(ctx context.Context, ex Execer, j Job, won int, losers []Run, now time.Time) ([]Spent, error) {
	return c.Stop(ctx, ex, j, losers, KilledReason(won), now)
}

// Stop records that the attempt job j's row describes no longer runs
// apart (it won, ended, or the job was deleted) and ends the copies
// killed beside it (j counts none now), for reason. It returns them, in
// order, for the core to charge.
func (c *Copies) Stop(ctx context.Context, ex Execer, j Job, killed []Run, reason string, now time.Time) ([]Spent, error) {
	ends, err := c.stop(ctx, ex, j, killed, reason, now)
	c.Sync(j)
	return ends, err
}

func (c *Copies) stop(ctx context.Context, ex Execer, j Job, killed []Run, reason string, now time.Time) ([]Spent, error) {
	if err := c.setApart(ctx, ex, j, false); err != nil {
		return nil, err
	}
	if len(killed) == 0 {
		return nil, nil
	}
	if err := c.allLeft(ctx, ex, j); err != nil {
		return nil, err
	}
	ends := make([]Spent, len(killed))
	for i, r := range killed {
		started, finished, err := c.End(ctx, ex, r, protocol.Report{Finished: now, Reason: reason}, true, now)
		if err != nil {
			return nil, err
		}
		ends[i] = Spent{Run: r, Started: started, Finished: finished, Charge: true,
			Kept: c.Kill(protocol.JobRef{ID: r.Job, Attempt: r.Attempt}, r.Placeholder)}
	}
	return ends, nil
}

// Kill remembers copy ref, just killed at placeholder ph, which runs on
// until that placeholder's next heartbeat: its late report is kept. It
// returns false, remembering nothing, past MaxKilledKept.
func (c *Copies) Kill(ref protocol.JobRef, ph int64) bool {
	if len(c.killed) >= MaxKilledKept {
		return false
	}
	c.killed[ref] = ph
	return true
}

// TakeKilled says whether ref is a killed copy placeholder ph ran, and
// forgets it: its report came.
func (c *Copies) TakeKilled(ref protocol.JobRef, ph int64) bool {
	if !c.Awaits(ref, ph) {
		return false
	}
	delete(c.killed, ref)
	return true
}

// Awaits says whether ref is a killed copy placeholder ph ran whose
// report has not come yet.
func (c *Copies) Awaits(ref protocol.JobRef, ph int64) bool {
	got, ok := c.killed[ref]
	return ok && got == ph
}

// Late records the report r of a killed copy that placeholder ph ran,
// which came after another attempt won (Awaits said so): it is awaited no
// more and its CPU figures are kept. The core then charges it up to when
// it stopped and releases its reservation.
func (c *Copies) Late(ctx context.Context, ex Execer, ph int64, r protocol.Report) error {
	if !c.TakeKilled(protocol.JobRef{ID: r.ID, Attempt: r.Attempt}, ph) {
		return nil
	}
	return c.LateUsage(ctx, ex, r)
}

// LateUsage keeps the CPU figures of a killed copy's report r (checked:
// protocol.Report.Kept), which came after another attempt won.
func (c *Copies) LateUsage(ctx context.Context, ex Execer, r protocol.Report) error {
	if !r.Usage.Measured() {
		return nil
	}
	if _, err := ex.ExecContext(ctx, queries.Get("LateUsage"), r.CPUUser, r.CPUSys, r.MaxRSS, r.ID, r.Attempt); err != nil {
		return fmt.Errorf("late report of job %d attempt %d: %w", r.ID, r.Attempt, err)
	}
	return nil
}

// The core's running attempts (package runs) as Apply sees them, and
// Apply's facts given back as those same attempts, so the core applies
// them without looking anything up.

// Ran is what one event did, in the core's attempts.
type Ran struct {
	// Won: the job moves on with the attempt (Facts.Won).
	Won bool
	// Alone: the job ran alone and nothing else changed; the fields
	// below are unset.
	Alone     bool
	Row       *runs.Run   // the attempt the job row describes now, when RowMoved
	RowMoved  bool        // another than before: the core writes it to the row
	Copies    []*runs.Run // the copies running beside it now, oldest first (nil: none)
	Spent     []Spent     // the attempts this event ended, in order (Facts.Spent)
	SpentRuns []*runs.Run // Spent[i]'s attempt
}

// Event is Apply over the core's attempts of job id (queue q): row, the
// one its row describes (nil if none), and cs, the copies beside it. now
// is the core's clock, read only when NeedsNow says the event needs it.
func (c *Copies) Event(ctx context.Context, ex Execer, id int64, q int32, row *runs.Run, cs []*runs.Run, ch Change, now func() time.Time) (Ran, error) {
	a := Attempts{Job: id, Queue: q, Copies: view(id, cs)}
	if row != nil {
		a.Row = Run{Job: id, Attempt: row.Attempt, Placeholder: row.Placeholder, Started: row.Started}
	}
	if NeedsNow(a, ch) {
		ch.Now = now()
	}
	f, err := c.Apply(ctx, ex, a, ch)
	if err != nil {
		return Ran{}, err
	}
	if len(cs) == 0 && !f.RowMoved {
		return Ran{Won: f.Won, Alone: true}, nil
	}
	all := append([]*runs.Run{row}, cs...)
	of := func(r Run) *runs.Run {
		return all[slices.IndexFunc(all, func(ru *runs.Run) bool { return ru != nil && ru.Attempt == r.Attempt })]
	}
	ran := Ran{Won: f.Won, RowMoved: f.RowMoved, Spent: f.Spent, SpentRuns: make([]*runs.Run, len(f.Spent))}
	if f.RowMoved {
		ran.Row = of(f.Row)
	}
	for _, r := range f.Copies {
		ran.Copies = append(ran.Copies, of(r))
	}
	for i, e := range f.Spent {
		ran.SpentRuns[i] = of(e.Run)
	}
	return ran, nil
}

// view is rs, attempts of job id, as the module sees them.
func view(id int64, rs []*runs.Run) []Run {
	if len(rs) == 0 {
		return nil
	}
	out := make([]Run, len(rs))
	for i, r := range rs {
		out[i] = Run{Job: id, Attempt: r.Attempt, Placeholder: r.Placeholder, Started: r.Started}
	}
	return out
}
