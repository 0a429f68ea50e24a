package dag

// Prereqs returns the prerequisites of target t: the union of those its
// jobs name, ever (edges are never removed). It is shared: do not modify.
func (g *Graph) Prereqs(t TargetID) []TargetID { return g.prereqsOf(g.targets.at(t)) }
