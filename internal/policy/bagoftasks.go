package policy

import (
	"cmp"
	"math"
	"slices"
)

// The bag-of-tasks policies of seed 000 (Santos-Neto, "Escalonamento de
// aplicações que processam grandes quantidades de dados em grids
// computacionais", 2004): Storage Affinity, Workqueue with Replication
// and XSufferage. Each is a pure function of what it is shown; the
// simulator (sim.RunGrid) and, later, the CLS apply its decisions.

// Chooser picks a ready job for an asking placeholder, or tells it to
// wait. DC is one; StorageAffinity and XSufferage are others.
type Chooser interface {
	Choose(s Snapshot) Decision
}

var (
	_ Chooser        = DC{}
	_ Chooser        = StorageAffinity{}
	_ Chooser        = XSufferage{}
	_ Replicator     = StorageAffinity{}
	_ Replicator     = WQR{}
	_ Unbounder      = StorageAffinity{}
	_ Unbounder      = XSufferage{}
	_ ReplicaLimiter = StorageAffinity{}
	_ ReplicaLimiter = WQR{}
)

// StorageAffinity is seed 000's heuristic (section 3.3.3, algorithm 3).
// Its first phase gives the asking placeholder the ready job with the most
// input bytes already at the placeholder's site (the job's storage
// affinity to the site); its second phase, when nothing is ready, copies a
// running job that has affinity to the asking site, lowest replication
// degree first, then highest affinity. It needs no runtimes, speeds or
// bandwidths: only where each input file is and how big it is.
type StorageAffinity struct {
	// MaxExamined bounds the ready jobs looked at per decision, oldest
	// first; 0 looks at all of them (the seed's rule).
	MaxExamined int
	// MaxReplicas bounds the copies of one job running at once, the
	// original included; 0 is unbounded (the seed's simulations).
	MaxReplicas int
}

// Affinity is a job's storage affinity to site: the bytes of its inputs
// already there (seed 000, SA(t, site) = sum of |d| over d in t.I and at site).
func Affinity(c Candidate, site Site) int64 {
	var b int64
	for _, in := range c.Inputs {
		if in.Site == site {
			b += in.Bytes
		}
	}
	return b
}

// Choose returns the examined ready job with the highest affinity to the
// asking placeholder's site; the oldest among equals (on a first run no
// data is anywhere yet, and it is FCFS). It waits only when nothing is
// ready.
func (a StorageAffinity) Choose(s Snapshot) Decision {
	best := Decision{Wait: true}
	var bestAff int64 = -1
	for c := range s.Ready {
		if a.MaxExamined > 0 && best.Examined >= a.MaxExamined {
			break
		}
		best.Examined++
		if aff := Affinity(c, s.Current); aff > bestAff {
			best.Job, bestAff = c, aff
		}
	}
	if bestAff >= 0 {
		best.Wait = false
		best.Priority = float64(bestAff)
	}
	return best
}

// Unbounded examines every ready job.
func (a StorageAffinity) Unbounded() Chooser { a.MaxExamined = 0; return a }

// LimitReplicas bounds the copies of one job at n.
func (a StorageAffinity) LimitReplicas(n int) Replicator { a.MaxReplicas = n; return a }

// Replicate is the second phase: among running jobs with positive affinity
// to the asking site (Running.LocalBytes) and under MaxReplicas copies,
// the lowest replication degree first, then the highest affinity, then
// the oldest.
func (a StorageAffinity) Replicate(_ string, running []Running) (int64, bool) {
	return pickReplica(running, a.MaxReplicas, true)
}

// WQR is Workqueue with Replication (seed 000 section 3.3.1, after
// Paranhos et al.): jobs go to placeholders in queue order with no regard
// to data (Info.Order is FCFS); when nothing is ready an idle placeholder
// copies a running job, lowest replication degree first, then the oldest.
type WQR struct {
	// MaxReplicas bounds the copies of one job running at once, the
	// original included; 0 is unbounded.
	MaxReplicas int
}

// LimitReplicas bounds the copies of one job at n.
func (w WQR) LimitReplicas(n int) Replicator { w.MaxReplicas = n; return w }

// Replicate picks the running job to copy for the asking placeholder.
func (w WQR) Replicate(_ string, running []Running) (int64, bool) {
	return pickReplica(running, w.MaxReplicas, false)
}

// pickReplica is both end games: fewest copies first, then (affinity
// only) the most local bytes, then the lowest id.
func pickReplica(running []Running, maxCopies int, affinity bool) (int64, bool) {
	var best Running
	found := false
	for _, r := range running {
		if maxCopies > 0 && r.Replicas >= maxCopies {
			continue
		}
		if affinity && r.LocalBytes <= 0 {
			continue
		}
		if !found {
			best, found = r, true
			continue
		}
		c := cmp.Compare(r.Replicas, best.Replicas)
		if c == 0 && affinity {
			c = -cmp.Compare(r.LocalBytes, best.LocalBytes)
		}
		if c == 0 {
			c = cmp.Compare(r.ID, best.ID)
		}
		if c < 0 {
			best = r
		}
	}
	return best.ID, found
}

// XSufferage is Casanova et al.'s site-level sufferage (seed 000 section
// 3.3.2, algorithm 2), asked one placeholder at a time. For each examined
// ready job it predicts the completion time at every site (the soonest a
// placeholder there is free, plus moving the job's inputs there, plus its
// runtime at that placeholder's speed); the job's sufferage is the second
// best site's time minus the best's. The asking placeholder gets, among
// the jobs whose best site is its own and whose best placeholder there is
// itself, the one that would suffer most elsewhere. If there is none it
// waits: other placeholders will run those jobs sooner. It needs every number SA does without: runtimes,
// speeds, when placeholders free up, and bandwidths.
type XSufferage struct {
	// MaxExamined bounds the ready jobs looked at per decision, oldest
	// first; 0 looks at all of them (the seed's rule).
	MaxExamined int
}

// Unbounded examines every ready job.
func (x XSufferage) Unbounded() Chooser { x.MaxExamined = 0; return x }

// Choose applies the rule to one asking placeholder.
func (x XSufferage) Choose(s Snapshot) Decision {
	fronts := siteFronts(s)
	best := Decision{Wait: true, Priority: math.Inf(-1)}
	found := false
	for c := range s.Ready {
		if x.MaxExamined > 0 && best.Examined >= x.MaxExamined {
			break
		}
		best.Examined++
		ct1, ct2, bestSite := bestSites(&c, s.Holds, s.Net, fronts)
		if bestSite != s.Current {
			continue
		}
		// the job goes to the placeholder with the best completion time
		// at its best site: if that is another one, leave it for that one
		cur := Arrival{Site: s.Current, Speed: s.CurrentSpeed}
		own := transfer(c, s.Current, s.Net) + c.Runtime/cur.speed()
		if own > ct1*(1+1e-9)+1e-9 {
			continue
		}
		suff := ct2 - ct1 // +Inf with a single site: every job suffers alike
		if !found || suff > best.Priority {
			best.Job, best.Priority, found = c, suff, true
		}
	}
	best.Wait = !found
	return best
}

// bestSites is job c's soonest completion time at its best site (ct1,
// at bestSite) and at its second best (ct2), over the placeholders that
// could hold it (Snapshot.Holds).
func bestSites(c *Candidate, holds func(int32, Candidate) bool, net Network, fronts []siteFront) (ct1, ct2 float64, bestSite Site) {
	ct1, ct2 = math.Inf(1), math.Inf(1)
	add := func(ct float64, site Site) {
		if ct < ct1 {
			ct1, ct2, bestSite = ct, ct1, site
		} else if ct < ct2 {
			ct2 = ct
		}
	}
	if holds == nil { // a site is one front
		for i := range fronts {
			add(fronts[i].completion(c, net), fronts[i].site)
		}
		return ct1, ct2, bestSite
	}
	for i := 0; i < len(fronts); {
		site, ct := fronts[i].site, math.Inf(1)
		for ; i < len(fronts) && fronts[i].site == site; i++ {
			if f := &fronts[i]; f.class == askingClass || holds(f.class, *c) {
				ct = min(ct, f.completion(c, net))
			}
		}
		add(ct, site)
	}
	return ct1, ct2, bestSite
}

// siteFront is one site's placeholders of one class reduced to those that
// could be the soonest to finish some job: none both frees up later and
// runs slower than another (a Pareto front over (free-at, speed)). The
// asking placeholder, which holds every job it is offered, is a class of
// its own when classes count (Snapshot.Holds).
type siteFront struct {
	site  Site
	class int32     // askingClass: the asking placeholder's own
	hosts []Arrival // In ascending, Speed strictly rising
}

// askingClass is the asking placeholder's class in siteFronts: below the
// callers' (Arrival.Class).
const askingClass = math.MinInt32

func (f *siteFront) completion(c *Candidate, net Network) float64 {
	tr := transfer(*c, f.site, net)
	ct := math.Inf(1)
	for i := range f.hosts {
		h := &f.hosts[i]
		ct = min(ct, h.In+tr+c.Runtime/h.speed())
	}
	return ct
}

func (a Arrival) speed() float64 {
	if a.Speed > 0 {
		return a.Speed
	}
	return 1
}

// siteFronts groups the asking placeholder (free now) and the predicted
// arrivals by site and, when classes count, by class, sites in order.
func siteFronts(s Snapshot) []siteFront {
	all := make([]Arrival, 0, len(s.Future)+1)
	cur := Arrival{Site: s.Current, In: 0, Speed: s.CurrentSpeed}
	if s.Holds != nil {
		cur.Class = askingClass
	}
	all = append(all, cur)
	all = append(all, s.Future...)
	if s.Holds == nil {
		for i := range all {
			all[i].Class = 0
		}
	}
	slices.SortStableFunc(all, func(a, b Arrival) int {
		if c := cmp.Compare(a.Site, b.Site); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Class, b.Class); c != 0 {
			return c
		}
		if c := cmp.Compare(a.In, b.In); c != 0 {
			return c
		}
		return -cmp.Compare(a.speed(), b.speed())
	})
	var fronts []siteFront
	for i := 0; i < len(all); {
		f := siteFront{site: all[i].Site, class: all[i].Class}
		j := i
		for ; j < len(all) && all[j].Site == f.site && all[j].Class == f.class; j++ {
			if n := len(f.hosts); n == 0 || all[j].speed() > f.hosts[n-1].speed() {
				f.hosts = append(f.hosts, all[j])
			}
		}
		fronts = append(fronts, f)
		i = j
	}
	return fronts
}
