package server

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/mq-hpc/mq/protocol"
)

// Jobs reach the CLS with what they ask of a placeholder
// (protocol.Resources). A store that keeps and honours requests says so
// (KeepsResources) and warns of jobs no placeholder or site can ever hold
// (Unholdable: they wait, as a site may be added), or expects to take
// longer than any can run; with one that does
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

// alterRuns bounds the runs of consecutive ids an alter's warnings look
// at: each is one call on the core.
const alterRuns = 20

// alterWarnings are resourceWarnings for jobs ids, just given new
// requests or times (mqalter), looked at run by run of consecutive ids, at most
// maxUnholdableLines of them.
func (s *Server) alterWarnings(ctx context.Context, ids []int64) []string {
	k, ok := s.keepsResources()
	var out []string
	for runs := 0; ok && len(ids) > 0 && runs < alterRuns && len(out) < maxUnholdableLines; runs++ {
		n := 1
		for n < len(ids) && ids[n] == ids[0]+int64(n) {
			n++
		}
		w, err := k.Unholdable(ctx, ids[0], n)
		if err != nil {
			return out // the jobs are changed: a warning is not worth failing the reply
		}
		out, ids = append(out, w...), ids[n:]
	}
	return out[:min(len(out), maxUnholdableLines)]
}

// maxUnholdableLines bounds an alter's warnings, as packing bounds a
// submission's.
const maxUnholdableLines = 5

// prereqSample bounds the jobs of a submission whose prerequisite
// targets are looked at: the first this many (jobs of one submission
// mostly share theirs).
const prereqSample = 2000

// prereqWarnings warns of the prerequisite targets with no job of the
// jobs specs submitted as ids, from the core's graph (a lookup per name,
// so a pipeline submitted job by job pays next to nothing): such jobs
// wait until one is submitted, forever when a name was meant as Slurm's
// -p PARTITION.
func (s *Server) prereqWarnings(ctx context.Context, specs []protocol.JobSpec, ids []int64) []string {
	seen := map[string]bool{}
	var names []string
	for _, js := range specs[:min(len(specs), prereqSample)] {
		for _, n := range slices.Concat(js.Prereqs, js.AfterAny) {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	if len(names) == 0 || len(ids) == 0 {
		return nil
	}
	slices.Sort(names)
	empty, err := s.Store.Inspect().EmptyTargets(ctx, names)
	if err != nil {
		return nil // the jobs are in: a warning is not worth failing the reply
	}
	// Slurm's -p is worth a word only where -p named an empty target.
	viaP := slices.ContainsFunc(specs[:min(len(specs), prereqSample)], func(js protocol.JobSpec) bool {
		return slices.ContainsFunc(js.Prereqs, func(n string) bool { return slices.Contains(empty, n) })
	})
	return prereqWarning(ids[0], ids[len(ids)-1], empty, viaP)
}

// bulkPrereqWarnings is prereqWarnings for a bulk submission of jobs
// first..last, whose specs the server spooled: one query of the first
// prereqSample jobs' prerequisite rows.
func (s *Server) bulkPrereqWarnings(ctx context.Context, first, last int64) []string {
	if last < first {
		return nil
	}
	empty, err := s.Store.Inspect().EmptyPrereqs(ctx, first, min(last, first+prereqSample-1))
	if err != nil {
		return nil
	}
	return prereqWarning(first, last, empty, true)
}

// prereqWarning is the warning of jobs first..last that wait for the
// targets empty, which have no job (none: no warning); with viaP, some
// were named with -p, which Slurm users type for a partition.
func prereqWarning(first, last int64, empty []string, viaP bool) []string {
	if len(empty) == 0 {
		return nil
	}
	who := fmt.Sprintf("job %d waits", first)
	if last > first {
		who = fmt.Sprintf("some of jobs %d-%d wait", first, last)
	}
	what := "target " + empty[0] + ", which has"
	if len(empty) > 8 { // the readers give a ninth when there are more
		empty = append(empty[:8:8], "...")
	}
	if len(empty) > 1 {
		what = "targets " + strings.Join(empty, ", ") + ", which have"
	}
	hint := ""
	if viaP {
		hint = " (-p names a prerequisite target; Slurm's -p PARTITION is mq's -q QUEUE)"
	}
	return []string{fmt.Sprintf("%s for %s no jobs yet%s", who, what, hint)}
}
