package dc

import (
	"maps"
	"sync"
	"sync/atomic"

	"github.com/mq-hpc/mq/internal/policy"
)

// Links are the sites' links as measured from real transfers, over the
// configured ones. Unlike State, any goroutine may set and read them: the
// CLS measures links outside the core, and reports them (SiteLink).
type Links struct {
	mu       sync.Mutex // serializes Measured
	measured atomic.Pointer[map[string]Link]
	// best is the best latency and bandwidth measured to any remote site:
	// the prior of a remote site not measured yet.
	best atomic.Pointer[Link]
}

// Of is site name's link: measured from real transfers when it has been
// (Measured), else configured, else the default (def when valid; the
// local site is a LAN), else (a remote site) the best measured to any
// other.
func (ls *Links) Of(name string, configured map[string]Link, def Link) Link {
	if m := ls.measured.Load(); m != nil {
		if l, ok := (*m)[name]; ok && l.Valid() {
			return l
		}
	}
	if l, ok := configured[name]; ok && l.Valid() {
		return l
	}
	if name == LocalSite {
		return DefaultLocalLink
	}
	if def.Valid() {
		return def
	}
	// A remote site not measured yet, beside others that are, is priced
	// as the best of them, not at the fixed prior: DC weighs the prior's
	// 0.5 s a file against a few measured milliseconds and would keep the
	// site's placeholders idle for good, and a site given no transfer is
	// never measured. Optimism it pays for once: its first transfer
	// measures it.
	if b := ls.best.Load(); b != nil && b.Valid() {
		return *b
	}
	return DefaultSiteLink
}

// Measured replaces a site's link with one measured from real transfers;
// an invalid one is ignored.
func (ls *Links) Measured(site string, l Link) {
	if !l.Valid() {
		return
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	m := map[string]Link{}
	if old := ls.measured.Load(); old != nil {
		m = maps.Clone(*old)
	}
	m[site] = l
	ls.measured.Store(&m)
	var best *Link
	for name, l := range m {
		if name == LocalSite {
			continue
		}
		if best == nil {
			b := l
			best = &b
			continue
		}
		best.Latency = min(best.Latency, l.Latency)
		best.Bandwidth = max(best.Bandwidth, l.Bandwidth)
	}
	ls.best.Store(best)
}

// siteLinks is where State finds the sites' links: measured (ls), else
// configured, else the default (Links.Of).
type siteLinks struct {
	ls         *Links
	configured map[string]Link
	def        Link
}

// UseLinks tells the state the sites' links (measured in ls, configured,
// the default), for its picks' prices. Reset keeps them.
func (d *State) UseLinks(ls *Links, configured map[string]Link, def Link) {
	d.links = siteLinks{ls, configured, def}
}

// LinkOf is site name's link (Links.Of); without UseLinks, the defaults.
func (d *State) LinkOf(name string) Link {
	if d.links.ls == nil {
		var none Links
		return none.Of(name, d.links.configured, d.links.def)
	}
	return d.links.ls.Of(name, d.links.configured, d.links.def)
}

// Link is the link of the site of place at.
func (d *State) Link(at policy.Site) Link { return d.LinkOf(d.SiteAt(at).Site) }

// Network prices a copy between two of d's places by their sites' links
// (policy.Network).
func (d *State) Network() policy.Network { return network{d} }

// network is a copy between two sites going as slowly as the slower of
// their links.
type network struct{ d *State }

func (n network) Transfer(from, to policy.Site, bytes int64, files int) float64 {
	if from == to {
		return 0
	}
	a, b := n.d.Link(from), n.d.Link(to)
	return float64(files)*max(a.Latency, b.Latency) + float64(bytes)/min(a.Bandwidth, b.Bandwidth)
}
