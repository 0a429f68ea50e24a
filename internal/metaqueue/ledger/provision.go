package ledger

import (
	"maps"
	"time"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/policy"
)

// What the ledger gives the provisioning planners (the deadline-and-budget
// one and LP provisioning), and the caps they give back.

// Counts is how many of a queue's jobs are in the states the ledger
// reads.
type Counts struct {
	Queued, Waiting, Executing int
}

// Provision is queue q as provisioning sees it. head is its next ready
// job (nil: none); declared the mean runtime its jobs declared (0: none),
// the estimate when neither a measured nor a ready job's is known.
func (l *Ledger) Provision(q Queue, c Counts, head *dag.Node, declared float64, est Estimator) policy.EconQueue {
	e := policy.EconQueue{Queue: q.Name, Ready: c.Queued, Running: c.Executing, Waiting: c.Waiting,
		PerJob: map[string]float64{}, Busy: maps.Clone(l.execAt[q.ID])}
	if w := l.wrote[q.ID]; w != nil && w.n > 0 {
		e.Out = w.bytes / float64(w.n)
	}
	if q.Deadline > 0 {
		e.Deadline = q.deadline()
	}
	if q.Budget > 0 {
		e.Budget = max(q.Budget-l.spentBy(q.ID)-l.reserved[q.ID]-l.lastJobSlack(q, head, est), 0)
		e.Budgeted = true
	}
	var all runtimes
	for site, r := range l.ran[q.ID] {
		if r.n > 0 {
			e.PerJob[site] = r.mean()
			all.secs += r.secs
			all.n += r.n
		}
	}
	if all.n > 0 {
		e.Est = all.mean()
	} else if head != nil {
		e.Est = est(*head)
	}
	if e.Est == 0 {
		e.Est = declared // all waiting: what they declared
	}
	if e.Est == 0 {
		e.Est = q.Ceiling
	}
	return e
}

// Capped says whether the planner caps queue q's jobs at some site.
func (l *Ledger) Capped(q int32) bool {
	_, ok := l.caps[q]
	return ok
}

// SetPlan sets how many of queue q's jobs each site may run at once (nil:
// no caps) and how many of its ready jobs the planner found cannot end
// within its deadline and budget. A queue capped for the first time has
// its running attempts counted first (Count).
func (l *Ledger) SetPlan(q int32, caps map[string]int, unfinishable int) {
	if caps == nil {
		delete(l.caps, q)
	} else {
		l.caps[q] = caps
	}
	l.unfinishable[q] = unfinishable
}

// stageCache keeps StageOrder's last answer.
type stageCache struct {
	key   [2]int64
	at    time.Time
	order []int32
	feeds map[[2]int32]bool // queue ids: the first's jobs feed the second's
}

// stageOrderAge is how long StageOrder keeps an order while jobs are
// added.
const stageOrderAge = 30 * time.Second

// StageOrder lists queues (ids, in creation order) so that a queue whose
// jobs name targets of another queue's jobs as prerequisites comes after
// it (BLAST, then Parse); queues unordered by that, or in a cycle of
// feeds, by creation. A target belongs to the queue of its first job. It
// walks every target (a million: tens of milliseconds of the core), so
// the order is kept until a job is added (nextJob, the next job id, says
// when), and then for stageOrderAge while jobs keep coming.
func (l *Ledger) StageOrder(g *dag.Graph, queues []int32, nextJob int64, now time.Time) []int32 {
	st := &l.stages
	key := [2]int64{nextJob, int64(g.NextTargetID())}
	if len(st.order) == len(queues) && (st.key == key || now.Sub(st.at) < stageOrderAge) {
		return st.order
	}
	st.at = now
	ids := make(map[int32]int, len(queues)) // queue id -> index in queues
	for i, q := range queues {
		ids[q] = i
	}
	feeds := make([]map[int]bool, len(queues)) // i -> the queues i feeds
	st.feeds = map[[2]int32]bool{}
	in := make([]int, len(queues))
	for t := dag.TargetID(1); t < g.NextTargetID(); t++ {
		qt, ok := g.TargetQueue(t)
		if !ok {
			continue
		}
		to, ok := ids[qt]
		if !ok {
			continue
		}
		// After-any edges are in Prereqs: a queue feeds the next either way.
		for _, p := range g.Prereqs(t) {
			qp, ok := g.TargetQueue(p)
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
				st.feeds[[2]int32{qp, qt}] = true
			}
		}
	}
	// Kahn's, the lowest index first; what a cycle leaves, by index.
	order := make([]int32, 0, len(queues))
	done := make([]bool, len(queues))
	for len(order) < len(queues) {
		next := -1
		for i := range queues {
			if !done[i] && in[i] == 0 {
				next = i
				break
			}
		}
		if next < 0 {
			for i := range queues {
				if !done[i] {
					next = i
					break
				}
			}
		}
		done[next] = true
		order = append(order, queues[next])
		for to := range feeds[next] {
			in[to]--
		}
	}
	st.key, st.order = key, order
	return order
}

// Feeds says whether queue from's jobs feed queue to's, as StageOrder
// last found.
func (l *Ledger) Feeds(from, to int32) bool { return l.stages.feeds[[2]int32{from, to}] }
