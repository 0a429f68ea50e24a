package policy

import (
	"math"
	"time"

	"github.com/mq-hpc/mq/internal/dbc"
)

// DBC is a deadline-and-budget strategy of seed 002 (dbc.Schedule) as a
// Provisioner: how many placeholders each priced site should hold so that
// a queue's ready jobs end within its deadline and its budget. It sees
// jobs only as a count, so every job is one unit of work; a site's speed
// is its measured jobs per second per placeholder, its price is per
// core-hour with one core per job slot. The site manager plans each queue
// with a deadline or a budget with it (registered as dbc-cost, dbc-time
// and dbc-costtime) and caps each site's share of the queue's jobs at the
// slots it plans there.
type DBC struct {
	Strategy dbc.Strategy
}

var _ Provisioner = DBC{}

// Provision returns the placeholders to hold per site.
func (p DBC) Provision(now time.Time, d Demand) map[string]int {
	want, _ := p.Plan(now, d)
	return want
}

// Plan returns the placeholders to hold per site, within each site's min
// and max, and how many ready jobs no site can finish within the
// deadline and the budget (to report early). A site whose rate is not
// measured yet is planned at the mean measured rate of the others, or,
// with none measured, at Slots/Est (the jobs' declared or learned
// runtime, as the seed's broker starts from theoretical capability); with
// neither, each site holds one placeholder (at least its min) to measure
// one; with nothing ready, none beyond what its busy slots need. A
// site's Busy slots are taken until a job there would end, and are held:
// the placeholders planned cover them and the jobs planned.
func (p DBC) Plan(now time.Time, d Demand) (map[string]int, int) {
	want := make(map[string]int, len(d.Sites))
	var sum float64
	var known int
	for _, s := range d.Sites {
		if s.Rate > 0 {
			sum += s.Rate / float64(max(s.Slots, 1))
			known++
		}
	}
	if d.Ready <= 0 {
		// Nothing to plan: hold what runs the demand's jobs now. (A probe
		// here would start a placeholder at a dear site before any work
		// it is planned for exists.)
		for _, s := range d.Sites {
			slots := max(s.Slots, 1)
			want[s.Name] = clamp((max(s.Busy, 0)+slots-1)/slots, s.Min, s.Max)
		}
		return want, 0
	}
	perSlot := 0.0 // jobs per second of one slot where not measured
	switch {
	case known > 0:
		perSlot = sum / float64(known)
	case d.Est > 0:
		perSlot = 1 / d.Est
	default:
		for _, s := range d.Sites {
			want[s.Name] = clamp(max(1, (s.Busy+max(s.Slots, 1)-1)/max(s.Slots, 1)), s.Min, s.Max)
		}
		return want, 0
	}
	deadline := math.Inf(1)
	if !d.Deadline.IsZero() {
		deadline = d.Deadline.Sub(now).Seconds()
	}
	budget := math.Inf(1)
	if d.Budget > 0 || d.Budgeted {
		budget = max(d.Budget, 0)
	}
	rs := make([]dbc.Resource, len(d.Sites))
	for i, s := range d.Sites {
		slots := max(s.Slots, 1)
		rate := s.Rate / float64(slots)
		if s.Rate <= 0 {
			rate = perSlot
		}
		// A PE is one job slot: jobs per second per slot, price per
		// slot-second. A busy slot is free when its job is predicted to
		// end: a whole job from now, not knowing when it started.
		pes := max(s.Max, 0) * slots
		busy := make([]float64, min(max(s.Busy, 0), pes))
		for k := range busy {
			busy[k] = 1 / rate
		}
		rs[i] = dbc.Resource{Name: s.Name, PEs: pes, MIPS: rate, Price: s.Price / 3600, Busy: busy}
	}
	jobs := make([]dbc.Job, max(d.Ready, 0))
	for i := range jobs {
		jobs[i] = dbc.Job{ID: i, MI: 1}
	}
	plan := dbc.Schedule(p.Strategy, dbc.Event{Deadline: deadline, Budget: budget}, rs, jobs)
	for i, s := range d.Sites {
		slots := max(s.Slots, 1)
		used := min(len(plan.Assigned[i])+len(rs[i].Busy), rs[i].PEs)
		want[s.Name] = clamp((used+slots-1)/slots, s.Min, s.Max)
	}
	return want, len(plan.Unassigned)
}

func clamp(v, lo, hi int) int {
	if v > hi {
		v = hi
	}
	if v < lo {
		v = lo
	}
	return v
}
