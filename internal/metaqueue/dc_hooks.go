package metaqueue

import (
	"context"
	"time"

	"github.com/mq-hpc/mq/internal/dispatch"
	"github.com/mq-hpc/mq/internal/metaqueue/catalog"
	"github.com/mq-hpc/mq/internal/metaqueue/dc"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/protocol"
)

// The core's side of data-conscious scheduling (internal/metaqueue/dc):
// the events it tells the module (a placeholder asked or went silent, a
// job was submitted, ended Done or ended), each one call, and the facts
// it applies from the answers (the catalog records the outputs, plans
// keep them, the ledger counts what was written, the copy index hears
// what moved). A choosing queue's pick (DC, SA, XSufferage) is the
// module's PickFor; the pick's world (asking) answers it about bundles,
// copies and the placeholders at work (dc.Jobs), and dcCatalog forwards
// its questions to the catalog. When a chooser says "wait" the
// placeholder's long poll stays parked and is decided again when the
// queue changes and at least once per dc.Redecide.

// dcState is the module's state and the core's scratch for one pick.
type dcState struct {
	dc.State
	// ask is the pick's view of the world (dispatch.World) and, for a
	// choosing queue, its answers (dc.Jobs), reused: a pick allocates
	// nothing.
	ask     asking
	scratch dispatch.Scratch
}

// fileDecl and jobFiles are a job's declared files (dc.File, dc.Files).
type (
	fileDecl = dc.File
	jobFiles = dc.Files
)

// setPolicy gives a new queue its policy (policy.Stored: a name this
// build does not know falls back to FCFS) and an empty ready heap in the
// policy's order.
func (q *queue) setPolicy(name string) {
	q.pol = policy.Stored(name)
	q.ready = policy.NewHeap(q.pol.Order)
}

func (q *queue) isDC() bool            { return dc.Chooses(q.pol) }
func (q *queue) learnsEstimates() bool { return dc.LearnsEstimates(q.pol) }

// linkOf is a site's link (dc.Links.Of); any goroutine may ask.
func (s *Store) linkOf(name string) dc.Link { return s.links.Of(name, s.opt.Links, s.opt.DefaultLink) }

// MeasuredLink replaces a site's configured link (--site-net) with one
// measured from real transfers, for DC's pricing.
func (s *Store) MeasuredLink(site string, l dc.Link) { s.links.Measured(site, l) }

// phPlaces returns where a placeholder runs, reading its row once if it
// registered before this run, and, with staging, where its jobs find
// their files (storePlace).
func (s *Store) phPlaces(ph int64) (policy.Site, catalog.Place, error) {
	at, err := s.data.PlaceholderAt(context.Background(), s.w, ph)
	if err != nil || s.opt.Stager == nil {
		return at, catalog.Place{}, storeErr(err)
	}
	to, err := s.data.StorePlace(context.Background(), s.w, ph)
	return at, catalog.Place(to), storeErr(err)
}

// storePlace is where a placeholder's jobs find their files
// (dc.State.StorePlace).
func (s *Store) storePlace(ph int64) (catalog.Place, error) {
	to, err := s.data.StorePlace(context.Background(), s.w, ph)
	return catalog.Place(to), storeErr(err)
}

func (s *Store) countDC() {
	pols := make([]policy.Info, len(s.qlist))
	for i, q := range s.qlist {
		pols[i] = q.pol
	}
	s.data.CountQueues(pols)
	s.setCP()
}

// forgetPlaceholder drops a placeholder from the arrival predictions.
func (s *Store) forgetPlaceholder(ph int64) {
	if s.data.Forget(ph) {
		s.dataChanged()
	}
}

// forgetSilent drops placeholders silent for longer than a lease that are
// neither parked asking now nor running a job (dc.State.ForgetSilent):
// the store's world, reused outside any pick, says which are at work.
func (s *Store) forgetSilent(now time.Time) {
	if s.data.ForgetSilent(now, s.opt.Lease, s.asking(nil, nil)) {
		s.dataChanged()
	}
}

// addFiles records a new job's declared files, in the batch's
// transaction, and the user's inputs the catalog learns of.
func (s *Store) addFiles(id int64, js *protocol.JobSpec) error {
	jf, onHost, err := s.data.Submitted(id, js, s.stmts.insFile)
	if err != nil {
		return fatalError{err}
	}
	for _, f := range onHost {
		if err := s.userFile(f.Path, *f.Size, f.MTime); err != nil {
			return err
		}
	}
	if jf != nil {
		s.cat.SetInputs(id, catInputs(jf.In))
	}
	return nil
}

// loadFiles reads the declared files of live jobs (one job, or all when
// id is 0) and, for all, every known file location.
func (s *Store) loadFiles(ctx context.Context, id int64) error {
	err := s.data.LoadFiles(ctx, s.w, id, func(id int64, in []fileDecl) {
		s.cat.SetInputs(id, catInputs(in))
	})
	if err != nil || id != 0 {
		return err
	}
	return s.loadCatalog(ctx)
}

// pickDC asks the module which of a choosing queue's oldest ready jobs
// the placeholder of p should get (dc.State.PickFor). It returns false
// when the queue has none that fits or the chooser decided the
// placeholder should wait (then waited is set).
func (s *Store) pickDC(q *queue, p *parkedNext) (id int64, ok, waited bool, err error) {
	w := s.asking(q, p)
	a := dc.Asking{Placeholder: p.req.Placeholder, Now: s.now(), Staging: s.opt.Stager != nil, Log: s.log, Shapes: s.pack, Skip: w.idle()}
	picked, err := s.data.PickFor(context.Background(), s.w, w, q.ready, q.pol, a, w, dcCatalog{s})
	if err != nil {
		return 0, false, false, err
	}
	return picked.ID, picked.ID != 0, picked.Waited, nil
}

// The world of a choosing pick answers it (dc.Jobs) for the placeholder
// of p: its bundles, the copy index's local bytes, the job it last let
// go, and the placeholders at work.
var _ dc.Jobs = (*asking)(nil)

func (a *asking) BundleOf(id int64) (int64, bool) { return a.s.bundles.Of(id) }

func (a *asking) BundleNow(id int64) []int64 {
	ids, _ := a.s.bundles.Expand(id, a.p.req.WalltimeLeft, (*bundleJobs)(a.s))
	return ids
}

func (a *asking) Estimate() (string, float64) {
	return a.s.g.Name(a.j.Target), float64(a.j.Est)
}

func (a *asking) Parked(dst []int64) []int64 {
	for _, o := range a.s.parked {
		dst = append(dst, o.req.Placeholder)
	}
	return dst
}

func (a *asking) Running(dst []int64) []int64 {
	for _, ru := range a.s.running {
		dst = append(dst, ru.Placeholder)
	}
	return dst
}

// dcCatalog forwards DC's questions to the catalog (dc.Catalog).
type dcCatalog struct{ s *Store }

func (c dcCatalog) Present(path string, to dc.Place) bool {
	return c.s.cat.Present(path, catalog.Place(to))
}

func (c dcCatalog) InputsPresent(ids []int64, to dc.Place) bool {
	return c.s.cat.InputsPresent(ids, catalog.Place(to))
}

func (c dcCatalog) InputsAt(ids []int64, to dc.Place) (bool, error) {
	return c.s.inputsAt(ids, catalog.Place(to))
}

func (c dcCatalog) StagingElsewhere(ids []int64, to dc.Place) bool {
	return c.s.cat.StagingElsewhere(ids, catalog.Place(to))
}

func (c dcCatalog) ValidSHA(sha string) bool { return catalog.ValidSHA(sha) }

func (c dcCatalog) SizeAt(path string, to dc.Place) (int64, bool) {
	return c.s.cat.SizeAt(path, catalog.Place(to))
}
