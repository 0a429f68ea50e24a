package plans

import (
	"cmp"
	"slices"
	"time"

	"github.com/mq-hpc/mq/internal/dispatch"
	"github.com/mq-hpc/mq/internal/policy"
)

// Planned is the chain a job planned for the asking placeholder's site
// passes to be a candidate of PickAt: its array below its limit (else it
// is passed, not counted, and not held: its queue's own pick holds it),
// the placeholder's walltime and free resources, and the site's budget.
// Its inputs are asked for (dispatch.InputsHere) of the candidates only,
// best first.
const Planned = dispatch.Chain(1<<dispatch.HeldByArray | 1<<dispatch.FitsWalltime | 1<<dispatch.FitsResources | 1<<dispatch.WithinBudget)

// Asking is the core's view of the world for a planned pick (PickAt):
// the dispatch checks about each job planned for the asking
// placeholder's site, and a job's priority.
type Asking interface {
	dispatch.World
	// Priority is job id's priority: higher goes first.
	Priority(id int64) int16
}

// inputsHere is the chain a candidate passes last.
const inputsHere = dispatch.Chain(1 << dispatch.InputsHere)

// PickAt takes the first job planned for site, in the plan's order among
// equal priorities, that the Planned chain lets go to the asking
// placeholder and that has its inputs there, looking at no more than
// policy.Window jobs (held and stale ones not counted); 0: none. It notes
// site as seen at now: a placeholder there asked for work.
func (p *Plans) PickAt(site string, now time.Time, a Asking) (int64, error) {
	p.Seen(site, now)
	var cands []int64
	examined := 0
	for id := range p.At(site) {
		if examined >= policy.Window {
			break
		}
		r := policy.Ready{ID: id}
		if !a.Current(r) {
			continue
		}
		v, err := dispatch.Run(a, Planned, r)
		if err != nil {
			return 0, err
		}
		if v == dispatch.Held {
			continue
		}
		examined++
		if v == dispatch.Feasible {
			cands = append(cands, id)
		}
	}
	// A job's priority comes before the plan's order (stable: among equal
	// priorities, the plan's).
	slices.SortStableFunc(cands, func(x, y int64) int { return cmp.Compare(a.Priority(y), a.Priority(x)) })
	for _, id := range cands {
		v, err := dispatch.Run(a, inputsHere, policy.Ready{ID: id})
		if err != nil {
			return 0, err
		}
		if v == dispatch.Feasible {
			return id, nil
		}
	}
	return 0, nil
}
