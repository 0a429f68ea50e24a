package metaqueue

import (
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/job"
)

// The core's side of the cp policy's b-levels (internal/metaqueue/blevel):
// the core notes jobs as they are added, settles after a submission, and
// pushes onto its queues' heaps what the b-levels re-rank.

func (q *queue) needsBLevels() bool { return q.pol.Needs&policy.NeedsBLevels != 0 }

// setCP turns b-levels on when a queue needs them and off (freeing them)
// when none does. Turning on ranks every live job.
func (s *Store) setCP() {
	on := false
	for _, q := range s.qlist {
		on = on || q.needsBLevels()
	}
	switch {
	case on && !s.bl.On():
		s.rankAll()
	case !on && s.bl.On():
		s.bl.Off()
	}
}

// rankAll computes every target's b-level afresh from the live jobs.
func (s *Store) rankAll() { s.bl.Start(s.g, s.nextID, s.data.Expect(), s.pushRanked) }

// settle ranks the chains the jobs noted since the last settle add, then
// enters the jobs deferRank held back into their heaps.
func (s *Store) settle() {
	for _, id := range s.bl.Settle(s.g, s.data.Expect(), s.pushRanked) {
		if j, ok := s.g.Node(id); ok && j.State == job.Queued {
			if q := s.queueIDs[j.Queue]; q != nil {
				q.ready.Push(s.readyEntry(q, id, j.Est, j.Target))
			}
		}
	}
}

// pushRanked pushes a job re-ranked by its b-level onto its queue's heap,
// if that queue still ranks by b-level.
func (s *Store) pushRanked(queue int32, r policy.Ready) bool {
	q := s.queueIDs[queue]
	if q == nil || !q.needsBLevels() {
		return false
	}
	r.Priority = s.prio.Of(r.ID)
	q.ready.Push(r)
	return true
}

// reranked settles the b-levels mqalter's new estimates moved: a rise
// as a submission's; a fall (blevel.Levels.Stale) by ranking every job
// afresh, as a restart does, and moving each cp queue's ready jobs onto
// a new heap, where entries at their old, higher ranks would go first.
// So are the ready jobs of the queues refill names that order by
// estimate: their old entries at an estimate now unknown look current.
func (s *Store) reranked(refill map[int32]bool) {
	stale := s.bl.Stale()
	if s.settle(); stale {
		s.rankAll()
	}
	for _, q := range s.qlist {
		if stale && q.needsBLevels() || refill[q.id] && q.learnsEstimates() {
			s.switchPolicy(q, q.pol)
		}
	}
}
