package placeholders

import (
	"log/slog"
	"time"
)

// Reach is what the CLS knows of whether it can reach each site that a
// network can cut off from it (an SSH site, whose batch system the site
// manager lists). A placeholder there falls silent when it dies, and also
// when the site is cut off: its jobs then run on, and report once the
// link is back or leave their reports in the site's spool. So the lease
// of a silent placeholder there lapses only once the site was up for a
// whole lease after the placeholder was last heard (its silence is then
// its own), or once grace has passed since it was last heard. A site
// Reach was never told of (a local one) lapses as before.
type Reach struct {
	sites map[string]*reached
	held  map[string]bool // a hold of the site's leases was logged since it was last up
	// holding tallies, by site, the leases held at the last lease check
	// (Cuts); Checking empties it as a check begins.
	holding map[string]*holding
}

// holding is the leases of one site held at a lease check: their
// placeholders, how many, and when the last hold runs out.
type holding struct {
	placeholders map[int64]bool
	leases       int
	until        time.Time
}

// reached is one site's: when it last answered, since when it has
// answered without a failure between, whether its last listing failed,
// and whether it has neither answered nor failed since the CLS started
// (pending).
type reached struct {
	at, upSince time.Time
	down        bool
	pending     bool
}

// Pending notes that site has not answered since the CLS started and its
// first listing is under way: until it answers its placeholders cannot
// be heard (a tunnel site's cannot even reach the CLS before its forward
// is made again), so their leases are held, then for a lease from its
// answer; a failed first listing holds them as a cut.
func (r *Reach) Pending(site string) {
	if r.sites == nil {
		r.sites, r.held = map[string]*reached{}, map[string]bool{}
	}
	if r.sites[site] == nil {
		r.sites[site] = &reached{pending: true}
	}
}

// Reached notes that site answered at at.
func (r *Reach) Reached(site string, at time.Time) {
	if r.sites == nil {
		r.sites, r.held = map[string]*reached{}, map[string]bool{}
	}
	s := r.sites[site]
	if s == nil {
		s = &reached{at: at, upSince: at}
		r.sites[site] = s
	}
	if s.pending {
		s.pending, s.upSince = false, at
	}
	if s.down {
		s.down, s.upSince = false, at
		delete(r.held, site)
	}
	if at.After(s.at) {
		s.at = at
	}
}

// Lost notes that site did not answer (its listing failed): it may be
// cut off from the CLS. A site that has not answered yet is watched from
// now: a CLS restarted during a cut holds the leases it loaded.
func (r *Reach) Lost(site string) {
	if r.sites == nil {
		r.sites, r.held = map[string]*reached{}, map[string]bool{}
	}
	if s := r.sites[site]; s != nil {
		s.down, s.pending = true, false
	} else {
		r.sites[site] = &reached{down: true}
	}
}

// Forget drops a removed site.
func (r *Reach) Forget(site string) {
	delete(r.sites, site)
	delete(r.held, site)
	delete(r.holding, site)
}

// Watching says whether any site is watched (Hold can hold a lease).
func (r *Reach) Watching() bool { return len(r.sites) > 0 }

// Hold says whether a lapsed lease of length lease, of a placeholder of
// site last heard at heard, is held at now: grace since heard has not run
// out, and the site is not known to have been up for a whole lease since
// heard (it does not answer now, or came back less than a lease ago, or
// has not answered since that lease ended). first is true the first time
// Hold holds a lease of site since it was last up, for one log line per
// cut.
func (r *Reach) Hold(site string, heard, now time.Time, lease, grace time.Duration) (hold, first bool) {
	s := r.sites[site]
	if s == nil || grace <= 0 || now.Sub(heard) >= grace {
		return false, false
	}
	if s.pending {
		return true, false // not asked yet: nothing known of a cut to log
	}
	due := heard
	if s.upSince.After(due) {
		due = s.upSince // back since: a fresh lease to reconnect in
	}
	due = due.Add(lease)
	if !s.down && !now.Before(due) && !s.at.Before(due) {
		return false, false
	}
	first = s.down && !r.held[site]
	if first {
		r.held[site] = true
	}
	return true, first
}

// SiteAnswered notes whether site, one a network can cut off, answered a
// listing asked for at asked (ok, at answered) or not (Reach). A listing
// that took longer than a lease may have hung through a cut and answered
// once it healed: the site counts as back at answered, not up all along.
func (g *Registry) SiteAnswered(site string, asked, answered time.Time, ok bool, lease time.Duration) {
	switch {
	case !ok:
		g.reach.Lost(site)
	case answered.Sub(asked) > lease:
		g.reach.Lost(site)
		g.reach.Reached(site, answered)
	default:
		g.reach.Reached(site, asked) // it answered after this, at the latest when asked for
	}
}

// SitePending notes that site, one a network can cut off, has not been
// listed since the CLS started (Reach.Pending).
func (g *Registry) SitePending(site string) { g.reach.Pending(site) }

// HoldLapsed is Reach.Hold for a lapsed lease of placeholder ph of the
// site that site names (asked only while some site is watched), logging
// the first hold of a cut. A lease held is tallied for Cuts.
func (g *Registry) HoldLapsed(ph int64, site func() string, heard, now time.Time, lease, grace time.Duration, log *slog.Logger) bool {
	if !g.reach.Watching() || grace <= 0 {
		return false
	}
	name := site()
	if name == "" {
		return false
	}
	hold, first := g.reach.Hold(name, heard, now, lease, grace)
	if first {
		log.Warn("a site's placeholders fell silent and the site does not answer either: their jobs' leases are held until it is back, or for the partition grace",
			"site", name, "grace", grace)
	}
	if hold {
		g.reach.tally(name, ph, heard.Add(grace))
	}
	return hold
}

// Checking notes that a lease check begins: the leases it holds are
// tallied afresh.
func (r *Reach) Checking() { clear(r.holding) }

// tally notes that the lease check held a lease of placeholder ph of
// site, until at most until.
func (r *Reach) tally(site string, ph int64, until time.Time) {
	if r.holding == nil {
		r.holding = map[string]*holding{}
	}
	h := r.holding[site]
	if h == nil {
		h = &holding{placeholders: map[int64]bool{}}
		r.holding[site] = h
	}
	h.placeholders[ph] = true
	h.leases++
	if until.After(h.until) {
		h.until = until
	}
}

// Cut is what the CLS knows of a site a network may have cut off from it.
type Cut struct {
	// Down says the site's last listing failed; Answered is when it last
	// answered before that (zero: not since the CLS started).
	Down     bool
	Answered time.Time
	// Placeholders and Leases count the silent placeholders, and the
	// attempts they run, whose lapsed leases the last lease check held.
	// Until is when the last of those holds runs out, the partition grace
	// after its placeholder was last heard, unless the site is back for a
	// lease first.
	Placeholders, Leases int
	Until                time.Time
}

// Cuts fills into the sites watched (SiteAnswered) that do not answer,
// or whose placeholders' leases the last lease check held; a site that
// answers and has none held is left out.
func (g *Registry) Cuts(into map[string]Cut) { g.reach.cuts(into) }

func (r *Reach) cuts(into map[string]Cut) {
	for name, s := range r.sites {
		c := Cut{Down: s.down}
		if s.down {
			c.Answered = s.at
		}
		if h := r.holding[name]; h != nil {
			c.Placeholders, c.Leases, c.Until = len(h.placeholders), h.leases, h.until
		}
		if c.Down || c.Leases > 0 {
			into[name] = c
		}
	}
}
