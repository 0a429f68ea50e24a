package metaqueue

import (
	"context"
	"slices"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/placeholders"
	"github.com/mq-hpc/mq/internal/runs"
	"github.com/mq-hpc/mq/protocol"
)

// An executing attempt holds a lease its placeholder renews with every
// heartbeat. The decisions (which leases lapsed, whether the CLS itself
// stalled) are the placeholders module's; the core renews leases and ends
// the attempts whose lease lapsed, through the lifecycle.

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
		if err := s.markStarted(hb.Placeholder, hb.Started); err != nil {
			return err
		}
		lease := s.now().Add(s.opt.Lease)
		for _, c := range hb.Claim {
			// The first attempt of a job to claim wins; the others are
			// killed below (a loser's claim finds its attempt gone).
			if ru := s.runOf(c.ID, c.Attempt, hb.Placeholder); ru != nil {
				if err := s.win(c.ID, ru); err != nil {
					return err
				}
				reply.Won = append(reply.Won, c)
			} else if !slices.Contains(hb.Running, c) {
				reply.Kill = append(reply.Kill, c)
			}
		}
		for _, r := range hb.Running {
			ru := s.runOf(r.ID, r.Attempt, hb.Placeholder)
			if ru == nil {
				// Deleted, requeued, lost a race, or never this
				// placeholder's: stop it.
				reply.Kill = append(reply.Kill, r)
				continue
			}
			ru.Lease = lease
		}
		return nil
	})
	return reply, err
}

// Holds reports whether placeholder ph holds attempt of job id now: the
// only time it may stage that attempt's output.
func (s *Store) Holds(ctx context.Context, ph, id int64, attempt int) (bool, error) {
	var ok bool
	err := s.do(ctx, func() error {
		ok = s.runOf(id, attempt, ph) != nil
		return nil
	})
	return ok, err
}

// leases are the leases of every executing attempt: the job rows' own,
// then the copies'.
func (s *Store) leases(yield func(placeholders.Lease) bool) {
	for id, ru := range s.running {
		if !yield(placeholders.Lease{Job: id, Attempt: ru.Attempt, Placeholder: ru.Placeholder, Until: ru.Lease}) {
			return
		}
	}
	for id, cs := range s.copyRuns {
		for _, c := range cs {
			if !yield(placeholders.Lease{Job: id, Attempt: c.Attempt, Placeholder: c.Placeholder, Until: c.Lease, Copy: true}) {
				return
			}
		}
	}
}

// expire requeues (or fails) jobs whose lease ran out and answers parked
// requests whose wait is over. It runs on the core's tick.
func (s *Store) expire() error {
	now := s.now()
	s.noticeStall(now)
	for _, l := range placeholders.Lapsed(now, s.leases) {
		// An attempt ended by an earlier one's end is gone; one that
		// took over the job row keeps its lease.
		ru := s.runOf(l.Job, l.Attempt, l.Placeholder)
		if ru == nil || now.Before(ru.Lease) {
			continue
		}
		j, ok := s.g.Node(l.Job)
		if !ok {
			if !l.Copy {
				s.stopRun(l.Job)
			}
			continue
		}
		if l.Copy {
			s.log.Warn("lease of a copy expired", "job", l.Job, "attempt", l.Attempt, "placeholder", l.Placeholder)
		} else {
			s.log.Warn("lease expired; requeueing", "job", l.Job, "attempt", l.Attempt, "placeholder", l.Placeholder)
		}
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

// noticeStall gives every executing job a fresh lease, as after a restart,
// when the core has not checked leases for longer than
// placeholders.StallAfter: the placeholders' silence was then the CLS's
// own, and their heartbeats and reports (finished jobs among them) are
// still on their way, or on their way back after a reconnect.
func (s *Store) noticeStall(now time.Time) {
	gap, stalled := s.reg.Stalled(now, placeholders.StallAfter(s.opt.Lease, tickEvery))
	if !stalled {
		return
	}
	s.log.Warn("the CLS did not run for a while; every executing job gets a fresh lease", "stalled", gap.Round(time.Millisecond), "jobs", len(s.running))
	lease := now.Add(s.opt.Lease)
	for _, ru := range s.running {
		ru.Lease = lease
	}
	for _, cs := range s.copyRuns {
		for _, c := range cs {
			c.Lease = lease
		}
	}
}
