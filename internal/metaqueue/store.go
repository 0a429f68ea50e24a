// Package metaqueue is the durable queue of jobs and the only code that
// changes job state. One goroutine (the core) owns the SQLite writer and the
// in-memory scheduling state (the dependency graph, ready heaps, leases);
// every request becomes a call that the core runs inside a transaction,
// grouping concurrent calls into one commit. A call is acknowledged only
// after its transaction committed.
//
// Reads that need no scheduling state (job listings) go to a pool of
// read-only connections and never wait for the core.
package metaqueue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mq-hpc/mq/internal/batchfail"
	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/metaqueue/arrays"
	"github.com/mq-hpc/mq/internal/metaqueue/blevel"
	"github.com/mq-hpc/mq/internal/metaqueue/bundles"
	"github.com/mq-hpc/mq/internal/metaqueue/bystate"
	"github.com/mq-hpc/mq/internal/metaqueue/catalog"
	"github.com/mq-hpc/mq/internal/metaqueue/dc"
	"github.com/mq-hpc/mq/internal/metaqueue/inspect"
	"github.com/mq-hpc/mq/internal/metaqueue/ledger"
	"github.com/mq-hpc/mq/internal/metaqueue/packing"
	"github.com/mq-hpc/mq/internal/metaqueue/placeholders"
	"github.com/mq-hpc/mq/internal/metaqueue/plans"
	"github.com/mq-hpc/mq/internal/metaqueue/priorities"
	"github.com/mq-hpc/mq/internal/metaqueue/progress"
	"github.com/mq-hpc/mq/internal/metaqueue/room"
	"github.com/mq-hpc/mq/internal/metaqueue/selector"
	"github.com/mq-hpc/mq/internal/metaqueue/tokens"
	"github.com/mq-hpc/mq/internal/metaqueue/waits"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/internal/runs"
	"github.com/mq-hpc/mq/internal/sqlfile"
	"github.com/mq-hpc/mq/protocol"
)

// ErrClosed is returned for calls made after Close.
var ErrClosed = protocol.Errorf(protocol.CodeShutdown, "the CLS is shutting down")

// Options configure a Store.
type Options struct {
	Path string // database file
	Sync Sync   // default SyncFull
	// Lease is how long a dispatched job stays with a placeholder without a
	// heartbeat before it is requeued. Default 30 s.
	Lease time.Duration
	// PartitionGrace bounds how long past its last heartbeat a lapsed
	// lease is held while its site is cut off (SiteReached). 0: none.
	PartitionGrace time.Duration
	// Heartbeat is how often placeholders are told to renew. Default Lease/10,
	// at most 1 s (it also bounds how fast mqdel kills a running job).
	Heartbeat time.Duration
	Now       func() time.Time // default time.Now
	Logger    *slog.Logger
	// SpoolDir holds bulk submissions while they upload. Default: beside Path.
	SpoolDir string
	// MaxBulkJobs and MaxBulkBytes bound one bulk submission's spool (jobs,
	// and bytes in SpoolDir); a chunk past either is refused and the bulk
	// dropped, so no client can grow the spool without bound. Defaults
	// upload.DefaultMaxJobs and upload.DefaultMaxBytes.
	MaxBulkJobs  int
	MaxBulkBytes int64
	// OutputDir is where remote placeholders' output is copied on this host
	// (see server.Server.OutputDir); job details name the copies.
	OutputDir string
	// Links are the network between sites for the data-conscious policy,
	// by site name; sites not named get DefaultLink (local:
	// dc.DefaultLocalLink). Zero or invalid links take the defaults.
	Links       map[string]dc.Link
	DefaultLink dc.Link
	// Stager moves files between places for jobs whose declared inputs
	// are not where a placeholder asks (DESIGN.md, "Data staging"). Nil:
	// nothing is moved, and every place is taken to share the CLS host's
	// filesystem (the behaviour before staging).
	Stager catalog.Stager
	// Observer, when set, is told about dispatches, reports and commits
	// (metrics); see Observer.
	Observer Observer
	// CheckConstraints makes SQLite verify the schema's CHECK constraints
	// on every write. The core is the only writer and writes states only
	// from job.State, so a running CLS skips them (they cost ~20% of a bulk
	// submit); the package's tests turn them on to catch a bad write.
	CheckConstraints bool
	// OnFull is called on the core when a batch fails because the disk is
	// full (SQLITE_FULL); it frees what space it can (the CLS's reserve
	// file) and says whether it freed any. The batch is rolled back as
	// any failed one; deletes and reruns then try once more, so that they
	// go through on a full disk (SQLite rolls back a COMMIT that failed
	// so: it cannot simply be committed again).
	OnFull func() bool
	// MinFree is the free space the database's filesystem must have again
	// after a batch failed for want of room (room.Watch; 0: a probe alone).
	MinFree int64
}

// Store is an open metaqueue.
type Store struct {
	opt   Options
	w     *sqlfile.Conn // the writer, its statements prepared once; used only by the core goroutine
	wdb   *sql.DB
	rdb   *sql.DB
	read  *inspect.Reader // the read side over rdb, its queries prepared once
	stmts stmts
	log   *slog.Logger

	calls   chan *call
	stop    chan struct{}
	stopped chan struct{}
	closeMu sync.Once

	// Owned by the core goroutine.
	g        *dag.Graph
	queues   map[string]*queue
	queueIDs map[int32]*queue
	qlist    []*queue // by id, for round-robin dispatch

	rr           int // round-robin position over queues for dispatch
	running      runs.Rows
	reg          placeholders.Registry // placeholders known, their connections, rows to sweep, the last lease check
	parked       []*parkedNext
	waits        waits.Waits[*call]  // parked waits (waits/, admin.go)
	watches      progress.Set        // progress streams (progress_hooks.go)
	counts       map[int32]*[128]int // queue -> state letter -> jobs
	states       bystate.Sets        // the jobs in each state (bystate/, inspect_hooks.go)
	nextID       int64
	inTx         bool
	curSync      Sync            // the writer's synchronous setting now (SyncSubmit switches it)
	synced       int             // batches committed fsync'd under SyncSubmit (tests check which calls are durable)
	ended        []int64         // jobs that ended or blocked in this batch (for waiters)
	tokensPruned tokens.Pruner   // when submit tokens were last pruned (tokens/)
	bundles      bundles.Bundles // live bundles (bundles/, bundle.go)
	arrays       arrays.Arrays   // limited job arrays (arrays/, array.go)
	data         dcState         // data-conscious scheduling (dc/, dc_hooks.go)
	plans        plans.Plans     // jobs' planned sites (plans/, plans_hooks.go)
	repl         replication     // copies of running jobs (copies/, copies_hooks.go)
	// prio is the live jobs' priorities that are not 0 (priorities/).
	prio priorities.Priorities
	// bl is the b-levels for cp queues (blevel/, blevel_hooks.go).
	bl blevel.Levels
	// cat is the data-staging catalog (catalog/, catalog_hooks.go).
	cat *catalog.Catalog

	// ledger keeps costs, spending, budgets, deadlines and the planners'
	// caps (internal/metaqueue/ledger; its hooks: ledger_hooks.go).
	ledger ledger.Ledger

	// pack keeps jobs' requests, placeholders' pools and running
	// attempts' grants (internal/metaqueue/packing; packing_hooks.go).
	pack *packing.Packing

	// commitFault, when set, fails a commit before it reaches SQLite: the
	// tests' stand-in for a full disk (SQLITE_FULL at COMMIT). Core-owned.
	commitFault func() error
	// room is whether the database's filesystem has room, after a batch
	// failed for want of it (room.Watch). Core-owned.
	room room.Watch
	// released counts the times OnFull freed space (actRun retries).
	released atomic.Int64
	// committedSummary, while a batch with a slow call runs, is the
	// summary as committed before it: Summary answers from it rather than
	// wait seconds for the core.
	committedSummary atomic.Pointer[[]protocol.QueueCounts]
	// actionBatch is how many jobs an action on a selection walks in one
	// batch (actRun); betweenBatches, when set, runs between them,
	// off the core: the tests' way in.
	actionBatch    int
	betweenBatches func()

	// copyRuns are the attempts running beside running[job], its copies,
	// leased and ended as the job rows' own are (copies_hooks.go).
	copyRuns runs.Copies

	// links are the sites' links measured from real transfers
	// (MeasuredLink), set and read from any goroutine (dc.Links).
	links dc.Links
}

type queue struct {
	protocol.QueueInfo
	id    int32
	pol   policy.Info     // from QueueInfo.Policy, looked up once
	ready *policy.Heap    // in pol's order
	est   ledger.Declared // the runtimes its jobs declared, for provisioning
}

// account is q's settings as the ledger reads them.
func (q *queue) account() ledger.Queue {
	return ledger.Queue{ID: q.id, Name: q.Name, Budget: q.Budget, Deadline: q.Deadline, Ceiling: q.Ceiling}
}

// costed says whether a queue's attempts are charged wherever they run.
func (q *queue) costed() bool { return q.Budget > 0 || q.Deadline > 0 }

// run is an attempt running (package runs keeps the lookups).
type run = runs.Run

// Open opens (creating if needed) the metaqueue at opt.Path, loads its
// scheduling state and starts the core. Jobs left Executing by an earlier
// run get a fresh lease: their placeholders may still report.
func Open(ctx context.Context, opt Options) (*Store, error) {
	if opt.Sync == "" {
		opt.Sync = SyncFull
	}
	if opt.Lease <= 0 {
		opt.Lease = 30 * time.Second
	}
	if opt.Heartbeat <= 0 {
		opt.Heartbeat = min(opt.Lease/10, time.Second)
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	w, wdb, rdb, err := openDB(ctx, opt.Path, opt.Sync, opt.CheckConstraints)
	if err != nil {
		return nil, err
	}
	s := &Store{
		opt: opt, w: sqlfile.NewConn(w), wdb: wdb, rdb: rdb, log: opt.Logger,
		calls:   make(chan *call, 1024),
		stop:    make(chan struct{}),
		stopped: make(chan struct{}),
		watches: progress.Set{},
		curSync: opt.Sync,
		pack:    packing.New(),
		room:    room.Watch{Dir: filepath.Dir(opt.Path), DB: opt.Path, MinFree: opt.MinFree},

		actionBatch: selector.Batch,
	}
	if s.read = inspect.New(rdb, opt.OutputDir, inspectSources{s}); opt.Sync == SyncSubmit {
		s.curSync = SyncFull // as opened
	}
	if err := s.stmts.prepare(ctx, w); err != nil {
		s.closeDB()
		return nil, err
	}
	if s.cat, err = catalog.New(ctx, w, opt.Stager); err != nil {
		s.closeDB()
		return nil, err
	}
	if err := s.load(ctx); err != nil {
		s.closeDB()
		return nil, fmt.Errorf("load metaqueue: %w", err)
	}
	if err := s.reg.LoadOld(ctx, s.w, s.now()); err != nil {
		s.closeDB()
		return nil, fmt.Errorf("delete the rows of placeholders gone: %w", err)
	}
	s.room.LookForLock(s.log) // held already: changes are refused at once from the first
	go s.loop()
	return s, nil
}

// Close stops the core after the calls already queued and closes the
// database. Parked requests are answered empty.
func (s *Store) Close() error {
	s.closeMu.Do(func() { close(s.stop) })
	<-s.stopped
	return s.closeDB()
}

func (s *Store) closeDB() error {
	s.stmts.close()
	if s.cat != nil {
		s.cat.Close()
	}
	return errors.Join(s.w.Close(), s.wdb.Close(), s.rdb.Close())
}

// call is one unit of work for the core. fn runs on the core goroutine
// inside the batch's transaction; its results travel in the closure.
type call struct {
	ctx    context.Context
	fn     func() error
	err    error
	done   chan struct{}
	parked bool // answered later (a long poll), not at this batch's commit
	// durable marks a call that accepts or changes users' work: under
	// SyncSubmit its batch's commit is fsync'd.
	durable bool
	// slow marks a call that may hold the core for seconds (a bulk
	// commit, an action on a selection's batch): its batch first keeps
	// the summary as committed, for Summary to answer from meanwhile.
	slow bool
	// needsRoom marks a call answered at once, without running, while the
	// database cannot be written (room.Watch): placeholders' polls, reports,
	// registrations, submits; every durable call too while it is locked.
	needsRoom bool
	// leaves marks a parked call whose caller stops waiting when its
	// context ends (a wait); the core drops it on its next tick.
	leaves bool
	closed bool // done has been closed; touched only by the core
}

// finish answers c once; later calls do nothing.
func (c *call) finish() {
	if !c.closed {
		c.closed = true
		close(c.done)
	}
}

// do runs fn on the core and waits until its transaction committed.
func (s *Store) do(ctx context.Context, fn func() error) error {
	return s.doCall(ctx, &call{ctx: ctx, fn: fn, done: make(chan struct{})})
}

// doSlow is doDurable for a call that may hold the core for seconds
// (call.slow).
func (s *Store) doSlow(ctx context.Context, fn func() error) error {
	return s.doCall(ctx, &call{ctx: ctx, fn: fn, done: make(chan struct{}), durable: true, slow: true})
}

// doNeedingRoom runs fn as c says (durable, slow), or answers it at once
// while the database's disk has no room (call.needsRoom).
func (s *Store) doNeedingRoom(ctx context.Context, c call, fn func() error) error {
	c.ctx, c.fn, c.done, c.needsRoom = ctx, fn, make(chan struct{}), true
	return s.doCall(ctx, &c)
}

// doDurable is do for a change a user made (submit, delete, rerun, queue
// settings): under SyncSubmit its commit is fsync'd before the answer.
func (s *Store) doDurable(ctx context.Context, fn func() error) error {
	return s.doCall(ctx, &call{ctx: ctx, fn: fn, done: make(chan struct{}), durable: true})
}

func (s *Store) doCall(ctx context.Context, c *call) error {
	select {
	case s.calls <- c:
	case <-s.stop:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	var left <-chan struct{}
	if c.leaves {
		left = ctx.Done()
	}
	select {
	case <-c.done:
		return c.err
	case <-left:
		return ctx.Err()
	case <-s.stopped:
		// The core may have finished c just before stopping.
		select {
		case <-c.done:
			return c.err
		default:
			return ErrClosed
		}
	}
}

const maxBatch = 512

// tickEvery is how often the core checks leases and deadlines.
const tickEvery = 100 * time.Millisecond

func (s *Store) loop() {
	defer close(s.stopped)
	tick := time.NewTicker(tickEvery)
	defer tick.Stop()
	batch := make([]*call, 0, maxBatch)
	for {
		batch = batch[:0]
		ticked := false
		select {
		case c := <-s.calls:
			batch = append(batch, c)
		drain:
			for len(batch) < maxBatch {
				select {
				case c := <-s.calls:
					batch = append(batch, c)
				default:
					break drain
				}
			}
		case <-tick.C:
			ticked = true
		case <-s.stop:
			// Answer what is queued, then stop.
			for {
				select {
				case c := <-s.calls:
					batch = append(batch, c)
					continue
				default:
				}
				break
			}
			s.runBatch(batch, false)
			for _, p := range s.parked {
				p.call.finish()
			}
			s.parked = nil
			answerWaits(s.waits.Close(ErrClosed))
			return
		}
		s.runBatch(batch, ticked)
	}
}

// runBatch runs calls in one transaction (begun lazily, on the first write)
// and answers them after it commits.
func (s *Store) runBatch(batch []*call, ticked bool) {
	slow := slices.ContainsFunc(batch, func(c *call) bool { return c.slow })
	if slow {
		sum := s.summary()
		s.committedSummary.Store(&sum)
	}
	var failed error
	if s.opt.Sync == SyncSubmit {
		failed = s.syncFor(batch)
	}
	refuse, back := s.room.Check(s.now())
	if back {
		s.log.Info("the database can be written again: its disk has room, its lock is free")
		placeholders.RenewAll(s.now(), s.opt.Lease, s.running, s.copyRuns) // no lapse was taken meanwhile
	}
	for _, c := range batch {
		if failed != nil {
			c.err = failed
			continue
		}
		if refuse != nil && (c.needsRoom || c.durable && s.room.Locked()) {
			c.err = refuse // it would fail again, and cost a reload
			continue
		}
		c.err = c.fn()
		var fe fatalError
		if errors.As(c.err, &fe) {
			failed = fe.err
		}
	}
	if failed == nil && ticked {
		failed = s.expire()
	}
	if failed == nil && ticked {
		failed = s.pruneTokens()
	}
	var filled []*parkedNext
	// matchParked takes the calls it answers off s.parked; if the batch
	// then fails (a full disk fails the COMMIT), they must wait on, not be
	// dropped unanswered: the placeholder's long poll would hang for good.
	parked := s.parked
	if failed == nil {
		filled, failed = s.matchParked()
	}
	if failed == nil {
		failed = s.flushMeasures() // what the batch's job ends measured, in its transaction
	}
	if failed == nil && s.inTx {
		start := time.Now()
		if err := s.commit(); err != nil {
			failed = err // the transaction may still be open: recover rolls it back
		} else {
			s.inTx = false
			if o := s.opt.Observer; o != nil {
				o.Committed(time.Since(start), s.curSync == SyncFull)
			}
		}
	}
	if failed != nil {
		s.parked = parked
		s.recover(failed, batch)
		filled = nil
	}
	if slow {
		// Before any call is answered: one that learns its change
		// committed must not be shown the summary from before it.
		s.committedSummary.Store(nil)
	}
	for _, c := range batch {
		if !c.parked {
			c.finish()
		}
	}
	for _, p := range filled {
		p.call.finish()
	}
	if failed == nil {
		s.notifyWaiters(ticked)
	}
	s.ended = s.ended[:0]
}

// commit commits the batch's transaction.
func (s *Store) commit() error {
	if s.commitFault != nil {
		if err := s.commitFault(); err != nil {
			return err
		}
	}
	_, err := s.w.ExecContext(context.Background(), connSQL.Get("Commit"))
	return err
}

// syncFor sets how hard this batch's commit goes to disk: fsync'd if a
// call in it changes users' work, else not. SQLite takes the setting only
// between transactions, and the batch has not begun one yet. The WAL is
// recovered as a prefix of its commits, so an fsync'd commit also makes
// every earlier one durable.
func (s *Store) syncFor(batch []*call) error {
	want := SyncNormal
	for _, c := range batch {
		if c.durable {
			want = SyncFull
			break
		}
	}
	if want == SyncFull {
		s.synced++
	}
	if want == s.curSync {
		return nil
	}
	pragma := connSQL.Get("SynchronousNormal")
	if want == SyncFull {
		pragma = connSQL.Get("SynchronousFull")
	}
	if _, err := s.w.ExecContext(context.Background(), pragma); err != nil {
		return fatalError{err}
	}
	s.curSync = want
	return nil
}

// fatalError marks a storage failure: the whole batch is rolled back.
type fatalError struct{ err error }

func (e fatalError) Error() string { return "metaqueue storage failure: " + e.err.Error() }
func (e fatalError) Unwrap() error { return e.err }

// recover rolls back a failed batch and reloads the in-memory state from
// the database, so memory never disagrees with what was committed.
func (s *Store) recover(cause error, batch []*call) {
	dir := filepath.Dir(s.opt.Path)
	noRoom := batchfail.NoRoom(cause, s.room.Probed)
	if noRoom != nil && !batchfail.ReadOnly(noRoom) && s.opt.OnFull != nil && s.opt.OnFull() {
		s.released.Add(1) // room for the next try: deletes try again at once
	}
	if s.inTx {
		s.w.ExecContext(context.Background(), connSQL.Get("Rollback"))
		s.inTx = false
	}
	perr := batchfail.Answer(cause, dir, noRoom) // names the cause: full, over quota, locked
	s.log.Error("transaction failed; rolling back and reloading state", "err", perr)
	if noRoom != nil || batchfail.IsLocked(cause) {
		s.room.Full(perr, noRoom == nil) // refused at once until it can be written
	}
	inBatch := map[*call]bool{}
	for _, c := range batch {
		inBatch[c] = true
		if c.err == nil || c.parked || errors.As(c.err, new(fatalError)) { // the cause, with what to do
			c.err = perr
			c.parked = false
		}
	}
	// Calls of this batch are answered with the error; earlier parked
	// placeholders may have been handed jobs in the failed batch: forget
	// those jobs (rolled back) and let them wait on.
	kept := s.parked[:0]
	for _, p := range s.parked {
		if !inBatch[p.call] {
			p.reply.Jobs = nil
			kept = append(kept, p)
		}
	}
	clear(s.parked[len(kept):])
	s.parked = kept
	s.waits.Drop(func(c *call) bool { return inBatch[c] })
	if err := s.load(context.Background()); err != nil {
		s.log.Error("reload after failure failed; stopping", "err", err)
		s.closeMu.Do(func() { close(s.stop) })
		return
	}
	// The placeholders still parked registered in batches that committed:
	// they stay known, so their next heartbeat is not refused.
	for _, p := range s.parked {
		s.reg.Know(p.req.Placeholder)
	}
	s.rewatch()
}

// beginFresh is begin before a call changed anything: a lock known held fails the call, not the batch.
func (s *Store) beginFresh() error { return s.room.BeginFresh(s.begin, s.log) }

// begin starts the batch's transaction if it has not started yet.
func (s *Store) begin() error {
	if s.inTx {
		return nil
	}
	if err := s.room.Begin(func() error { _, err := s.w.ExecContext(context.Background(), connSQL.Get("Begin")); return err }); err != nil {
		return fatalError{err} // a lock known held fails at once
	}
	s.inTx = true
	return nil
}

func (s *Store) now() time.Time { return s.opt.Now() }

// guess is the core's runtime estimate of job j, beyond what the ledger
// measured per site: declared, or learned for its target (ledger.Estimator).
func (s *Store) guess(j dag.Node) float64 {
	return s.data.Estimate(s.g.Name(j.Target), float64(j.Est))
}

func micros(t time.Time) int64 { return t.UnixMicro() }

func (s *Store) addQueue(q *queue) {
	s.queues[q.Name], s.queueIDs[q.id] = q, q
	s.qlist = append(s.qlist, q)
	sort.Slice(s.qlist, func(i, j int) bool { return s.qlist[i].id < s.qlist[j].id })
	s.countDC()
	s.countCopying()
}

// queueID is the id of the queue called name, for the modules that name
// queues (selections, purges, progress, the planners).
func (s *Store) queueID(name string) (int32, bool) {
	if q := s.queues[name]; q != nil {
		return q.id, true
	}
	return 0, false
}

func closeRows(rows *sql.Rows) error {
	err := rows.Err()
	return errors.Join(err, rows.Close())
}
