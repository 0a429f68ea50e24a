package dag

// Prereqs returns the prerequisites of target t: the union of those its
// jobs name, ever (edges are never removed). It is shared: do not modify.
func (g *Graph) Prereqs(t TargetID) []TargetID { return g.prereqsOf(g.targets.at(t)) }

// Each calls f for every live job, in id order. A Node's Prereqs are
// shared: do not modify them. f must not change the graph.
func (g *Graph) Each(f func(id int64, j Node)) {
	g.jobs.each(func(id int64, n *slot) { f(id, g.jobs.node(n, &g.targets)) })
}
