package copies

import (
	"context"
	"slices"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// Attempts is a job's attempts running, as the core keeps them: the one
// its row describes and the copies beside it, oldest first.
type Attempts struct {
	Job    int64
	Queue  int32
	Row    Run
	Copies []Run
}

// Event is what happened to one of a job's attempts, as replication sees
// it.
type Event int

const (
	// Won: the attempt finished 0, or its agent claimed first. Every
	// other attempt is killed and it is the row's from now on.
	Won Event = iota
	// EndedAlone: the attempt failed or was lost while another runs on.
	// It is recorded as Report says; if it was the row's, the oldest copy
	// takes the row.
	EndedAlone
	// HandedBack: the attempt was handed back unstarted while another
	// runs on: as EndedAlone, with nothing to record.
	HandedBack
	// Stopped: the job stops executing (deleted, or the row's attempt
	// ended it): every copy is killed, for Reason.
	Stopped
)

// Change is one event of a job's attempts.
type Change struct {
	Event   Event
	Attempt int             // the attempt it happened to (not Stopped)
	Report  protocol.Report // how it ended (EndedAlone)
	Reason  string          // why the copies are killed (Stopped)
	// Now is the core's clock, read when an attempt is recorded without
	// a time of its own (it may be zero when none is).
	Now time.Time
}

// Facts is what the core does after a Change: which attempt its row
// describes and which copies run beside it now, what to charge and which
// reservations to hold or release.
type Facts struct {
	Row      Run   // the attempt the job row describes now
	RowMoved bool  // another than before: the core writes it to the row
	Copies   []Run // the copies running beside it now, oldest first
	// Killed are the attempts killed for the winner or the stop, in
	// order: each is charged as it ran; a Kept one's reservation is held
	// until its late report.
	Killed []Ended
	// Charge: the attempt that ended alone ran from Started to Finished
	// (false when it was handed back unstarted).
	Charge            bool
	Started, Finished time.Time
}

// NeedsNow says whether Apply reads Change.Now for ch over a: the core
// reads its clock only then, as it always has.
func NeedsNow(a Attempts, ch Change) bool {
	switch ch.Event {
	case Won:
		return len(a.Copies) > 0 || a.Row.Attempt != ch.Attempt
	case Stopped:
		return len(a.Copies) > 0
	case EndedAlone:
		return ch.Report.Finished.IsZero()
	}
	return false
}

// Apply records ch, an event of the attempts a of a job that runs or ran
// as copies, in the module's state and tables, and returns what the core
// must do about it. It is replication's whole part of the event: the
// core charges, releases and writes its own rows from the facts.
func (c *Copies) Apply(ctx context.Context, ex Execer, a Attempts, ch Change) (Facts, error) {
	switch ch.Event {
	case Won:
		return c.won(ctx, ex, a, ch)
	case Stopped:
		f := Facts{Row: a.Row}
		j := Job{ID: a.Job, Row: a.Row.Attempt, Queue: a.Queue, Runs: 1}
		var err error
		f.Killed, err = c.Stop(ctx, ex, j, a.Copies, ch.Reason, ch.Now)
		return f, err
	}
	return c.alone(ctx, ex, a, ch)
}

// won is Apply for a winner: the losers are the row's attempt (unless it
// won) and every other copy, in that order.
func (c *Copies) won(ctx context.Context, ex Execer, a Attempts, ch Change) (Facts, error) {
	f := Facts{Row: a.Row}
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
	var err error
	f.Killed, err = c.Win(ctx, ex, j, ch.Attempt, losers, ch.Now)
	return f, err
}

// alone is Apply for an attempt that ended while another runs on: a copy
// leaves the copies; the row's own gives way to the oldest copy.
func (c *Copies) alone(ctx context.Context, ex Execer, a Attempts, ch Change) (Facts, error) {
	f := Facts{Row: a.Row, Copies: a.Copies}
	ended := a.Row
	promoted := false
	if i := slices.IndexFunc(a.Copies, func(r Run) bool { return r.Attempt == ch.Attempt }); i >= 0 {
		ended = a.Copies[i]
		f.Copies = slices.Delete(slices.Clone(a.Copies), i, i+1)
	} else if a.Row.Attempt == ch.Attempt && len(a.Copies) > 0 {
		f.Row, f.Copies, f.RowMoved, promoted = a.Copies[0], a.Copies[1:], true, true
	}
	if len(f.Copies) == 0 {
		f.Copies = nil
	}
	j := Job{ID: a.Job, Row: f.Row.Attempt, Queue: a.Queue, Runs: 1 + len(f.Copies)}
	f.Charge = ch.Event == EndedAlone
	now := ch.Report.Finished
	if now.IsZero() {
		now = ch.Now
	}
	var err error
	f.Started, f.Finished, err = c.EndAlone(ctx, ex, j, ended, ch.Report, f.Charge, promoted, now)
	return f, err
}
