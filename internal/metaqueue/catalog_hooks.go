package metaqueue

import (
	"context"
	"errors"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/catalog"
	"github.com/mq-hpc/mq/internal/metaqueue/dc"
	"github.com/mq-hpc/mq/internal/metaqueue/placeholders"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// The core's side of the data-staging catalog (package catalog): the
// Store methods the CLS calls, and the glue between the
// catalog and the rest of the store. A catalog request is one call in the
// core's batch returning a catalog.Change; the core tells DC and the copy
// index what moved and fails the jobs it names (lifecycle.go).

// loadCatalog reads the sites keeping files of their own, the catalog and
// the transfer totals (after resetIndex).
func (s *Store) loadCatalog(ctx context.Context) error {
	d := &s.data
	if err := placeholders.EachSite(ctx, s.w, func(name string, spec protocol.SiteSpec) {
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
	if changed {
		s.data.LocateNew(path, dc.Loc{At: s.data.At(catalog.LocalSite, ""), Size: size})
		s.repl.Moved(path) // running jobs reading it see its new size
	}
	return nil
}

// Catalog is the catalog's requests (files.add, files.rm, files.get's
// record, a stage request's end, the transfer totals), each run on the
// core (catalog.Requests).
func (s *Store) Catalog() catalog.Requests { return catalog.NewRequests(s.cat, catalogCore{s}, s.log) }

// catalogCore runs the catalog's requests on the core (catalog.Core).
type catalogCore struct{ s *Store }

// Change runs req in a batch (durable: fsync'd as a user's change) with
// the transaction open, and tells the store what it changed.
func (c catalogCore) Change(ctx context.Context, durable bool, req func(context.Context, catalog.Execer, time.Time) (catalog.Change, error)) error {
	s := c.s
	do := s.do
	if durable {
		do = s.doDurable
	}
	return do(ctx, func() error {
		if err := s.beginFresh(); err != nil {
			return err
		}
		ch, err := req(context.Background(), s.w, s.now())
		if _, refused := errors.AsType[*protocol.Error](err); refused {
			return err
		} else if err != nil {
			return fatalError{err}
		}
		return s.catalogChanged(ch)
	})
}

func (c catalogCore) Read(ctx context.Context, fn func()) error {
	return c.s.do(ctx, func() error { fn(); return nil })
}

// catalogChanged tells the store what the catalog changed: a file that
// arrived somewhere is there for DC, and the copy candidates reading it
// forget their local bytes; DC forgets where files no replica is left of;
// the queued jobs whose inputs cannot be staged fail.
func (s *Store) catalogChanged(ch catalog.Change) error {
	if a := ch.Arrived; a != nil {
		if a.New {
			s.data.LocateNew(a.Path, dc.Loc{At: s.data.At(a.At.Site, a.At.Host), Size: a.Size})
		}
		s.repl.Moved(a.Path) // the copy candidates reading it forget their local bytes
		s.data.Changed()
	}
	if ch.Moved {
		s.data.Gone(ch.Gone)
	}
	if u := ch.Fail; u != nil {
		return s.failUnstageable(u.Jobs, u.Reason)
	}
	return nil
}

// dropStale forgets the replicas at placeholder ph's place of the inputs
// of job id its agent did not find whole there (catalog.DropMissing), and
// says whether any was: the job is then handed back unstarted. The report
// writes the attempt's end in this batch anyway, so the transaction is
// begun here whatever is dropped.
func (s *Store) dropStale(id, ph int64, missing []string) (bool, error) {
	if !s.cat.Staging() || len(missing) == 0 {
		return false, nil
	}
	to, err := s.storePlace(ph)
	if err == nil {
		err = s.begin()
	}
	if err != nil {
		return false, err
	}
	stale, ch, err := s.cat.DropMissing(context.Background(), s.w, id, to, missing)
	if err != nil {
		return false, fatalError{err}
	}
	if ch.Moved {
		s.data.Gone(ch.Gone) // replicas dropped: nothing arrived, no job fails
	}
	return stale, nil
}

// inputsAt says whether jobs ids have every movable input at place to,
// asking the stager for the missing ones.
func (s *Store) inputsAt(ids []int64, to catalog.Place) (bool, error) {
	return s.cat.InputsAt(ids, to, s.now(), s.isQueued), nil
}

func (s *Store) isQueued(id int64) bool {
	j, ok := s.g.Node(id)
	return ok && j.State == job.Queued
}

// assigned is how an assignment carries a job's declared files
// (dc.Files.Assigned), inputs with the catalog's size and checksum.
func (s *Store) assigned(jf *jobFiles) (in, out []protocol.AssignedFile) {
	in, out = jf.Assigned()
	s.cat.AddSums(in)
	return in, out
}
