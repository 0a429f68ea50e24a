package metaqueue

import (
	"context"
	"maps"
	"time"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// What the ledger gives the provisioning planners (the deadline-and-budget
// one and LP provisioning), and the caps they give back.

// EconQueues returns what the deadline-and-budget planner needs of every
// queue with a deadline or a budget.
func (s *Store) EconQueues(ctx context.Context) ([]policy.EconQueue, error) {
	var out []policy.EconQueue
	err := s.do(ctx, func() error {
		for _, q := range s.qlist {
			if q.costed() {
				out = append(out, s.econQueue(q))
			}
		}
		return nil
	})
	return out, err
}

// StageQueues is what LP provisioning plans: every queue with jobs not
// ended, as the stages of one pipeline in the order its jobs feed each
// other (stageOrder), and each named site's link in bytes per second
// (measured by staging, else configured).
func (s *Store) StageQueues(ctx context.Context, sites []string) ([]policy.EconQueue, map[string]float64, error) {
	var out []policy.EconQueue
	links := make(map[string]float64, len(sites))
	err := s.do(ctx, func() error {
		var ids []int32
		for _, q := range s.stageOrder() {
			c := s.countsFor(q.id)
			if c[job.Queued]+c[job.Waiting]+c[job.Executing] > 0 {
				out = append(out, s.econQueue(q))
				ids = append(ids, q.id)
			}
		}
		for i := 1; i < len(ids); i++ {
			out[i-1].FeedsNext = s.stages.feeds[[2]int32{ids[i-1], ids[i]}]
		}
		for _, name := range sites {
			links[name] = s.linkOf(name).Bandwidth
		}
		return nil
	})
	return out, links, err
}

// econQueue is queue q as provisioning sees it.
func (s *Store) econQueue(q *queue) policy.EconQueue {
	c := s.countsFor(q.id)
	e := policy.EconQueue{Queue: q.Name, Ready: c[job.Queued], Running: c[job.Executing], Waiting: c[job.Waiting],
		PerJob: map[string]float64{}, Busy: maps.Clone(s.econ.execAt[q.id])}
	if w := s.econ.wrote[q.id]; w != nil && w.n > 0 {
		e.Out = w.bytes / float64(w.n)
	}
	if q.Deadline > 0 {
		e.Deadline = time.Unix(0, int64(q.Deadline*1e9))
	}
	if q.Budget > 0 {
		e.Budget = max(q.Budget-s.econ.spentBy(q.id)-s.econ.reserved[q.id]-s.lastJobSlack(q), 0)
		e.Budgeted = true
	}
	var all runtimes
	for site, r := range s.econ.ran[q.id] {
		if r.n > 0 {
			e.PerJob[site] = r.secs / float64(r.n)
			all.secs += r.secs
			all.n += r.n
		}
	}
	if all.n > 0 {
		e.Est = all.secs / float64(all.n)
	} else if r, ok := q.ready.Peek(); ok {
		if j, ok := s.g.Node(r.ID); ok {
			e.Est = s.data.expect.Estimate(s.g.Name(j.Target), float64(j.Est))
		}
	}
	if e.Est == 0 && q.estN > 0 {
		e.Est = q.estSum / float64(q.estN) // all waiting: what they declared
	}
	if e.Est == 0 {
		e.Est = q.Ceiling
	}
	return e
}

// stageOrder lists the queues so that a queue whose jobs name targets of
// another queue's jobs as prerequisites comes after it (BLAST, then
// Parse); queues unordered by that, or in a cycle of feeds, by creation.
// A target belongs to the queue of its first job. It walks every target
// (a million: tens of milliseconds of the core), so the order is kept
// until a job is added, and then for stageOrderAge while jobs keep coming.
func (s *Store) stageOrder() []*queue {
	key := [2]int64{s.nextID, int64(s.g.NextTargetID())}
	if len(s.stages.order) == len(s.qlist) && (s.stages.key == key || s.now().Sub(s.stages.at) < stageOrderAge) {
		return s.stages.order
	}
	s.stages.at = s.now()
	ids := make(map[int32]int, len(s.qlist)) // queue id -> index in qlist
	for i, q := range s.qlist {
		ids[q.id] = i
	}
	feeds := make([]map[int]bool, len(s.qlist)) // i -> the queues i feeds
	s.stages.feeds = map[[2]int32]bool{}
	in := make([]int, len(s.qlist))
	for t := dag.TargetID(1); t < s.g.NextTargetID(); t++ {
		qt, ok := s.g.TargetQueue(t)
		if !ok {
			continue
		}
		to, ok := ids[qt]
		if !ok {
			continue
		}
		for _, p := range s.g.Prereqs(t) {
			qp, ok := s.g.TargetQueue(p)
			from, known := ids[qp]
			if !ok || !known || from == to {
				continue
			}
			if feeds[from] == nil {
				feeds[from] = map[int]bool{}
			}
			if !feeds[from][to] {
				feeds[from][to] = true
				in[to]++
				s.stages.feeds[[2]int32{qp, qt}] = true
			}
		}
	}
	// Kahn's, the lowest index first; what a cycle leaves, by index.
	order := make([]*queue, 0, len(s.qlist))
	done := make([]bool, len(s.qlist))
	for len(order) < len(s.qlist) {
		next := -1
		for i := range s.qlist {
			if !done[i] && in[i] == 0 {
				next = i
				break
			}
		}
		if next < 0 {
			for i := range s.qlist {
				if !done[i] {
					next = i
					break
				}
			}
		}
		done[next] = true
		order = append(order, s.qlist[next])
		for to := range feeds[next] {
			in[to]--
		}
	}
	s.stages.key, s.stages.order = key, order
	return order
}

// stageOrderAge is how long stageOrder keeps an order while jobs are
// added.
const stageOrderAge = 30 * time.Second

// SetEconPlan sets how many of a queue's jobs each site may run at once
// (nil: no caps) and how many of its ready jobs the planner found cannot
// end within its deadline and budget.
func (s *Store) SetEconPlan(ctx context.Context, queue string, caps map[string]int, unfinishable int) error {
	return s.do(ctx, func() error {
		q, ok := s.queues[queue]
		if !ok {
			return protocol.Errorf(protocol.CodeNotFound, "no queue %s", queue)
		}
		if caps == nil {
			delete(s.econ.caps, q.id)
		} else {
			if _, had := s.econ.caps[q.id]; !had {
				if err := s.countRunning(q); err != nil {
					return err
				}
			}
			s.econ.caps[q.id] = caps
		}
		s.econ.unfinishable[q.id] = unfinishable
		return nil
	})
}
