package metaqueue

import (
	"context"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/dc"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/metaqueue/plans"
)

// The core's side of plans (internal/metaqueue/plans): what it tells the
// plans module when jobs, placeholders and files move, and what it does
// with the module's answers. The module decides which planned job waits
// for its site; the core resolves sites, checks that a job fits, and asks
// the catalog and the stager for files.

// planAlive notes that a placeholder is alive at its site (a heartbeat).
func (s *Store) planAlive(ph int64) error {
	site, err := s.siteName(ph)
	if err == nil {
		s.plans.Seen(site, s.now())
	}
	return err
}

// Plans records and clears plans, each change one batch on the core
// (plans.Writer).
func (s *Store) Plans() plans.Writer { return plans.NewWriter(&s.plans, plansCore{s}) }

// plansCore runs a change of the plans on the core (plans.Core).
type plansCore struct{ s *Store }

func (c plansCore) Write(ctx context.Context, write func(context.Context, plans.DB, *dag.Graph, time.Time) error) error {
	s := c.s
	return s.do(ctx, func() error {
		if err := s.beginFresh(); err != nil {
			return err
		}
		return storeErr(write(context.Background(), s.w, s.g, s.now()))
	})
}

// SiteLink is the link of a site by name: measured from real transfers
// when it has been, else configured, else the default.
func (s *Store) SiteLink(site string) dc.Link { return s.linkOf(site) }
