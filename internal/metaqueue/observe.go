package metaqueue

import (
	"context"
	"time"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// Observer is told what the core does, for metrics (cls serve --http). Its
// methods run on the core goroutine, between a batch's calls and its
// commit: they must be quick and never block or call back into the store.
// A batch a storage failure rolls back has been observed all the same.
type Observer interface {
	// Dispatched: a placeholder's request for work got a job; latency is
	// how long the request waited for it (its long poll included), wait
	// how long the job waited since it was submitted.
	Dispatched(latency, wait time.Duration)
	// Ended: an attempt ended (reported by its placeholder, or its lease
	// expired) and its job went to this state: job.Done, job.Failed, or
	// job.Queued when it goes back to the queue (lost, returned, retried).
	Ended(to job.State)
	// Committed: a batch's transaction committed in d; durable says
	// whether it was fsync'd.
	Committed(d time.Duration, durable bool)
}

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

// TargetGraph returns target name and its prerequisite targets,
// transitively, breadth first, at most limit of them (truncated says some
// were left out). It reads the core's in-memory graph: its cost is that of
// the targets returned, whatever the metaqueue's size.
func (s *Store) TargetGraph(ctx context.Context, name string, limit int) (nodes []TargetNode, truncated bool, err error) {
	if limit <= 0 {
		limit = 200
	}
	err = s.do(ctx, func() error {
		root, ok := s.g.Lookup(name)
		if !ok {
			return protocol.Errorf(protocol.CodeNotFound, "target %q does not exist", name)
		}
		index := map[dag.TargetID]int{}
		type item struct {
			id    dag.TargetID
			depth int
		}
		queue := []item{{root, 0}}
		index[root] = 0
		nodes = append(nodes, TargetNode{Name: name})
		for len(queue) > 0 {
			it := queue[0]
			queue = queue[1:]
			n := &nodes[index[it.id]]
			n.Depth = it.depth
			n.Total, n.Done, n.Bad = s.g.Counts(it.id)
			for _, p := range s.g.Prereqs(it.id) {
				k, seen := index[p]
				if !seen {
					if len(nodes) >= limit {
						truncated = true
						continue
					}
					k = len(nodes)
					index[p] = k
					nodes = append(nodes, TargetNode{Name: s.g.Name(p)})
					n = &nodes[index[it.id]] // nodes may have moved
					queue = append(queue, item{p, it.depth + 1})
				}
				n.Prereqs = append(n.Prereqs, k)
			}
		}
		return nil
	})
	return nodes, truncated, err
}

// JobsPage lists up to limit jobs matching st with ids above after, in id
// order: a page of a listing, read from a snapshot like Stat.
func (s *Store) JobsPage(ctx context.Context, st protocol.Stat, after int64, limit int) ([]protocol.JobInfo, error) {
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	st.Limit = limit
	var out []protocol.JobInfo
	err := s.stat(ctx, st, after, func(b []protocol.JobInfo) error {
		out = append(out, b...)
		return nil
	})
	return out, err
}

// RunningByPlaceholder counts executing jobs per placeholder, from memory
// (its cost is that of the jobs executing now).
func (s *Store) RunningByPlaceholder(ctx context.Context) (map[int64]int, error) {
	m := map[int64]int{}
	err := s.do(ctx, func() error {
		for _, r := range s.running {
			m[r.placeholder]++
		}
		for _, cs := range s.copyRuns {
			for _, c := range cs {
				m[c.placeholder]++
			}
		}
		return nil
	})
	return m, err
}
