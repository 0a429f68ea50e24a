package inspect

import (
	"context"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/protocol"
)

// TargetNode is a target of a prerequisite graph with its jobs' counts.
type TargetNode struct {
	Name    string `json:"name"`
	Total   int    `json:"total"`
	Done    int    `json:"done"`
	Bad     int    `json:"bad"` // failed, deleted or blocked
	Prereqs []int  `json:"prereqs"`
	// Depth is the number of edges from the root (0 for the root).
	Depth int `json:"depth"`
}

// Graph is what TargetGraph reads of the core's dependency graph
// (*dag.Graph).
type Graph interface {
	Lookup(name string) (dag.TargetID, bool)
	Name(t dag.TargetID) string
	Counts(t dag.TargetID) (total, done, bad int)
	Prereqs(t dag.TargetID) []dag.TargetID
}

var _ Graph = (*dag.Graph)(nil)

// EmptyTargets returns those of the named targets that have no job and
// had none (purged ones count), at most 9 (8 to name, a ninth: more),
// from the core's graph: jobs waiting for them wait until one is
// submitted.
func (r *Reader) EmptyTargets(ctx context.Context, names []string) (empty []string, err error) {
	err = r.src.Graph(ctx, func(g Graph) error {
		for _, n := range names {
			if t, ok := g.Lookup(n); ok {
				if total, _, _ := g.Counts(t); total > 0 {
					continue
				}
			}
			if empty = append(empty, n); len(empty) == 9 { // 8 named, and a ninth: more
				break
			}
		}
		return nil
	})
	return empty, err
}

// DefaultGraphLimit is TargetGraph's limit when none is given.
const DefaultGraphLimit = 200

// TargetGraph is TargetGraph over the core's graph, on the core.
func (r *Reader) TargetGraph(ctx context.Context, name string, limit int) (nodes []TargetNode, truncated bool, err error) {
	err = r.src.Graph(ctx, func(g Graph) (err error) {
		nodes, truncated, err = TargetGraph(g, name, limit)
		return err
	})
	return nodes, truncated, err
}

// TargetGraph returns target name and its prerequisite targets,
// transitively, breadth first, at most limit of them (truncated says some
// were left out). Its cost is that of the targets returned, whatever the
// graph's size. g is the core's: call it on the core.
func TargetGraph(g Graph, name string, limit int) (nodes []TargetNode, truncated bool, err error) {
	if limit <= 0 {
		limit = DefaultGraphLimit
	}
	root, ok := g.Lookup(name)
	if !ok {
		return nil, false, protocol.Errorf(protocol.CodeNotFound, "target %q does not exist", name)
	}
	index := map[dag.TargetID]int{root: 0}
	type item struct {
		id    dag.TargetID
		depth int
	}
	queue := []item{{root, 0}}
	nodes = append(nodes, TargetNode{Name: name})
	for len(queue) > 0 {
		it := queue[0]
		queue = queue[1:]
		n := &nodes[index[it.id]]
		n.Depth = it.depth
		n.Total, n.Done, n.Bad = g.Counts(it.id)
		// After-any edges are drawn as edges: they order jobs too.
		for _, p := range g.Prereqs(it.id) {
			k, seen := index[p]
			if !seen {
				if len(nodes) >= limit {
					truncated = true
					continue
				}
				k = len(nodes)
				index[p] = k
				nodes = append(nodes, TargetNode{Name: g.Name(p)})
				n = &nodes[index[it.id]] // nodes may have moved
				queue = append(queue, item{p, it.depth + 1})
			}
			n.Prereqs = append(n.Prereqs, k)
		}
	}
	return nodes, truncated, nil
}
