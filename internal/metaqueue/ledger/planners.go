package ledger

import (
	"context"
	"time"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/protocol"
)

// PlanCore is what the provisioning planners' reads and caps need of the
// core, each answered in a line on the core's goroutine (Do).
type PlanCore interface {
	Core
	// Do runs fn on the core's goroutine, which owns the ledger.
	Do(ctx context.Context, fn func() error) error
	// Queues is every queue as the ledger reads it.
	Queues() []QueueCounts
	// QueueID is the id of the queue named name.
	QueueID(name string) (int32, bool)
	Graph() *dag.Graph
	NextID() int64
	Now() time.Time
	Estimate(j dag.Node) float64
	// Bandwidth is a site's link in bytes per second (measured by
	// staging, else configured).
	Bandwidth(site string) float64
}

// Planners answer the deadline-and-budget and LP provisioning planners
// (internal/site): what they read of the queues and the caps they set,
// each on the core (Store.Planners).
type Planners struct {
	l *Ledger
	c PlanCore
}

// NewPlanners is l's planners' side, run on c.
func NewPlanners(l *Ledger, c PlanCore) Planners { return Planners{l: l, c: c} }

// EconQueues returns what the deadline-and-budget planner needs of every
// queue with a deadline or a budget (Ledger.EconQueues).
func (p Planners) EconQueues(ctx context.Context) ([]policy.EconQueue, error) {
	var out []policy.EconQueue
	err := p.c.Do(ctx, func() error { out = p.l.EconQueues(p.c.Queues(), p.c.Estimate); return nil })
	return out, err
}

// StageQueues is what LP provisioning plans (Ledger.StageQueues), and
// each named site's link in bytes per second.
func (p Planners) StageQueues(ctx context.Context, sites []string) ([]policy.EconQueue, map[string]float64, error) {
	var out []policy.EconQueue
	links := make(map[string]float64, len(sites))
	err := p.c.Do(ctx, func() error {
		out = p.l.StageQueues(p.c.Graph(), p.c.Queues(), p.c.NextID(), p.c.Now(), p.c.Estimate)
		for _, name := range sites {
			links[name] = p.c.Bandwidth(name)
		}
		return nil
	})
	return out, links, err
}

// SetEconPlan sets how many of a queue's jobs each site may run at once
// (nil: no caps) and how many of its ready jobs the planner found cannot
// end within its deadline and budget (Ledger.Plan).
func (p Planners) SetEconPlan(ctx context.Context, queue string, caps map[string]int, unfinishable int) error {
	return p.c.Do(ctx, func() error {
		q, ok := p.c.QueueID(queue)
		if !ok {
			return protocol.Errorf(protocol.CodeNotFound, "no queue %s", queue)
		}
		return p.l.Plan(q, caps, unfinishable, p.c)
	})
}
