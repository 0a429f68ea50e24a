package copies

import (
	"context"
	"slices"
	"time"

	"github.com/mq-hpc/mq/internal/runs"
)

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
