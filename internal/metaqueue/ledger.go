package metaqueue

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/protocol"
)

// Economics (seed 002, docs/seed002.md): what attempts cost, what each
// queue has spent and reserved, and the caps the deadline-and-budget
// planner (econ.Provisioner, followed by the site manager) puts on how
// many of a queue's jobs each site runs at once.
//
// A queue is costed when it has a deadline or a budget; any attempt at a
// priced site is charged. Spending is committed with the attempt's end, in
// the same transaction (table charges), so it survives a crash exactly.
type econState struct {
	price map[string]float64 // stored site -> per core-hour
	spent map[int32]map[string]float64
	// reserved is what a queue's executing attempts may cost: each
	// reserves its site's price times its bound (the queue's ceiling, which
	// kills a job that runs longer, else its expected runtime), released
	// when it ends and the real cost is charged.
	reserved map[int32]float64
	// priced counts a queue's executing attempts at priced sites.
	priced map[int32]int
	// ran is each queue's succeeded attempts' runtimes per site: the
	// planner's measured rates.
	ran map[int32]map[string]*runtimes
	// free is the part of ran not in charges (succeeded attempts of a
	// queue the LP caps, uncosted, at an unpriced site): kept in
	// stage_runtimes, so a restarted CLS plans from it too.
	free map[int32]map[string]*runtimes
	// wrote is the bytes each queue's Done jobs wrote (their outputs'
	// reported sizes, else declared ones), kept in stage_output: what a
	// stage sends the next (LP provisioning).
	wrote map[int32]*wrote
	// dirtyFree and dirtyWrote are the rows of free and wrote changed in
	// the batch's transaction, written before it commits (flushMeasures).
	dirtyFree  map[ranKey]bool
	dirtyWrote map[int32]bool
	// caps and execAt: a queue's jobs each site may run at once, as the
	// planner last said (a site absent: no cap), and runs now.
	caps         map[int32]map[string]int
	execAt       map[int32]map[string]int
	unfinishable map[int32]int
	// sites are the sites a job could run at: stored ones and those
	// placeholders registered from (the deadline check's candidates).
	sites map[string]bool
	// infeasible are the ready jobs no site can end by their queue's
	// deadline, with why (checkInfeasible); infeasibleN counts them per
	// queue. checkedAt and checkedGen are when they were last checked
	// and infeasibleGen what the check depends on beyond the clock.
	// dying are killed copies whose placeholder has not said they
	// stopped: each keeps its reservation until it does (or until, a
	// lease after the kill), since it runs on until the placeholder's
	// next heartbeat and that time is charged too (extendCharge).
	dying       map[protocol.JobRef]dyingRun
	infeasible  map[int64]string
	infeasibleN map[int32]int
	// parked are ready jobs taken off their queue's heap while infeasible
	// (pickFrom): left there, more than a window of them at its head hid
	// the jobs behind that could end in time. A check that finds one
	// feasible again puts it back (unpark).
	parked map[int64]parkedReady
	// overBudget counts per queue the jobs not started that its budget
	// left cannot pay for, with why (checkInfeasible).
	overBudget                map[int32]int
	overBudgetWhy             map[int32]string
	checkedAt                 time.Time
	checkTook                 time.Duration // the last check's own time
	checkedGen, infeasibleGen uint64
}

func (e *econState) reset() {
	*e = econState{price: map[string]float64{}, spent: map[int32]map[string]float64{}, reserved: map[int32]float64{},
		priced: map[int32]int{}, ran: map[int32]map[string]*runtimes{}, free: map[int32]map[string]*runtimes{}, wrote: map[int32]*wrote{},
		dirtyFree: map[ranKey]bool{}, dirtyWrote: map[int32]bool{}, caps: map[int32]map[string]int{},
		execAt: map[int32]map[string]int{}, unfinishable: map[int32]int{}, sites: map[string]bool{},
		infeasible: map[int64]string{}, parked: map[int64]parkedReady{}, infeasibleN: map[int32]int{}, overBudget: map[int32]int{}, overBudgetWhy: map[int32]string{}, infeasibleGen: 1, dying: map[protocol.JobRef]dyingRun{}}
}

// costed says whether a queue's attempts are charged wherever they run.
func (q *queue) costed() bool { return q.Budget > 0 || q.Deadline > 0 }

func (e *econState) spentBy(q int32) float64 {
	t := 0.0
	for _, v := range e.spent[q] {
		t += v
	}
	return t
}

// loadEcon reads the stored sites' prices and what every queue spent.
func (s *Store) loadEcon(ctx context.Context) error {
	s.econ.reset()
	if err := s.eachSiteSpec(ctx, func(name string, spec protocol.SiteSpec) {
		s.econ.sites[name] = true
		if spec.Price > 0 {
			s.econ.price[name] = spec.Price
		}
	}); err != nil {
		return err
	}
	rows, err := s.w.QueryContext(ctx, `SELECT queue_id, site, sum(cost), coalesce(sum(CASE WHEN ok THEN seconds END), 0), sum(ok)
		FROM charges GROUP BY queue_id, site`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var q int32
		var site string
		var cost, secs float64
		var n int
		if err := rows.Scan(&q, &site, &cost, &secs, &n); err != nil {
			rows.Close()
			return err
		}
		s.addSpent(q, site, cost)
		if n > 0 {
			s.ranAt(q, site).secs += secs
			s.ranAt(q, site).n += n
		}
	}
	if err := closeRows(rows); err != nil {
		return err
	}
	return s.loadMeasures(ctx)
}

// ranKey is a queue at a site.
type ranKey struct {
	queue int32
	site  string
}

// loadMeasures reads what LP provisioning measured beyond charges: the
// uncharged runtimes (stage_runtimes) and the bytes written per queue
// (stage_output). A row per queue and site: nothing to speak of at load.
func (s *Store) loadMeasures(ctx context.Context) error {
	rows, err := s.w.QueryContext(ctx, "SELECT queue_id, site, seconds, runs FROM stage_runtimes")
	if err != nil {
		return err
	}
	for rows.Next() {
		var q int32
		var site string
		var r runtimes
		if err := rows.Scan(&q, &site, &r.secs, &r.n); err != nil {
			rows.Close()
			return err
		}
		*s.freeAt(q, site) = r
		s.ranAt(q, site).secs += r.secs
		s.ranAt(q, site).n += r.n
	}
	if err := closeRows(rows); err != nil {
		return err
	}
	rows, err = s.w.QueryContext(ctx, "SELECT queue_id, bytes, jobs FROM stage_output")
	if err != nil {
		return err
	}
	for rows.Next() {
		var q int32
		w := &wrote{}
		if err := rows.Scan(&q, &w.bytes, &w.n); err != nil {
			rows.Close()
			return err
		}
		s.econ.wrote[q] = w
	}
	return closeRows(rows)
}

// flushMeasures writes the rows of stage_runtimes and stage_output the
// batch changed, in its transaction (before it commits): a row per queue
// (and site) however many of its jobs ended.
func (s *Store) flushMeasures() error {
	e := &s.econ
	if len(e.dirtyFree) == 0 && len(e.dirtyWrote) == 0 {
		return nil
	}
	if err := s.begin(); err != nil {
		return err
	}
	for k := range e.dirtyFree {
		r := s.freeAt(k.queue, k.site)
		if _, err := s.w.ExecContext(context.Background(), "INSERT OR REPLACE INTO stage_runtimes (queue_id, site, seconds, runs) VALUES (?, ?, ?, ?)",
			k.queue, k.site, r.secs, r.n); err != nil {
			return fatalError{err}
		}
	}
	for q := range e.dirtyWrote {
		w := e.wrote[q]
		if _, err := s.w.ExecContext(context.Background(), "INSERT OR REPLACE INTO stage_output (queue_id, bytes, jobs) VALUES (?, ?, ?)",
			q, w.bytes, w.n); err != nil {
			return fatalError{err}
		}
	}
	clear(e.dirtyFree)
	clear(e.dirtyWrote)
	return nil
}

func (s *Store) addSpent(q int32, site string, cost float64) {
	m := s.econ.spent[q]
	if m == nil {
		m = map[string]float64{}
		s.econ.spent[q] = m
	}
	m[site] += cost
}

func (s *Store) ranAt(q int32, site string) *runtimes { return runtimesAt(s.econ.ran, q, site) }

func (s *Store) freeAt(q int32, site string) *runtimes { return runtimesAt(s.econ.free, q, site) }

func runtimesAt(all map[int32]map[string]*runtimes, q int32, site string) *runtimes {
	m := all[q]
	if m == nil {
		m = map[string]*runtimes{}
		all[q] = m
	}
	r := m[site]
	if r == nil {
		r = &runtimes{}
		m[site] = r
	}
	return r
}

// econCosting says whether any queue is costed or any site priced: only
// then does dispatch need the asking placeholder's site.
func (s *Store) econCosting() bool {
	if len(s.econ.price) > 0 || len(s.econ.caps) > 0 {
		return true
	}
	for _, q := range s.qlist {
		if q.costed() {
			return true
		}
	}
	return false
}

// siteName is placeholder ph's site.
func (s *Store) siteName(ph int64) (string, error) {
	at, err := s.phSite(ph)
	if err != nil {
		return "", err
	}
	return s.data.places[at].site, nil
}

// knowSite adds a site jobs may run at to the deadline check's candidates.
func (s *Store) knowSite(site string) {
	if site != "" && !s.econ.sites[site] {
		s.econ.sites[site] = true
		s.econ.infeasibleGen++
	}
}

// econStart records that ru (job j of q) started at site.
func (s *Store) econStart(q *queue, j dag.Node, ru *run, site string) {
	s.knowSite(site)
	_, capped := s.econ.caps[q.id] // an LP stage's caps hold uncosted queues too
	if !q.costed() && !capped && s.econ.price[site] == 0 {
		return
	}
	ru.site, ru.queue, ru.costed = site, q.id, true
	if q.costed() || capped {
		s.count(ru)
	}
	if q.costed() {
		if s.econ.price[site] > 0 {
			ru.reserve = s.reserveFor(q, j, site)
			s.econ.reserved[q.id] += ru.reserve
			s.econ.priced[q.id]++
		}
	}
}

// count adds ru to what its queue runs at its site.
func (s *Store) count(ru *run) {
	m := s.econ.execAt[ru.queue]
	if m == nil {
		m = map[string]int{}
		s.econ.execAt[ru.queue] = m
	}
	m[ru.site]++
	ru.counted = true
}

// countRunning counts the attempts of queue q running now that are not
// counted yet (the queue is capped for the first time: they started
// while nothing held it, or before a restart), so its caps hold from the
// first plan on.
func (s *Store) countRunning(q *queue) error {
	add := func(id int64, ru *run) error {
		if ru.counted {
			return nil
		}
		if j, ok := s.g.Node(id); !ok || j.Queue != q.id {
			return nil
		}
		if ru.site == "" {
			site, err := s.siteName(ru.placeholder)
			if err != nil {
				return err
			}
			ru.site = site
		}
		ru.queue = q.id
		s.count(ru)
		return nil
	}
	for id, ru := range s.running {
		if err := add(id, ru); err != nil {
			return err
		}
	}
	for id, cs := range s.copyRuns {
		for _, ru := range cs {
			if err := add(id, ru); err != nil {
				return err
			}
		}
	}
	return nil
}

// econStop releases what ru reserved.
func (s *Store) econStop(ru *run) {
	if ru.counted {
		if m := s.econ.execAt[ru.queue]; m[ru.site] > 0 {
			m[ru.site]--
		}
		ru.counted = false
	}
	if !ru.costed {
		return
	}
	if s.econ.price[ru.site] > 0 || ru.reserve > 0 {
		s.econ.reserved[ru.queue] = max(s.econ.reserved[ru.queue]-ru.reserve, 0)
		if s.econ.priced[ru.queue] > 0 {
			s.econ.priced[ru.queue]--
		}
	}
	ru.costed = false
}

// charge records what an attempt of job id that ran from started to
// finished cost, in the batch's transaction. Called before stopRun.
func (s *Store) charge(id int64, q *queue, ru *run, started, finished time.Time, ok bool) error {
	site := ru.site
	if site == "" {
		var err error
		if site, err = s.siteName(ru.placeholder); err != nil {
			return err
		}
	}
	price := s.econ.price[site]
	secs := max(finished.Sub(started).Seconds(), 0)
	if price == 0 && !q.costed() {
		if ok && ru.counted {
			// Nothing to charge, but a queue the LP caps (an uncosted
			// stage) is planned from its measured rates all the same,
			// kept in stage_runtimes (charges has none of them).
			r := s.ranAt(q.id, site)
			r.secs += secs
			r.n++
			f := s.freeAt(q.id, site)
			f.secs += secs
			f.n++
			s.econ.dirtyFree[ranKey{q.id, site}] = true
		}
		return nil
	}
	cost := price * secs / 3600
	if _, err := s.w.ExecContext(context.Background(), `INSERT OR REPLACE INTO charges (job_id, attempt, queue_id, site, seconds, price, cost, ok)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, id, ru.attempt, q.id, site, secs, price, cost, ok); err != nil {
		return fatalError{err}
	}
	s.addSpent(q.id, site, cost)
	if ok {
		r := s.ranAt(q.id, site)
		r.secs += secs
		r.n++
	}
	return nil
}

type dyingRun struct {
	ru    *run
	until time.Time
}

// econDying keeps killed copy ru's reservation until its placeholder
// reports it stopped (econDied), or a lease from now.
func (s *Store) econDying(ref protocol.JobRef, ru *run) {
	if !ru.costed {
		s.econStop(ru) // counted only (a capped queue): nothing to charge
		return
	}
	s.econ.dying[ref] = dyingRun{ru, s.now().Add(s.opt.Lease)}
	// What it was charged at the kill is spent: no longer reserved.
	s.unreserve(ru, s.econ.price[ru.site]*max(s.now().Sub(ru.started).Seconds(), 0)/3600)
}

// unreserve moves cost of ru's reservation to spent (charged meanwhile).
func (s *Store) unreserve(ru *run, cost float64) {
	d := min(max(cost, 0), ru.reserve)
	ru.reserve -= d
	s.econ.reserved[ru.queue] = max(s.econ.reserved[ru.queue]-d, 0)
}

// econDied releases a killed copy's reservation.
func (s *Store) econDied(ref protocol.JobRef) {
	if d, ok := s.econ.dying[ref]; ok {
		s.econStop(d.ru)
		delete(s.econ.dying, ref)
	}
}

// expireDying releases the reservations of killed copies never reported.
func (s *Store) expireDying(now time.Time) {
	for ref, d := range s.econ.dying {
		if now.After(d.until) {
			s.econStop(d.ru)
			delete(s.econ.dying, ref)
		}
	}
}

// extendCharge charges a killed copy up to when its placeholder says it
// ended (never past now, nor past a lease after the kill): it was
// charged up to the kill, and ran on until the placeholder's next
// heartbeat killed it. Its reservation covered that meanwhile.
func (s *Store) extendCharge(id int64, attempt int, finished time.Time) error {
	if finished.IsZero() {
		return nil
	}
	finished = minTime(finished, s.now())
	if d, ok := s.econ.dying[protocol.JobRef{ID: id, Attempt: attempt}]; ok {
		finished = minTime(finished, d.until)
	}
	var started int64
	var secs, price float64
	var q int32
	var site string
	err := s.w.QueryRowContext(context.Background(), `SELECT a.started, c.seconds, c.price, c.queue_id, c.site FROM charges c
		JOIN attempts a ON a.job_id = c.job_id AND a.attempt = c.attempt WHERE c.job_id = ? AND c.attempt = ?`, id, attempt).
		Scan(&started, &secs, &price, &q, &site)
	if errors.Is(err, sql.ErrNoRows) {
		return nil // not charged: neither priced nor costed
	}
	if err != nil {
		return fatalError{err}
	}
	// Charged up to the kill (secs from its start): a lease past it is the
	// most it ran on, also when the report comes after its dying entry
	// expired.
	more := min(finished.Sub(time.UnixMicro(started)).Seconds(), secs+s.opt.Lease.Seconds())
	if more <= secs {
		return nil
	}
	if _, err := s.w.ExecContext(context.Background(), "UPDATE charges SET seconds = ?, cost = ? WHERE job_id = ? AND attempt = ?",
		more, price*more/3600, id, attempt); err != nil {
		return fatalError{err}
	}
	s.addSpent(q, site, price*(more-secs)/3600)
	if d, ok := s.econ.dying[protocol.JobRef{ID: id, Attempt: attempt}]; ok {
		s.unreserve(d.ru, price*(more-secs)/3600)
	}
	return nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// setPrice is what a stored site's price became (0: free or gone).
func (s *Store) setPrice(site string, price float64) {
	s.knowSite(site)
	if price > 0 {
		s.econ.price[site] = price
	} else {
		delete(s.econ.price, site)
	}
}

// econInfo fills a queue's spending for listings.
func (s *Store) econInfo(q *queue) protocol.QueueInfo {
	info := q.QueueInfo
	if m := s.econ.spent[q.id]; len(m) > 0 {
		info.SpentBySite = make(map[string]float64, len(m))
		for site, v := range m {
			info.SpentBySite[site] = v
			info.Spent += v
		}
	}
	info.Reserved = s.econ.reserved[q.id]
	info.Unfinishable = s.econ.unfinishable[q.id]
	info.Infeasible = s.econ.infeasibleN[q.id]
	info.OverBudget = s.econ.overBudget[q.id]
	return info
}

// runtimes adds up attempts' seconds.
type runtimes struct {
	secs float64
	n    int
}

type wrote struct {
	bytes float64
	n     int
}

// noteWrote counts bytes a Done job of queue q wrote (jobDone: the
// sizes its placeholder reported, else those it declared).
func (s *Store) noteWrote(q int32, bytes float64) {
	w := s.econ.wrote[q]
	if w == nil {
		w = &wrote{}
		s.econ.wrote[q] = w
	}
	w.bytes += bytes
	w.n++
	s.econ.dirtyWrote[q] = true
}
