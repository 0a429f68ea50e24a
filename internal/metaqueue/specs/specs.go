// Package specs checks a submission's job specs (protocol.ValidateSpec:
// defaults, bounds, the environment's encoding) and gathers what the
// metaqueue's core needs of them before it adds the jobs: the edges
// among their targets, to refuse a cycle, and for a bulk submission how
// many jobs need no prerequisite, by queue, to size the queues' heaps
// once. It keeps no state of the core's and writes nothing.
package specs

import (
	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/protocol"
)

// Check validates a request's specs and returns their edges. An error
// names the job by its position, unless it is the request's only one.
func Check(specs []protocol.JobSpec) (*dag.EdgeSet, error) {
	edges := dag.NewEdgeSet()
	for i := range specs {
		if err := protocol.ValidateSpec(&specs[i]); err != nil {
			if len(specs) == 1 {
				return nil, protocol.Errorf(protocol.CodeBadRequest, "%v", err)
			}
			return nil, protocol.Errorf(protocol.CodeBadRequest, "job %d: %v", i+1, err)
		}
		edges.Add(specs[i].Target, specs[i].Prereqs, specs[i].AfterAny)
	}
	return edges, nil
}

// Bulk is what a bulk submission's specs, checked as they arrive, tell
// the core.
type Bulk struct {
	Edges *dag.EdgeSet   // among the specs' targets
	Free  map[string]int // by queue, the jobs needing no prerequisite
}

// NewBulk returns an empty Bulk.
func NewBulk() *Bulk { return &Bulk{Edges: dag.NewEdgeSet(), Free: map[string]int{}} }

// Add adds js, from input line; validate checks it first (specs read by
// protocol.ReadJobLines were checked already).
func (b *Bulk) Add(line int, js *protocol.JobSpec, validate bool) error {
	if validate {
		if err := protocol.ValidateSpec(js); err != nil {
			return protocol.Errorf(protocol.CodeBadRequest, "line %d: %v", line, err)
		}
	}
	b.Edges.Add(js.Target, js.Prereqs, js.AfterAny)
	if len(js.Prereqs)+len(js.AfterAny) == 0 {
		b.Free[js.Queue]++
	}
	return nil
}
