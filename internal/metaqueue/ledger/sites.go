package ledger

import "slices"

// minSitePrune is the fewest registrations held and sites known that
// make Registered look for sites to forget.
const minSitePrune = 256

// siteHolders is what the ledger keeps to forget the sites placeholders
// registered from once none holds them: a placeholder key registering
// under endless names would otherwise grow the candidates for the whole
// run.
type siteHolders struct {
	held   map[int64]string // the site each placeholder registered under
	stored map[string]bool  // stored sites (SetPrice until RemoveSite)
	// pruneAt is how many held registrations and sites make the next
	// Registered look for sites to forget: twice those kept by the last
	// look, so its cost is spread over the registrations between. (Both
	// count: registrations under one name grow held alone.)
	pruneAt int
}

// Registered notes that placeholder ph registered under site, a
// candidate for the deadline check (KnowSite). Now and then it forgets
// the sites that no placeholder still live (live: registered and not
// swept or ended) holds, unless they are stored, priced, or named by an
// attempt, a runtime, a charge or a cap: such a site could tell no check
// anything a site by another name does not (candidates).
func (l *Ledger) Registered(ph int64, site string, live func(ph int64) bool) {
	if l.held == nil {
		l.held = map[int64]string{}
	}
	l.held[ph] = site
	l.KnowSite(site)
	if len(l.held)+len(l.siteNames) < l.pruneAt {
		return
	}
	l.forgetSites(live)
	l.pruneAt = max(2*(len(l.held)+len(l.siteNames)), minSitePrune)
}

// forgetSites drops the placeholders no longer live from held, then the
// sites nothing holds or names (Registered).
func (l *Ledger) forgetSites(live func(ph int64) bool) {
	keep := map[string]bool{}
	for ph, site := range l.held {
		if live(ph) {
			keep[site] = true
		} else {
			delete(l.held, ph)
		}
	}
	for site := range l.stored {
		keep[site] = true
	}
	for site := range l.price {
		keep[site] = true
	}
	for _, a := range l.runs {
		keep[a.site] = true
	}
	keepSites(keep, l.spent)
	keepSites(keep, l.ran)
	keepSites(keep, l.free)
	keepSites(keep, l.caps)
	keepSites(keep, l.execAt)
	n := len(l.siteNames)
	l.siteNames = slices.DeleteFunc(l.siteNames, func(site string) bool {
		if keep[site] {
			return false
		}
		delete(l.sites, site)
		return true
	})
	if len(l.siteNames) < n {
		l.check.gen++
	}
}

// keepSites adds the sites named in per-queue accounts to keep.
func keepSites[V any](keep map[string]bool, byQueue map[int32]map[string]V) {
	for _, m := range byQueue {
		for site := range m {
			keep[site] = true
		}
	}
}

// Sites are the sites the deadline check knows, sorted.
func (l *Ledger) Sites() []string { return slices.Clone(l.siteNames) }
