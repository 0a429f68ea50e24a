package metaqueue

import (
	"context"
	"time"

	"github.com/mq-hpc/mq/internal/batchfail"
	"github.com/mq-hpc/mq/internal/metaqueue/placeholders"
	"github.com/mq-hpc/mq/protocol"
)

// The placeholders and their sites are a module
// (internal/metaqueue/placeholders): the registry, its sweep of rows gone
// for good, the lease decisions and the sites' specs. The core forwards
// the public calls, and applies what the module answers: a registration
// tells the other features (packing, DC, the ledger); a placeholder
// deleted is forgotten by DC. Sites are in sites.go, leases in leases.go.

// placeholdersErr makes the module's database failures the core's.
func placeholdersErr(err error) error {
	if batchfail.IsStore(err) {
		return fatalError{err}
	}
	return err
}

// Register records a placeholder (or renews one reconnecting with its id)
// and returns its id.
func (s *Store) Register(ctx context.Context, r protocol.Register) (protocol.RegisterReply, error) {
	return s.RegisterAs(ctx, r, "")
}

// RegisterAs is Register for a peer with an identity (the credential its
// transport proved). A placeholder reclaims its id after a reconnect only
// with the same site, host and identity, so one key cannot take over the
// jobs of a placeholder that another key started.
func (s *Store) RegisterAs(ctx context.Context, r protocol.Register, identity string) (protocol.RegisterReply, error) {
	if err := placeholders.Check(r); err != nil {
		return protocol.RegisterReply{}, err
	}
	var id int64
	err := s.doNeedingRoom(ctx, call{}, func() error {
		if err := s.begin(); err != nil {
			return err
		}
		var err error
		st := placeholders.Stmts{Insert: s.stmts.insPlaceholder, Touch: s.stmts.touchPlaceholder}
		if id, err = s.reg.Register(st, r, identity, s.now()); err != nil {
			return placeholdersErr(err)
		}
		s.phCapacity(id, r)
		s.data.SetPlaceholder(id, r.Site, r.Host)
		s.ledger.Registered(id, r.Site, s.reg.Known)
		if r.ID != 0 && id == r.ID && r.Holding != nil {
			return s.handBackUnheld(id, r.Holding)
		}
		return nil
	})
	return protocol.RegisterReply{ID: id, LeaseS: s.opt.Lease.Seconds(), HeartbeatS: s.opt.Heartbeat.Seconds()}, err
}

// handBackUnheld hands back, as returned unstarted, placeholder ph's
// executing attempts that its registration does not list as holding
// (placeholders.Unheld); the server ended its earlier connections first.
func (s *Store) handBackUnheld(ph int64, holding []protocol.JobRef) error {
	back := placeholders.Unheld(ph, holding, s.now(), s.running, s.copyRuns)
	if len(back) > 0 {
		s.log.Info("handed back the jobs of replies a reconnecting placeholder never got", "placeholder", ph, "jobs", len(back))
	}
	return s.report(ph, back)
}

// PlaceholderDisconnected tells the store that a connection a placeholder
// registered on has closed (the server calls it for each).
func (s *Store) PlaceholderDisconnected(ctx context.Context, id int64) error {
	return s.do(ctx, func() error { s.reg.Disconnected(id, s.now()); return nil })
}

// sweepPlaceholders deletes the rows of this run's placeholders gone for
// good (placeholders.Sweep), and DC forgets them.
func (s *Store) sweepPlaceholders(now time.Time) error {
	gone, err := s.reg.Sweep(context.Background(), s.w, now, s.opt.Lease, s.parkedPlaceholders, s.begin)
	if err != nil {
		return placeholdersErr(err)
	}
	for _, id := range gone {
		if s.data.PlaceholderGone(id) {
			s.dataChanged()
		}
	}
	if len(gone) > 0 {
		s.log.Info("deleted the rows of placeholders gone for good", "placeholders", len(gone))
	}
	return nil
}

// parkedPlaceholders are the placeholders with a poll waiting.
func (s *Store) parkedPlaceholders() map[int64]bool {
	parked := make(map[int64]bool, len(s.parked))
	for _, p := range s.parked {
		parked[p.req.Placeholder] = true
	}
	return parked
}

// NoteBroken stores a site's broken placeholder (site.BrokenStore), so a
// restarted CLS lists it still; while the database cannot be written (its
// disk full, its lock held) it is refused at once.
func (s *Store) NoteBroken(ctx context.Context, site string, b protocol.BrokenPlaceholder, embedded bool) error {
	return s.doNeedingRoom(ctx, call{}, func() error {
		if err := s.beginFresh(); err != nil {
			return err
		}
		return placeholdersErr(placeholders.NoteBroken(context.Background(), s.w, site, b, embedded))
	})
}

// BrokenPlaceholders lists the sites' broken placeholders heard at since
// or later, the latest first (site.BrokenStore).
func (s *Store) BrokenPlaceholders(ctx context.Context, since time.Time) (out map[string][]protocol.BrokenPlaceholder, err error) {
	err = s.do(ctx, func() error {
		out, err = placeholders.Broken(context.Background(), s.w, since)
		return placeholdersErr(err)
	})
	return out, err
}
