package ledger

import (
	"context"
	"time"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/protocol"
)

// What the ledger reads of the core beyond an event's own facts, and the
// events that take it: an attempt's end, a planner's caps, the check, the
// planners' reads.

// Core is what the ledger reads of the core, answered in a line each.
type Core interface {
	// SiteOf is where placeholder ph runs (its site's name).
	SiteOf(ph int64) (string, error)
	// Running is every attempt running now, copies included.
	Running() []Running
}

// Running is an attempt running now.
type Running struct {
	Ref         protocol.JobRef
	Queue       int32
	Placeholder int64
	Started     time.Time
}

// End is how an attempt ended, as the ledger needs it.
type End struct {
	Ref               protocol.JobRef
	Queue             Queue
	Placeholder       int64
	Started, Finished time.Time
	OK                bool // succeeded: its runtime is a measured rate
	Returned          bool // handed back unstarted: nothing ran, nothing is charged
}

// siteOf is where attempt e ran: where the ledger costed or counted it,
// else where its placeholder runs.
func (l *Ledger) siteOf(c Core, e End) (string, error) {
	if site := l.SiteOf(e.Ref); site != "" {
		return site, nil
	}
	return c.SiteOf(e.Placeholder)
}

// ChargeEnd is the ledger's part of an attempt's end, one call: what
// attempt e cost is charged at the site it ran at (where the ledger
// costed or counted it, else where its placeholder runs), in the core's
// transaction. Its reservation is released when it stops (Stop), or held
// while a killed copy runs on (Dying).
func (l *Ledger) ChargeEnd(ctx context.Context, x Execer, c Core, e End) error {
	site, err := l.siteOf(c, e)
	if err != nil {
		return err
	}
	return l.Charge(ctx, x, e.Ref, e.Queue, site, e.Started, e.Finished, e.OK)
}

// Ended is the ledger's part of an attempt's end that stops it, one
// call: the attempt is charged (ChargeEnd) unless it was returned
// unstarted, then what it reserved and its place under the planner's caps
// are released (Stop).
func (l *Ledger) Ended(ctx context.Context, x Execer, c Core, e End) error {
	if !e.Returned {
		if err := l.ChargeEnd(ctx, x, c, e); err != nil {
			return err
		}
	}
	l.Stop(e.Ref)
	return nil
}

// Plan sets queue q's caps and unfinishable count (SetPlan). A queue
// capped for the first time has the attempts it runs now that the ledger
// does not count yet (they started while nothing held it, or before a
// restart) counted first, so its caps hold from the first plan on.
func (l *Ledger) Plan(q int32, caps map[string]int, unfinishable int, c Core) error {
	if caps != nil && !l.Capped(q) {
		for _, r := range c.Running() {
			if l.Counted(r.Ref) || r.Queue != q {
				continue
			}
			site, err := l.siteOf(c, End{Ref: r.Ref, Placeholder: r.Placeholder})
			if err != nil {
				return err
			}
			l.Count(r.Ref, q, site)
		}
	}
	l.SetPlan(q, caps, unfinishable)
	return nil
}

// StartedFrom is when each running job's earliest running attempt (itself
// or a copy) started (View.Started; zero: none), reading running only
// when first asked: the check seldom needs it.
func StartedFrom(running func() []Running) func(id int64) time.Time {
	var first map[int64]time.Time
	return func(id int64) time.Time {
		if first == nil {
			rs := running()
			first = make(map[int64]time.Time, len(rs))
			for _, r := range rs {
				if f, ok := first[r.Ref.ID]; !ok || f.IsZero() || r.Started.Before(f) {
					first[r.Ref.ID] = r.Started
				}
			}
		}
		return first[id]
	}
}

// EconQueues is what the deadline-and-budget planner needs of every
// queue with a deadline or a budget.
func (l *Ledger) EconQueues(qs []QueueCounts, est Estimator) []policy.EconQueue {
	var out []policy.EconQueue
	for _, q := range qs {
		if q.Costed() {
			out = append(out, l.Provision(q.Queue, q.Counts, q.Head, q.Declared, est))
		}
	}
	return out
}

// StageQueues is what LP provisioning plans: every queue with jobs not
// ended, as the stages of one pipeline in the order its jobs feed each
// other (StageOrder), each saying whether it feeds the next.
func (l *Ledger) StageQueues(g *dag.Graph, qs []QueueCounts, nextJob int64, now time.Time, est Estimator) []policy.EconQueue {
	ids := make([]int32, len(qs))
	byID := make(map[int32]QueueCounts, len(qs))
	for i, q := range qs {
		ids[i], byID[q.ID] = q.ID, q
	}
	var out []policy.EconQueue
	var kept []int32
	for _, id := range l.StageOrder(g, ids, nextJob, now) {
		q := byID[id]
		if q.Queued+q.Waiting+q.Executing > 0 {
			out = append(out, l.Provision(q.Queue, q.Counts, q.Head, q.Declared, est))
			kept = append(kept, id)
		}
	}
	for i := 1; i < len(kept); i++ {
		out[i-1].FeedsNext = l.Feeds(kept[i-1], kept[i])
	}
	return out
}
