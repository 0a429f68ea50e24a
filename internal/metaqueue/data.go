package metaqueue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/dispatch"
	"github.com/mq-hpc/mq/internal/metaqueue/catalog"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/protocol"
)

// Data-conscious scheduling in the live CLS. Jobs may declare the files
// they read and write (job_files). When a job ends Done, the site of the
// placeholder that ran it (and its host, for the local site) becomes the
// location of each of its outputs (file_locations; the last producer wins).
// A queue with policy "dc" hands a placeholder the job policy.DC chooses
// from its 128 oldest ready jobs, pricing each job's inputs by where they
// are and the configured links between sites. When DC says "wait" the
// placeholder's long poll stays parked and DC decides for it again when
// the queue changes and at least once a second: a waiting job's queue-time
// term grows, so it cannot wait forever.

// Link is how fast data moves between a site and the others.
type Link struct {
	// Latency is the one-way time in seconds between the site and the CLS:
	// the start-up cost of one file copy, and DC's placeholder latency for
	// placeholders there. Must be > 0.
	Latency float64
	// Bandwidth is bytes per second of a copy. Must be > 0.
	Bandwidth float64
}

// Default links when Options do not say: the local site is a LAN, any
// other site a WAN.
var (
	DefaultLocalLink = Link{Latency: 0.05, Bandwidth: 100e6}
	DefaultSiteLink  = Link{Latency: 0.5, Bandwidth: 10e6}
)

// LocalSite is the site name of the CLS's own placeholders. Files there are
// located per host for DC; at other sites per site (a cluster shares its
// file system), but per host at sites whose nodes share none (NodeLocal).
const LocalSite = catalog.LocalSite

func (l Link) valid() bool {
	ok := func(f float64) bool { return f > 0 && !math.IsInf(f, 0) && !math.IsNaN(f) }
	return ok(l.Latency) && ok(l.Bandwidth)
}

// redecide is the longest a DC "wait" stands without being decided again.
const redecide = time.Second

// place is where files live and placeholders run.
type place struct{ site, host string }

// placeOf is DC's place of a placeholder or file at site and host: the
// host counts at the local site and at sites whose nodes share no
// filesystem.
func (d *dataState) placeOf(site, host string) place {
	if site != LocalSite && !d.perHost[site] {
		host = ""
	}
	return place{site, host}
}

type fileDecl struct {
	path string
	size int64 // -1 = unknown
	rel  bool  // declared relative: movable (data staging)
}

type jobFiles struct {
	in, out []fileDecl
	// outsideCwd: an output is declared absolute or outside the job's
	// working directory, so its attempts cannot keep it apart (never
	// copied; replicate.go).
	outsideCwd bool
}

type fileLoc struct {
	at   policy.Site
	size int64 // the producer's declared size; -1 = unknown
	job  int64
}

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

// dataState is the core's memory for data-conscious scheduling.
type dataState struct {
	files   map[int64]*jobFiles // live jobs that declared files
	where   map[string]fileLoc  // path -> where it was last produced (or the CLS host, for users' files)
	perHost map[string]bool     // sites with a data root whose nodes share no filesystem: places per host
	places  []place             // indexed by policy.Site
	placeID map[place]policy.Site
	phPlace map[int64]policy.Site // placeholder -> where it runs
	readyAt map[int64]time.Time   // jobs of dc queues: when first seen ready
	expect  policy.Expect         // runtimes by target, of Done jobs (earlier runs' loaded at start)
	arr     policy.Arrivals       // placeholders' requests, fed while a dc queue exists
	lastAsk map[int64]time.Time
	epoch   time.Time // arrival times are seconds since this
	ndc     int       // queues with policy dc
	nsjf    int       // queues with policy sjf (they order by learned runtimes too)
	gen     uint64    // bumped when a dc decision may change (ready set, locations)
	// told counts the bumps of gen made by dataMoved and dataChanged,
	// which say what moved: any other bump may have moved any file.
	told  uint64
	waits int64 // DC "wait" decisions, for tests and logs

	// Scratch for one decision, kept to avoid allocating per request.
	ask     asking // the pick's view of the world (dispatch.World)
	scratch dispatch.Scratch
	popped  []policy.Ready
	cands   []policy.Candidate
	inBuf   []policy.Input
	fut     []policy.Arrival
}

func (d *dataState) reset(now time.Time) {
	*d = dataState{
		files: map[int64]*jobFiles{}, where: map[string]fileLoc{}, perHost: map[string]bool{},
		placeID: map[place]policy.Site{},
		phPlace: map[int64]policy.Site{}, readyAt: map[int64]time.Time{}, lastAsk: map[int64]time.Time{},
		epoch: now,
	}
}

func (d *dataState) site(p place) policy.Site {
	if id, ok := d.placeID[p]; ok {
		return id
	}
	id := policy.Site(len(d.places))
	d.places = append(d.places, p)
	d.placeID[p] = id
	return id
}

// link returns the link of a place's site: measured from real transfers
// when it has been (MeasuredLink), else the configured one, else (a remote
// site) the best measured to any other.
func (s *Store) link(at policy.Site) Link { return s.linkOf(s.data.places[at].site) }

func (s *Store) linkOf(name string) Link {
	if m := s.measured.Load(); m != nil {
		if l, ok := (*m)[name]; ok && l.valid() {
			return l
		}
	}
	if l, ok := s.opt.Links[name]; ok && l.valid() {
		return l
	}
	if name == LocalSite {
		return DefaultLocalLink
	}
	if s.opt.DefaultLink.valid() {
		return s.opt.DefaultLink
	}
	// A remote site not measured yet, beside others that are, is priced
	// as the best of them, not at the fixed prior: DC weighs the prior's
	// 0.5 s a file against a few measured milliseconds and would keep the
	// site's placeholders idle for good, and a site given no transfer is
	// never measured. Optimism it pays for once: its first transfer
	// measures it.
	if b := s.bestMeasured.Load(); b != nil && b.valid() {
		return *b
	}
	return DefaultSiteLink
}

// MeasuredLink replaces a site's configured link (--site-net) with one
// measured from real transfers, for DC's pricing.
func (s *Store) MeasuredLink(site string, l Link) {
	if !l.valid() {
		return
	}
	s.measuredMu.Lock()
	defer s.measuredMu.Unlock()
	m := map[string]Link{}
	if old := s.measured.Load(); old != nil {
		m = maps.Clone(*old)
	}
	m[site] = l
	s.measured.Store(&m)
	var best *Link
	for name, l := range m {
		if name == LocalSite {
			continue
		}
		if best == nil {
			b := l
			best = &b
			continue
		}
		best.Latency = min(best.Latency, l.Latency)
		best.Bandwidth = max(best.Bandwidth, l.Bandwidth)
	}
	s.bestMeasured.Store(best)
}

// network implements policy.Network over the store's places: a copy
// between two sites goes as slowly as the slower of their links.
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
	if at, ok := s.data.phPlace[ph]; ok {
		return at, nil
	}
	var site, host string
	err := s.w.QueryRowContext(context.Background(), "SELECT site, host FROM placeholders WHERE id = ?", ph).Scan(&site, &host)
	if errors.Is(err, sql.ErrNoRows) {
		site, host = "", "" // unknown: a place of its own
	} else if err != nil {
		return 0, fatalError{err}
	}
	at := s.data.site(s.data.placeOf(site, host))
	s.data.phPlace[ph] = at
	return at, nil
}

// storePlace is where a placeholder's jobs find their files (the
// catalog's place for where it runs).
func (s *Store) storePlace(ph int64) (catalog.Place, error) {
	at, err := s.phSite(ph)
	if err != nil {
		return catalog.Place{}, err
	}
	pl := s.data.places[at]
	return s.cat.StorePlace(pl.site, pl.host), nil
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
	s.data.nsjf = sjf
	if n == 0 && s.data.ndc > 0 {
		s.data.arr, s.data.lastAsk = policy.Arrivals{}, map[int64]time.Time{}
	}
	s.data.ndc = n
	s.setCP()
}

func (s *Store) secs(t time.Time) float64 { return t.Sub(s.data.epoch).Seconds() }

// observeRequest feeds a placeholder's request for work to the arrival
// predictor.
func (s *Store) observeRequest(ph int64) error {
	if s.data.ndc == 0 {
		return nil
	}
	at, err := s.phSite(ph)
	if err != nil {
		return err
	}
	now := s.now()
	s.data.arr.Observe(ph, at, s.secs(now))
	s.data.lastAsk[ph] = now
	return nil
}

// forgetPlaceholder drops a placeholder from the arrival predictions.
func (s *Store) forgetPlaceholder(ph int64) {
	if _, ok := s.data.lastAsk[ph]; ok {
		s.data.arr.Forget(ph)
		delete(s.data.lastAsk, ph)
		s.dataChanged()
	}
}

// forgetSilent drops placeholders that have not asked for work for longer
// than a lease and are neither parked asking now nor running a job (whose
// lease their heartbeats renew): a vanished placeholder would otherwise be
// predicted to arrive at once, forever. (Forgetting busy ones too, as it
// once did, left DC blind to a placeholder running jobs longer than a
// lease: it expected no arrival there and staged jobs away from their
// data; BENCHMARKS.md, "FCFS vs DC, live and simulated".)
func (s *Store) forgetSilent(now time.Time) {
	if len(s.data.lastAsk) == 0 {
		return
	}
	var alive map[int64]bool
	for ph, t := range s.data.lastAsk {
		if now.Sub(t) <= s.opt.Lease {
			continue
		}
		if alive == nil {
			alive = make(map[int64]bool, len(s.parked))
			for _, p := range s.parked {
				alive[p.req.Placeholder] = true
			}
			for _, ru := range s.running {
				alive[ru.placeholder] = true
			}
		}
		if !alive[ph] {
			s.forgetPlaceholder(ph)
		}
	}
}

// addFiles records a new job's declared files, in the batch's transaction.
func (s *Store) addFiles(id int64, js *protocol.JobSpec) error {
	if len(js.Inputs) == 0 && len(js.Outputs) == 0 {
		return nil
	}
	jf := &jobFiles{}
	for _, k := range []struct {
		kind  string
		files []protocol.File
		dst   *[]fileDecl
	}{{"i", js.Inputs, &jf.in}, {"o", js.Outputs, &jf.out}} {
		for i, f := range k.files {
			var size any
			n := int64(-1)
			if f.Size != nil {
				size, n = *f.Size, *f.Size
			}
			if _, err := s.stmts.insFile.Exec(id, k.kind, i, f.Path, size, f.Rel); err != nil {
				return fatalError{err}
			}
			*k.dst = append(*k.dst, fileDecl{f.Path, n, f.Rel})
			if k.kind == "i" && f.MTime != 0 && n >= 0 {
				if err := s.userFile(f.Path, n, f.MTime); err != nil {
					return err
				}
			}
		}
	}
	for _, f := range jf.out {
		jf.outsideCwd = jf.outsideCwd || !f.rel || !under(js.Cwd, f.path)
	}
	s.data.files[id] = jf
	s.cat.SetInputs(id, catInputs(jf.in))
	return nil
}

// loadFiles reads the declared files of live jobs (one job, or all when
// id is 0) and every known file location.
func (s *Store) loadFiles(ctx context.Context, id int64) error {
	q := `SELECT f.job_id, f.kind, f.path, f.size, f.rel, j.cwd FROM job_files f JOIN jobs j ON j.id = f.job_id
		WHERE j.state IN ('W','Q','H','E','B') ORDER BY f.job_id, f.kind, f.seq`
	args := []any{}
	if id != 0 {
		q = "SELECT f.job_id, f.kind, f.path, f.size, f.rel, j.cwd FROM job_files f JOIN jobs j ON j.id = f.job_id WHERE f.job_id = ? ORDER BY f.kind, f.seq"
		args = append(args, id)
		delete(s.data.files, id)
	}
	rows, err := s.w.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	for rows.Next() {
		var jid int64
		var kind, path, cwd string
		var size sql.NullInt64
		var rel bool
		if err := rows.Scan(&jid, &kind, &path, &size, &rel, &cwd); err != nil {
			rows.Close()
			return err
		}
		jf := s.data.files[jid]
		if jf == nil {
			jf = &jobFiles{}
			s.data.files[jid] = jf
		}
		d := fileDecl{path, -1, rel}
		if size.Valid {
			d.size = size.Int64
		}
		if kind == "i" {
			jf.in = append(jf.in, d)
		} else {
			jf.out = append(jf.out, d)
			jf.outsideCwd = jf.outsideCwd || !rel || !under(cwd, path)
		}
	}
	if err := closeRows(rows); err != nil {
		return err
	}
	if id != 0 {
		var in []fileDecl
		if jf := s.data.files[id]; jf != nil {
			in = jf.in
		}
		s.cat.SetInputs(id, catInputs(in))
		return nil
	}
	for jid, jf := range s.data.files {
		s.cat.SetInputs(jid, catInputs(jf.in))
	}
	return s.loadCatalog(ctx)
}

// readyEntry is how a queue's heap sees a job that became ready. An SJF
// queue orders a job that declared no estimate by the mean runtime of its
// target's jobs finished so far in this run (policy.Expect), known when it
// became ready; unknown still goes last. A cp queue ranks it by its
// b-level (blevel.Levels.Rank).
func (s *Store) readyEntry(q *queue, id int64, est float32, t dag.TargetID) policy.Ready {
	if est == 0 && s.data.nsjf > 0 && q.learnsEstimates() {
		est = float32(s.data.expect.Estimate(s.g.Name(t), 0))
	}
	r := policy.Ready{ID: id, Est: est, Priority: s.prio[id]}
	if s.bl.On() && q.needsBLevels() {
		r.Prio = s.bl.Rank(s.g, &s.data.expect, t, id, est)
	}
	return r
}

// jobDone records where a job that ended Done produced its outputs and
// learns its runtime, in the batch's transaction. With staging (or when
// the agent reported them) the outputs reported become replicas, with the
// agent's size and checksum; an output not reported is taken to be at the
// producer's place (as before staging) when it is site-local or was made
// where the CLS host's filesystem is seen, and is skipped otherwise.
func (s *Store) jobDone(id int64, q int32, target string, ph int64, started, finished time.Time, outs []protocol.FileSum) error {
	if !started.IsZero() && finished.After(started) { // kept for any queue: one may turn SJF or DC later
		s.data.expect.Observe(target, finished.Sub(started).Seconds())
	}
	jf := s.data.files[id]
	if jf == nil || len(jf.out) == 0 {
		return nil
	}
	at, err := s.phSite(ph)
	if err != nil {
		return err
	}
	pl := s.data.places[at]
	legacy := s.opt.Stager == nil && len(outs) == 0
	shared := s.cat.IsShared(pl.site)
	wrote, known := 0.0, false
	defer func() {
		if known {
			s.noteWrote(q, wrote)
		}
	}()
	for _, f := range jf.out {
		size, sha := f.size, ""
		i := slices.IndexFunc(outs, func(o protocol.FileSum) bool { return o.Path == f.path })
		switch {
		case i >= 0 && outs[i].Size >= 0 && catalog.ValidSHA(outs[i].SHA256):
			size, sha = outs[i].Size, outs[i].SHA256
		case legacy || !f.rel || shared:
			// Not reported but there: a site-local output (declared
			// absolute, never hashed), or one made where the CLS host's
			// filesystem is seen. DC still locates it at its producer.
		default:
			continue // not made (the agent fails such a job), or not said well
		}
		if size >= 0 {
			wrote += float64(size)
			known = true
		}
		// A declared size is a hint for DC, not a fact the agent may check
		// a dependent's input against: without a checksum the catalog
		// leaves it unknown.
		catSize := size
		if sha == "" {
			catSize = -1
		}
		p := catalog.Place{Site: pl.site, Host: pl.host}
		if err := s.cat.Produced(f.path, p, catSize, sha, id, finished); err != nil {
			return fatalError{err}
		}
		s.data.where[f.path] = fileLoc{at: at, size: size, job: id}
		if sha == "" {
			continue
		}
		if err := s.planKeep(f.path, p, id); err != nil {
			return err
		}
	}
	s.dataMoved(jf.out)
	return nil
}

// becameReady notes when a job of a dc queue became ready (its queue time
// counts from then; a requeued job keeps its first time).
func (s *Store) becameReady(id int64, now time.Time) {
	if _, ok := s.data.readyAt[id]; !ok {
		s.data.readyAt[id] = now
	}
	s.data.gen++
}

// jobEnded forgets a job that reached a terminal state.
func (s *Store) jobEnded(id int64) {
	s.cat.JobEnded(id)
	delete(s.data.files, id)
	delete(s.data.readyAt, id)
	s.planEnded(id)
}

// inputs adds up the inputs of jobs ids by where they are, appending to
// dst. Inputs no job has produced have no known place and weigh nothing;
// an input of unknown size costs one copy's latency. With staging, an
// input with a replica at the asking placeholder's place (here; cur is
// its DC place) is priced there, whoever produced it: a copy staged to a
// site, or to a host of a site whose nodes share no filesystem, is data
// on that place.
func (s *Store) inputs(dst []policy.Input, ids []int64, cur policy.Site, here Place) []policy.Input {
	start := len(dst)
	for _, id := range ids {
		jf := s.data.files[id]
		if jf == nil {
			continue
		}
		for _, f := range jf.in {
			loc, ok := s.data.where[f.path]
			if !ok {
				continue
			}
			// Only at a place with a data root of its own: at one sharing
			// the CLS host's filesystem every file is "present", and DC's
			// places there are where it was made (cache affinity).
			if s.opt.Stager != nil && f.rel && loc.at != cur && here != catalog.Shared && s.cat.Present(f.path, here) {
				loc.at = cur
			}
			size := f.size
			if size < 0 {
				size = loc.size
			}
			i := start
			for ; i < len(dst) && dst[i].Site != loc.at; i++ {
			}
			if i == len(dst) {
				dst = append(dst, policy.Input{Site: loc.at})
			}
			dst[i].Bytes += max(size, 0)
			dst[i].Files++
		}
	}
	return dst
}

// logStaging logs why DC chose to bring a job's inputs to place to: its
// priority, queue time, and the placeholder arrivals it expected, per
// place (soonest, in seconds). Once per transfer decided, not per request.
func (s *Store) logStaging(dec policy.Decision, to Place, fut []policy.Arrival) {
	soonest := map[string]float64{}
	for _, a := range fut {
		name := s.data.places[a.Site].site
		if h := s.data.places[a.Site].host; h != "" {
			name += ":" + h
		}
		if old, ok := soonest[name]; !ok || a.In < old {
			soonest[name] = a.In
		}
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(soonest)) {
		fmt.Fprintf(&b, "%s in %.1fs; ", k, soonest[k])
	}
	arr := strings.TrimSuffix(b.String(), "; ")
	if arr == "" {
		arr = "none expected"
	}
	s.log.Info("dc: staging the chosen job's inputs to the asking placeholder", "job", dec.Job.ID, "to", to.String(),
		"priority", dec.Priority, "queue_s", dec.Job.QueueTime, "arrivals", arr)
}

// pickDC asks the queue's chooser (policy.DC, SA, XSufferage) which of a
// choosing queue's oldest ready jobs the placeholder of p should get. It
// returns false when the queue has none that fits or the chooser decided
// the placeholder should wait (then waited is set).
func (s *Store) pickDC(q *queue, p *parkedNext) (id int64, ok, waited bool, err error) {
	d := &s.data
	cur, err := s.phSite(p.req.Placeholder)
	if err != nil {
		return 0, false, false, err
	}
	c := dcRound{s: s, q: q, p: p, cur: cur, now: s.now()}
	if s.opt.Stager != nil {
		if c.to, err = s.storePlace(p.req.Placeholder); err != nil {
			return 0, false, false, err
		}
	}
	c.popped, c.cands, c.ins = d.popped[:0], d.cands[:0], d.inBuf[:0]
	if err := s.dcCandidates(&c); err != nil {
		return 0, false, false, err
	}
	var dec policy.Decision
	if len(c.cands) > 0 {
		if dec, err = s.dcDecide(&c); err != nil {
			return 0, false, false, err
		}
	} else {
		dec.Wait = true
	}
	var chosen int64
	if !dec.Wait {
		chosen = dec.Job.ID
	}
	dispatch.Restore(q.ready, c.popped, chosen)
	clear(c.cands) // drop references to input slices
	d.popped, d.cands, d.inBuf = c.popped[:0], c.cands[:0], c.ins[:0]
	if dec.Wait {
		if len(c.cands) > 0 {
			d.waits++
			return 0, false, true, nil
		}
		return 0, false, false, nil
	}
	s.dataChanged() // the ready set, not where files are
	return dec.Job.ID, true, false, nil
}

// dcRound is one pickDC: the asking placeholder, where it is, and the
// candidates the chooser chooses among. It answers dispatch.Placement for
// the candidates, a bundle by its members.
type dcRound struct {
	s   *Store
	q   *queue
	p   *parkedNext
	cur policy.Site
	to  Place // the placeholder's place, with staging
	now time.Time

	popped []policy.Ready     // off the heap, back unless chosen
	cands  []policy.Candidate // what the chooser chooses among
	ins    []policy.Input     // the candidates' inputs, one buffer
	groups map[int64][]int64  // bundles among the candidates: their members
}

// membersOf is the jobs candidate id stands for: its bundle, or itself.
func (c *dcRound) membersOf(id int64) []int64 {
	if m, ok := c.groups[id]; ok {
		return m
	}
	return []int64{id}
}

// InputsPresent says whether candidate id's inputs are all at c.to.
func (c *dcRound) InputsPresent(id int64) bool {
	return c.s.opt.Stager == nil || c.s.inputsPresent(c.membersOf(id), c.to)
}

// InputsAt says the same, asking for the missing ones.
func (c *dcRound) InputsAt(id int64) (bool, error) {
	if c.s.opt.Stager == nil {
		return true, nil
	}
	return c.s.inputsAt(c.membersOf(id), c.to)
}

// dcCandidates looks at up to policy.Window ready jobs of c.q that the
// choosing chain lets go (dispatch.Examine) and makes them the chooser's
// candidates, a bundle as one.
func (s *Store) dcCandidates(c *dcRound) error {
	d := &s.data
	q, p := c.q, c.p
	cands, ins := c.cands, c.ins
	var seen []int64 // bundles already among the candidates
	a := s.asking(q, p)
	popped, err := dispatch.Examine(a, q.ready, dispatch.Choosing, c.popped, func(r policy.Ready) (bool, error) {
		one := [1]int64{r.ID}
		members := one[:]
		if bid, inBundle := s.bundles.of[r.ID]; inBundle {
			if slices.Contains(seen, bid) {
				return true, nil
			}
			if members, _ = s.bundlePick(r.ID, p.req.WalltimeLeft); len(members) == 0 {
				return false, nil // held back; pushed again when its state changes
			}
			seen = append(seen, bid)
		}
		if s.opt.Stager != nil {
			// The chooser prices the inputs that are elsewhere: only the
			// job it chooses is staged here (dcDecide), not every job
			// examined.
			if s.stagingElsewhere(members, c.to) {
				return true, nil // another place is bringing its inputs
			}
			if len(members) > 1 {
				if c.groups == nil {
					c.groups = map[int64][]int64{}
				}
				c.groups[r.ID] = members
			}
		}
		ready, known := d.readyAt[r.ID]
		if !known {
			ready = c.now
			d.readyAt[r.ID] = c.now
		}
		start := len(ins)
		if q.pol.Needs&policy.NeedsBytesHere != 0 {
			// With staging, every replica counts, not only the producer's.
			var b int64
			for _, m := range members {
				b += s.localBytes(m, c.cur, c.to)
			}
			if b > 0 {
				ins = append(ins, policy.Input{Site: c.cur, Bytes: b})
			}
		} else {
			ins = s.inputs(ins, members, c.cur, c.to)
		}
		cands = append(cands, policy.Candidate{
			ID:        r.ID,
			QueueTime: max(c.now.Sub(ready).Seconds(), 0),
			Runtime:   d.expect.Estimate(s.g.Name(a.j.Target), float64(a.j.Est)),
			Inputs:    ins[start:len(ins):len(ins)],
		})
		return true, nil
	})
	c.popped, c.cands, c.ins = popped, cands, ins
	return err
}

// dcDecide asks the queue's chooser for one of c's candidates (there is
// at least one), given the placeholders expected to ask soon, by
// dispatch.Choose: with staging, a choice whose inputs are not here yet is
// staged and the placeholder gets one whose inputs are, or waits.
func (s *Store) dcDecide(c *dcRound) (policy.Decision, error) {
	d := &s.data
	q, p, cur, to := c.q, c.p, c.cur, c.to
	fut := d.arr.Predict(s.secs(c.now), p.req.Placeholder, d.fut[:0])
	// Placeholders parked now are asking now, whatever their history.
	for _, o := range s.parked {
		if o != p && o.req.Placeholder != p.req.Placeholder {
			at, err := s.phSite(o.req.Placeholder)
			if err != nil {
				return policy.Decision{}, err
			}
			fut = append(fut, policy.Arrival{Site: at, In: 0})
		}
	}
	d.fut = fut
	var ch policy.Chooser
	if q.pol.NewDC != nil {
		ch = q.pol.NewDC(s.link(cur).Latency)
	} else {
		ch = q.pol.NewChooser()
	}
	choice, err := dispatch.Choose(ch, policy.Snapshot{Current: cur, Future: fut, Net: network{s}}, c.cands, c, dispatch.Patience(q.pol))
	if choice.Staged {
		s.logStaging(choice.Staging, to, fut)
	}
	return choice.Decision, err
}
