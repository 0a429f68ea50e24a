package metaqueue

import (
	"context"
	"testing"

	"github.com/mq-hpc/mq/internal/metaqueue/catalog"
	"github.com/mq-hpc/mq/internal/metaqueue/dc"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/protocol"
)

// link is the link of a place's site, as DC prices it.
func (s *Store) link(at policy.Site) dc.Link { return s.data.Link(at) }

// inputs adds up the inputs of jobs ids by where they are (dc.State.Inputs),
// with staging priced at here (cur) where a replica is, as a pick does.
func (s *Store) inputs(dst []policy.Input, ids []int64, cur policy.Site, here catalog.Place) []policy.Input {
	var pr dc.Presence
	if s.opt.Stager != nil {
		pr = dc.PresentAt(dcCatalog{s}, dc.Place(here))
	}
	return s.data.Inputs(dst, ids, cur, pr)
}

// TestSharedPlace: DC and the catalog name the CLS host's filesystem the
// same place, so a place DC gives the catalog means what it meant.
func TestSharedPlace(t *testing.T) {
	if catalog.Place(dc.Shared) != catalog.Shared {
		t.Errorf("dc.Shared %+v, catalog.Shared %+v", dc.Shared, catalog.Shared)
	}
}

// TestStorePlaceAgreesWithCatalog: where DC says a placeholder's jobs
// find their files is the catalog's place for it, at a site sharing the
// CLS host's filesystem, one with a data root, a node-local one, one not
// configured, and a rooted site once removed.
func TestStorePlaceAgreesWithCatalog(t *testing.T) {
	t.Parallel()
	e, _ := newStagingEnv(t) // siteA..siteX have data roots
	addNodeLocal(t, e, "nodes")
	if err := e.s.AddSite(context.Background(), protocol.SiteSpec{Name: "nfs", Type: "slurm", SharedFS: true}); err != nil {
		t.Fatal(err)
	}
	phs := map[string]int64{}
	for _, at := range []struct{ site, host string }{{catalog.LocalSite, "cls"}, {"siteA", "a1"}, {"nodes", "n1"}, {"nfs", "f1"}, {"hand", "h1"}} {
		phs[at.site] = e.registerAt(at.site, at.host)
	}
	agree := func(when string) {
		t.Helper()
		e.s.do(context.Background(), func() error {
			for site, ph := range phs {
				got, err := e.s.storePlace(ph)
				at, _, _ := e.s.phPlaces(ph)
				pl := e.s.data.SiteAt(at)
				if want := e.s.cat.StorePlace(pl.Site, pl.Host); err != nil || got != want {
					t.Errorf("%s: placeholder at %s: %+v (%v), the catalog's %+v", when, site, got, err, want)
				}
			}
			return nil
		})
	}
	agree("configured")
	if err := e.s.RemoveSite(context.Background(), "siteA"); err != nil {
		t.Fatal(err)
	}
	agree("siteA removed")
}
