package metaqueue

import (
	"context"

	"github.com/mq-hpc/mq/internal/batchfail"
	"github.com/mq-hpc/mq/internal/metaqueue/inspect"
	"github.com/mq-hpc/mq/internal/metaqueue/queues"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// The queues' settings are the queues module's (internal/metaqueue/queues):
// their checks, rows and listings' rows. The core keeps each queue's heap
// and policy, and applies a change to them and to the features that
// follow a queue's settings (copies, the ledger).

// Queues lists queues and their properties.
func (s *Store) Queues(ctx context.Context) ([]protocol.QueueInfo, error) {
	var out []protocol.QueueInfo
	err := s.do(ctx, func() error {
		for _, q := range s.qlist {
			out = append(out, s.econInfo(q))
		}
		return nil
	})
	return out, err
}

// SetQueue creates a queue or changes its properties: the queues module
// checks the change and writes the settings it makes; the core applies
// them to the queue's heap and tells the features that follow them.
func (s *Store) SetQueue(ctx context.Context, qs protocol.QueueSet) (protocol.QueueInfo, error) {
	var info protocol.QueueInfo
	c, err := queues.Check(qs)
	if err != nil {
		return info, err
	}
	err = s.doDurable(ctx, func() error {
		q, err := s.queueFor(qs.Name)
		if err != nil {
			return err
		}
		if err := s.begin(); err != nil {
			return err
		}
		next := c.Settings(q.QueueInfo)
		if err := c.Save(context.Background(), s.w, q.id, next, s.now()); err != nil {
			return queuesErr(err)
		}
		if c.Economics() {
			s.repl.Changed() // copies refused for the budget or deadline may now fit
			s.ledger.Changed()
		}
		if c.Policy != nil && c.Policy.Name != q.pol.Name {
			s.switchPolicy(q, *c.Policy)
		}
		q.QueueInfo = next
		s.countCopying()
		info = next
		return nil
	})
	return info, err
}

// queuesErr makes the queues module's database failures the core's.
func queuesErr(err error) error {
	if batchfail.IsStore(err) {
		return fatalError{err}
	}
	return err
}

// loadQueues loads every queue with its settings and policy.
func (s *Store) loadQueues(ctx context.Context) error {
	return queues.Load(ctx, s.w, func(id int32, info protocol.QueueInfo) {
		q := &queue{QueueInfo: info, id: id}
		q.setPolicy(q.Policy)
		s.addQueue(q)
	})
}

// switchPolicy moves queue q's ready jobs onto a heap ordered by pol,
// each ranked afresh (readyEntry).
func (s *Store) switchPolicy(q *queue, pol policy.Info) {
	old, toDC := q.ready, pol.Kind == policy.Choosing && !q.isDC()
	q.pol, q.ready = pol, policy.NewHeap(pol.Order)
	s.countDC() // ranks every job if this is the first cp queue
	now := s.now()
	for {
		r, ok := old.Pop()
		if !ok {
			break
		}
		if j, ok := s.g.Node(r.ID); ok && j.State == job.Queued { // ranked afresh, as the policy ranks
			r = s.readyEntry(q, r.ID, j.Est, j.Target)
		}
		q.ready.Push(r)
		if toDC {
			s.data.Switched(r.ID, now) // queue time counts from the switch (queues.choosing_since)
		}
	}
	s.data.Bump()
}

// Summary counts jobs per queue and state, from memory: it costs the same
// with a million jobs as with ten. While the core runs a slow batch (a
// bulk commit, an action's batch) it answers with the counts as
// committed before that batch, at once.
func (s *Store) Summary(ctx context.Context) ([]protocol.QueueCounts, error) {
	if sum := s.committedSummary.Load(); sum != nil {
		return queues.CloneSummary(*sum), nil
	}
	var out []protocol.QueueCounts
	err := s.do(ctx, func() error {
		out = s.summary()
		return nil
	})
	return out, err
}

// summary is Summary, on the core.
func (s *Store) summary() []protocol.QueueCounts {
	var out []protocol.QueueCounts
	pre := s.running.Prefetched(s.executingIn)
	for _, q := range s.qlist {
		out = append(out, queues.Summary(s.econInfo(q), inspect.Counts(s.countsFor(q.id), pre[q.id])))
	}
	return out
}
