package dag

import "math"

// Prereqs returns the prerequisites of target t: the union of those its
// jobs name, ever (edges are never removed), after-ok and after-any alike:
// both order jobs, which is what the walks over targets (b-levels, the
// web DAG, queue stages) need. It is shared: do not modify.
func (g *Graph) Prereqs(t TargetID) []TargetID { return g.prereqsOf(g.targets.at(t)) }

// Each calls f for every live job, in id order. A Node's Prereqs are
// shared: do not modify them. f must not change the graph.
func (g *Graph) Each(f func(id int64, j Node)) {
	g.jobs.each(func(id int64, n *slot) { f(id, g.jobs.node(n, &g.targets)) })
}

// TargetQueue returns the queue of the first job target t was given (as
// loaded: LoadJob and NoteQueue), and false when it has none (or the
// queue's id is past 65534).
func (g *Graph) TargetQueue(t TargetID) (int32, bool) {
	q := g.targets.at(t).queue
	return int32(q) - 1, q != 0
}

// NoteQueue records q as target t's queue if it has none yet: for jobs
// loaded as counts (LoadCounts), not one by one.
func (g *Graph) NoteQueue(t TargetID, q int32) { g.targets.at(t).noteQueue(q) }

func (tg *target) noteQueue(q int32) {
	if tg.queue == 0 && q >= 0 && q < math.MaxUint16 {
		tg.queue = uint16(q + 1)
	}
}
