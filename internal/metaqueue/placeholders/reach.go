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
}

// reached is one site's: when it last answered, since when it has
// answered without a failure between, and whether its last listing failed.
type reached struct {
	at, upSince time.Time
	down        bool
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
		s.down = true
	} else {
		r.sites[site] = &reached{down: true}
	}
}

// Forget drops a removed site.
func (r *Reach) Forget(site string) {
	delete(r.sites, site)
	delete(r.held, site)
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

// HoldLapsed is Reach.Hold for a lapsed lease of a placeholder of the
// site that site names (asked only while some site is watched), logging
// the first hold of a cut.
func (g *Registry) HoldLapsed(site func() string, heard, now time.Time, lease, grace time.Duration, log *slog.Logger) bool {
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
	return hold
}
