package site

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue"
	"github.com/mq-hpc/mq/internal/site/batch"
	"github.com/mq-hpc/mq/protocol"
)

// TestBrokenPlaceholders: a site lists the placeholders whose heartbeats
// said their node cannot run jobs, with host and why, the latest first,
// once each; after they disconnect too (they exit once their jobs end,
// and the node stays broken), for protocol.BrokenKept, MaxBroken at most
// (one pushed out by later ones is not put back by its next heartbeat).
// A placeholder of no site changes nothing.
func TestBrokenPlaceholders(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	m := &Manager{Store: &fakeStore{}, Poll: time.Hour, Now: clock, Open: func(protocol.SiteSpec, func(int)) (Site, error) {
		return &fakeSite{jobs: map[string]batch.State{}}, nil
	}}
	ctx := startManager(t, m)
	if _, err := m.Add(ctx, protocol.SiteSpec{Name: "c", Type: SGE, SSH: "u@h", Max: 2}); err != nil {
		t.Fatal(err)
	}
	m.Placeholder(7, protocol.Register{Site: "c", Host: "n7"}, true)
	m.Placeholder(8, protocol.Register{Site: "c", Host: "n8"}, true)
	broken := func() []protocol.BrokenPlaceholder { return m.List()[0].Broken }
	if b := broken(); len(b) != 0 {
		t.Fatalf("broken %+v before any said so", b)
	}
	m.Broken(7, "job 9 (attempt 1): its processes did not end 60s after SIGKILL")
	m.Broken(7, "said again")
	m.Broken(99, "no site's")
	b := broken()
	if len(b) != 1 || b[0].ID != 7 || b[0].Host != "n7" || b[0].Why != "job 9 (attempt 1): its processes did not end 60s after SIGKILL" || !b[0].At.Equal(now) {
		t.Fatalf("broken %+v; want placeholder 7 on n7, once, with why", b)
	}
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	m.Broken(8, "data root /scratch cannot be written")
	m.Placeholder(7, protocol.Register{Site: "c"}, false)
	m.Placeholder(8, protocol.Register{Site: "c"}, false)
	if b := broken(); len(b) != 2 || b[0].ID != 8 || b[1].ID != 7 {
		t.Fatalf("broken %+v after both disconnected; want 8 then 7", b)
	}
	for id := int64(100); id < 100+protocol.MaxBroken+2; id++ {
		m.Placeholder(id, protocol.Register{Site: "c", Host: "n"}, true)
		m.Broken(id, "broken")
	}
	if b := broken(); len(b) != protocol.MaxBroken || b[0].ID != 100+protocol.MaxBroken+1 {
		t.Fatalf("%d broken, the first %d; want the latest %d", len(b), b[0].ID, protocol.MaxBroken)
	}
	// One pushed out says it again in its next heartbeat: it stays out.
	m.Broken(100, "broken")
	if b := broken(); len(b) != protocol.MaxBroken || b[0].ID != 100+protocol.MaxBroken+1 || b[len(b)-1].ID != 102 {
		t.Fatalf("broken %+v after one pushed out said it again; want %d to 102", b, 100+protocol.MaxBroken+1)
	}
	mu.Lock()
	now = now.Add(protocol.BrokenKept + time.Second)
	mu.Unlock()
	if b := broken(); len(b) != 0 {
		t.Fatalf("broken %+v a day on; want none", b)
	}
}

// TestBrokenSurvivesRestart: a broken placeholder told to one manager is
// listed by the next on the same database (a CLS restarted), the CLS's
// own site's too, until protocol.BrokenKept after it was first heard; a
// site removed takes its records with it (added again, it lists none).
func TestBrokenSurvivesRestart(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	own := protocol.SiteSpec{Name: EmbeddedName, Type: Local, Max: 1, Slots: 1}
	remote := protocol.SiteSpec{Name: "c", Type: SGE, SSH: "u@h", Max: 2}
	for _, tc := range []struct {
		name   string
		site   string
		remove bool          // the site is removed (and added again) before the restart
		later  time.Duration // the restart, after the word
		want   []int64
	}{
		{"told", "c", false, time.Hour, []int64{7}},
		{"a day on", "c", false, protocol.BrokenKept, []int64{7}},
		{"older than a day", "c", false, protocol.BrokenKept + time.Second, nil},
		{"site removed", "c", true, time.Minute, nil},
		{"the CLS's own", EmbeddedName, false, time.Hour, []int64{7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "mq.db")
			// run is a CLS's manager and store on the database at now,
			// until stop (or the test's end).
			run := func(now time.Time) (m *Manager, ctx context.Context, stop func()) {
				t.Helper()
				ctx, cancel := context.WithCancel(context.Background())
				st, err := metaqueue.Open(ctx, metaqueue.Options{Path: path, Sync: metaqueue.SyncNormal})
				if err != nil {
					cancel()
					t.Fatal(err)
				}
				m = &Manager{Store: st, Poll: time.Hour, Now: func() time.Time { return now }, Embedded: []protocol.SiteSpec{own},
					Open: func(protocol.SiteSpec, func(int)) (Site, error) {
						return &fakeSite{jobs: map[string]batch.State{}}, nil
					}}
				if err := m.Start(ctx); err != nil {
					cancel()
					st.Close()
					t.Fatal(err)
				}
				var once sync.Once
				stop = func() {
					once.Do(func() {
						m.Stop()
						cancel()
						st.Close()
					})
				}
				t.Cleanup(stop)
				return m, ctx, stop
			}
			listed := func(m *Manager) []protocol.BrokenPlaceholder {
				for _, s := range m.List() {
					if s.Name == tc.site {
						return s.Broken
					}
				}
				t.Fatalf("no site %s listed", tc.site)
				return nil
			}

			first, ctx, stop := run(t0)
			if _, err := first.Add(ctx, remote); err != nil {
				t.Fatal(err)
			}
			first.Placeholder(7, protocol.Register{Site: tc.site, Host: "n7"}, true)
			first.Broken(7, "job 9 (attempt 1): its processes did not end 60s after SIGKILL")
			if b := listed(first); len(b) != 1 {
				t.Fatalf("broken %+v before the restart", b)
			}
			if tc.remove {
				if _, err := first.Remove(ctx, tc.site); err != nil {
					t.Fatal(err)
				}
				if _, err := first.Add(ctx, remote); err != nil {
					t.Fatal(err)
				}
			}
			stop()

			second, _, _ := run(t0.Add(tc.later))
			b := listed(second)
			var ids []int64
			for _, p := range b {
				ids = append(ids, p.ID)
			}
			if !slices.Equal(ids, tc.want) {
				t.Fatalf("broken %+v after the restart; want placeholders %v", b, tc.want)
			}
			if len(b) > 0 && (b[0].Host != "n7" || b[0].Why != "job 9 (attempt 1): its processes did not end 60s after SIGKILL" || !b[0].At.Equal(t0)) {
				t.Errorf("broken %+v after the restart; want placeholder 7 on n7 at %v, with why", b[0], t0)
			}
		})
	}
}

// fullStore is a store that cannot write broken placeholders (its disk
// full) until full is false.
type fullStore struct {
	*fakeStore
	mu    sync.Mutex
	full  bool
	tries int
}

func (s *fullStore) NoteBroken(context.Context, string, protocol.BrokenPlaceholder, bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tries++
	if s.full {
		return errors.New("database or disk is full")
	}
	return nil
}

func (s *fullStore) BrokenPlaceholders(context.Context, time.Time) (map[string][]protocol.BrokenPlaceholder, error) {
	return nil, nil
}

// TestBrokenUnstored: a broken placeholder the store cannot write is
// listed still (for this run), and the failure is logged once however
// many fail, then once more when one is stored again.
func TestBrokenUnstored(t *testing.T) {
	var logBuf syncBuffer
	st := &fullStore{fakeStore: &fakeStore{}, full: true}
	m := &Manager{Store: st, Poll: time.Hour, Log: slog.New(slog.NewTextHandler(&logBuf, nil)),
		Open: func(protocol.SiteSpec, func(int)) (Site, error) {
			return &fakeSite{jobs: map[string]batch.State{}}, nil
		}}
	ctx := startManager(t, m)
	if _, err := m.Add(ctx, protocol.SiteSpec{Name: "c", Type: SGE, SSH: "u@h", Max: 2}); err != nil {
		t.Fatal(err)
	}
	for id := int64(7); id <= 10; id++ {
		m.Placeholder(id, protocol.Register{Site: "c", Host: "n"}, true)
	}
	m.Broken(7, "stuck")
	m.Broken(8, "stuck")
	m.Broken(8, "said again: not written again")
	st.mu.Lock()
	st.full = false
	st.mu.Unlock()
	m.Broken(9, "stuck")
	m.Broken(10, "stuck")
	if b := m.List()[0].Broken; len(b) != 4 || b[0].ID != 10 || b[3].ID != 7 {
		t.Fatalf("broken %+v; want 10, 9, 8, 7", b)
	}
	st.mu.Lock()
	tries := st.tries
	st.mu.Unlock()
	if tries != 4 {
		t.Errorf("%d writes, want 4: one per placeholder", tries)
	}
	log := logBuf.String()
	if n := strings.Count(log, "cannot store that a placeholder's node cannot run jobs"); n != 1 {
		t.Errorf("the failure logged %d times, want once:\n%s", n, log)
	}
	if n := strings.Count(log, "broken placeholders are stored again"); n != 1 {
		t.Errorf("the recovery logged %d times, want once:\n%s", n, log)
	}
}
