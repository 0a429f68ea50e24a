package plan

import (
	"errors"
	"math"
	"slices"
	"sort"

	"github.com/mq-hpc/mq/internal/policy"
)

// Scheduled is one job of a plan as the model predicts it runs: on which
// slot of its site, from when to when (seconds from the plan's start).
type Scheduled struct {
	ID   int64
	Site string
	Slot int // the lowest of its slots
	// Slots is how many slots it holds (policy.PlanJob.Slots, at most
	// the site's; 0 reads as 1).
	Slots int
	Start float64
	End   float64
	// Ready is when its prerequisites are predicted to have ended: from
	// Ready to Start the plan has it wait for a slot at its site.
	Ready float64
}

// Timeline is the schedule Evaluate scores, job by job, in the plan's
// order: each job at its planned site on the slot that frees first (the
// lowest-numbered of equals) once its prerequisites have ended. Its
// latest End is Evaluate's makespan.
func Timeline(p policy.Problem, pl policy.Plan) ([]Scheduled, error) {
	m, sc, err := compilePlan(p, pl)
	if err != nil {
		return nil, err
	}
	free := make([][]float64, len(m.sites))
	for s, site := range m.sites {
		free[s] = make([]float64, site.Slots)
	}
	ft := make([]float64, len(m.ids))
	for i := range ft {
		ft[i] = -1
	}
	out := make([]Scheduled, 0, len(sc.order))
	for _, t := range sc.order {
		s := sc.alloc[t]
		ready := 0.0
		for _, q := range m.pred[t] {
			if ft[q] < 0 {
				return nil, errors.New("plan: the order starts a job before its prerequisites")
			}
			ready = max(ready, ft[q])
		}
		// The slots that free first (the lowest-numbered of equals), as
		// many as the job holds.
		taken := make([]int, len(free[s]))
		for k := range taken {
			taken[k] = k
		}
		sort.SliceStable(taken, func(a, b int) bool { return free[s][taken[a]] < free[s][taken[b]] })
		taken = taken[:min(int(m.width[t]), len(taken))]
		start := ready
		for _, k := range taken {
			start = max(start, free[s][k])
		}
		d, _ := m.duration(t, sc.alloc)
		end := start + d
		ft[t] = end
		for _, k := range taken {
			free[s][k] = end
		}
		out = append(out, Scheduled{ID: m.ids[t], Site: m.sites[s].Name, Slot: slices.Min(taken), Slots: len(taken), Start: start, End: end, Ready: ready})
	}
	return out, nil
}

// SiteTimeline is one site's part of a plan's timeline.
type SiteTimeline struct {
	Site  string
	Slots int
	Jobs  int     // planned there
	Busy  float64 // slot-seconds its jobs are predicted to take
	// Util is Busy over the site's slots times the makespan (0 when the
	// makespan is 0).
	Util float64
	// First are the first jobs by predicted start (ties: slot, then the
	// plan's order), at most the limit given; More counts the rest.
	First []Scheduled
	More  int
}

// BySite groups a timeline per site, in the order of sites, then any
// site the timeline names that sites lacks (at one slot): each site's
// jobs by predicted start, its busy time and utilisation over makespan,
// and at most limit jobs listed (limit <= 0: all).
func BySite(sites []policy.PlanSite, jobs []Scheduled, makespan float64, limit int) []SiteTimeline {
	idx := map[string]int{}
	var out []SiteTimeline
	for _, s := range sites {
		if _, dup := idx[s.Name]; !dup {
			idx[s.Name] = len(out)
			out = append(out, SiteTimeline{Site: s.Name, Slots: max(s.Slots, 1)})
		}
	}
	per := make([][]Scheduled, len(out))
	for _, j := range jobs {
		i, ok := idx[j.Site]
		if !ok {
			i = len(out)
			idx[j.Site] = i
			out = append(out, SiteTimeline{Site: j.Site, Slots: 1})
			per = append(per, nil)
		}
		per[i] = append(per[i], j)
		out[i].Jobs++
		out[i].Busy += max(j.End-j.Start, 0) * float64(max(j.Slots, 1))
	}
	for i := range out {
		js := per[i]
		sort.SliceStable(js, func(a, b int) bool {
			if js[a].Start != js[b].Start {
				return js[a].Start < js[b].Start
			}
			return js[a].Slot < js[b].Slot
		})
		if limit > 0 && len(js) > limit {
			out[i].More = len(js) - limit
			js = js[:limit]
		}
		out[i].First = js
		if makespan > 0 && !math.IsInf(makespan, 0) {
			out[i].Util = out[i].Busy / (float64(out[i].Slots) * makespan)
		}
	}
	return out
}
