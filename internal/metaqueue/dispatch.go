package metaqueue

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/metaqueue/bundles"
	"github.com/mq-hpc/mq/internal/metaqueue/dc"
	"github.com/mq-hpc/mq/internal/metaqueue/placeholders"
	"github.com/mq-hpc/mq/internal/metaqueue/sharedenv"
	"github.com/mq-hpc/mq/internal/runs"
	"github.com/mq-hpc/mq/protocol"
)

type parkedNext struct {
	call     *call
	req      protocol.Next
	reply    *protocol.NextReply
	deadline time.Time
	asked    time.Time // when the request reached the core (dispatch latency)
	// dcWait is a DC "wait" for this request, standing until the dc
	// queues change or dc.Redecide passes (dc.Wait).
	dcWait dc.Wait
	// site is the asking placeholder's site name, once economics or
	// plans needed it (dispatch).
	site    string
	copied  copyAsked // what pickCopy last looked at
	copyAsk copyAsk   // the core's side of its looks, kept so a look allocates nothing
}

// Next applies a placeholder's reports and hands it up to req.Free jobs,
// waiting up to req.WaitMS for work. Reports are committed even if no work
// comes.
func (s *Store) Next(ctx context.Context, req protocol.Next) (protocol.NextReply, error) {
	var reply protocol.NextReply
	if err := placeholders.CheckNext(req); err != nil {
		return reply, err
	}
	wait := min(time.Duration(req.WaitMS)*time.Millisecond, 5*time.Minute)
	c := &call{ctx: ctx, done: make(chan struct{}), needsRoom: true}
	c.fn = func() error {
		if !s.reg.Known(req.Placeholder) {
			return protocol.Errorf(protocol.CodeNotFound, "unknown placeholder %d: register first", req.Placeholder)
		}
		if err := s.markStarted(req.Placeholder, req.Started); err != nil {
			return err
		}
		if err := s.report(req.Placeholder, req.Reports); err != nil {
			return err
		}
		if req.Free == 0 {
			return nil
		}
		if err := storeErr(s.data.Observe(context.Background(), s.w, req.Placeholder, s.now())); err != nil { // the arrival predictor
			return err
		}
		// Every asker queues behind those already waiting (FIFO fairness);
		// matchParked serves them all at the end of the batch.
		c.parked = true
		s.parked = append(s.parked, &parkedNext{call: c, req: req, reply: &reply, asked: s.now(), deadline: s.now().Add(wait)})
		return nil
	}
	// Answered when matchParked fills it or its wait ends, as any call.
	err := s.doCall(ctx, c)
	return reply, err
}

// siteName is placeholder ph's site (dc.State.SiteOf).
func (s *Store) siteName(ph int64) (string, error) {
	site, err := s.data.SiteOf(context.Background(), s.w, ph)
	return site, storeErr(err)
}

// matchParked hands ready jobs to waiting placeholders in arrival order and
// returns those answered (they are told after the commit).
func (s *Store) matchParked() ([]*parkedNext, error) {
	if len(s.parked) == 0 {
		return nil, nil
	}
	now := s.now()
	var filled []*parkedNext
	// A fresh slice, not s.parked[:0]: if dispatch fails midway the batch is
	// rolled back and s.parked must still list every parked call.
	kept := make([]*parkedNext, 0, len(s.parked))
	for _, p := range s.parked {
		if p.call.ctx.Err() != nil {
			p.call.err = p.call.ctx.Err()
			filled = append(filled, p)
			continue
		}
		if err := s.dispatch(p); err != nil {
			return nil, err
		}
		if len(p.reply.Jobs) > 0 || !now.Before(p.deadline) {
			filled = append(filled, p)
			continue
		}
		kept = append(kept, p)
	}
	s.parked = kept
	return filled, nil
}

// picked is a job a request's dispatch chose, before its row is claimed.
type picked struct {
	id     int64
	target dag.TargetID
	q      *queue
	bundle int64
	seq    int
	ru     *run
	grant  *protocol.Capacity // nil: none sent (one core, as before)
}

// dispatch picks up to p.req.Free ready jobs for the placeholder, going
// round the queues, and marks them Executing under a lease with one UPDATE.
// p's reply is empty: a request is answered once it holds a job
// (matchParked), so every slot it asked for is free.
func (s *Store) dispatch(p *parkedNext) error {
	if len(s.qlist) == 0 || s.room.Short() || s.reg.Retired(p.req.Placeholder) { // a claim now would fail; a removed site's get none
		return nil
	}
	var picks []picked
	// Economics (its price, the planner's caps) and plans (the jobs
	// planned for it) need the asking placeholder's site: read once per
	// request.
	if (s.econCosting() || s.plans.Active()) && p.site == "" {
		var err error
		if p.site, err = s.siteName(p.req.Placeholder); err != nil {
			return err
		}
	}
	now := s.now()
	s.pack.Begin(now, p.req.Placeholder, p.req.Free)
	skipDC := s.data.Stands(&p.dcWait, now) // a DC "wait" stands (dc.Wait)
	waited := false
	// A bundle takes one slot however many jobs it has.
	for slots := 0; slots < p.req.Free; {
		_, id, w, err := s.pick(p, skipDC)
		if err != nil {
			return err
		}
		waited = waited || w
		if id == 0 {
			break
		}
		ids, bundle := s.bundles.Expand(id, p.req.WalltimeLeft, (*bundleJobs)(s))
		if len(ids) == 0 {
			continue // held back: a job of its bundle is waiting
		}
		slots++
		for _, id := range ids {
			// Executing in memory at once, so a duplicate heap entry of the
			// same job cannot be picked again in this loop.
			j, err := s.claim(id)
			if err != nil {
				return err
			}
			// Reserved now, so the next pick of this request sees it.
			ru := &run{}
			s.ledger.Start(protocol.JobRef{ID: id}, s.queueIDs[j.Queue].account(), j, p.site, s.guess, s.jobCores(id))
			var grant *protocol.Capacity
			if id == ids[0] { // a bundle runs its jobs in turn, in one grant
				grant = s.packStart(id, p.req.Placeholder)
			}
			picks = append(picks, picked{id, j.Target, s.queueIDs[j.Queue], bundle, bundles.Seq(bundle, id), ru, grant})
		}
	}
	s.data.Decided(&p.dcWait, waited && len(picks) == 0, skipDC, now)
	if len(picks) == 0 {
		if !s.repl.On() {
			return nil
		}
		// Nothing ready for it: a queue that copies may give it a copy
		// of a running job (one per request).
		id, q, err := s.pickCopy(p)
		if err != nil || id == 0 {
			return err
		}
		return s.dispatchCopy(p, id, q)
	}
	return s.handOut(p, picks, now)
}

// handOut claims the rows of the jobs picked for p and puts their
// assignments in p's reply.
func (s *Store) handOut(p *parkedNext, picks []picked, now time.Time) error {
	if err := s.begin(); err != nil {
		return err
	}
	s.reg.Worked(p.req.Placeholder)
	ahead := aheadOf(p, picks)
	ids := make([]int64, len(picks))
	for i, pk := range picks {
		ids[i] = pk.id
	}
	got, err := s.claimRows(p.req.Placeholder, now, ids, ahead)
	if err != nil {
		return err
	}
	lease := now.Add(s.opt.Lease)
	for i, pk := range picks {
		r, ok := got[pk.id]
		if !ok {
			return fatalError{fmt.Errorf("ready job %d has no row", pk.id)}
		}
		ru := pk.ru
		ru.Attempt, ru.Used, ru.Placeholder, ru.Lease, ru.Started = r.attempt, r.attempt-r.base, p.req.Placeholder, lease, now
		ru.Unstarted = ahead[i] // P until the placeholder says it started it (markStarted)
		s.ledger.Numbered(pk.id, r.attempt)
		s.pack.Numbered(pk.id, r.attempt)
		s.running[pk.id] = ru
		a, err := s.assignment(pk.id, pk.target, pk.q, r, pk.bundle, pk.seq)
		if err != nil {
			return err
		}
		a.Grant, a.Ahead = pk.grant, ahead[i]
		// A job that may be copied later runs apart from the start: its
		// outputs must not be overwritten by a copy that loses.
		a.Scratch = s.repl.On() && s.copyable(pk.id, pk.q)
		if err := s.setApart(pk.id, a.Scratch); err != nil {
			return err
		}
		p.reply.Jobs = append(p.reply.Jobs, a)
		if o := s.opt.Observer; o != nil {
			o.Dispatched(now.Sub(p.asked), now.Sub(time.UnixMicro(r.submitted)))
		}
	}
	return nil
}

// assignRow is what dispatch reads back of a job it marks Executing.
type assignRow struct {
	attempt, base     int
	command, cwd, env string
	shared            string // the environment its submission's jobs share, under env
	submitted         int64
}

// assignment is how attempt r of job id (of target t and queue q)
// travels to its placeholder.
func (s *Store) assignment(id int64, t dag.TargetID, q *queue, r assignRow, bundle int64, seq int) (protocol.Assignment, error) {
	a := protocol.Assignment{
		ID: id, Attempt: r.attempt, Cwd: r.cwd,
		Target: s.g.Name(t), Queue: q.Name, Ceiling: q.Ceiling, MaxOutput: q.MaxOutput, OutputFiles: q.Output == protocol.OutputModeFiles,
		Bundle: bundle, Seq: seq,
	}
	if r.env != "" || r.shared != "" {
		env, err := sharedenv.Merge(r.shared, r.env)
		if err != nil {
			return a, fatalError{fmt.Errorf("job %d's environment: %w", id, err)}
		}
		a.Env = protocol.EnvList(env)
	}
	a.Command, a.CommandBytes = protocol.WireCommand(r.command)
	if jf := s.data.Job(id); jf != nil {
		a.Inputs, a.Outputs = s.assigned(jf)
	}
	return a, nil
}

// dataReady says whether job id (with its bundle) has its movable inputs
// at p's placeholder's place, asking for them when not, for no more jobs
// than the placeholder has free slots (dispatch.MayStage).
func (s *Store) dataReady(id int64, p *parkedNext) (bool, error) {
	if s.opt.Stager == nil || !s.data.AnyFiles() {
		return true, nil
	}
	bid, inBundle := s.bundles.Of(id)
	if !inBundle && s.data.Job(id) == nil {
		return true, nil // no declared files: the common case, on every dispatch
	}
	to, err := s.storePlace(p.req.Placeholder)
	if err != nil {
		return false, err
	}
	ids := []int64{id}
	if inBundle {
		ids = s.bundles.Members(bid)
	}
	return s.cat.Ready(ids, to, p.req.Free-len(p.reply.Jobs), s.now(), s.isQueued), nil
}

// PlaceholderGone requeues (or fails) at once every job a placeholder was
// running: its process is known to have ended, so waiting for the lease
// would only waste time.
func (s *Store) PlaceholderGone(ctx context.Context, id int64) error {
	return s.do(ctx, func() error {
		now := s.now()
		for jid, ru := range s.running {
			if ru.Placeholder != id {
				continue
			}
			j, ok := s.g.Node(jid)
			if !ok {
				s.stopRun(jid)
				continue
			}
			s.log.Warn("placeholder ended while running a job; requeueing", "job", jid, "placeholder", id)
			reason := fmt.Sprintf("lost: placeholder %d ended while running it", id)
			if err := s.attemptEnded(jid, j, ru, runs.Lost, protocol.Report{Finished: now, Reason: reason}); err != nil {
				return err
			}
		}
		for jid, cs := range s.copyRuns {
			for _, c := range slices.Clone(cs) {
				if c.Placeholder != id {
					continue
				}
				if j, ok := s.g.Node(jid); ok {
					reason := fmt.Sprintf("lost: placeholder %d ended while running it", id)
					if err := s.attemptEnded(jid, j, c, runs.Lost, protocol.Report{Finished: now, Reason: reason}); err != nil {
						return err
					}
				}
			}
		}
		// Its killed copies stopped with it.
		s.ledger.PlaceholderGone(id)
		s.pack.PlaceholderGone(id)
		s.reg.Forget(id)
		s.forgetPlaceholder(id)
		return nil
	})
}
