package site

import (
	"sync"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/site/batch"
	"github.com/mq-hpc/mq/protocol"
)

// TestBrokenPlaceholders: a site lists the placeholders whose heartbeats
// said their node cannot run jobs, with host and why, the latest first,
// once each; after they disconnect too (they exit once their jobs end,
// and the node stays broken), for protocol.BrokenKept, MaxBroken at most.
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
	mu.Lock()
	now = now.Add(protocol.BrokenKept + time.Second)
	mu.Unlock()
	if b := broken(); len(b) != 0 {
		t.Fatalf("broken %+v a day on; want none", b)
	}
}
