// Package copies runs a job as several attempts at once: the end game of
// Workqueue with Replication (WQR) and Storage Affinity, the bag-of-tasks
// schedulers of Santos-Neto's 2004 thesis (docs/policies/bag-of-tasks.md).
// When a placeholder asks and a queue that copies has no ready job, the
// queue's policy.Replicator picks a running job to copy: a new attempt of
// it runs at the asking placeholder beside the others (job_copies). The first
// attempt to finish wins: a copy that ends 0 (its report, or its agent's
// claim before it moves outputs into place) ends every other attempt of
// the job as a killed copy (attempts.killed_copy) and becomes the attempt
// the job row describes; the losers' placeholders are told to kill them at
// their next heartbeat, as for mqdel. An attempt that fails or is lost
// while another runs ends alone; the job follows the last one. Copies are
// not counted against max_attempts.
//
// The metaqueue's core keeps every running attempt (its lease, its
// placeholder) and calls this package where they change; Copies keeps
// what replication alone knows: which jobs opted out, which row attempts
// run apart in scratch, the copies killed whose late report is awaited,
// and the index of jobs a copy may start beside (Sync, Choose). It writes
// its own tables inside the core's write transaction, through an Execer.
package copies

import (
	"context"
	"database/sql"
	_ "embed"
	"fmt"
	"strings"
	"time"

	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/internal/sqlfile"
	"github.com/mq-hpc/mq/protocol"
)

//go:embed copies.sql
var copiesSQL string

var queries = sqlfile.MustParse("copies.sql", copiesSQL)

// Execer is the connection the module reads and writes through: the
// core's writer (*sql.Conn, *sql.Tx) or its reader pool (*sql.DB).
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// MaxKilledKept bounds the killed copies whose late report is awaited.
const MaxKilledKept = 100_000

// Copies is replication's state, owned by the core goroutine.
type Copies struct {
	noCopy map[int64]bool // jobs that opted out (job_no_replicate)
	// apart: the attempt each job row describes, when it runs in a
	// scratch directory of its own and has not won a race, so copies may
	// run beside it (job_apart).
	apart map[int64]int
	// killed are copies killed for a winner whose placeholder has not
	// reported them yet (the placeholder that ran each): their report's
	// CPU figures are still kept.
	killed map[protocol.JobRef]int64
	on     int    // queues that copy
	gen    uint64 // bumped when running attempts change (copy decisions may change)
	idx    index
}

// New returns empty state.
func New() *Copies {
	c := &Copies{}
	c.Reset()
	return c
}

// Reset forgets everything (before a load).
func (c *Copies) Reset() {
	*c = Copies{noCopy: map[int64]bool{}, apart: map[int64]int{}, killed: map[protocol.JobRef]int64{}}
	c.idx.reset()
}

// Limit says whether a queue copies running jobs, and its bound on the
// attempts of one job running at once (0: none), from its max_copies and
// whether its policy has a Replicator of its own. A policy that
// replicates copies unless max_copies is 1; another only with
// max_copies 2 or more.
func Limit(replicates bool, maxCopies int) (on bool, most int) {
	if replicates {
		return maxCopies != 1, maxCopies
	}
	return maxCopies >= 2, maxCopies
}

// Replicator is a queue's end game: its policy's (newRep, nil if none),
// or WQR's for a queue that copies by max_copies alone.
func Replicator(newRep func() policy.Replicator) policy.Replicator {
	if newRep != nil {
		return newRep()
	}
	return policy.WQR{}
}

// SetCopying records how many queues copy.
func (c *Copies) SetCopying(queues int) { c.on = queues }

// On says whether any queue copies.
func (c *Copies) On() bool { return c.on > 0 }

// Changed notes that running attempts, or what a copy may spend, changed:
// a placeholder that found nothing to copy looks again.
func (c *Copies) Changed() { c.gen++ }

// Gen numbers the state Changed last moved on to.
func (c *Copies) Gen() uint64 { return c.gen }

// OptedOut says whether job id asked never to be copied.
func (c *Copies) OptedOut(id int64) bool { return c.noCopy[id] }

// OptOut records that job id, being submitted, is never to be copied.
func (c *Copies) OptOut(ctx context.Context, ex Execer, id int64) error {
	if _, err := ex.ExecContext(ctx, queries.Get("OptOut"), id); err != nil {
		return fmt.Errorf("job %d opts out of copies: %w", id, err)
	}
	c.noCopy[id] = true
	return nil
}

// Apart says whether attempt of job id, the one its row describes, runs
// apart: copies may run beside it.
func (c *Copies) Apart(id int64, attempt int) bool {
	a, ok := c.apart[id]
	return ok && a == attempt
}

// SetApart records whether j.Row, the attempt job j's row describes,
// runs apart (job_apart: a restart must know), and syncs j's entry in the
// index. Only a change is written, so jobs of queues that never copy cost
// nothing.
func (c *Copies) SetApart(ctx context.Context, ex Execer, j Job, apart bool) error {
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
		_, err = ex.ExecContext(ctx, queries.Get("ClearApart"), j.ID)
	}
	c.Sync(j)
	if err != nil {
		return fmt.Errorf("job %d apart: %w", j.ID, err)
	}
	return nil
}

// Run is an attempt of a job running at a placeholder.
type Run struct {
	Job         int64
	Attempt     int
	Placeholder int64
	Started     time.Time
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
	c.gen++
	c.Sync(j)
	if _, err := ex.ExecContext(ctx, queries.Get("DeleteCopy"), j.ID, attempt); err != nil {
		return fmt.Errorf("copy %d of job %d: %w", attempt, j.ID, err)
	}
	return nil
}

// AllLeft records that no copy of job j runs any more (one won, or the
// job stopped).
func (c *Copies) AllLeft(ctx context.Context, ex Execer, j Job) error {
	c.gen++
	c.Sync(j)
	if _, err := ex.ExecContext(ctx, queries.Get("DeleteCopies"), j.ID); err != nil {
		return fmt.Errorf("copies of job %d: %w", j.ID, err)
	}
	return nil
}

// Promote records that copy j.Row of job j, the oldest, is the attempt
// the row describes now that the row's own ended: it leaves job_copies
// and runs apart, so copies may start beside it.
func (c *Copies) Promote(ctx context.Context, ex Execer, j Job) error {
	c.gen++
	if _, err := ex.ExecContext(ctx, queries.Get("DeleteCopy"), j.ID, j.Row); err != nil {
		return fmt.Errorf("copy %d of job %d: %w", j.Row, j.ID, err)
	}
	return c.SetApart(ctx, ex, j, true)
}

// EndAlone records attempt a of job j, which ended as r says while
// another attempt runs on (record false: handed back unstarted, there is
// nothing to record). A copy leaves job_copies; with promoted, a was the
// row's own and copy j.Row, the oldest, is the row's now. It returns when
// a ran, for the charge of what it spent.
func (c *Copies) EndAlone(ctx context.Context, ex Execer, j Job, a Run, r protocol.Report, record, promoted bool, now time.Time) (started, finished time.Time, err error) {
	if record {
		if started, finished, err = c.End(ctx, ex, a, r, false, now); err != nil {
			return started, finished, err
		}
	}
	if promoted {
		return started, finished, c.Promote(ctx, ex, j)
	}
	return started, finished, c.Left(ctx, ex, j, a.Attempt)
}

// KilledReason is why the attempts that lost to attempt won were killed.
func KilledReason(won int) string {
	return fmt.Sprintf("killed: attempt %d of the job finished first", won)
}

// End records attempt a, which ended as r says while the job goes on, or
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
	if !killed && r.Reason != protocol.ReasonInterrupted && !strings.HasPrefix(r.Reason, "lost") {
		exit = r.Exit
	}
	if r.Usage.Measured() && protocol.CheckUsage(r.Usage) == nil {
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

// Ended is a copy just killed, as the core charges it: its run, when it
// ran, and whether its late report is awaited (Kept; past MaxKilledKept
// it is charged up to the kill only).
type Ended struct {
	Run               Run
	Started, Finished time.Time
	Kept              bool
}

// Win records that attempt won of job j (j.Row is it now): no copy may
// start beside it any more (a later one could claim and win again), and
// the losers, every other attempt that ran, are ended as killed copies.
// It returns them, in order, for the core to charge.
func (c *Copies) Win(ctx context.Context, ex Execer, j Job, won int, losers []Run, now time.Time) ([]Ended, error) {
	return c.Stop(ctx, ex, j, losers, KilledReason(won), now)
}

// Stop records that the attempt job j's row describes no longer runs
// apart (it won, ended, or the job was deleted) and ends the copies
// killed beside it (j counts none now), for reason. It returns them, in
// order, for the core to charge.
func (c *Copies) Stop(ctx context.Context, ex Execer, j Job, killed []Run, reason string, now time.Time) ([]Ended, error) {
	if err := c.SetApart(ctx, ex, j, false); err != nil {
		return nil, err
	}
	if len(killed) == 0 {
		return nil, nil
	}
	if err := c.AllLeft(ctx, ex, j); err != nil {
		return nil, err
	}
	ends := make([]Ended, len(killed))
	for i, r := range killed {
		started, finished, err := c.End(ctx, ex, r, protocol.Report{Finished: now, Reason: reason}, true, now)
		if err != nil {
			return nil, err
		}
		ends[i] = Ended{Run: r, Started: started, Finished: finished,
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
	if got, ok := c.killed[ref]; !ok || got != ph {
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

// LateUsage keeps the CPU figures of a killed copy's report, which came
// after another attempt won.
func (c *Copies) LateUsage(ctx context.Context, ex Execer, r protocol.Report) error {
	if !r.Usage.Measured() || protocol.CheckUsage(r.Usage) != nil {
		return nil
	}
	if _, err := ex.ExecContext(ctx, queries.Get("LateUsage"), r.CPUUser, r.CPUSys, r.MaxRSS, r.ID, r.Attempt); err != nil {
		return fmt.Errorf("late report of job %d attempt %d: %w", r.ID, r.Attempt, err)
	}
	return nil
}
