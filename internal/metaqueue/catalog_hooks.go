package metaqueue

import (
	"context"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/catalog"
	"github.com/mq-hpc/mq/internal/metaqueue/dc"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// The core's side of the data-staging catalog (package catalog): the
// names the CLS uses, the Store methods it calls, and the glue between the
// catalog and the rest of the store. The catalog says what changed (a file
// moved, jobs to fail); the core updates DC's file places, tells the copy
// index and ends the jobs (lifecycle.go).

type (
	// Place is where a file can be (catalog.Place).
	Place = catalog.Place
	// StageRequest asks the stager for a copy (catalog.StageRequest).
	StageRequest = catalog.StageRequest
	// StageResult is how a StageRequest ended (catalog.StageResult).
	StageResult = catalog.StageResult
	// Stager moves files for the store (catalog.Stager).
	Stager = catalog.Stager
)

// shared is the place of every site sharing the CLS host's filesystem.
var shared = catalog.Shared

// loadCatalog reads the sites keeping files of their own, the catalog and
// the transfer totals (after resetIndex).
func (s *Store) loadCatalog(ctx context.Context) error {
	d := &s.data
	if err := s.eachSiteSpec(ctx, func(name string, spec protocol.SiteSpec) {
		if s.cat.AddSite(name, spec) {
			d.SetNodeLocal(name, spec.NodeLocal, true)
		}
	}); err != nil {
		return err
	}
	return s.cat.Load(ctx, s.w, func(l catalog.Located) {
		d.Locate(l.Path, dc.Loc{At: d.At(l.Site, l.Host), Size: l.Size, Job: l.Producer})
	})
}

// catInputs is how the catalog sees a job's declared inputs.
func catInputs(in []fileDecl) []catalog.Input {
	if len(in) == 0 {
		return nil
	}
	out := make([]catalog.Input, len(in))
	for i, f := range in {
		out[i] = catalog.Input{Path: f.Path, Movable: f.Rel}
	}
	return out
}

// userFile records a user's input that exists on the CLS host at submit,
// in the batch's transaction.
func (s *Store) userFile(path string, size, mtime int64) error {
	changed, err := s.cat.UserFile(path, size, mtime, s.now())
	if err != nil {
		return fatalError{err}
	}
	if !changed {
		return nil
	}
	s.data.LocateNew(path, dc.Loc{At: s.data.At(LocalSite, ""), Size: size})
	s.repl.Moved(path) // running jobs reading it see its new size
	return nil
}

// addReplica records a copy of path at p, in the batch's transaction.
func (s *Store) addReplica(path string, p Place, size int64, sha string) error {
	if err := s.begin(); err != nil {
		return err
	}
	isNew, err := s.cat.AddReplica(context.Background(), s.w, path, p, size, sha, s.now())
	if err != nil {
		return fatalError{err}
	}
	s.replicaAdded(path, p, isNew, size)
	return nil
}

// replicaAdded follows a replica of path recorded at p: a file the
// catalog did not know is at p for DC, and the copy candidates reading it
// forget their local bytes.
func (s *Store) replicaAdded(path string, p Place, isNew bool, size int64) {
	if isNew {
		s.data.LocateNew(path, dc.Loc{At: s.data.At(p.Site, p.Host), Size: size})
	}
	s.dataMoved1(path)
}

// filesGone follows replicas dropped: DC forgets where files no replica
// is left of, and data-conscious decisions may differ.
func (s *Store) filesGone(gone []string) {
	s.data.Gone(gone)
}

// failJobs ends Failed the queued jobs among u's (none when u is nil).
func (s *Store) failJobs(u *catalog.Unstageable) error {
	if u == nil {
		return nil
	}
	for _, id := range u.Jobs {
		if err := s.failUnstageable(id, u.Reason); err != nil {
			return err
		}
	}
	return nil
}

// isShared says whether a site sees the CLS host's filesystem.
func (s *Store) isShared(site string) bool { return s.cat.IsShared(site) }

// inputsAt says whether jobs ids have every movable input at place to,
// asking the stager for the missing ones.
func (s *Store) inputsAt(ids []int64, to Place) (bool, error) {
	return s.cat.InputsAt(ids, to, s.now(), s.isQueued), nil
}

func (s *Store) isQueued(id int64) bool {
	j, ok := s.g.Node(id)
	return ok && j.State == job.Queued
}

// inputsPresent says, asking for nothing, whether jobs ids have every
// movable input at to.
func (s *Store) inputsPresent(ids []int64, to Place) bool { return s.cat.InputsPresent(ids, to) }

// stagingElsewhere says whether another place than to is bringing the
// inputs of any of jobs ids.
func (s *Store) stagingElsewhere(ids []int64, to Place) bool { return s.cat.StagingElsewhere(ids, to) }

// requestStage asks for path at to on behalf of job id.
func (s *Store) requestStage(path string, to Place, id int64) error {
	u := s.cat.RequestStage(path, to, id)
	return s.failJobs(u)
}

// dropStale forgets the replicas at placeholder ph's place of the inputs
// of job id its agent did not find whole there (catalog.Stale), and says
// whether any was: the job is then handed back unstarted, to wait for
// them, rather than failed.
func (s *Store) dropStale(id, ph int64, missing []string) (bool, error) {
	if !s.cat.Staging() || len(missing) == 0 {
		return false, nil
	}
	to, err := s.storePlace(ph)
	if err != nil {
		return false, err
	}
	drop := s.cat.Stale(id, to, missing)
	if len(drop) == 0 {
		return false, nil
	}
	if err := s.begin(); err != nil {
		return false, err
	}
	gone, err := s.cat.DropStale(context.Background(), s.w, id, to, drop)
	if err != nil {
		return false, fatalError{err}
	}
	s.filesGone(gone)
	return true, nil
}

// assigned is how an assignment carries a job's declared files, inputs
// with the catalog's size and checksum.
func (s *Store) assigned(jf *jobFiles) (in, out []protocol.AssignedFile) {
	conv := func(files []fileDecl) []protocol.AssignedFile {
		if len(files) == 0 {
			return nil
		}
		a := make([]protocol.AssignedFile, len(files))
		for i, f := range files {
			a[i] = protocol.AssignedFile{Path: f.Path, Size: f.Size, Local: !f.Rel}
		}
		return a
	}
	in, out = conv(jf.In), conv(jf.Out)
	s.cat.AddSums(in)
	return in, out
}

// Files pages through the catalog.
func (s *Store) Files(ctx context.Context, q protocol.FilesQuery) (protocol.FilesReply, error) {
	return catalog.Files(ctx, s.rdb, q)
}

// Replicas returns the places holding path, best first, with the
// catalog's size and checksum of the file.
func (s *Store) Replicas(ctx context.Context, path string) ([]protocol.Replica, error) {
	out, err := catalog.Replicas(ctx, s.rdb, path)
	if err == nil && len(out) == 0 {
		err = protocol.Errorf(protocol.CodeNotFound, "no replica of %s is known", path)
	}
	return out, err
}

// catalogFile reads one file of the catalog on the writer (in the batch).
func (s *Store) catalogFile(path string) (protocol.CatalogFile, error) {
	f, err := catalog.File(context.Background(), s.w, path)
	if err != nil {
		return f, fatalError{err}
	}
	return f, nil
}

// AddReplica records that path exists at a place with this size and
// checksum (files.add, after the CLS measured it there). A copy whose
// checksum differs from the catalog's is another file: refused.
func (s *Store) AddReplica(ctx context.Context, path string, at Place, size int64, sha256 string) (protocol.CatalogFile, error) {
	var out protocol.CatalogFile
	if err := catalog.CheckReplica(path, at, sha256); err != nil {
		return out, err
	}
	err := s.doDurable(ctx, func() error {
		at, err := s.cat.ReplicaPlace(path, at, sha256)
		if err != nil {
			return err
		}
		if err := s.addReplica(path, at, size, sha256); err != nil {
			return err
		}
		out, err = s.catalogFile(path)
		return err
	})
	return out, err
}

// RemoveReplicas drops path's replicas at site ("" = every place) and
// returns what is left and the places dropped (for the CLS to delete the
// files there). The last replica of a file that live jobs read goes only
// with force.
func (s *Store) RemoveReplicas(ctx context.Context, path, site string, force bool) (left protocol.CatalogFile, dropped []Place, err error) {
	err = s.doDurable(ctx, func() error {
		if err := s.cat.CheckRemove(path, site, force); err != nil {
			return err
		}
		if err := s.begin(); err != nil {
			return err
		}
		r, err := s.cat.RemoveReplicas(context.Background(), s.w, path, site)
		if err != nil {
			return fatalError{err}
		}
		dropped = r.Dropped
		var gone []string
		if r.Gone {
			gone = []string{path}
		}
		s.filesGone(gone)
		left, err = s.catalogFile(path)
		return err
	})
	if err != nil {
		dropped = nil
	}
	return left, dropped, err
}

// Staged records how a stage request ended: the transfer for accounting,
// and on success the new replica, waking placeholders whose jobs waited
// for it. A failed transfer is tried again from another replica (the
// failed ones last); after catalog.MaxStageTries failures, or one that
// cannot be helped (Permanent), the jobs waiting for the file there fail.
func (s *Store) Staged(ctx context.Context, r StageResult) error {
	return s.do(ctx, func() error {
		if err := s.begin(); err != nil {
			return err
		}
		if r.Err != nil {
			s.log.Warn("staging failed", "path", r.Path, "to", r.To.String(), "from", r.From.String(), "err", r.Err, "permanent", r.Permanent)
		}
		out, err := s.cat.Staged(context.Background(), s.w, r, s.now())
		if err != nil {
			return fatalError{err}
		}
		if out.Arrived {
			s.replicaAdded(r.Path, r.To, out.New, r.Bytes)
		}
		if out.Changed {
			s.data.Bump()
		}
		return s.failJobs(out.Fail)
	})
}

// RecordTransfer accounts a copy made outside a job (files.get).
func (s *Store) RecordTransfer(ctx context.Context, t protocol.TransferInfo) error {
	started, err := time.Parse(time.RFC3339Nano, t.Started)
	if err != nil {
		started = s.now()
	}
	if t.Bytes < 0 || t.Seconds < 0 {
		return protocol.Errorf(protocol.CodeBadRequest, "a transfer has no negative bytes or seconds")
	}
	d := time.Duration(t.Seconds * float64(time.Second))
	return s.do(ctx, func() error {
		if err := s.begin(); err != nil {
			return err
		}
		if err := s.cat.Record(catalog.Transfer{Job: t.Job, Path: t.Path, From: catalog.ParsePlace(t.From), To: catalog.ParsePlace(t.To),
			Bytes: t.Bytes, Started: started, Duration: d, Err: t.Error, Via: t.Via}); err != nil {
			return fatalError{err}
		}
		return nil
	})
}

// Moved totals the transfers made (nil when none were).
func (s *Store) Moved(ctx context.Context) (*protocol.MovedTotals, error) {
	var m protocol.MovedTotals
	err := s.do(ctx, func() error { m = s.cat.Moved(); return nil })
	if err != nil || m.Transfers == 0 {
		return nil, err
	}
	return &m, nil
}
