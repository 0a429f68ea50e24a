package policy

import (
	"cmp"
	"iter"
	"math"
	"slices"
)

// Site is where files live and placeholders run: a host for the local site,
// a cluster for a remote one. Callers number their sites; the numbers only
// have to be equal for the same place.
type Site int32

// Input is the part of a job's input data that lives at one site. Callers
// add up a job's files per site, so DC prices each site once.
type Input struct {
	Site  Site
	Bytes int64
	Files int // each file pays the per-transfer latency (one scp each)
}

// Network estimates how long moving data between two sites takes.
type Network interface {
	// Transfer returns the seconds to copy files totalling bytes from one
	// site to another; from == to costs nothing.
	Transfer(from, to Site, bytes int64, files int) float64
}

// Candidate is a ready job as DC sees it.
type Candidate struct {
	ID        int64   // the caller's job id, returned unchanged
	QueueTime float64 // seconds since the job was submitted
	Runtime   float64 // expected runtime in seconds (see Expect); 0 if unknown
	Inputs    []Input
}

// Arrival predicts when a placeholder will next ask for work.
type Arrival struct {
	Site Site // where that placeholder runs
	// Class is the caller's number (>= 0) for what the placeholder can
	// hold: placeholders of one class hold the same jobs (Snapshot.Holds).
	Class int32
	In    float64 // seconds from now, >= 0
	// Speed is the placeholder's speed relative to the one runtimes are
	// counted on (0 means 1). XSufferage divides runtimes by it; DC
	// ignores it.
	Speed float64
	// Placeholder is the caller's id for it (Arrivals.Predict fills it).
	Placeholder int64
}

// Snapshot is everything DC looks at for one decision.
type Snapshot struct {
	Current Site      // where the asking placeholder runs
	Future  []Arrival // other placeholders' predicted next arrivals, any order
	// Ready yields the ready jobs in the order they should be examined
	// (oldest first); DC stops after DC.MaxExamined of them, so the caller
	// can hand over an iterator on a queue of any length.
	Ready iter.Seq[Candidate]
	Net   Network
	// CurrentSpeed is the asking placeholder's Arrival.Speed.
	CurrentSpeed float64
	// Holds says whether a placeholder of class could hold candidate c
	// at all, whatever it runs now; nil: every placeholder holds every
	// job. A job is priced only at the arrivals that could take it (the
	// asking placeholder can: callers offer only jobs that fit it), so
	// it is not held back for a placeholder too small to run it.
	Holds func(class int32, c Candidate) bool
}

// DC is the data-conscious policy of the Trellis Driver thesis (Lamb 2005,
// section 6.3), exactly:
//
//	priority(x, cur, futs) = Data_Affinity_R_C(x, cur, futs) + queue_time(x)/placeholder_latency
//	Data_Affinity_R_C      = min over the next N arrivals PH_i of cost_of(x, PH_i) - cost_of(x, cur)
//	cost_of(x, PH)         = arrival_time(PH) + Penalty*data_transfer(x, PH) + runtime(x)
//
// with arrival_time(cur) = 0. The highest priority wins; if every examined
// job's priority is negative, the placeholder should wait for a better one.
//
// The relative cost is a time and the queue-time term a ratio of times, so
// their balance depends on the unit the cost is counted in. The thesis
// counted in Smurph units of 10 ms ("both these quantities are expressed
// in simulation time units"), and CostUnit keeps that by default: the cost
// term weighs 100 times more than it would in seconds. That reproduces the
// thesis's "maximum data affinity at every placeholder count" on a WAN; in
// seconds DC gives up a little affinity on a WAN too (docs/policies/simulator.md).
//
// Waiting cannot starve a job: its queue-time term grows by 1/latency per
// second, so any job is dispatched after at most
// -Data_Affinity_R_C/CostUnit * PlaceholderLatency seconds in the queue.
type DC struct {
	N                  int     // upcoming arrivals considered (thesis: 32)
	Penalty            float64 // weight on transfer time (thesis: 25)
	MaxExamined        int     // ready jobs looked at per decision (thesis: 128)
	PlaceholderLatency float64 // one-way placeholder<->CLS time in seconds; must be > 0
	CostUnit           float64 // seconds per cost unit (thesis: 0.01); <= 0 means 0.01
}

// DefaultDC returns the thesis's parameters for a network whose one-way
// placeholder latency is latency seconds.
func DefaultDC(latency float64) DC {
	return DC{N: 32, Penalty: 25, MaxExamined: 128, PlaceholderLatency: latency, CostUnit: 0.01}
}

// Decision is what DC chose.
type Decision struct {
	Job      Candidate // valid when Wait is false
	Priority float64   // the winner's priority (the best one when waiting)
	Wait     bool      // every examined job had a negative priority, or none was ready
	Examined int
}

// Choose returns the ready job to give the asking placeholder, or Wait.
// It is a pure function of the snapshot and allocates nothing per job.
func (d DC) Choose(s Snapshot) Decision {
	unit := d.CostUnit
	if unit <= 0 {
		unit = 0.01
	}
	lat := d.PlaceholderLatency
	if lat <= 0 {
		lat = unit // avoid dividing by zero; callers should set it
	}
	fut := d.upcoming(s.Future, s.Holds != nil)

	best := Decision{Wait: true, Priority: math.Inf(-1)}
	found := false
	for c := range s.Ready {
		if best.Examined >= d.maxExamined() {
			break
		}
		best.Examined++
		p := d.relativeCost(c, s.Current, s.Net, s.Holds, fut)/unit + c.QueueTime/lat
		if !found || p > best.Priority {
			best.Job, best.Priority, found = c, p, true
		}
	}
	best.Wait = !found || best.Priority < 0
	return best
}

func (d DC) maxExamined() int {
	if d.MaxExamined <= 0 {
		return 128
	}
	return d.MaxExamined
}

// upcoming is the first N predicted arrivals reduced to what the minimum in
// Data_Affinity_R_C needs: the soonest arrival anywhere and the soonest at
// each site. For a job x, a placeholder at a site holding none of x's data
// costs arrival + Penalty*full_transfer, which is never below the soonest
// arrival's cost; so min over all N equals the min over the soonest one and
// the soonest at each site where x has data. This keeps a decision
// O(MaxExamined * sites per job) instead of O(MaxExamined * N * files).
// With classes (Snapshot.Holds), the same holds within each class, and a
// job's minimum is over the classes that hold it.
type upcoming []classArrivals

// classArrivals is the reduction for one class of placeholders.
type classArrivals struct {
	class   int32
	first   arrivesAt
	perSite []arrivesAt // soonest arrival per site, among the first N
}

// arrivesAt is the part of an Arrival DC prices: kept small, as the
// inner loop of a decision scans it.
type arrivesAt struct {
	Site Site
	In   float64
}

func (d DC) upcoming(all []Arrival, byClass bool) upcoming {
	if len(all) == 0 {
		return nil
	}
	n := d.N
	if n <= 0 {
		n = 32
	}
	sorted := all
	if len(all) > n {
		// Pick the n soonest without disturbing the caller's slice; ties
		// keep the caller's order, so equal snapshots give equal answers.
		sorted = slices.Clone(all)
		slices.SortStableFunc(sorted, func(a, b Arrival) int { return cmp.Compare(a.In, b.In) })
		sorted = sorted[:n]
	}
	var u upcoming
	for _, a := range sorted {
		var class int32
		if byClass {
			class = a.Class
		}
		at := arrivesAt{a.Site, a.In}
		k := slices.IndexFunc(u, func(c classArrivals) bool { return c.class == class })
		if k < 0 {
			u = append(u, classArrivals{class: class, first: at})
			k = len(u) - 1
		}
		c := &u[k]
		if at.In < c.first.In {
			c.first = at
		}
		i := slices.IndexFunc(c.perSite, func(b arrivesAt) bool { return b.Site == at.Site })
		switch {
		case i < 0:
			c.perSite = append(c.perSite, at)
		case at.In < c.perSite[i].In:
			c.perSite[i] = at
		}
	}
	return u
}

// transfer is data_transfer(x, PH at site): the time to bring every input
// not already there.
func transfer(c Candidate, to Site, net Network) float64 {
	var t float64
	for _, in := range c.Inputs {
		if in.Site != to && (in.Bytes > 0 || in.Files > 0) {
			t += net.Transfer(in.Site, to, in.Bytes, in.Files)
		}
	}
	return t
}

// relativeCost is Data_Affinity_R_C(x, current, upcoming) in seconds. With
// no predicted arrival that could take x there is no better placeholder to
// wait for, so it is 0 (neither favoured nor held back).
func (d DC) relativeCost(c Candidate, cur Site, net Network, holds func(int32, Candidate) bool, u upcoming) float64 {
	cost := func(arrival float64, site Site) float64 {
		return arrival + d.Penalty*transfer(c, site, net) + c.Runtime
	}
	best, ok := math.Inf(1), false
	for k := range u {
		cl := &u[k]
		if holds != nil && !holds(cl.class, c) {
			continue
		}
		ok = true
		best = min(best, cost(cl.first.In, cl.first.Site))
		for _, in := range c.Inputs {
			for _, a := range cl.perSite {
				if a.Site == in.Site && a.Site != cl.first.Site {
					best = min(best, cost(a.In, a.Site))
				}
			}
		}
	}
	if !ok {
		return 0
	}
	return best - cost(0, cur)
}
