package server

import (
	"fmt"

	"github.com/mq-hpc/mq/protocol"
)

// Jobs reach the CLS with what they ask of a placeholder
// (protocol.Resources), but until the metaqueue stores those requests and
// packs by them every job runs in one slot. The server does not drop a
// request silently: a submission with jobs that ask for resources gets a
// warning in its reply, which mqsub prints.
//
// TODO(resources): the hook for the integrator. Once internal/metaqueue
// keeps JobSpec.Resources with each job (its inserter, JobInfo) and
// dispatch packs by them, give *metaqueue.Store the method of
// resourceKeeper returning true: the warning stops, nothing else here
// changes.
type resourceKeeper interface {
	KeepsResources() bool
}

// keepsResources reports whether the store keeps and honours jobs'
// resource requests.
func (s *Server) keepsResources() bool {
	k, ok := any(s.Store).(resourceKeeper)
	return ok && k.KeepsResources()
}

// countAsking counts the jobs of specs that ask for resources.
func countAsking(specs []protocol.JobSpec) int {
	n := 0
	for i := range specs {
		if specs[i].Resources.Asks() {
			n++
		}
	}
	return n
}

// resourceWarnings are the warnings of a submission of which asking jobs
// ask for resources: none when the store honours them.
func (s *Server) resourceWarnings(asking int) []string {
	if asking == 0 || s.keepsResources() {
		return nil
	}
	jobs := "1 job asks"
	if asking > 1 {
		jobs = fmt.Sprintf("%d jobs ask", asking)
	}
	return []string{jobs + " for cores, memory, GPUs or named resources, which this CLS does not keep or honour yet: each runs in one slot, as a job that asks for nothing"}
}
