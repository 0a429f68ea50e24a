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
// module's PickFor; the core answers it about bundles, copies and other
// placeholders (dcJobs) and forwards its questions to the catalog
// (dcCatalog). When a chooser says "wait" the placeholder's long poll
// stays parked and is decided again when the queue changes and at least
// once per dc.Redecide.

// Link is how fast data moves between a site and the others (dc.Link).
type Link = dc.Link

// Default links when Options do not say (dc.DefaultLocalLink,
// dc.DefaultSiteLink).
var (
	DefaultLocalLink = dc.DefaultLocalLink
	DefaultSiteLink  = dc.DefaultSiteLink
)

// LocalSite is the site name of the CLS's own placeholders.
const LocalSite = catalog.LocalSite

// redecide is the longest a DC "wait" stands without being decided again.
const redecide = dc.Redecide

// dcState is the module's state and the core's scratch for one pick.
type dcState struct {
	dc.State
	ask     asking // the pick's view of the world (dispatch.World)
	scratch dispatch.Scratch
	jobs    dcJobs // the core's answers to a pick (dc.Jobs), reused: a pick allocates nothing
}

// fileDecl and jobFiles are a job's declared files (dc.File, dc.Files).
type (
	fileDecl = dc.File
	jobFiles = dc.Files
)

// setPolicy gives a new queue its policy and an empty ready heap in the
// policy's order. A stored name this build does not know (a newer
// version's) falls back to the registry's baseline (FCFS).
func (q *queue) setPolicy(name string) {
	p, err := policy.Lookup(name)
	if err != nil {
		p = policy.Baseline()
	}
	q.pol = p
	q.ready = policy.NewHeap(p.Order)
}

func (q *queue) isDC() bool            { return dc.Chooses(q.pol) }
func (q *queue) learnsEstimates() bool { return dc.LearnsEstimates(q.pol) }

// link returns the link of a place's site, as DC prices it.
func (s *Store) link(at policy.Site) Link { return s.data.Link(at) }

// linkOf is a site's link (dc.Links.Of); any goroutine may ask.
func (s *Store) linkOf(name string) Link { return s.links.Of(name, s.opt.Links, s.opt.DefaultLink) }

// MeasuredLink replaces a site's configured link (--site-net) with one
// measured from real transfers, for DC's pricing.
func (s *Store) MeasuredLink(site string, l Link) { s.links.Measured(site, l) }

// phSite returns where a placeholder runs, reading its row once if it
// registered before this run.
func (s *Store) phSite(ph int64) (policy.Site, error) {
	at, err := s.data.PlaceholderAt(context.Background(), s.w, ph)
	if err != nil {
		return 0, fatalError{err}
	}
	return at, nil
}

// storePlace is where a placeholder's jobs find their files (the
// catalog's place for where it runs).
func (s *Store) storePlace(ph int64) (catalog.Place, error) {
	at, err := s.phSite(ph)
	if err != nil {
		return catalog.Place{}, err
	}
	pl := s.data.SiteAt(at)
	return s.cat.StorePlace(pl.Site, pl.Host), nil
}

func (s *Store) countDC() {
	pols := make([]policy.Info, len(s.qlist))
	for i, q := range s.qlist {
		pols[i] = q.pol
	}
	s.data.CountQueues(pols)
	s.setCP()
}

// observeRequest feeds a placeholder's request for work to the arrival
// predictor.
func (s *Store) observeRequest(ph int64) error {
	if err := s.data.Observe(context.Background(), s.w, ph, s.now()); err != nil {
		return fatalError{err}
	}
	return nil
}

// forgetPlaceholder drops a placeholder from the arrival predictions.
func (s *Store) forgetPlaceholder(ph int64) {
	if s.data.Forget(ph) {
		s.dataChanged()
	}
}

// forgetSilent drops placeholders silent for longer than a lease that are
// neither parked asking now nor running a job (dc.State.Silent).
func (s *Store) forgetSilent(now time.Time) {
	if s.data.ForgetSilent(now, s.opt.Lease, s.busyPlaceholders) {
		s.dataChanged()
	}
}

// busyPlaceholders are those parked asking now or running a job.
func (s *Store) busyPlaceholders() map[int64]bool {
	alive := make(map[int64]bool, len(s.parked))
	for _, p := range s.parked {
		alive[p.req.Placeholder] = true
	}
	for _, ru := range s.running {
		alive[ru.Placeholder] = true
	}
	return alive
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
	err := s.data.LoadFiles(ctx, s.w, id, func(id int64, jf *jobFiles) {
		var in []fileDecl
		if jf != nil {
			in = jf.In
		}
		s.cat.SetInputs(id, catInputs(in))
	})
	if err != nil || id != 0 {
		return err
	}
	return s.loadCatalog(ctx)
}

// inputs adds up the inputs of jobs ids by where they are (dc.State.Inputs),
// with staging priced at here (cur) where a replica is.
func (s *Store) inputs(dst []policy.Input, ids []int64, cur policy.Site, here Place) []policy.Input {
	var pr dc.Presence
	if s.opt.Stager != nil {
		pr = dc.PresentAt(dcCatalog{s}, dc.Place(here))
	}
	return s.data.Inputs(dst, ids, cur, pr)
}

// pickDC asks the module which of a choosing queue's oldest ready jobs
// the placeholder of p should get (dc.State.PickFor). It returns false
// when the queue has none that fits or the chooser decided the
// placeholder should wait (then waited is set).
func (s *Store) pickDC(q *queue, p *parkedNext) (id int64, ok, waited bool, err error) {
	a := dc.Asking{Placeholder: p.req.Placeholder, Now: s.now(), Staging: s.opt.Stager != nil}
	w := s.asking(q, p)
	s.data.jobs = dcJobs{s: s, p: p, w: w}
	picked, err := s.data.PickFor(context.Background(), s.w, w, q.ready, q.pol, a, &s.data.jobs, dcCatalog{s})
	if err != nil {
		return 0, false, false, err
	}
	if picked.Staged {
		s.log.Info("dc: staging the chosen job's inputs to the asking placeholder", "job", picked.Staging.Job.ID, "to", catalog.Place(picked.To).String(),
			"priority", picked.Staging.Priority, "queue_s", picked.Staging.Job.QueueTime, "arrivals", s.data.Arrivals())
	}
	return picked.ID, picked.ID != 0, picked.Waited, nil
}

// dcJobs answers a pick (dc.Jobs) for the placeholder of p, picking
// through w: its bundles, the copy index's local bytes, the job w last
// let go, and the other placeholders parked.
type dcJobs struct {
	s *Store
	p *parkedNext
	w *asking
}

func (j *dcJobs) BundleOf(id int64) (int64, bool) {
	return j.s.bundles.Of(id)
}

func (j *dcJobs) BundleNow(id int64) []int64 {
	ids, _ := j.s.bundlePick(id, j.p.req.WalltimeLeft)
	return ids
}

func (j *dcJobs) LocalBytes(id int64, cur policy.Site, to dc.Place) int64 {
	return j.s.localBytes(id, cur, catalog.Place(to))
}

func (j *dcJobs) Estimate() (string, float64) {
	return j.s.g.Name(j.w.j.Target), float64(j.w.j.Est)
}

func (j *dcJobs) Parked(dst []int64) []int64 {
	for _, o := range j.s.parked {
		if o != j.p && o.req.Placeholder != j.p.req.Placeholder {
			dst = append(dst, o.req.Placeholder)
		}
	}
	return dst
}

// dcCatalog forwards DC's questions to the catalog (dc.Catalog).
type dcCatalog struct{ s *Store }

func (c dcCatalog) Present(path string, to dc.Place) bool {
	p := catalog.Place(to)
	return p != catalog.Shared && c.s.cat.Present(path, p)
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

func (c dcCatalog) StorePlace(site, host string) dc.Place {
	return dc.Place(c.s.cat.StorePlace(site, host))
}

func (c dcCatalog) IsShared(site string) bool { return c.s.cat.IsShared(site) }
func (c dcCatalog) ValidSHA(sha string) bool  { return catalog.ValidSHA(sha) }
