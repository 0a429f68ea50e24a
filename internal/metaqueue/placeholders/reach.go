package placeholders

import "time"

// Reach is when the CLS last reached each site that a network can cut off
// from it (an SSH site whose batch system the site manager listed). A
// placeholder there falls silent when it dies, and also when the site is
// cut off: its jobs then run on and report once the link is back, or leave
// their reports in the site's spool. So a lease there lapses only once the
// site was reached after it lapsed (the placeholder's silence is then its
// own), or once grace has passed since the placeholder was last heard. A
// site Reach was never told of (a local one) lapses as before.
type Reach struct {
	at   map[string]time.Time
	held map[string]bool // a hold of the site's leases was logged
}

// Reached notes that site was reached at at.
func (r *Reach) Reached(site string, at time.Time) {
	if r.at == nil {
		r.at, r.held = map[string]time.Time{}, map[string]bool{}
	}
	if at.After(r.at[site]) {
		r.at[site] = at
	}
	delete(r.held, site)
}

// Forget drops a removed site.
func (r *Reach) Forget(site string) {
	delete(r.at, site)
	delete(r.held, site)
}

// Watching says whether any site is watched (Hold can hold a lease).
func (r *Reach) Watching() bool { return len(r.at) > 0 }

// Hold says whether the lease of a placeholder of site, which lapsed at
// lapsed after it was last heard at heard, is held at now: the site was
// not reached since the lease lapsed, and grace since heard has not run
// out. first is true the first time Hold holds a lease of site since it
// was last reached, for one log line per cut.
func (r *Reach) Hold(site string, heard, lapsed, now time.Time, grace time.Duration) (hold, first bool) {
	at, ok := r.at[site]
	if !ok || grace <= 0 || !at.Before(lapsed) || now.Sub(heard) >= grace {
		return false, false
	}
	first = !r.held[site]
	r.held[site] = true
	return true, first
}

// SiteReached notes that site, one a network can cut off, was reached at
// at (Reach).
func (g *Registry) SiteReached(site string, at time.Time) { g.reach.Reached(site, at) }

// HoldLapsed is Reach.Hold for a lapsed lease of a placeholder of the
// site site names, asked only while some site is watched (site is then
// called).
func (g *Registry) HoldLapsed(site func() (string, bool), heard, lapsed, now time.Time, grace time.Duration) (hold, first bool, name string) {
	if !g.reach.Watching() || grace <= 0 {
		return false, false, ""
	}
	name, ok := site()
	if !ok {
		return false, false, ""
	}
	hold, first = g.reach.Hold(name, heard, lapsed, now, grace)
	return hold, first, name
}
