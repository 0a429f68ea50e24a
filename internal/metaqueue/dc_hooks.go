package metaqueue

import (
	"context"
	"slices"
	"time"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/dispatch"
	"github.com/mq-hpc/mq/internal/metaqueue/catalog"
	"github.com/mq-hpc/mq/internal/metaqueue/dc"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/protocol"
)

// The core's side of data-conscious scheduling (internal/metaqueue/dc):
// what it tells the module when placeholders ask, jobs become ready, end
// or produce their outputs, and what it does with the module's answers
// (the catalog records the outputs, plans keep them, the copy index hears
// what moved). The choosing pick (DC, SA, XSufferage) is the module's
// Pick; the core answers it about bundles, the catalog and copies
// (dcPool). When a chooser says "wait" the placeholder's long poll stays
// parked and is decided again when the queue changes and at least once
// per dc.Redecide.

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
	pool    dcPool
	parked  []policy.Site
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

func (q *queue) isDC() bool { return q.pol.Kind == policy.Choosing }

// learnsEstimates says whether the queue orders jobs that declared no
// runtime by a learned one (SJF); DC prices runtimes on its own.
func (q *queue) learnsEstimates() bool {
	return q.pol.Kind == policy.Ordered && q.pol.Needs&policy.NeedsEstimates != 0
}

// link returns the link of a place's site.
func (s *Store) link(at policy.Site) Link { return s.linkOf(s.data.SiteAt(at).Site) }

// linkOf is a site's link: measured, else configured, else the default
// (dc.Links.Of).
func (s *Store) linkOf(name string) Link { return s.links.Of(name, s.opt.Links, s.opt.DefaultLink) }

// MeasuredLink replaces a site's configured link (--site-net) with one
// measured from real transfers, for DC's pricing.
func (s *Store) MeasuredLink(site string, l Link) { s.links.Measured(site, l) }

// network implements policy.Network over the module's places by the
// sites' links: a copy between two sites goes as slowly as the slower of
// their links.
type network struct{ s *Store }

func (n network) Transfer(from, to policy.Site, bytes int64, files int) float64 {
	if from == to {
		return 0
	}
	a, b := n.s.link(from), n.s.link(to)
	return float64(files)*max(a.Latency, b.Latency) + float64(bytes)/min(a.Bandwidth, b.Bandwidth)
}

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
	n, sjf := 0, 0
	for _, q := range s.qlist {
		if q.isDC() {
			n++
		}
		if q.learnsEstimates() {
			sjf++
		}
	}
	s.data.Count(n, sjf)
	s.setCP()
}

// observeRequest feeds a placeholder's request for work to the arrival
// predictor.
func (s *Store) observeRequest(ph int64) error {
	if !s.data.Choosing() {
		return nil
	}
	at, err := s.phSite(ph)
	if err != nil {
		return err
	}
	s.data.Asked(ph, at, s.now())
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
	for _, ph := range s.data.Silent(now, s.opt.Lease, s.busyPlaceholders) {
		s.forgetPlaceholder(ph)
	}
}

// busyPlaceholders are those parked asking now or running a job.
func (s *Store) busyPlaceholders() map[int64]bool {
	alive := make(map[int64]bool, len(s.parked))
	for _, p := range s.parked {
		alive[p.req.Placeholder] = true
	}
	for _, ru := range s.running {
		alive[ru.placeholder] = true
	}
	return alive
}

// addFiles records a new job's declared files, in the batch's transaction.
func (s *Store) addFiles(id int64, js *protocol.JobSpec) error {
	if len(js.Inputs) == 0 && len(js.Outputs) == 0 {
		return nil
	}
	for _, k := range []struct {
		kind  string
		files []protocol.File
	}{{"i", js.Inputs}, {"o", js.Outputs}} {
		for i, f := range k.files {
			var size any
			if f.Size != nil {
				size = *f.Size
			}
			if _, err := s.stmts.insFile.Exec(id, k.kind, i, f.Path, size, f.Rel); err != nil {
				return fatalError{err}
			}
			if k.kind == "i" && f.MTime != 0 && f.Size != nil && *f.Size >= 0 {
				if err := s.userFile(f.Path, *f.Size, f.MTime); err != nil {
					return err
				}
			}
		}
	}
	jf := dc.Declared(js)
	s.data.AddJob(id, jf)
	s.cat.SetInputs(id, catInputs(jf.In))
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

// readyEntry is how a queue's heap sees a job that became ready. An SJF
// queue orders a job that declared no estimate by its target's learned
// runtime (dc.State.Learned); a cp queue ranks it by its b-level
// (blevel.Levels.Rank).
func (s *Store) readyEntry(q *queue, id int64, est float32, t dag.TargetID) policy.Ready {
	if est == 0 && q.learnsEstimates() {
		est = s.data.Learned(s.g.Name(t), est)
	}
	r := policy.Ready{ID: id, Est: est, Priority: s.prio[id]}
	if s.bl.On() && q.needsBLevels() {
		r.Prio = s.bl.Rank(s.g, s.data.Expect(), t, id, est)
	}
	return r
}

// jobDone learns a Done job's runtime and records where it produced its
// outputs (dc.State.Outputs), in the batch's transaction: in the catalog, at
// DC's place, at the site a plan keeps them, and for the copy index.
func (s *Store) jobDone(id int64, q int32, target string, ph int64, started, finished time.Time, outs []protocol.FileSum) error {
	s.data.Ran(target, started, finished)
	jf := s.data.Job(id)
	if jf == nil || len(jf.Out) == 0 {
		return nil
	}
	at, err := s.data.PlaceholderAt(context.Background(), s.w, ph)
	if err != nil {
		return fatalError{err}
	}
	pl := s.data.SiteAt(at)
	rec := s.data.Outputs(id, outs, s.opt.Stager != nil || len(outs) > 0, s.cat.IsShared(pl.Site), catalog.ValidSHA)
	wrote, known := 0.0, false
	defer func() {
		if known {
			s.noteWrote(q, wrote)
		}
	}()
	for _, o := range rec {
		if o.Size >= 0 {
			wrote += float64(o.Size)
			known = true
		}
		// A declared size is a hint for DC, not a fact the agent may check
		// a dependent's input against: without a checksum the catalog
		// leaves it unknown.
		catSize := o.Size
		if o.SHA == "" {
			catSize = -1
		}
		p := catalog.Place{Site: pl.Site, Host: pl.Host}
		if err := s.cat.Produced(o.Path, p, catSize, o.SHA, id, finished); err != nil {
			return fatalError{err}
		}
		s.data.Locate(o.Path, dc.Loc{At: at, Size: o.Size, Job: id})
		if o.SHA == "" {
			continue
		}
		if err := s.planKeep(o.Path, p, id); err != nil {
			return err
		}
	}
	s.dataMoved(jf.Out)
	return nil
}

// jobEnded forgets a job that reached a terminal state.
func (s *Store) jobEnded(id int64) {
	s.cat.JobEnded(id)
	s.data.Ended(id)
	s.planEnded(id)
}

// inputs adds up the inputs of jobs ids by where they are (dc.State.Inputs),
// with staging priced at here (cur) where a replica is.
func (s *Store) inputs(dst []policy.Input, ids []int64, cur policy.Site, here Place) []policy.Input {
	var pr dc.Presence
	if s.opt.Stager != nil {
		pr = presence{s, here}
	}
	return s.data.Inputs(dst, ids, cur, pr)
}

// presence is the catalog's answer whether a file has a replica at a
// place with a data root of its own: at one sharing the CLS host's
// filesystem every file is "present", and DC's places there are where
// it was made (cache affinity).
type presence struct {
	s  *Store
	to Place
}

func (p presence) Present(path string) bool {
	return p.to != catalog.Shared && p.s.cat.Present(path, p.to)
}

// pickDC asks the module which of a choosing queue's oldest ready jobs
// the placeholder of p should get (dc.State.Pick). It returns false when
// the queue has none that fits or the chooser decided the placeholder
// should wait (then waited is set).
func (s *Store) pickDC(q *queue, p *parkedNext) (id int64, ok, waited bool, err error) {
	cur, err := s.phSite(p.req.Placeholder)
	if err != nil {
		return 0, false, false, err
	}
	a := dc.Asking{Placeholder: p.req.Placeholder, Cur: cur, Latency: s.link(cur).Latency, Now: s.now(), Staging: s.opt.Stager != nil}
	pool := &s.data.pool
	*pool = dcPool{s: s, p: p, cur: cur, groups: pool.groups, seen: pool.seen[:0]}
	clear(pool.groups)
	if a.Staging {
		if pool.to, err = s.storePlace(p.req.Placeholder); err != nil {
			return 0, false, false, err
		}
	}
	pool.w = s.asking(q, p)
	picked, err := s.data.Pick(pool.w, q.ready, dispatch.Choosing, q.pol, a, network{s}, pool)
	if err != nil {
		return 0, false, false, err
	}
	if picked.Staged {
		s.log.Info("dc: staging the chosen job's inputs to the asking placeholder", "job", picked.Staging.Job.ID, "to", pool.to.String(),
			"priority", picked.Staging.Priority, "queue_s", picked.Staging.Job.QueueTime, "arrivals", s.data.Arrivals())
	}
	return picked.ID, picked.ID != 0, picked.Waited, nil
}

// dcPool answers the module's pick (dc.Pool) for the placeholder of p:
// bundles, the catalog and copies. A bundle is one candidate, answered by
// its members.
type dcPool struct {
	s      *Store
	p      *parkedNext
	w      *asking
	cur    policy.Site       // where the placeholder runs
	to     Place             // the placeholder's place, with staging
	one    [1]int64          // Members' answer for a job on its own
	seen   []int64           // bundles already among the candidates
	groups map[int64][]int64 // bundles among the candidates: their members
}

var _ dc.Pool = (*dcPool)(nil)

// membersOf is the jobs candidate id stands for: its bundle, or itself.
func (c *dcPool) membersOf(id int64) []int64 {
	if m, ok := c.groups[id]; ok {
		return m
	}
	return []int64{id}
}

// Members is the jobs ready job id stands for, when it is a candidate.
func (c *dcPool) Members(id int64) (members []int64, take, back bool) {
	s := c.s
	c.one[0] = id
	members = c.one[:]
	if bid, inBundle := s.bundles.Of(id); inBundle {
		if slices.Contains(c.seen, bid) {
			return nil, false, true
		}
		if members, _ = s.bundlePick(id, c.p.req.WalltimeLeft); len(members) == 0 {
			return nil, false, false // held back; pushed again when its state changes
		}
		c.seen = append(c.seen, bid)
	}
	if s.opt.Stager != nil {
		// The chooser prices the inputs that are elsewhere: only the job
		// it chooses is staged here, not every job examined.
		if s.stagingElsewhere(members, c.to) {
			return nil, false, true // another place is bringing its inputs
		}
		if len(members) > 1 {
			if c.groups == nil {
				c.groups = map[int64][]int64{}
			}
			c.groups[id] = members
		}
	}
	return members, true, true
}

// LocalBytes is the bytes of job id's inputs at the placeholder's place.
func (c *dcPool) LocalBytes(id int64) int64 {
	return c.s.localBytes(id, c.cur, c.to)
}

// Estimate is the target and declared runtime of the job last let go.
func (c *dcPool) Estimate() (string, float64) {
	return c.s.g.Name(c.w.j.Target), float64(c.w.j.Est)
}

// Parked is where the other placeholders parked asking now run.
func (c *dcPool) Parked() ([]policy.Site, error) {
	s := c.s
	parked := s.data.parked[:0]
	for _, o := range s.parked {
		if o != c.p && o.req.Placeholder != c.p.req.Placeholder {
			at, err := s.phSite(o.req.Placeholder)
			if err != nil {
				return nil, err
			}
			parked = append(parked, at)
		}
	}
	s.data.parked = parked
	return parked, nil
}

// Present says whether path has a replica at the placeholder's place.
func (c *dcPool) Present(path string) bool { return presence{c.s, c.to}.Present(path) }

// InputsPresent says whether candidate id's inputs are all at c.to.
func (c *dcPool) InputsPresent(id int64) bool {
	return c.s.opt.Stager == nil || c.s.inputsPresent(c.membersOf(id), c.to)
}

// InputsAt says the same, asking for the missing ones.
func (c *dcPool) InputsAt(id int64) (bool, error) {
	if c.s.opt.Stager == nil {
		return true, nil
	}
	return c.s.inputsAt(c.membersOf(id), c.to)
}
