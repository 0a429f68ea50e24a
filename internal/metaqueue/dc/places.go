package dc

import "github.com/mq-hpc/mq/internal/policy"

// placeRefs says which numbered places are still needed. Every
// registration numbers its placeholder's place (SetPlaceholder), and
// placeholders name their sites (and, at the local site and node-local
// ones, their hosts) as they like: a key registering under endless names
// would grow the places for the whole run. A place no placeholder runs at
// any more and no file was located at is forgotten (PlaceholderGone);
// numbers are never given again, so one still held elsewhere (a cache
// keyed by it) names no other place.
type placeRefs struct {
	next    policy.Site         // the next number Site gives
	phs     map[policy.Site]int // placeholders at each place (phPlace)
	located map[policy.Site]bool
}

// ref counts one more placeholder at place at.
func (d *State) ref(at policy.Site) {
	if d.phs == nil {
		d.phs = map[policy.Site]int{}
	}
	d.phs[at]++
}

// unref counts one placeholder fewer at place at, and forgets the place
// when none is left and no file was located there.
func (d *State) unref(at policy.Site) {
	if n := d.phs[at] - 1; n > 0 {
		d.phs[at] = n
		return
	}
	delete(d.phs, at)
	if d.located[at] {
		return
	}
	delete(d.placeID, d.places[at])
	delete(d.places, at)
}

// locatedAt notes that a file was located at place at: it is kept.
func (d *State) locatedAt(at policy.Site) {
	if d.located == nil {
		d.located = map[policy.Site]bool{}
	}
	d.located[at] = true
}

// Places is how many places are numbered.
func (d *State) Places() int { return len(d.places) }
