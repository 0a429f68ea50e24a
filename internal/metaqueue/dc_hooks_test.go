package metaqueue

import (
	"testing"

	"github.com/mq-hpc/mq/internal/metaqueue/catalog"
	"github.com/mq-hpc/mq/internal/metaqueue/dc"
	"github.com/mq-hpc/mq/internal/policy"
)

// link is the link of a place's site, as DC prices it.
func (s *Store) link(at policy.Site) Link { return s.data.Link(at) }

// inputs adds up the inputs of jobs ids by where they are (dc.State.Inputs),
// with staging priced at here (cur) where a replica is, as a pick does.
func (s *Store) inputs(dst []policy.Input, ids []int64, cur policy.Site, here Place) []policy.Input {
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
