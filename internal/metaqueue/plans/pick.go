package plans

import (
	"cmp"
	"slices"
	"time"

	"github.com/mq-hpc/mq/internal/policy"
)

// Asking is what a planned pick (PickAt) needs to know of the jobs planned for the
// site of the placeholder asking: the core answers each from its graph,
// queues and modules.
type Asking interface {
	// Eligible says whether job id is Queued and not held by its array's
	// limit; a job that is not is passed without counting as examined
	// (its queue's own pick holds it).
	Eligible(id int64) bool
	// Fits says whether job id fits the placeholder's walltime and its
	// site's budget.
	Fits(id int64) bool
	// Priority is job id's priority: higher goes first.
	Priority(id int64) int16
	// InputsHere says whether job id has its inputs at the placeholder's
	// place (asking for them when not).
	InputsHere(id int64) (bool, error)
}

// PickAt takes the first job planned for site, in the plan's order among
// equal priorities, that is eligible, fits and has its inputs there,
// looking at no more than policy.Window eligible ones (0: none). It notes
// site as seen at now: a placeholder there asked for work.
func (p *Plans) PickAt(site string, now time.Time, a Asking) (int64, error) {
	p.Seen(site, now)
	var cands []int64
	examined := 0
	for id := range p.At(site) {
		if examined >= policy.Window {
			break
		}
		if !a.Eligible(id) {
			continue
		}
		examined++
		if a.Fits(id) {
			cands = append(cands, id)
		}
	}
	// A job's priority comes before the plan's order (stable: among equal
	// priorities, the plan's).
	slices.SortStableFunc(cands, func(x, y int64) int { return cmp.Compare(a.Priority(y), a.Priority(x)) })
	for _, id := range cands {
		here, err := a.InputsHere(id)
		if err != nil {
			return 0, err
		}
		if here {
			return id, nil
		}
	}
	return 0, nil
}
