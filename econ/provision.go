package econ

import (
	"math"
	"time"

	"github.com/mq-hpc/mq/policy"
)

// Provisioner is a DBC strategy as a policy.Provisioner: how many
// placeholders each site should hold so that the ready jobs end within
// the deadline and the budget. It sees jobs only as a count, so every job
// is one unit of work; a site's speed is its measured jobs per second per
// placeholder, its price is per core-hour with one core per job slot.
//
// It is not yet registered or followed by the site manager
// (docs/seed002.md, "What is left").
type Provisioner struct {
	Strategy Strategy
}

var _ policy.Provisioner = Provisioner{}

// Provision returns the placeholders to hold per site.
func (p Provisioner) Provision(now time.Time, d policy.Demand) map[string]int {
	want, _ := p.Plan(now, d)
	return want
}

// Plan returns the placeholders to hold per site, within each site's min
// and max, and how many ready jobs no site can finish within the
// deadline and the budget (to report early). A site whose rate is not
// measured yet is planned at the mean measured rate of the others; with
// no rate measured anywhere, each site holds one placeholder (at least
// its min) to measure one, as the seed's broker starts from theoretical
// capability.
func (p Provisioner) Plan(now time.Time, d policy.Demand) (map[string]int, int) {
	want := make(map[string]int, len(d.Sites))
	var sum float64
	var known int
	for _, s := range d.Sites {
		if s.Rate > 0 {
			sum += s.Rate
			known++
		}
	}
	if known == 0 {
		for _, s := range d.Sites {
			want[s.Name] = clamp(1, s.Min, s.Max)
		}
		return want, 0
	}
	mean := sum / float64(known)
	deadline := math.Inf(1)
	if !d.Deadline.IsZero() {
		deadline = d.Deadline.Sub(now).Seconds()
	}
	budget := math.Inf(1)
	if d.Budget > 0 {
		budget = d.Budget
	}
	rs := make([]Resource, len(d.Sites))
	for i, s := range d.Sites {
		slots := max(s.Slots, 1)
		rate := s.Rate
		if rate <= 0 {
			rate = mean
		}
		// A PE is one job slot: jobs per second per slot, price per
		// slot-second.
		rs[i] = Resource{Name: s.Name, PEs: max(s.Max, 0) * slots, MIPS: rate / float64(slots), Price: s.Price / 3600}
	}
	jobs := make([]Job, max(d.Ready, 0))
	for i := range jobs {
		jobs[i] = Job{ID: i, MI: 1}
	}
	plan := Schedule(p.Strategy, Event{Deadline: deadline, Budget: budget}, rs, jobs)
	for i, s := range d.Sites {
		slots := max(s.Slots, 1)
		used := min(len(plan.Assigned[i]), rs[i].PEs)
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
