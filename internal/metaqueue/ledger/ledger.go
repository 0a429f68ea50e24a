// Package ledger keeps the metaqueue's accounts: what attempts cost, what
// each queue has spent and reserved, its budget and deadline rules at
// dispatch, the caps the provisioning planners put on how many of a
// queue's jobs each site runs, and the periodic check that parks the jobs
// no site can finish in time or pay for (the economy-based grid of seed
// 002, docs/policies/dbc.md).
//
// A queue is costed when it has a deadline or a budget; any attempt at a
// priced site is charged. Spending is committed with the attempt's end, in
// the core's write transaction (table charges), so it survives a crash
// exactly.
//
// The Ledger is owned by the metaqueue's core goroutine, which calls it
// where things happen (an attempt started, charged, stopped or killed; a
// placeholder gone; the tick; load) and gives it every fact it needs as
// arguments: queue settings as Queue values, the core's clock, its runtime
// estimates (Estimator) and, for the periodic check, a read-only view of
// the job graph.
package ledger

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/sqlfile"
	"github.com/mq-hpc/mq/protocol"
)

//go:embed ledger.sql
var ledgerSQL string

var queries = sqlfile.MustParse("ledger.sql", ledgerSQL)

// Execer is the core's writer connection, or its open transaction:
// *sql.Conn and *sql.Tx both satisfy it.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Queue is a queue's settings as the ledger reads them.
type Queue struct {
	ID       int32
	Name     string
	Budget   float64 // what its jobs may cost; 0: none
	Deadline float64 // when they should have ended, Unix seconds; 0: none
	Ceiling  float64 // longest job allowed, seconds; 0: none
}

// Costed says whether a queue's attempts are charged wherever they run.
func (q Queue) Costed() bool { return q.Budget > 0 || q.Deadline > 0 }

// deadline is q's deadline as a time (zero: none).
func (q Queue) deadline() time.Time {
	if q.Deadline <= 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(q.Deadline*1e9))
}

// Estimator is the core's estimate of how long job j runs, beyond what
// the ledger measured per site: declared, or learned for its target; 0:
// unknown.
type Estimator func(j dag.Node) float64

// Ledger is the accounts of one metaqueue.
type Ledger struct {
	log   *slog.Logger
	price map[string]float64 // stored site -> per core-hour
	spent map[int32]map[string]float64
	// reserved is what a queue's executing attempts may cost: each
	// reserves its site's price times its bound (the queue's ceiling, which
	// kills a job that runs longer, else its expected runtime), released
	// when it ends and the real cost is charged.
	reserved map[int32]float64
	// priced counts a queue's executing attempts at priced sites.
	priced map[int32]int
	// runs are the executing attempts the ledger follows: costed ones
	// and those counted under a planner's caps. An attempt dispatch
	// reserves for before its number is known is under attempt 0 until
	// Numbered.
	runs map[protocol.JobRef]*attempt
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
	// the batch's transaction, written before it commits (Flush).
	dirtyFree  map[ranKey]bool
	dirtyWrote map[int32]bool
	// caps and execAt: a queue's jobs each site may run at once, as the
	// planner last said (a site absent: no cap), and runs now.
	caps         map[int32]map[string]int
	execAt       map[int32]map[string]int
	unfinishable map[int32]int
	// sites are the sites a job could run at: stored ones and those
	// placeholders registered from, until none live holds them
	// (siteHolders; the deadline check's candidates); siteNames the same,
	// sorted (candidates).
	sites     map[string]bool
	siteNames []string
	siteHolders
	// dying are killed copies whose placeholder has not said they
	// stopped: each keeps its reservation until it does (or until, a
	// lease after the kill), since it runs on until the placeholder's
	// next heartbeat and that time is charged too (ExtendCharge).
	dying map[protocol.JobRef]dyingRun
	check checkState
	// stages caches StageOrder until a job or target is added.
	stages stageCache
}

// attempt is what the ledger keeps of an executing attempt: the site and
// queue it is costed at, and what it reserves of the queue's budget.
type attempt struct {
	site    string
	queue   int32
	reserve float64
	costed  bool
	// cores is what the attempt holds (at least 1): a site's price is
	// per core-hour, so an attempt of 8 cores costs 8 times one of 1.
	cores float64
	// counted: it is in execAt (its queue is costed or capped), so it
	// leaves it when it stops.
	counted bool
}

type dyingRun struct {
	placeholder int64
	until       time.Time
}

// runtimes adds up attempts' seconds.
type runtimes struct {
	secs float64
	n    int
}

func (r *runtimes) mean() float64 { return r.secs / float64(r.n) }

type wrote struct {
	bytes float64
	n     int
}

// ranKey is a queue at a site.
type ranKey struct {
	queue int32
	site  string
}

// New returns an empty ledger that logs to log.
func New(log *slog.Logger) *Ledger {
	l := &Ledger{}
	l.Reset(log)
	return l
}

// Reset empties the ledger (before a load). A zero Ledger holds no
// accounts and refuses nothing, but must be Reset before it records any.
func (l *Ledger) Reset(log *slog.Logger) {
	*l = Ledger{log: log, price: map[string]float64{}, spent: map[int32]map[string]float64{}, reserved: map[int32]float64{},
		priced: map[int32]int{}, runs: map[protocol.JobRef]*attempt{}, ran: map[int32]map[string]*runtimes{},
		free: map[int32]map[string]*runtimes{}, wrote: map[int32]*wrote{},
		dirtyFree: map[ranKey]bool{}, dirtyWrote: map[int32]bool{}, caps: map[int32]map[string]int{},
		execAt: map[int32]map[string]int{}, unfinishable: map[int32]int{}, sites: map[string]bool{},
		dying: map[protocol.JobRef]dyingRun{}, check: newCheckState()}
}

// Load reads what every queue spent and what LP provisioning measured
// beyond charges: the uncharged runtimes (stage_runtimes) and the bytes
// written per queue (stage_output). A row per queue and site: nothing to
// speak of at load. The sites' prices come first (SetPrice).
func (l *Ledger) Load(ctx context.Context, x Execer) error {
	err := eachRow(ctx, x, "SpentByQueueSite", func(rows *sql.Rows) error {
		var q int32
		var site string
		var cost, secs float64
		var n int
		if err := rows.Scan(&q, &site, &cost, &secs, &n); err != nil {
			return err
		}
		l.addSpent(q, site, cost)
		if n > 0 {
			r := l.ranAt(q, site)
			r.secs += secs
			r.n += n
		}
		return nil
	})
	if err != nil {
		return err
	}
	err = eachRow(ctx, x, "StageRuntimes", func(rows *sql.Rows) error {
		var q int32
		var site string
		var r runtimes
		if err := rows.Scan(&q, &site, &r.secs, &r.n); err != nil {
			return err
		}
		*l.freeAt(q, site) = r
		all := l.ranAt(q, site)
		all.secs += r.secs
		all.n += r.n
		return nil
	})
	if err != nil {
		return err
	}
	return eachRow(ctx, x, "StageOutput", func(rows *sql.Rows) error {
		var q int32
		w := &wrote{}
		if err := rows.Scan(&q, &w.bytes, &w.n); err != nil {
			return err
		}
		l.wrote[q] = w
		return nil
	})
}

// eachRow runs query name and calls f on each row.
func eachRow(ctx context.Context, x Execer, name string, f func(*sql.Rows) error) error {
	rows, err := x.QueryContext(ctx, queries.Get(name))
	if err != nil {
		return fmt.Errorf("ledger: %s: %w", name, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := f(rows); err != nil {
			return fmt.Errorf("ledger: %s: %w", name, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("ledger: %s: %w", name, err)
	}
	return rows.Close()
}

// Dirty says whether the batch measured anything Flush must write.
func (l *Ledger) Dirty() bool { return len(l.dirtyFree) > 0 || len(l.dirtyWrote) > 0 }

// Flush writes the rows of stage_runtimes and stage_output the batch
// changed, in its transaction (before it commits): a row per queue (and
// site) however many of its jobs ended.
func (l *Ledger) Flush(ctx context.Context, x Execer) error {
	for k := range l.dirtyFree {
		r := l.freeAt(k.queue, k.site)
		if _, err := x.ExecContext(ctx, queries.Get("SaveStageRuntimes"), k.queue, k.site, r.secs, r.n); err != nil {
			return err
		}
	}
	for q := range l.dirtyWrote {
		w := l.wrote[q]
		if _, err := x.ExecContext(ctx, queries.Get("SaveStageOutput"), q, w.bytes, w.n); err != nil {
			return err
		}
	}
	clear(l.dirtyFree)
	clear(l.dirtyWrote)
	return nil
}

func (l *Ledger) addSpent(q int32, site string, cost float64) {
	m := l.spent[q]
	if m == nil {
		m = map[string]float64{}
		l.spent[q] = m
	}
	m[site] += cost
}

func (l *Ledger) spentBy(q int32) float64 {
	t := 0.0
	for _, v := range l.spent[q] {
		t += v
	}
	return t
}

func (l *Ledger) ranAt(q int32, site string) *runtimes { return runtimesAt(l.ran, q, site) }

func (l *Ledger) freeAt(q int32, site string) *runtimes { return runtimesAt(l.free, q, site) }

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

// Costing says whether any site is priced or any queue capped: then, as
// when a queue is costed, dispatch needs the asking placeholder's site.
func (l *Ledger) Costing() bool { return len(l.price) > 0 || len(l.caps) > 0 }

// Priced says whether any site has a price.
func (l *Ledger) Priced() bool { return len(l.price) > 0 }

// KnowSite adds a site jobs may run at to the deadline check's candidates.
func (l *Ledger) KnowSite(site string) {
	if site != "" && !l.sites[site] {
		l.sites[site] = true
		i, _ := slices.BinarySearch(l.siteNames, site)
		l.siteNames = slices.Insert(l.siteNames, i, site)
		l.check.gen++
	}
}

// SetPrice is what a stored site's price became (0: free or gone).
func (l *Ledger) SetPrice(site string, price float64) {
	l.KnowSite(site)
	if l.stored == nil {
		l.stored = map[string]bool{}
	}
	l.stored[site] = true
	if price > 0 {
		l.price[site] = price
	} else {
		delete(l.price, site)
	}
}

// RemoveSite forgets a stored site: its price, and it as a candidate.
func (l *Ledger) RemoveSite(site string) {
	l.SetPrice(site, 0)
	delete(l.stored, site)
	delete(l.sites, site)
	if i, ok := slices.BinarySearch(l.siteNames, site); ok {
		l.siteNames = slices.Delete(l.siteNames, i, i+1)
	}
	l.check.gen++
}

// Changed says a queue's deadline or budget changed: the next tick checks
// again at once.
func (l *Ledger) Changed() { l.check.gen++ }

// Start records that attempt ref of job j of q, holding cores (0 means
// 1), started at site (dispatch, or load for attempts that were
// executing).
func (l *Ledger) Start(ref protocol.JobRef, q Queue, j dag.Node, site string, est Estimator, cores int) {
	l.KnowSite(site)
	_, capped := l.caps[q.ID] // an LP stage's caps hold uncosted queues too
	if !q.Costed() && !capped && l.price[site] == 0 {
		return
	}
	a := &attempt{site: site, queue: q.ID, costed: true, cores: float64(max(cores, 1))}
	l.runs[ref] = a
	if q.Costed() || capped {
		l.count(a)
	}
	if q.Costed() && l.price[site] > 0 {
		a.reserve = l.reserveFor(q, j, site, est) * a.cores
		l.reserved[q.ID] += a.reserve
		l.priced[q.ID]++
	}
}

// Numbered moves what job id's attempt reserved when dispatch picked it
// (Start under attempt 0) to its number, once claimed.
func (l *Ledger) Numbered(id int64, attempt int) {
	if a, ok := l.runs[protocol.JobRef{ID: id}]; ok {
		delete(l.runs, protocol.JobRef{ID: id})
		l.runs[protocol.JobRef{ID: id, Attempt: attempt}] = a
	}
}

// count adds a to what its queue runs at its site.
func (l *Ledger) count(a *attempt) {
	m := l.execAt[a.queue]
	if m == nil {
		m = map[string]int{}
		l.execAt[a.queue] = m
	}
	m[a.site]++
	a.counted = true
}

// SiteOf is the site attempt ref is costed or counted at ("": not known
// to the ledger).
func (l *Ledger) SiteOf(ref protocol.JobRef) string {
	if a := l.runs[ref]; a != nil {
		return a.site
	}
	return ""
}

// Counted says whether attempt ref is counted under its queue's caps.
func (l *Ledger) Counted(ref protocol.JobRef) bool {
	a := l.runs[ref]
	return a != nil && a.counted
}

// Count adds attempt ref, running at site, to what queue q runs there
// (q is capped for the first time: it started while nothing held it, or
// before a restart), so its caps hold from the first plan on.
func (l *Ledger) Count(ref protocol.JobRef, q int32, site string) {
	a := l.runs[ref]
	if a == nil {
		a = &attempt{}
		l.runs[ref] = a
	}
	if a.counted {
		return
	}
	a.site, a.queue = site, q
	l.count(a)
}

// Stop releases what attempt ref reserved, and its place under its
// queue's caps: it no longer runs.
func (l *Ledger) Stop(ref protocol.JobRef) {
	a := l.runs[ref]
	if a == nil {
		return
	}
	delete(l.runs, ref)
	if a.counted {
		if m := l.execAt[a.queue]; m[a.site] > 0 {
			m[a.site]--
		}
	}
	if !a.costed {
		return
	}
	if l.price[a.site] > 0 || a.reserve > 0 {
		l.reserved[a.queue] = max(l.reserved[a.queue]-a.reserve, 0)
		if l.priced[a.queue] > 0 {
			l.priced[a.queue]--
		}
	}
}

// Charge records what attempt ref of q that ran at site from started to
// finished cost, in the core's transaction. Called before Stop.
func (l *Ledger) Charge(ctx context.Context, x Execer, ref protocol.JobRef, q Queue, site string, started, finished time.Time, ok bool) error {
	price := l.price[site]
	if a := l.runs[ref]; a != nil && a.cores > 1 {
		// The charge's price is the attempt's rate: the site's per
		// core-hour times its cores (ExtendCharge reads it back).
		price *= a.cores
	}
	secs := max(finished.Sub(started).Seconds(), 0)
	if price == 0 && !q.Costed() {
		if ok && l.Counted(ref) {
			// Nothing to charge, but a queue the LP caps (an uncosted
			// stage) is planned from its measured rates all the same,
			// kept in stage_runtimes (charges has none of them).
			r := l.ranAt(q.ID, site)
			r.secs += secs
			r.n++
			f := l.freeAt(q.ID, site)
			f.secs += secs
			f.n++
			l.dirtyFree[ranKey{q.ID, site}] = true
		}
		return nil
	}
	cost := price * secs / 3600
	if _, err := x.ExecContext(ctx, queries.Get("Charge"), ref.ID, ref.Attempt, q.ID, site, secs, price, cost, ok); err != nil {
		return fmt.Errorf("ledger: charge job %d attempt %d: %w", ref.ID, ref.Attempt, err)
	}
	l.addSpent(q.ID, site, cost)
	if ok {
		r := l.ranAt(q.ID, site)
		r.secs += secs
		r.n++
	}
	return nil
}

// Dying keeps killed attempt ref's reservation (it started at started,
// on placeholder ph) until its placeholder reports it stopped (Died), or
// until until: it runs on to the placeholder's next heartbeat.
func (l *Ledger) Dying(ref protocol.JobRef, ph int64, started, now, until time.Time) {
	a := l.runs[ref]
	if a == nil || !a.costed {
		l.Stop(ref) // counted only (a capped queue): nothing to charge
		return
	}
	l.dying[ref] = dyingRun{ph, until}
	// What it was charged at the kill is spent: no longer reserved.
	l.unreserve(a, l.price[a.site]*max(a.cores, 1)*max(now.Sub(started).Seconds(), 0)/3600)
}

// unreserve moves cost of a's reservation to spent (charged meanwhile).
func (l *Ledger) unreserve(a *attempt, cost float64) {
	d := min(max(cost, 0), a.reserve)
	a.reserve -= d
	l.reserved[a.queue] = max(l.reserved[a.queue]-d, 0)
}

// Died releases a killed attempt's reservation: its placeholder said it
// stopped.
func (l *Ledger) Died(ref protocol.JobRef) {
	if _, ok := l.dying[ref]; ok {
		l.Stop(ref)
		delete(l.dying, ref)
	}
}

// Spent ends attempt ref, which ran beside others, at now: its
// reservation is kept (Dying) until its late report or a lease from now
// when kept, else released.
func (l *Ledger) Spent(ref protocol.JobRef, ph int64, started, now time.Time, lease time.Duration, kept bool) {
	if kept {
		l.Dying(ref, ph, started, now, now.Add(lease))
		return
	}
	l.Stop(ref)
}

// LateEnd is a killed attempt's late report: charged up to when its
// placeholder says it ended (ExtendCharge), its reservation released
// (Died) whether or not the charge is written.
func (l *Ledger) LateEnd(ctx context.Context, x Execer, ref protocol.JobRef, finished, now time.Time, lease time.Duration) error {
	err := l.ExtendCharge(ctx, x, ref, finished, now, lease)
	l.Died(ref)
	return err
}

// PlaceholderGone releases the reservations of the killed attempts
// placeholder ph ran: they stopped with it.
func (l *Ledger) PlaceholderGone(ph int64) {
	for ref, d := range l.dying {
		if d.placeholder == ph {
			l.Died(ref)
		}
	}
}

// Expire releases the reservations of killed attempts never reported.
func (l *Ledger) Expire(now time.Time) {
	for ref, d := range l.dying {
		if now.After(d.until) {
			l.Stop(ref)
			delete(l.dying, ref)
		}
	}
}

// ExtendCharge charges killed attempt ref up to when its placeholder says
// it ended (never past now, nor past lease after what it was charged): it
// was charged up to the kill, and ran on until the placeholder's next
// heartbeat killed it. Its reservation covered that meanwhile.
func (l *Ledger) ExtendCharge(ctx context.Context, x Execer, ref protocol.JobRef, finished, now time.Time, lease time.Duration) error {
	if finished.IsZero() {
		return nil
	}
	finished = minTime(finished, now)
	d, dying := l.dying[ref]
	if dying {
		finished = minTime(finished, d.until)
	}
	var started int64
	var secs, price float64
	var q int32
	var site string
	err := x.QueryRowContext(ctx, queries.Get("ChargeOf"), ref.ID, ref.Attempt).Scan(&started, &secs, &price, &q, &site)
	if errors.Is(err, sql.ErrNoRows) {
		return nil // not charged: neither priced nor costed
	}
	if err != nil {
		return fmt.Errorf("ledger: charge of job %d attempt %d: %w", ref.ID, ref.Attempt, err)
	}
	// Charged up to the kill (secs from its start): a lease past it is the
	// most it ran on, also when the report comes after its dying entry
	// expired.
	more := min(finished.Sub(time.UnixMicro(started)).Seconds(), secs+lease.Seconds())
	if more <= secs {
		return nil
	}
	if _, err := x.ExecContext(ctx, queries.Get("ExtendCharge"), more, price*more/3600, ref.ID, ref.Attempt); err != nil {
		return fmt.Errorf("ledger: extend charge of job %d attempt %d: %w", ref.ID, ref.Attempt, err)
	}
	l.addSpent(q, site, price*(more-secs)/3600)
	if a := l.runs[ref]; dying && a != nil {
		l.unreserve(a, price*(more-secs)/3600)
	}
	return nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// Wrote counts bytes a Done job of queue q wrote (the sizes its
// placeholder reported, else those it declared).
func (l *Ledger) Wrote(q int32, bytes float64) {
	w := l.wrote[q]
	if w == nil {
		w = &wrote{}
		l.wrote[q] = w
	}
	w.bytes += bytes
	w.n++
	l.dirtyWrote[q] = true
}

// Fill sets queue q's spending in info, for listings.
func (l *Ledger) Fill(info *protocol.QueueInfo, q int32) {
	if m := l.spent[q]; len(m) > 0 {
		info.SpentBySite = make(map[string]float64, len(m))
		for site, v := range m {
			info.SpentBySite[site] = v
			info.Spent += v
		}
	}
	info.Reserved = l.reserved[q]
	info.Unfinishable = l.unfinishable[q]
	info.Infeasible = l.check.infeasibleN[q]
	info.OverBudget = l.check.overBudget[q]
}

// EachSpent calls f with what each queue spent at each site.
func (l *Ledger) EachSpent(f func(q int32, site string, cost float64)) {
	for q, m := range l.spent {
		for site, v := range m {
			f(q, site, v)
		}
	}
}
