package metaqueue

import (
	"context"
	"errors"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// The data-staging catalog (DESIGN.md, "Data staging"): which places hold
// a replica of each declared file, and the transfers made between them.
// This file declares the store's side of the contract with the stager
// (package cls drives a stage.Mover with it).

// Place is where a file can be: a site, and a host at sites whose nodes
// share no filesystem ("" otherwise). The CLS host is Place{Site: LocalSite}.
type Place struct{ Site, Host string }

// StageRequest asks the stager to copy Path to To from one of From (best
// first). The stager calls Store.Staged when the copy ended, whichever way.
type StageRequest struct {
	Path   string
	To     Place
	From   []Place
	Size   int64  // -1 = unknown
	SHA256 string // hex; "" = unknown: the stager computes it
	// ModTime is a user's file's modification time on the CLS host at
	// submit (zero otherwise): the stager refuses a file that changed
	// since (size or time), rather than stage its new form.
	ModTime time.Time
	Job     int64 // the job that first wanted it, for accounting
}

// StageResult is how a StageRequest ended.
type StageResult struct {
	Path     string
	To, From Place
	Bytes    int64
	Started  time.Time
	Duration time.Duration
	SHA256   string
	Job      int64
	// Err is nil when the replica at To exists now. Permanent says that
	// retrying from another replica cannot help (the file changed since
	// submit, or is missing everywhere): the jobs that need it fail.
	Err       error
	Permanent bool
}

// Stager moves files for the store. Stage must not block: it queues the
// request and reports through Store.Staged.
type Stager interface {
	Stage(StageRequest)
}

var errNotBuilt = errors.New("data staging is not built yet")

// Staged records how a stage request ended: the transfer for accounting,
// and on success the new replica, waking placeholders whose jobs waited
// for it.
func (s *Store) Staged(ctx context.Context, r StageResult) error { return errNotBuilt }

// Files pages through the catalog.
func (s *Store) Files(ctx context.Context, q protocol.FilesQuery) (protocol.FilesReply, error) {
	return protocol.FilesReply{}, errNotBuilt
}

// Replicas returns the places holding path, best first, with the
// catalog's size and checksum of the file.
func (s *Store) Replicas(ctx context.Context, path string) ([]protocol.Replica, error) {
	return nil, errNotBuilt
}

// AddReplica records that path exists at a place with this size and
// checksum (files.add, after the CLS measured it there).
func (s *Store) AddReplica(ctx context.Context, path string, at Place, size int64, sha256 string) (protocol.CatalogFile, error) {
	return protocol.CatalogFile{}, errNotBuilt
}

// RemoveReplicas drops path's replicas at site ("" = every place) and
// returns what is left and the places dropped (for the CLS to delete the
// files there). The last replica of a file that live jobs read goes only
// with force.
func (s *Store) RemoveReplicas(ctx context.Context, path, site string, force bool) (left protocol.CatalogFile, dropped []Place, err error) {
	return protocol.CatalogFile{}, nil, errNotBuilt
}

// RecordTransfer accounts a copy made outside a job (files.get).
func (s *Store) RecordTransfer(ctx context.Context, t protocol.TransferInfo) error { return errNotBuilt }

// MeasuredLink replaces a site's configured link (--site-net) with one
// measured from real transfers, for DC's pricing.
func (s *Store) MeasuredLink(site string, l Link) {}
