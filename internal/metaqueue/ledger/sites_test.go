package ledger

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// TestRegisteredSitesForgotten: a key registering under endless site
// names, each placeholder swept soon after, leaves the ledger a bounded
// number of sites; those a live placeholder holds, stored, priced, with
// a runtime or with a running attempt stay.
func TestRegisteredSitesForgotten(t *testing.T) {
	t.Parallel()
	l := New(nil)
	l.SetPrice("stored", 0)
	l.SetPrice("priced", 3)
	l.ranAt(1, "ran").n = 1
	l.runs[protocol.JobRef{ID: 1, Attempt: 1}] = &attempt{site: "running", queue: 1}
	live := map[int64]bool{1: true}
	isLive := func(ph int64) bool { return live[ph] }
	l.Registered(1, "held", isLive)
	l.Registered(2, "ran", isLive)
	l.Registered(3, "running", isLive)
	const flood = 20_000
	for ph := int64(10); ph < 10+flood; ph++ {
		live[ph] = true
		l.Registered(ph, fmt.Sprintf("name%d", ph), isLive)
		delete(live, ph) // swept
	}
	if n := len(l.sites); n > 2*minSitePrune+5 {
		t.Errorf("%d sites known after %d names registered and swept, want at most %d", n, flood, 2*minSitePrune+5)
	}
	if len(l.held) > 2*minSitePrune {
		t.Errorf("%d registrations held, want at most %d", len(l.held), 2*minSitePrune)
	}
	if !slices.Equal(l.Sites(), slices.Sorted(maps.Keys(l.sites))) {
		t.Errorf("siteNames %v do not match sites", l.Sites())
	}
	for _, site := range []string{"held", "stored", "priced", "ran", "running"} {
		if !l.sites[site] {
			t.Errorf("site %q was forgotten", site)
		}
	}
	l.RemoveSite("stored")
	delete(live, 1)
	for ph := int64(100_000); ph < 100_000+2*minSitePrune; ph++ {
		l.Registered(ph, "again", func(int64) bool { return false })
	}
	for _, site := range []string{"held", "stored"} {
		if l.sites[site] {
			t.Errorf("site %q is known though nothing holds it", site)
		}
	}
}
