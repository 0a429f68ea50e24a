package catalog

import (
	"context"
	"log/slog"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// Core runs the catalog's requests on the core's goroutine, which owns
// the catalog's state.
type Core interface {
	// Change runs req in a batch with the transaction open (durable:
	// fsync'd before the reply) and applies the Change it returns. A
	// refusal (*protocol.Error) changed nothing; any other error is a
	// storage failure.
	Change(ctx context.Context, durable bool, req func(context.Context, Execer, time.Time) (Change, error)) error
	// Read runs fn on the core's goroutine.
	Read(ctx context.Context, fn func()) error
}

// Requests are the catalog's changes the CLS asks for (files.add, files.rm,
// files.get's record, a stage request's end) and the transfer totals, each
// run on the core (Store.Catalog).
type Requests struct {
	cat  *Catalog
	core Core
	log  *slog.Logger
}

// NewRequests is c's requests, run on core; log takes staging failures.
func NewRequests(c *Catalog, core Core, log *slog.Logger) Requests {
	return Requests{cat: c, core: core, log: log}
}

// AddReplica records that path exists at a place with this size and
// checksum (AddFile).
func (r Requests) AddReplica(ctx context.Context, path string, at Place, size int64, sha256 string) (f protocol.CatalogFile, err error) {
	return f, r.core.Change(ctx, true, func(ctx context.Context, w Execer, now time.Time) (ch Change, err error) {
		ch, f, err = r.cat.AddFile(ctx, w, path, at, size, sha256, now)
		return ch, err
	})
}

// RemoveReplicas drops path's replicas at site ("" = every place) and
// returns what is left and the places dropped (RemoveFile).
func (r Requests) RemoveReplicas(ctx context.Context, path, site string, force bool) (left protocol.CatalogFile, dropped []Place, err error) {
	err = r.core.Change(ctx, true, func(ctx context.Context, w Execer, _ time.Time) (ch Change, err error) {
		ch, left, dropped, err = r.cat.RemoveFile(ctx, w, path, site, force)
		return ch, err
	})
	if err != nil {
		dropped = nil
	}
	return left, dropped, err
}

// Staged records how a stage request ended (StageEnded): the transfer,
// and the new replica, or a try from another, or the jobs waiting for the
// file there fail.
func (r Requests) Staged(ctx context.Context, res StageResult) error {
	if res.Err != nil {
		r.log.Warn("staging failed", "path", res.Path, "to", res.To.String(), "from", res.From.String(), "err", res.Err, "permanent", res.Permanent)
	}
	return r.core.Change(ctx, false, func(ctx context.Context, w Execer, now time.Time) (Change, error) {
		return r.cat.StageEnded(ctx, w, res, now)
	})
}

// RecordTransfer accounts a copy made outside a job (files.get).
func (r Requests) RecordTransfer(ctx context.Context, t protocol.TransferInfo) error {
	if err := CheckTransfer(t); err != nil {
		return err
	}
	return r.core.Change(ctx, false, func(_ context.Context, _ Execer, now time.Time) (Change, error) {
		return Change{}, r.cat.RecordTransfer(t, now)
	})
}

// Moved totals the transfers made (nil when none were).
func (r Requests) Moved(ctx context.Context) (*protocol.MovedTotals, error) {
	var m protocol.MovedTotals
	err := r.core.Read(ctx, func() { m = r.cat.Moved() })
	if err != nil || m.Transfers == 0 {
		return nil, err
	}
	return &m, nil
}
