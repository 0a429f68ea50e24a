package site

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/site/batch"
	"github.com/mq-hpc/mq/protocol"
)

// reachingStore records when the manager said each site was reached.
type reachingStore struct {
	*fakeStore
	mu      sync.Mutex
	reached map[string][]time.Time
	lost    map[string]int
}

func (s *reachingStore) SiteReached(_ context.Context, site string, at, _ time.Time, ok bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ok {
		s.reached[site] = append(s.reached[site], at)
	} else {
		s.lost[site]++
	}
	return nil
}

func (s *reachingStore) losses(site string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lost[site]
}

func (s *reachingStore) times(site string) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.reached[site]...)
}

// TestSiteReached: the manager tells the store a remote site was reached
// each time it lists its batch system, from before it asked, and lost
// each time listing fails (the site may be cut off: its placeholders'
// leases are then held); never either for a local site, which no network
// cuts off.
func TestSiteReached(t *testing.T) {
	remote, local := &fakeSite{jobs: map[string]batch.State{}}, &fakeSite{jobs: map[string]batch.State{}}
	st := &reachingStore{fakeStore: &fakeStore{ready: 1}, reached: map[string][]time.Time{}, lost: map[string]int{}}
	m := &Manager{Store: st, Poll: 5 * time.Millisecond,
		Open: func(spec protocol.SiteSpec, _ func(int)) (Site, error) {
			if spec.Type == Local {
				return local, nil
			}
			return remote, nil
		}}
	ctx := startManager(t, m)
	if _, err := m.Add(ctx, protocol.SiteSpec{Name: "far", Type: SGE, SSH: "u@h", Max: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Add(ctx, protocol.SiteSpec{Name: "l", Type: Local, Max: 1}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "far reached", func() bool { return len(st.times("far")) > 0 })
	eventually(t, "the local site listed", func() bool { return listed(local) > 2 })
	if got := st.times("l"); len(got) > 0 || st.losses("l") > 0 {
		t.Errorf("a local site was told reached %v, lost %d times", got, st.losses("l"))
	}

	cut := time.Now()
	remote.mu.Lock()
	remote.listErr = errors.New("ssh: connect to host h port 22: Connection timed out")
	remote.mu.Unlock()
	n := listed(remote)
	eventually(t, "listing far failed thrice", func() bool { return listed(remote) > n+3 && st.losses("far") >= 3 })
	for _, at := range st.times("far") {
		if !at.Before(cut) {
			t.Fatalf("far told reached at %v, after listing it failed from %v", at, cut)
		}
	}
	remote.mu.Lock()
	remote.listErr = nil
	remote.mu.Unlock()
	eventually(t, "far reached again", func() bool {
		ts := st.times("far")
		return ts[len(ts)-1].After(cut)
	})
}

func listed(f *fakeSite) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lists
}

// TestListsAfterPlaceholderGone: a site with no work and no placeholder
// is listed seldom (every 30 s), but for a while after a placeholder
// disconnected it is listed at every poll: that placeholder's jobs are
// requeued once a listing answers after their leases lapsed.
func TestListsAfterPlaceholderGone(t *testing.T) {
	remote := &fakeSite{jobs: map[string]batch.State{}}
	st := &reachingStore{fakeStore: &fakeStore{}, reached: map[string][]time.Time{}, lost: map[string]int{}}
	m := &Manager{Store: st, Poll: 5 * time.Millisecond, Open: func(protocol.SiteSpec, func(int)) (Site, error) { return remote, nil }}
	ctx := startManager(t, m)
	if _, err := m.Add(ctx, protocol.SiteSpec{Name: "far", Type: SGE, SSH: "u@h", Max: 1}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "far listed once", func() bool { return listed(remote) > 0 })
	reg := protocol.Register{Site: "far", Host: "n1"}
	m.Placeholder(7, reg, true)
	m.Placeholder(7, reg, false)
	n := listed(remote)
	eventually(t, "far listed at every poll after its placeholder left", func() bool { return listed(remote) > n+5 })
}
