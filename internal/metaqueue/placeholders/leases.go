package placeholders

import (
	"fmt"
	"iter"
	"time"

	"github.com/mq-hpc/mq/internal/runs"
	"github.com/mq-hpc/mq/internal/suspend"
	"github.com/mq-hpc/mq/protocol"
)

// An executing attempt holds a lease its placeholder renews with every
// heartbeat. The module decides what a heartbeat renews and kills, which
// leases lapsed and whether the CLS itself stalled, over the core's
// running attempts (package runs); the core ends the attempts whose lease
// lapsed, through its lifecycle.

// Renew answers the heartbeat hb, renewing to until the leases of the
// attempts it names that rows and cs hold as its placeholder's, and
// returns those the placeholder must kill: any it runs that the metaqueue
// does not have executing with it (deleted, requeued after a lost lease,
// lost a race, or another placeholder's). The first attempt of a job to
// claim wins, through win (the core's); a loser's claim finds its attempt
// gone and is killed, unless the heartbeat still reports it running.
func Renew(hb protocol.Heartbeat, until time.Time, rows runs.Rows, cs runs.Copies, win func(job int64, r *runs.Run) error) (protocol.HeartbeatReply, error) {
	var reply protocol.HeartbeatReply
	var running map[protocol.JobRef]bool // hb.Running, once a claim is lost
	for _, c := range hb.Claim {
		if r := runs.Find(rows[c.ID], cs[c.ID], c.Attempt, hb.Placeholder); r != nil {
			if err := win(c.ID, r); err != nil {
				return reply, err
			}
			reply.Won = append(reply.Won, c)
			continue
		}
		// A set, not a scan of Running per claim: a placeholder's
		// 60,000 lost claims beside 60,000 running held the core 11 s.
		if running == nil {
			running = make(map[protocol.JobRef]bool, len(hb.Running))
			for _, ref := range hb.Running {
				running[ref] = true
			}
		}
		if !running[c] {
			reply.Kill = append(reply.Kill, c)
		}
	}
	for _, ref := range hb.Running {
		r := runs.Find(rows[ref.ID], cs[ref.ID], ref.Attempt, hb.Placeholder)
		if r == nil {
			reply.Kill = append(reply.Kill, ref)
			continue
		}
		r.Lease = until
	}
	return reply, nil
}

// A Lease is an attempt's lease: placeholder Placeholder runs attempt
// Attempt of job Job until Until unless it heartbeats; Copy is a copy's
// attempt, not the job row's own.
type Lease struct {
	Job         int64
	Attempt     int
	Placeholder int64
	Until       time.Time
	Copy        bool
}

// Leases are the leases of every executing attempt: the job rows' own,
// then the copies'.
func Leases(rows runs.Rows, cs runs.Copies) iter.Seq[Lease] {
	return func(yield func(Lease) bool) {
		for id, r := range rows {
			if !yield(Lease{Job: id, Attempt: r.Attempt, Placeholder: r.Placeholder, Until: r.Lease}) {
				return
			}
		}
		for id, rs := range cs {
			for _, r := range rs {
				if !yield(Lease{Job: id, Attempt: r.Attempt, Placeholder: r.Placeholder, Until: r.Lease, Copy: true}) {
					return
				}
			}
		}
	}
}

// Lapsed returns the leases that ran out at now, in the order given.
func Lapsed(now time.Time, leases iter.Seq[Lease]) []Lease {
	var out []Lease
	for l := range leases {
		if !now.Before(l.Until) {
			out = append(out, l)
		}
	}
	return out
}

// Still returns the attempt whose lease l lapsed if it still runs at now
// with its lease out (rows and cs, after the core ended earlier lapsed
// attempts), else nil: an attempt ended by an earlier one's end is gone,
// and one that took over the job row keeps its lease.
func (l Lease) Still(now time.Time, rows runs.Rows, cs runs.Copies) *runs.Run {
	r := runs.Find(rows[l.Job], cs[l.Job], l.Attempt, l.Placeholder)
	if r == nil || now.Before(r.Lease) {
		return nil
	}
	return r
}

// Warning is what the log says of a lapsed lease.
func (l Lease) Warning() string {
	if l.Copy {
		return "lease of a copy expired"
	}
	return "lease expired; requeueing"
}

// LostReason is the reason an attempt whose lease of length lease lapsed
// ended with.
func (l Lease) LostReason(lease time.Duration) string {
	return fmt.Sprintf("lost: no heartbeat from placeholder %d for %s", l.Placeholder, lease)
}

// StallAfter is the longest gap between two lease checks that is still the
// CLS running, with leases of length lease checked every tick. Within it,
// a lease renewed up to a heartbeat before the gap has more than
// lease/2 - heartbeat left after it (0.4 leases or more at the default
// heartbeat): time for the heartbeats that waited to be read. A longer gap
// is the CLS's own stall (the process was stopped, starved, or held by a
// long batch, or its host suspended), during which it could not have read
// a heartbeat either.
func StallAfter(lease, tick time.Duration) time.Duration {
	return max(lease/2, 3*tick)
}

// Checked notes that leases are fresh at now (the store opened).
func (g *Registry) Checked(now time.Time) { g.checked, g.slept = now, g.suspendedNow() }

// Stalled notes a lease check at now (Reach.Checking) and says whether the gap since the
// last one is longer than after: the placeholders' silence was then the
// CLS's own, and every lease is to be renewed. The gap counts the time
// the host spent suspended meanwhile, which now's monotonic reading
// does not: leases compared by it would not have lapsed, but the
// placeholders' heartbeats went unread all that time.
func (g *Registry) Stalled(now time.Time, after time.Duration) (gap time.Duration, stalled bool) {
	g.reach.Checking()
	slept := g.suspendedNow()
	gap = now.Sub(g.checked) + slept - g.slept
	g.checked, g.slept = now, slept
	return gap, gap > after
}

func (g *Registry) suspendedNow() time.Duration {
	if g.suspended == nil {
		return suspend.Total()
	}
	return g.suspended()
}

// NoticeStall notes a lease check at now, with leases of length lease
// checked every tick, and when the CLS stalled (Stalled, StallAfter) gives
// every attempt in rows and cs a fresh lease, as after a restart: the
// placeholders' heartbeats and reports (finished jobs among them) are
// still on their way, or on their way back after a reconnect.
func (g *Registry) NoticeStall(now time.Time, lease, tick time.Duration, rows runs.Rows, cs runs.Copies) (gap time.Duration, stalled bool) {
	gap, stalled = g.Stalled(now, StallAfter(lease, tick))
	if stalled {
		RenewAll(now, lease, rows, cs)
	}
	return gap, stalled
}

// RenewAll gives every executing attempt a lease from now.
func RenewAll(now time.Time, lease time.Duration, rows runs.Rows, cs runs.Copies) {
	for _, r := range runs.All(rows, cs) {
		r.Lease = now.Add(lease)
	}
}

// RunningOn yields the attempts in rows and cs that the placeholders phs
// run, by job (a site's executing work).
func RunningOn(phs []int64, rows runs.Rows, cs runs.Copies) iter.Seq2[int64, *runs.Run] {
	return func(yield func(int64, *runs.Run) bool) {
		if len(phs) == 0 {
			return
		}
		mine := make(map[int64]bool, len(phs))
		for _, id := range phs {
			mine[id] = true
		}
		for id, r := range runs.All(rows, cs) {
			if mine[r.Placeholder] && !yield(id, r) {
				return
			}
		}
	}
}

// Unheld returns, as reports of attempts returned unstarted at now, the
// executing attempts (rows and copies) of placeholder ph that a
// registration's holding does not list: a reconnecting placeholder never
// read the replies that handed them out.
func Unheld(ph int64, holding []protocol.JobRef, now time.Time, rows runs.Rows, cs runs.Copies) []protocol.Report {
	held := make(map[protocol.JobRef]bool, len(holding))
	for _, r := range holding {
		held[r] = true
	}
	var out []protocol.Report
	for l := range Leases(rows, cs) {
		if ref := (protocol.JobRef{ID: l.Job, Attempt: l.Attempt}); l.Placeholder == ph && !held[ref] {
			out = append(out, protocol.Report{ID: l.Job, Attempt: l.Attempt, Started: now, Finished: now, Reason: protocol.ReasonReturned})
		}
	}
	return out
}
