// Package copies runs a job as several attempts at once: the end game of
// Workqueue with Replication (WQR) and Storage Affinity, the bag-of-tasks
// schedulers of Santos-Neto's 2004 thesis (docs/policies/bag-of-tasks.md).
// When a placeholder asks and a queue that copies has no ready job, the
// queue's policy.Replicator picks a running job to copy: a new attempt of
// it runs at the asking placeholder beside the others (job_copies). The first
// attempt to finish wins: a copy that ends 0 (its report, or its agent's
// claim before it moves outputs into place) ends every other attempt of
// the job as a killed copy (attempts.killed_copy) and becomes the attempt
// the job row describes; the losers' placeholders are told to kill them at
// their next heartbeat, as for mqdel. An attempt that fails or is lost
// while another runs ends alone; the job follows the last one. Copies are
// not counted against max_attempts.
//
// The metaqueue's core keeps every running attempt (its lease, its
// placeholder) and calls this package where they change; Copies keeps
// what replication alone knows: which jobs opted out, which row attempts
// run apart in scratch, the copies killed whose late report is awaited,
// and the index of jobs a copy may start beside (Sync, Choose). It writes
// its own tables inside the core's write transaction, through an Execer.
package copies

import (
	"context"
	"database/sql"
	_ "embed"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/internal/sqlfile"
	"github.com/mq-hpc/mq/protocol"
)

//go:embed copies.sql
var copiesSQL string

var queries = sqlfile.MustParse("copies.sql", copiesSQL)

// Execer is the connection the module reads and writes through: the
// core's writer (*sql.Conn, *sql.Tx) or its reader pool (*sql.DB).
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// MaxKilledKept bounds the killed copies whose late report is awaited.
const MaxKilledKept = 100_000

// Copies is replication's state, owned by the core goroutine.
type Copies struct {
	noCopy map[int64]bool // jobs that opted out (job_no_replicate)
	// apart: the attempt each job row describes, when it runs in a
	// scratch directory of its own and has not won a race, so copies may
	// run beside it (job_apart).
	apart map[int64]int
	// killed are copies killed for a winner whose placeholder has not
	// reported them yet (the placeholder that ran each): their report's
	// CPU figures are still kept.
	killed map[protocol.JobRef]int64
	on     int    // queues that copy
	gen    uint64 // bumped when running attempts change (copy decisions may change)
	idx    index
}

// New returns empty state.
func New() *Copies {
	c := &Copies{}
	c.Reset()
	return c
}

// Reset forgets everything (before a load).
func (c *Copies) Reset() {
	*c = Copies{noCopy: map[int64]bool{}, apart: map[int64]int{}, killed: map[protocol.JobRef]int64{}}
	c.idx.reset()
}

// Limit says whether a queue copies running jobs, and its bound on the
// attempts of one job running at once (0: none), from its max_copies and
// whether its policy has a Replicator of its own. A policy that
// replicates copies unless max_copies is 1; another only with
// max_copies 2 or more.
func Limit(replicates bool, maxCopies int) (on bool, most int) {
	if replicates {
		return maxCopies != 1, maxCopies
	}
	return maxCopies >= 2, maxCopies
}

// Replicator is a queue's end game: its policy's (newRep, nil if none),
// or WQR's for a queue that copies by max_copies alone.
func Replicator(newRep func() policy.Replicator) policy.Replicator {
	if newRep != nil {
		return newRep()
	}
	return policy.WQR{}
}

// SetCopying records how many queues copy.
func (c *Copies) SetCopying(queues int) { c.on = queues }

// On says whether any queue copies.
func (c *Copies) On() bool { return c.on > 0 }

// Changed notes that running attempts, or what a copy may spend, changed:
// a placeholder that found nothing to copy looks again.
func (c *Copies) Changed() { c.gen++ }

// Gen numbers the state Changed last moved on to.
func (c *Copies) Gen() uint64 { return c.gen }

// OptedOut says whether job id asked never to be copied.
func (c *Copies) OptedOut(id int64) bool { return c.noCopy[id] }

// OptOut records that job id, being submitted, is never to be copied.
func (c *Copies) OptOut(ctx context.Context, ex Execer, id int64) error {
	if _, err := ex.ExecContext(ctx, queries.Get("OptOut"), id); err != nil {
		return fmt.Errorf("job %d opts out of copies: %w", id, err)
	}
	c.noCopy[id] = true
	return nil
}

// Apart says whether attempt of job id, the one its row describes, runs
// apart: copies may run beside it.
func (c *Copies) Apart(id int64, attempt int) bool {
	a, ok := c.apart[id]
	return ok && a == attempt
}

// SetApart records whether j.Row, the attempt job j's row describes,
// runs apart (job_apart: a restart must know), and syncs j's entry in the
// index. Only a change is written, so jobs of queues that never copy cost
// nothing.
func (c *Copies) SetApart(ctx context.Context, ex Execer, j Job, apart bool) error {
	// Any attempt's row goes: the attempt that wins a race is a copy
	// whose job row described another until now.
	_, was := c.apart[j.ID]
	var err error
	switch {
	case apart && j.Row != 0:
		c.apart[j.ID] = j.Row
		_, err = ex.ExecContext(ctx, queries.Get("SetApart"), j.ID, j.Row)
	case !apart && was:
		delete(c.apart, j.ID)
		_, err = ex.ExecContext(ctx, queries.Get("ClearApart"), j.ID)
	}
	c.Sync(j)
	if err != nil {
		return fmt.Errorf("job %d apart: %w", j.ID, err)
	}
	return nil
}

// Run is an attempt of a job running at a placeholder.
type Run struct {
	Job         int64
	Attempt     int
	Placeholder int64
	Started     time.Time
}

// Started records a copy r that starts beside job j's other attempts
// (j counts it).
func (c *Copies) Started(ctx context.Context, ex Execer, r Run, j Job) error {
	c.gen++
	c.Sync(j)
	if _, err := ex.ExecContext(ctx, queries.Get("InsertCopy"), r.Job, r.Attempt, r.Placeholder, r.Started.UnixMicro()); err != nil {
		return fmt.Errorf("copy %d of job %d: %w", r.Attempt, r.Job, err)
	}
	return nil
}

// Left records that copy attempt of job j no longer runs beside the
// row's: it ended, or the row describes it now (j counts it no more).
func (c *Copies) Left(ctx context.Context, ex Execer, j Job, attempt int) error {
	c.gen++
	c.Sync(j)
	if _, err := ex.ExecContext(ctx, queries.Get("DeleteCopy"), j.ID, attempt); err != nil {
		return fmt.Errorf("copy %d of job %d: %w", attempt, j.ID, err)
	}
	return nil
}

// AllLeft records that no copy of job j runs any more (one won, or the
// job stopped).
func (c *Copies) AllLeft(ctx context.Context, ex Execer, j Job) error {
	c.gen++
	c.Sync(j)
	if _, err := ex.ExecContext(ctx, queries.Get("DeleteCopies"), j.ID); err != nil {
		return fmt.Errorf("copies of job %d: %w", j.ID, err)
	}
	return nil
}

// Promote records that copy j.Row of job j, the oldest, is the attempt
// the row describes now that the row's own ended: it leaves job_copies
// and runs apart, so copies may start beside it.
func (c *Copies) Promote(ctx context.Context, ex Execer, j Job) error {
	c.gen++
	if _, err := ex.ExecContext(ctx, queries.Get("DeleteCopy"), j.ID, j.Row); err != nil {
		return fmt.Errorf("copy %d of job %d: %w", j.Row, j.ID, err)
	}
	return c.SetApart(ctx, ex, j, true)
}

// EndAlone records attempt a of job j, which ended as r says while
// another attempt runs on (record false: handed back unstarted, there is
// nothing to record). A copy leaves job_copies; with promoted, a was the
// row's own and copy j.Row, the oldest, is the row's now. It returns when
// a ran, for the charge of what it spent.
func (c *Copies) EndAlone(ctx context.Context, ex Execer, j Job, a Run, r protocol.Report, record, promoted bool, now time.Time) (started, finished time.Time, err error) {
	if record {
		if started, finished, err = c.End(ctx, ex, a, r, false, now); err != nil {
			return started, finished, err
		}
	}
	if promoted {
		return started, finished, c.Promote(ctx, ex, j)
	}
	return started, finished, c.Left(ctx, ex, j, a.Attempt)
}

// KilledReason is why the attempts that lost to attempt won were killed.
func KilledReason(won int) string {
	return fmt.Sprintf("killed: attempt %d of the job finished first", won)
}

// End records attempt a, which ended as r says while the job goes on, or
// was killed for another (attempts, with killed_copy). It returns when
// the attempt ran, r's times or a's start and now, for the charge of
// what it spent.
func (c *Copies) End(ctx context.Context, ex Execer, a Run, r protocol.Report, killed bool, now time.Time) (started, finished time.Time, err error) {
	started, finished = r.Started, r.Finished
	if started.IsZero() {
		started = a.Started
	}
	if finished.IsZero() {
		finished = now
	}
	var exit, cpuUser, cpuSys, maxRSS any
	if !killed && r.Reason != protocol.ReasonInterrupted && !strings.HasPrefix(r.Reason, "lost") {
		exit = r.Exit
	}
	if r.Usage.Measured() && protocol.CheckUsage(r.Usage) == nil {
		cpuUser, cpuSys, maxRSS = r.CPUUser, r.CPUSys, r.MaxRSS
	}
	reason := r.Reason
	if reason == "" {
		reason = fmt.Sprintf("exit status %d while another attempt ran on", r.Exit)
	}
	if _, err := ex.ExecContext(ctx, queries.Get("EndAttempt"), a.Job, a.Attempt, a.Placeholder, started.UnixMicro(), finished.UnixMicro(),
		exit, reason, cpuUser, cpuSys, maxRSS, killed); err != nil {
		return started, finished, fmt.Errorf("attempt %d of job %d ended: %w", a.Attempt, a.Job, err)
	}
	return started, finished, nil
}

// Ended is a copy just killed, as the core charges it: its run, when it
// ran, and whether its late report is awaited (Kept; past MaxKilledKept
// it is charged up to the kill only).
type Ended struct {
	Run               Run
	Started, Finished time.Time
	Kept              bool
}

// Win records that attempt won of job j (j.Row is it now): no copy may
// start beside it any more (a later one could claim and win again), and
// the losers, every other attempt that ran, are ended as killed copies.
// It returns them, in order, for the core to charge.
func (c *Copies) Win(ctx context.Context, ex Execer, j Job, won int, losers []Run, now time.Time) ([]Ended, error) {
	return c.Stop(ctx, ex, j, losers, KilledReason(won), now)
}

// Stop records that the attempt job j's row describes no longer runs
// apart (it won, ended, or the job was deleted) and ends the copies
// killed beside it (j counts none now), for reason. It returns them, in
// order, for the core to charge.
func (c *Copies) Stop(ctx context.Context, ex Execer, j Job, killed []Run, reason string, now time.Time) ([]Ended, error) {
	if err := c.SetApart(ctx, ex, j, false); err != nil {
		return nil, err
	}
	if len(killed) == 0 {
		return nil, nil
	}
	if err := c.AllLeft(ctx, ex, j); err != nil {
		return nil, err
	}
	ends := make([]Ended, len(killed))
	for i, r := range killed {
		started, finished, err := c.End(ctx, ex, r, protocol.Report{Finished: now, Reason: reason}, true, now)
		if err != nil {
			return nil, err
		}
		ends[i] = Ended{Run: r, Started: started, Finished: finished,
			Kept: c.Kill(protocol.JobRef{ID: r.Job, Attempt: r.Attempt}, r.Placeholder)}
	}
	return ends, nil
}

// Kill remembers copy ref, just killed at placeholder ph, which runs on
// until that placeholder's next heartbeat: its late report is kept. It
// returns false, remembering nothing, past MaxKilledKept.
func (c *Copies) Kill(ref protocol.JobRef, ph int64) bool {
	if len(c.killed) >= MaxKilledKept {
		return false
	}
	c.killed[ref] = ph
	return true
}

// TakeKilled says whether ref is a killed copy placeholder ph ran, and
// forgets it: its report came.
func (c *Copies) TakeKilled(ref protocol.JobRef, ph int64) bool {
	if got, ok := c.killed[ref]; !ok || got != ph {
		return false
	}
	delete(c.killed, ref)
	return true
}

// LateUsage keeps the CPU figures of a killed copy's report, which came
// after another attempt won.
func (c *Copies) LateUsage(ctx context.Context, ex Execer, r protocol.Report) error {
	if !r.Usage.Measured() || protocol.CheckUsage(r.Usage) != nil {
		return nil
	}
	if _, err := ex.ExecContext(ctx, queries.Get("LateUsage"), r.CPUUser, r.CPUSys, r.MaxRSS, r.ID, r.Attempt); err != nil {
		return fmt.Errorf("late report of job %d attempt %d: %w", r.ID, r.Attempt, err)
	}
	return nil
}

// The copy candidates: a copy decision used to walk every running job on
// every look by an idle placeholder, 2-3 ms at 10,000 running jobs. The
// index keeps apart the running jobs a copy may start beside, those whose
// row's attempt runs apart, by queue and by how many attempts of each run
// (1 + its copies): WQR and Storage Affinity copy from the
// fewest-attempts bucket first, so a look walks that bucket only, in a
// tight loop, and asks the core's other conditions (Ask.Copyable) only
// for a job that would beat the best so far. Storage Affinity's local
// bytes of each job are cached per asking site while the core's data
// generation does not move; when it moves, Moved says which files did,
// and only the candidates reading those forget theirs; any other move
// (Fresh) forgets all.
//
// Sync keeps it: the core calls it (or SetApart, Started, Left, AllLeft,
// which sync) for a job whenever its row's attempt, that attempt's
// apartness or its copies change, and for every running job after a
// load.

// index is the candidates of every queue.
type index struct {
	at     map[int64]entryAt // job -> its entry
	queues map[int32]*buckets
	keys   map[Where]uint32 // asking sites seen, numbered for the local bytes cache
	// readers: the candidates reading each input file, whose local bytes
	// a move of the file makes stale.
	readers map[string]map[int64]struct{}
	// epoch numbers the local bytes valid now; untold is the data
	// generation's moves that said nothing of what moved, when epoch was
	// last moved on.
	epoch  uint64
	untold uint64
}

// entryAt places a job's entry: its queue, attempts running and index in
// the bucket.
type entryAt struct {
	q    int32
	n, i int
}

// buckets is one queue's candidates: by[n-1] holds the jobs with n
// attempts running, in no order (entries move by swapping).
type buckets struct {
	by [][]cand
}

// localSlots is how many asking sites a candidate remembers its local
// bytes for.
const localSlots = 4

// cand is a candidate job and its local bytes at recent asking sites.
type cand struct {
	id    int64
	in    []string // its inputs (readers), once its local bytes were asked
	known bool     // in was asked
	local [localSlots]localBytesAt
}

// localBytesAt is a job's local bytes at site key (numbered in
// index.keys), valid while the index's epoch is epoch and none of the
// job's inputs moved.
type localBytesAt struct {
	key   uint32 // 0: none
	epoch uint64
	bytes int64
}

// Where is what a job's local bytes depend on of the asking placeholder:
// its site and, with staging, the storage place it reads from.
type Where struct {
	Site                 policy.Site
	StoreSite, StoreHost string
}

func (x *index) reset() {
	*x = index{at: map[int64]entryAt{}, queues: map[int32]*buckets{}, keys: map[Where]uint32{},
		readers: map[string]map[int64]struct{}{}, epoch: 1}
}

// Job is what the index needs of a job whose attempts changed.
type Job struct {
	ID int64
	// Row is the attempt the job row describes, running; 0 if none runs
	// (or the core no longer knows the job).
	Row   int
	Queue int32
	Runs  int // attempts running: the row's and its copies
}

// Sync makes job j's entry agree with the core: present while its row's
// attempt runs apart, in the bucket of its attempts running.
func (c *Copies) Sync(j Job) {
	x := &c.idx
	if j.Row == 0 {
		delete(c.apart, j.ID) // the attempt it described stopped
	}
	a, ok := c.apart[j.ID]
	in := ok && j.Row != 0 && a == j.Row
	at, had := x.at[j.ID]
	switch {
	case !in && had:
		x.read(x.remove(j.ID, at), false)
	case in && !had:
		x.insert(j.Queue, j.Runs, cand{id: j.ID})
	case in && (at.n != j.Runs || at.q != j.Queue):
		x.insert(j.Queue, j.Runs, x.remove(j.ID, at))
	}
}

// Rebuild empties the index, for the core to Sync every running job
// (after a load).
func (c *Copies) Rebuild() { c.idx.reset() }

// Moved forgets the local bytes of the candidates reading path: an output
// was made there, or a replica added.
func (c *Copies) Moved(path string) {
	x := &c.idx
	for id := range x.readers[path] {
		if at, ok := x.at[id]; ok {
			x.queues[at.q].by[at.n-1][at.i].local = [localSlots]localBytesAt{}
		}
	}
}

// read notes that candidate e reads its inputs, or (in false) forgets it.
func (x *index) read(e cand, in bool) {
	for _, path := range e.in {
		r := x.readers[path]
		if in {
			if r == nil {
				r = map[int64]struct{}{}
				x.readers[path] = r
			}
			r[e.id] = struct{}{}
			continue
		}
		delete(r, e.id)
		if len(r) == 0 {
			delete(x.readers, path)
		}
	}
}

// remove takes job id's entry out of its bucket.
func (x *index) remove(id int64, at entryAt) cand {
	bk := x.queues[at.q].by[at.n-1]
	e := bk[at.i]
	last := len(bk) - 1
	if at.i != last {
		bk[at.i] = bk[last]
		x.at[bk[at.i].id] = entryAt{q: at.q, n: at.n, i: at.i}
	}
	x.queues[at.q].by[at.n-1] = bk[:last]
	delete(x.at, id)
	return e
}

// insert adds e to queue q's bucket of n attempts.
func (x *index) insert(q int32, n int, e cand) {
	b := x.queues[q]
	if b == nil {
		b = &buckets{}
		x.queues[q] = b
	}
	for len(b.by) < n {
		b.by = append(b.by, nil)
	}
	b.by[n-1] = append(b.by[n-1], e)
	x.at[e.id] = entryAt{q: q, n: n, i: len(b.by[n-1]) - 1}
}

// Has says whether queue q has a job a copy may start beside.
func (c *Copies) Has(q int32) bool { return c.idx.queues[q] != nil }

// Ask is the core's side of one look for a copy, for one asking
// placeholder: the conditions the index does not keep.
type Ask interface {
	// Copyable says whether job id, a candidate of the queue looked at,
	// may be copied for the asker now: it executes in that queue, may run
	// as several attempts, runs apart and not at the asker, fits the
	// asker's walltime and is affordable at its site.
	Copyable(id int64) bool
	// LocalBytes is how many bytes of job id's inputs are at the asker's
	// site.
	LocalBytes(id int64) int64
	// Inputs lists the files job id reads, whose moves make its local
	// bytes stale: asked once, when they are first computed.
	Inputs(id int64) []string
	// Est is job id's expected runtime in seconds (0: unknown).
	Est(id int64) float32
}

// Look is one look for a copy by one asking placeholder.
type Look struct {
	key  uint32 // its Where, numbered
	site string // its site's name, as a Replicator sees it
	skip []int64
}

// Look starts a look for a copy at w (site named site). untold counts the
// core's data generation moves that said nothing of what moved: when it
// changed since the last look, every local bytes figure is forgotten.
func (c *Copies) Look(w Where, site string, untold uint64) Look {
	x := &c.idx
	if untold != x.untold {
		x.untold = untold
		x.epoch++
	}
	key, ok := x.keys[w]
	if !ok {
		key = uint32(len(x.keys) + 1)
		x.keys[w] = key
	}
	return Look{key: key, site: site}
}

// Unskip forgets the jobs skipped: the look moves on to another queue.
func (l *Look) Unskip() { l.skip = l.skip[:0] }

// Skip leaves job id out of the rest of the look (its inputs are not at
// the asker's place yet).
func (l *Look) Skip(id int64) { l.skip = append(l.skip, id) }

// Queue is what a choice needs of the queue looked at.
type Queue struct {
	ID         int32
	Rep        policy.Replicator
	Most       int  // the bound on attempts running at once (0: none)
	NeedsFiles bool // its policy reads local bytes
}

// Choose is what q's Replicator would choose among q's candidates for
// look l (less those skipped), or 0 for none. WQR and Storage Affinity
// walk the fewest-attempts bucket that has a candidate; another
// Replicator is shown every candidate.
func (c *Copies) Choose(l *Look, q Queue, a Ask) int64 {
	b := c.idx.queues[q.ID]
	if b == nil {
		return 0
	}
	var affinity bool
	var maxRep int
	switch r := q.Rep.(type) {
	case policy.WQR:
		maxRep = r.MaxReplicas
	case policy.StorageAffinity:
		affinity, maxRep = true, r.MaxReplicas
	default:
		return c.chooseAny(l, q, b, a)
	}
	if affinity && !q.NeedsFiles {
		return 0 // no job has local bytes as the policy sees them
	}
	for n := 1; n <= len(b.by); n++ {
		if q.Most > 0 && n >= q.Most || maxRep > 0 && n >= maxRep {
			break
		}
		bk := b.by[n-1]
		var best, bestLocal int64
		for i := range bk {
			e := &bk[i]
			if best > 0 && !affinity && e.id > best {
				continue
			}
			var local int64
			if affinity {
				if local = c.localAt(e, l, a); local <= 0 {
					continue
				}
				if best > 0 && (local < bestLocal || local == bestLocal && e.id > best) {
					continue
				}
			}
			if slices.Contains(l.skip, e.id) || !a.Copyable(e.id) {
				continue
			}
			best, bestLocal = e.id, local
		}
		if best > 0 {
			return best
		}
	}
	return 0
}

// chooseAny shows q's Replicator every candidate of q.
func (c *Copies) chooseAny(l *Look, q Queue, b *buckets, a Ask) int64 {
	var runs []policy.Running
	for n, bk := range b.by {
		n++
		if q.Most > 0 && n >= q.Most {
			break
		}
		for i := range bk {
			e := &bk[i]
			if slices.Contains(l.skip, e.id) || !a.Copyable(e.id) {
				continue
			}
			var local int64
			if q.NeedsFiles {
				local = c.localAt(e, l, a)
			}
			runs = append(runs, policy.Running{ID: e.id, Replicas: n, LocalBytes: local, Est: a.Est(e.id)})
		}
	}
	if len(runs) == 0 {
		return 0
	}
	id, ok := q.Rep.Replicate(l.site, runs)
	if !ok {
		return 0
	}
	return id
}

// localAt is candidate e's local bytes at l's site, cached while neither
// the epoch nor its inputs moved.
func (c *Copies) localAt(e *cand, l *Look, a Ask) int64 {
	epoch := c.idx.epoch
	slot := -1
	for i := range e.local {
		lb := &e.local[i]
		if lb.key == l.key {
			if lb.epoch == epoch {
				return lb.bytes
			}
			slot = i
			break
		}
	}
	if slot < 0 { // an empty slot, else the one computed longest ago
		slot = 0
		for i := range e.local {
			if lb, o := &e.local[i], &e.local[slot]; o.key != 0 && (lb.key == 0 || lb.epoch < o.epoch) {
				slot = i
			}
		}
	}
	if !e.known {
		e.in, e.known = a.Inputs(e.id), true
		c.idx.read(*e, true)
	}
	bytes := a.LocalBytes(e.id)
	e.local[slot] = localBytesAt{key: l.key, epoch: epoch, bytes: bytes}
	return bytes
}

// Entry is where the index holds a job: its queue and attempts running.
type Entry struct {
	Queue int32
	Runs  int
}

// Check says how the index disagrees with want, the entries a full scan
// of the core's running jobs finds, or with itself; nil if it does not.
// The core's tests hold the index to a scan with it.
func (c *Copies) Check(want map[int64]Entry) error {
	x := &c.idx
	if len(want) != len(x.at) {
		return fmt.Errorf("index holds %d jobs, a scan finds %d", len(x.at), len(want))
	}
	total := 0
	for q, b := range x.queues {
		for n, bk := range b.by {
			total += len(bk)
			for i, e := range bk {
				if at := x.at[e.id]; at != (entryAt{q: q, n: n + 1, i: i}) {
					return fmt.Errorf("job %d in queue %d bucket %d at %d, its entry says %+v", e.id, q, n+1, i, at)
				}
			}
		}
	}
	if total != len(x.at) {
		return fmt.Errorf("buckets hold %d entries, the index %d jobs", total, len(x.at))
	}
	for id, w := range want {
		at, ok := x.at[id]
		if !ok || at.q != w.Queue || at.n != w.Runs {
			return fmt.Errorf("job %d: index %+v (present %v), scan queue %d with %d attempts", id, at, ok, w.Queue, w.Runs)
		}
	}
	return nil
}

// Reverse reverses every bucket's order, keeping the index whole: for
// tests that a choice does not depend on the order candidates came in.
func (c *Copies) Reverse() {
	x := &c.idx
	for _, b := range x.queues {
		for _, bk := range b.by {
			slices.Reverse(bk)
			for i, e := range bk {
				at := x.at[e.id]
				at.i = i
				x.at[e.id] = at
			}
		}
	}
}
