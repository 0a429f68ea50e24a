package metaqueue

import (
	"context"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/placeholders"
	"github.com/mq-hpc/mq/internal/runs"
	"github.com/mq-hpc/mq/protocol"
)

// An executing attempt holds a lease its placeholder renews with every
// heartbeat. The decisions (what a heartbeat renews and kills, which
// leases lapsed, whether the CLS itself stalled) are the placeholders
// module's; the core ends the attempts whose lease lapsed, through the
// lifecycle.

// Heartbeat renews the leases of the attempts a placeholder runs and
// returns those it must kill: any it runs that the metaqueue does not have
// Executing with it (deleted, requeued after a lost lease, or another
// placeholder's). A placeholder can only renew or report its own jobs.
func (s *Store) Heartbeat(ctx context.Context, hb protocol.Heartbeat) (protocol.HeartbeatReply, error) {
	var reply protocol.HeartbeatReply
	if err := protocol.CheckStarted(hb.Started); err != nil {
		return reply, protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	err := s.do(ctx, func() error {
		if !s.reg.Known(hb.Placeholder) {
			return protocol.Errorf(protocol.CodeNotFound, "unknown placeholder %d: register first", hb.Placeholder)
		}
		if s.plans.Active() {
			if err := s.planAlive(hb.Placeholder); err != nil {
				return err
			}
		}
		for ph, refs := range s.reg.Started(hb.Placeholder, s.running.Startable(hb.Placeholder, hb.Started), s.room.Short()) { // none kept but its own (runs.Startable)
			if err := s.markStarted(ph, refs); err != nil {
				return err
			}
		}
		var err error
		reply, err = placeholders.Renew(hb, s.now().Add(s.opt.Lease), s.running, s.copyRuns, s.win)
		return err
	})
	return reply, err
}

// Holds reports whether placeholder ph holds attempt of job id now: the
// only time it may stage that attempt's output.
func (s *Store) Holds(ctx context.Context, ph, id int64, attempt int) (bool, error) {
	var ok bool
	err := s.do(ctx, func() error {
		ok = runs.Find(s.running[id], s.copyRuns[id], attempt, ph) != nil
		return nil
	})
	return ok, err
}

// expire requeues (or fails) jobs whose lease ran out and answers parked
// requests whose wait is over. It runs on the core's tick. A check after
// the CLS itself stalled renews every lease instead (NoticeStall).
func (s *Store) expire() error {
	now := s.now()
	if gap, stalled := s.reg.NoticeStall(now, s.opt.Lease, tickEvery, s.running, s.copyRuns); stalled {
		s.log.Warn("the CLS did not run for a while; every executing job gets a fresh lease", "stalled", gap.Round(time.Millisecond), "jobs", len(s.running))
	}
	lapsed := placeholders.Lapsed(now, placeholders.Leases(s.running, s.copyRuns))
	if s.room.Short() {
		lapsed = nil // ending one would fail; every lease is renewed when there is room
	}
	for _, l := range lapsed {
		ru := l.Still(now, s.running, s.copyRuns)
		if ru == nil {
			continue
		}
		j, ok := s.g.Node(l.Job)
		if !ok {
			if !l.Copy {
				s.stopRun(l.Job)
			}
			continue
		}
		if s.reg.HoldLapsed(l.Placeholder, func() string { site, _ := s.siteName(l.Placeholder); return site }, ru.Lease.Add(-s.opt.Lease), now, s.opt.Lease, s.opt.PartitionGrace, s.log) {
			continue // its site may be cut off: it may run on, and report
		}
		s.log.Warn(l.Warning(), "job", l.Job, "attempt", l.Attempt, "placeholder", l.Placeholder)
		if err := s.attemptEnded(l.Job, j, ru, runs.Lost, protocol.Report{Finished: now, Reason: l.LostReason(s.opt.Lease)}); err != nil {
			return err
		}
	}
	answerWaits(s.waits.Expire(now))
	s.forgetSilent(now)
	if err := s.sweepPlaceholders(now); err != nil {
		return err
	}
	s.ledger.Expire(now)
	s.checkInfeasible(now)
	return nil
}

// SiteReached tells the store whether site, one a network can cut off
// from the CLS (not a local one), answered a listing asked for at asked
// (ok, by answered): its silent placeholders' lapsed leases are held
// meanwhile (placeholders.Reach).
func (s *Store) SiteReached(ctx context.Context, site string, asked, answered time.Time, ok bool) error {
	return s.do(ctx, func() error { s.reg.SiteAnswered(site, asked, answered, ok, s.opt.Lease); return nil })
}

// SitePending tells the store that site, one a network can cut off from
// the CLS, is being listed for the first time since the CLS started: its
// silent placeholders' lapsed leases are held until it answers, and a
// lease more (placeholders.Reach.Pending).
func (s *Store) SitePending(ctx context.Context, site string) error {
	return s.do(ctx, func() error { s.reg.SitePending(site); return nil })
}

// SiteCuts fills into the sites cut off, as of the last lease check (placeholders.Registry.Cuts).
func (s *Store) SiteCuts(ctx context.Context, into map[string]placeholders.Cut) error {
	return s.do(ctx, func() error { s.reg.Cuts(into); return nil })
}
