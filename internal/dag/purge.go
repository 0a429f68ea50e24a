package dag

import "slices"

// Waited reports whether a live job still names target t among its
// prerequisites: purging t's ended jobs would then take away what that
// job waits on, or what a rerun must revive to unblock it.
func (g *Graph) Waited(t TargetID) bool {
	if t <= 0 || int(t) >= g.targets.len() {
		return false
	}
	for _, id := range g.depsOf(g.targets.at(t)) { // lazily pruned: check each
		if n := g.jobs.get(id); n != nil {
			ok, after := g.jobs.prereqs(n, &g.targets)
			if slices.Contains(ok, t) || slices.Contains(after, t) {
				return true
			}
		}
	}
	return false
}

// LiveIn reports whether any job with an id in first..last is live.
// Empty pages are skipped, so a range of ended jobs costs a page check
// per 1<<pageBits ids.
func (g *Graph) LiveIn(first, last int64) bool {
	if first < 0 {
		first = 0
	}
	for id := first; id <= last; {
		p := id >> pageBits
		if p >= int64(len(g.jobs.pages)) {
			return false
		}
		if g.jobs.pages[p] == nil {
			id = (p + 1) << pageBits
			continue
		}
		if g.jobs.get(id) != nil {
			return true
		}
		id++
	}
	return false
}
