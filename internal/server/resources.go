package server

import (
	"context"
	"fmt"
	"strings"

	"github.com/mq-hpc/mq/protocol"
)

// Jobs reach the CLS with what they ask of a placeholder
// (protocol.Resources). A store that keeps and honours requests says so
// (KeepsResources) and warns of jobs no placeholder or site can ever hold
// (Unholdable: they wait, as a site may be added); with one that does
// not, every job runs in one slot and the submission is warned of it, so
// that no request is dropped silently. mqsub prints the warnings.
type resourceKeeper interface {
	KeepsResources() bool
	Unholdable(ctx context.Context, first int64, n int) ([]string, error)
}

// keepsResources reports whether the store keeps and honours jobs'
// resource requests.
func (s *Server) keepsResources() (resourceKeeper, bool) {
	k, ok := any(s.Store.Resources()).(resourceKeeper)
	return k, ok && k.KeepsResources()
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

// resourceWarnings are the warnings of a submission of n jobs from id
// first on, of which asking ask for resources themselves.
func (s *Server) resourceWarnings(ctx context.Context, asking int, first int64, n int) []string {
	if k, ok := s.keepsResources(); ok {
		if n == 0 {
			return nil
		}
		w, err := k.Unholdable(ctx, first, n)
		if err != nil {
			return nil // the jobs are in: a warning is not worth failing the reply
		}
		return w
	}
	if asking == 0 {
		return nil
	}
	jobs := "1 job asks"
	if asking > 1 {
		jobs = fmt.Sprintf("%d jobs ask", asking)
	}
	return []string{jobs + " for cores, memory, GPUs or named resources, which this CLS does not keep or honour yet: each runs in one slot, as a job that asks for nothing"}
}

// prereqSample bounds the jobs of a submission whose prerequisite
// targets are looked at: the first this many (jobs of one submission
// mostly share theirs).
const prereqSample = 2000

// prereqWarnings warns of the prerequisite targets with no job of the
// jobs submitted as first..last: such jobs wait until one is submitted,
// forever when a name was meant as Slurm's -p PARTITION.
func (s *Server) prereqWarnings(ctx context.Context, first, last int64) []string {
	if first == 0 || last < first {
		return nil
	}
	names, err := s.Store.Inspect().EmptyPrereqs(ctx, first, min(last, first+prereqSample-1))
	if err != nil || len(names) == 0 {
		return nil // the jobs are in: a warning is not worth failing the reply
	}
	who := fmt.Sprintf("job %d waits", first)
	if last > first {
		who = fmt.Sprintf("some of jobs %d-%d wait", first, last)
	}
	what := "target " + names[0] + ", which has"
	if len(names) > 1 {
		what = "targets " + strings.Join(names, ", ") + ", which have"
	}
	return []string{fmt.Sprintf("%s for %s no jobs yet (-p names a prerequisite target; Slurm's -p PARTITION is mq's -q QUEUE)", who, what)}
}

// namesPrereqs says whether any of specs names a prerequisite target.
func namesPrereqs(specs []protocol.JobSpec) bool {
	for i := range specs {
		if len(specs[i].Prereqs) > 0 || len(specs[i].AfterAny) > 0 {
			return true
		}
	}
	return false
}
