package cls

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue"
	"github.com/mq-hpc/mq/internal/site"
	"github.com/mq-hpc/mq/protocol"
)

// cls site list (and the dashboard) says which remote site does not
// answer, since when, and how many of its placeholders' jobs the store
// holds until when; the other sites get nothing, and a list of local
// sites only does not ask the store.
func TestSiteListCut(t *testing.T) {
	if err := (&sites{}).withCuts(context.Background(), []protocol.SiteInfo{{SiteSpec: protocol.SiteSpec{Name: "local", Type: site.Local}}}); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const lease, grace = time.Second, time.Hour
	store, err := metaqueue.Open(ctx, metaqueue.Options{Path: filepath.Join(t.TempDir(), "mq.db"), Sync: metaqueue.SyncNormal, Lease: lease, PartitionGrace: grace})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	reg, err := store.Register(ctx, protocol.Register{Site: "far", Host: "n1", PID: 1, Slots: 1, OutDir: "/out"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Submit(ctx, []protocol.JobSpec{{Target: "t", Command: "sleep 1000"}}); err != nil {
		t.Fatal(err)
	}
	dispatched := time.Now()
	if r, err := store.Next(ctx, protocol.Next{Placeholder: reg.ID, Free: 1}); err != nil || len(r.Jobs) != 1 {
		t.Fatalf("next: %+v, %v", r, err)
	}
	answered := time.Now()
	for _, r := range []struct {
		site string
		ok   bool
	}{{"far", true}, {"near", true}, {"far", false}} {
		if err := store.SiteReached(ctx, r.site, answered, answered, r.ok); err != nil {
			t.Fatal(err)
		}
	}

	s := &sites{store: store}
	var list []protocol.SiteInfo
	waitFor(t, "far's lease held", func() bool {
		list = []protocol.SiteInfo{
			{SiteSpec: protocol.SiteSpec{Name: "local", Type: site.Local}},
			{SiteSpec: protocol.SiteSpec{Name: "far", Type: site.Slurm}},
			{SiteSpec: protocol.SiteSpec{Name: "near", Type: site.SGE}},
		}
		if err := s.withCuts(ctx, list); err != nil {
			t.Fatal(err)
		}
		return list[1].HeldLeases > 0
	})
	far := list[1]
	if !far.Unreachable || !far.AnsweredAt.Equal(answered) || far.HeldPlaceholders != 1 || far.HeldLeases != 1 ||
		far.HeldUntil.Before(dispatched.Add(grace)) || far.HeldUntil.After(answered.Add(grace)) {
		t.Errorf("far cut off: %+v", far)
	}
	for _, si := range []protocol.SiteInfo{list[0], list[2]} {
		if si.CutNote(utcClock) != "" || si.Unreachable || si.HeldLeases != 0 {
			t.Errorf("site %s answers: %+v", si.Name, si)
		}
	}
}
