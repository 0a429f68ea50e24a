package catalog

import (
	"context"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// The catalog's requests (files.add, files.rm, files.get's record, a
// stage request's end, an agent's missing inputs), each one call the core
// makes inside its batch with its transaction open. A request checks
// first and changes nothing when it refuses (a *protocol.Error); any other
// error is a storage failure. What it changed beyond the catalog's own
// tables comes back as a Change, which the core tells the rest of the
// store: no request calls back into the core.

// Change is what a request changed that the rest of the store follows.
type Change struct {
	// Arrived is a replica recorded at a place: the file moved there.
	Arrived *Arrival
	// Moved says where files can be brought from changed (replicas
	// dropped, a place left alone, a failure counted): data-conscious
	// decisions may differ. Gone lists the files no replica is left of.
	Moved bool
	Gone  []string
	// Fail is the jobs to fail, when no transfer can bring a file.
	Fail *Unstageable
}

// Arrival is a replica recorded at a place.
type Arrival struct {
	Path string
	At   Place
	Size int64
	New  bool // the catalog knew nothing of the file before
}

// AddFile records that path exists at place at with this size and
// checksum (files.add, after the CLS measured it there) and reads the
// file back. A copy whose checksum differs from the catalog's is another
// file: refused (CheckReplica, ReplicaPlace).
func (c *Catalog) AddFile(ctx context.Context, db Execer, path string, at Place, size int64, sha string, now time.Time) (Change, protocol.CatalogFile, error) {
	if err := CheckReplica(path, at, sha); err != nil {
		return Change{}, protocol.CatalogFile{}, err
	}
	at, err := c.ReplicaPlace(path, at, sha)
	if err != nil {
		return Change{}, protocol.CatalogFile{}, err
	}
	isNew, err := c.addReplica(ctx, db, path, at, size, sha, now)
	if err != nil {
		return Change{}, protocol.CatalogFile{}, err
	}
	f, err := File(ctx, db, path)
	return Change{Arrived: &Arrival{Path: path, At: at, Size: size, New: isNew}}, f, err
}

// RemoveFile drops path's replicas at site ("" = every place) and
// returns what is left and the places dropped (for the CLS to delete the
// files there). The last replica of a file that live jobs read goes only
// with force (CheckRemove).
func (c *Catalog) RemoveFile(ctx context.Context, db Execer, path, site string, force bool) (ch Change, left protocol.CatalogFile, dropped []Place, err error) {
	if err := c.CheckRemove(path, site, force); err != nil {
		return ch, left, nil, err
	}
	r, err := c.RemoveReplicas(ctx, db, path, site)
	if err != nil {
		return ch, left, nil, err
	}
	ch.Moved = true
	if r.Gone {
		ch.Gone = []string{path}
	}
	left, err = File(ctx, db, path)
	return ch, left, r.Dropped, err
}

// StageEnded is Staged as a Change: the new replica on success, the jobs
// to fail when no transfer can bring the file.
func (c *Catalog) StageEnded(ctx context.Context, db Execer, r StageResult, now time.Time) (Change, error) {
	out, err := c.Staged(ctx, db, r, now)
	if err != nil {
		return Change{}, err
	}
	ch := Change{Moved: out.Changed, Fail: out.Fail}
	if out.Arrived {
		ch.Arrived = &Arrival{Path: r.Path, At: r.To, Size: r.Bytes, New: out.New}
	}
	return ch, nil
}

// CheckTransfer refuses a transfer report with negative bytes or seconds
// (files.get), before the core starts a batch for it.
func CheckTransfer(t protocol.TransferInfo) error {
	if t.Bytes < 0 || t.Seconds < 0 {
		return protocol.Errorf(protocol.CodeBadRequest, "a transfer has no negative bytes or seconds")
	}
	return nil
}

// RecordTransfer accounts a copy made outside a job (files.get, checked
// by CheckTransfer); a start time that does not parse is now.
func (c *Catalog) RecordTransfer(t protocol.TransferInfo, now time.Time) error {
	started, err := time.Parse(time.RFC3339Nano, t.Started)
	if err != nil {
		started = now
	}
	return c.Record(Transfer{Job: t.Job, Path: t.Path, From: ParsePlace(t.From), To: ParsePlace(t.To), Bytes: t.Bytes,
		Started: started, Duration: time.Duration(t.Seconds * float64(time.Second)), Err: t.Error, Via: t.Via})
}
