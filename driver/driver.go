// Package driver runs a program's helper commands across the metaqueue the
// way os/exec runs them on one machine: the Trellis Driver of thesis 004,
// in Go.
//
// A program configures a Driver, starts it, and calls Exec for each command
// line. Exec returns a Key as soon as the job is in the driver's bounded
// buffer (it blocks while the buffer is full, so memory stays bounded however
// many jobs a program issues); consumers submit buffered jobs to the CLS over
// one pipelined connection and collect their ends with long-poll waits.
// WaitForOne and WaitForAll (for the whole program or one Producer) return
// the jobs' own exit statuses. With no CLS configured the same calls run
// the commands here with os/exec (local mode).
//
// Groups (homogeneous batching) and pipelines (heterogeneous batching) turn
// several jobs into one metaqueue bundle that one placeholder runs in order,
// each job keeping its own exit status, output and timing.
//
// What os/exec users expect is here too. Command and CommandContext build
// a Cmd from argv (quoted for the placeholders' POSIX shell: see Quote),
// with Dir, Env and Stdin, and Run, Output and CombinedOutput it. A
// Result reads the job's stdout and stderr (Stdout, Stderr, Open; up to
// MaxOutput) wherever it ran, and says which attempt ran where and when.
// Results iterates over results as jobs end. The context given to Exec
// (or CommandContext, ExecSync, a wait) bounds the job's life as
// exec.CommandContext's does: when it ends the job is deleted, killed if
// running, through a CLS as here; Stop is the graceful end, waiting for
// issued jobs. A wait whose context ends gives up its jobs the same way:
// nobody waits for them any more, so a Results loop after it ends as soon
// as the other jobs are collected, and the driver goes on taking jobs.
package driver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// Key names one issued job until its result is collected.
type Key uint64

// Result is how a job ended. Its Stdout, Stderr and Open methods read the
// job's output.
type Result struct {
	Key Key
	// ID is the job's metaqueue id (0 in local mode, or if it was never
	// submitted).
	ID int64
	// Exit is the job's own exit status (128+N if killed by signal N); -1
	// when it has none, and then Err says why.
	Exit int
	// State is the job's final state letter: D (done), F (failed), X
	// (deleted) or B (blocked by a failed prerequisite); "" if it never
	// reached the metaqueue.
	State  string
	Reason string
	Err    error

	// Attempt is which run of the job this is (1 for the first; a job
	// requeued after its placeholder was lost runs again); 0 if it never
	// started.
	Attempt int
	// Site and Host are where the attempt ran ("local" and this host in
	// local mode); empty if it never started.
	Site, Host string
	// Started and Finished are when the attempt started and ended (zero
	// if it never started).
	Started, Finished time.Time
	// Usage is the resources the attempt used, where known.
	Usage Usage

	out outputSource // where Stdout and Stderr read; nil if nowhere
}

// Usage is the resources a job's attempt used. Local mode fills it from
// the process's rusage; through a CLS it is what the placeholder measured
// and mqstat --acct shows (zero where nothing was measured).
type Usage struct {
	CPU    time.Duration // user plus system CPU time of the job's processes
	MaxRSS int64         // largest resident set of any of its processes, bytes
}

// JobError is why a job has no exit status of its own: it was deleted, it
// is blocked by a failed prerequisite, it failed without an exit status
// (lost too often), or it could not be submitted.
type JobError struct {
	Key    Key
	ID     int64
	State  string
	Reason string
	// Cause is why the driver deleted the job, if it did: the error of the
	// context that was cancelled (see Producer.Exec).
	Cause error
}

// Unwrap returns the cause, so errors.Is(err, context.Canceled) holds for
// a job deleted because its context was cancelled.
func (e *JobError) Unwrap() error { return e.Cause }

func (e *JobError) Error() string {
	what := map[string]string{"X": "was deleted", "B": "is blocked by a failed or deleted prerequisite", "F": "failed without an exit status"}[e.State]
	if what == "" {
		what = "has no exit status"
	}
	s := fmt.Sprintf("job %d %s", e.ID, what)
	if e.ID == 0 {
		s = fmt.Sprintf("job (key %d) %s", e.Key, what)
	}
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// Errors of the driver's life cycle.
var (
	ErrNotStarted = errors.New("driver: not started")
	ErrStopped    = errors.New("driver: stopped")
	ErrStarted    = errors.New("driver: already started")
)

// Driver runs jobs through the metaqueue (or locally). Its methods may be
// called from many goroutines.
type Driver struct {
	cfg   Config
	local bool

	slots    chan struct{} // the bounded buffer: a token per job from Exec until it ends
	ready    chan *unit    // jobs and bundles for consumers
	stopping chan struct{} // closed by Stop

	mu       sync.Mutex
	state    int // 0 new, 1 started, 2 stopping
	groups   map[string]*group
	pipes    map[string]*pipeline
	records  map[Key]*record
	nextKey  Key
	live     int // records whose job has not ended
	dropped  int // records abandoned by a wait whose job has not ended: no Results loop waits for them
	allEnded *sync.Cond
	def      *Producer
	subs     map[*subscription]bool // Results iterators running

	ctx       context.Context // background work; cancelled when Stop gives up
	cancel    context.CancelFunc
	consumers sync.WaitGroup
	be        backend
}

// backend submits or runs what consumers take from the buffer.
type backend interface {
	consume(ctx context.Context)
	// kill deletes (kills) a job that was cancelled: r.cause is set. The
	// job must still end, through finish, as any job does.
	kill(r *record)
	close()
}

// record is one issued job's result, kept until it is waited for.
type record struct {
	key  Key
	prod *Producer
	done chan struct{}
	res  Result
	grp  *group // the group whose incomplete bundle holds the job, if any

	// Under d.mu:
	id        int64         // metaqueue id, once submitted (CLS mode)
	cause     error         // why the job was cancelled; nil if it was not
	killed    chan struct{} // closed when cause is set
	abandoned bool          // a wait gave up on it: forget its result when it ends
	stopCtx   func() bool   // stops watching the context given to Exec
}

// entry is a job in the buffer, not yet ended.
type entry struct {
	rec  *record
	spec protocol.JobSpec
}

// unit is what consumers take: one job, or a bundle (a group's or a
// pipeline's jobs, run in order by one placeholder).
type unit struct {
	jobs   []*entry
	bundle bool
}

type group struct {
	name    string
	bf      int
	pending []*entry
	gen     int // bumped when pending is sent, so a stale timer does nothing
	timer   *time.Timer
}

type pipeline struct {
	name    string
	length  int
	pending []*entry
}

// New checks cfg and returns a driver; call Start before Exec.
func New(cfg Config) (*Driver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	d := &Driver{
		cfg:      cfg,
		local:    cfg.Local,
		slots:    make(chan struct{}, cfg.Buffer),
		ready:    make(chan *unit, cfg.Buffer),
		stopping: make(chan struct{}),
		groups:   map[string]*group{},
		pipes:    map[string]*pipeline{},
		records:  map[Key]*record{},
		subs:     map[*subscription]bool{},
	}
	d.allEnded = sync.NewCond(&d.mu)
	d.def = &Producer{d: d}
	return d, nil
}

// Config returns the configuration in effect (defaults filled in).
func (d *Driver) Config() Config { return d.cfg }

// Local reports whether the driver runs jobs here rather than through a CLS.
func (d *Driver) Local() bool { return d.local }

// SetGroup registers (or changes) a job group: its jobs are sent in bundles
// of batchingFactor (1..buffer size) jobs that one placeholder runs one
// after another. An incomplete bundle goes after the group timeout, or at
// once when the program waits for one of its jobs (WaitForOne, WaitForAll).
func (d *Driver) SetGroup(name string, batchingFactor int) error {
	if name == "" {
		return errors.New("driver: a group needs a name")
	}
	if batchingFactor < 1 || batchingFactor > d.cfg.Buffer {
		return fmt.Errorf("driver: batching factor of group %s must be 1..%d (the buffer size), not %d", name, d.cfg.Buffer, batchingFactor)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.pipes[name]; ok {
		return fmt.Errorf("driver: %s is already a pipeline", name)
	}
	if g := d.groups[name]; g != nil {
		g.bf = batchingFactor
		if len(g.pending) >= g.bf {
			d.sendGroup(g)
		}
		return nil
	}
	d.groups[name] = &group{name: name, bf: batchingFactor}
	return nil
}

// CreatePipeline registers a pipeline of length (1..buffer size) jobs: the
// next length jobs issued into it go as one bundle, run in issue order on
// one placeholder. There is no timeout: the program must issue all of them
// (Stop sends an incomplete pipeline as it is). Once complete, the name may
// be used for a new pipeline.
func (d *Driver) CreatePipeline(name string, length int) error {
	if name == "" {
		return errors.New("driver: a pipeline needs a name")
	}
	if length < 1 || length > d.cfg.Buffer {
		return fmt.Errorf("driver: length of pipeline %s must be 1..%d (the buffer size), not %d", name, d.cfg.Buffer, length)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.groups[name]; ok {
		return fmt.Errorf("driver: %s is already a group", name)
	}
	if _, ok := d.pipes[name]; ok {
		return fmt.Errorf("driver: pipeline %s already exists and is not complete", name)
	}
	d.pipes[name] = &pipeline{name: name, length: length}
	return nil
}

// Start connects to the CLS (or prepares local mode) and starts the
// consumers.
func (d *Driver) Start(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.state != 0 {
		return ErrStarted
	}
	d.ctx, d.cancel = context.WithCancel(context.WithoutCancel(ctx))
	switch {
	case d.be != nil: // set by a test
	case d.local:
		b, err := newLocal(d)
		if err != nil {
			d.cancel()
			return err
		}
		d.be = b
	default:
		b, err := newCLS(ctx, d)
		if err != nil {
			d.cancel()
			return err
		}
		d.be = b
	}
	d.state = 1
	for i := 0; i < d.cfg.Consumers; i++ {
		d.consumers.Add(1)
		go func() {
			defer d.consumers.Done()
			d.be.consume(d.ctx)
		}()
	}
	return nil
}

// Stop stops taking jobs (Exec returns ErrStopped), sends incomplete
// bundles, and waits until every issued job has ended. If ctx ends first it
// stops waiting: jobs not yet ended get an error (in local mode they are
// killed; in the metaqueue they run on). Results not yet collected stay
// available to WaitForOne and WaitForAll; with Config.OutDir "" in local
// mode their output does not (it was in a temporary directory).
//
// Stop is the graceful end; to kill jobs, cancel the context given to
// Exec (or to a wait): those jobs are deleted at once.
func (d *Driver) Stop(ctx context.Context) error {
	d.mu.Lock()
	if d.state != 1 {
		d.mu.Unlock()
		if d.state == 0 {
			return ErrNotStarted
		}
		return ErrStopped
	}
	d.state = 2
	for _, g := range d.groups {
		d.sendGroup(g)
	}
	for name, p := range d.pipes {
		if len(p.pending) > 0 {
			d.send(&unit{jobs: p.pending, bundle: true})
		}
		delete(d.pipes, name)
	}
	close(d.ready) // Exec holds d.mu to send, and now refuses
	close(d.stopping)
	d.mu.Unlock()

	ended := make(chan struct{})
	go func() {
		d.mu.Lock()
		for d.live > 0 {
			d.allEnded.Wait()
		}
		d.mu.Unlock()
		close(ended)
	}()
	var err error
	select {
	case <-ended:
	case <-ctx.Done():
		err = fmt.Errorf("driver: stopped before every job ended: %w", ctx.Err())
	}
	d.cancel()
	d.consumers.Wait()
	d.be.close()
	if err != nil {
		// Whatever is still out will never be heard of: say so to waiters.
		d.mu.Lock()
		var open []*record
		for _, r := range d.records {
			select {
			case <-r.done:
			default:
				open = append(open, r)
			}
		}
		d.mu.Unlock()
		for _, r := range open {
			d.finish(r, Result{Exit: -1, Err: fmt.Errorf("driver stopped before job (key %d) ended: %w", r.key, ctx.Err())})
		}
	}
	return err
}

// send hands a unit to the consumers. d.mu is held; it never blocks: every
// job of a unit holds a buffer slot, so there are never more units than the
// channel holds.
func (d *Driver) send(u *unit) { d.ready <- u }

func (d *Driver) sendGroup(g *group) {
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
	g.gen++
	if len(g.pending) == 0 {
		return
	}
	for _, e := range g.pending {
		e.rec.grp = nil
	}
	d.send(&unit{jobs: g.pending, bundle: len(g.pending) > 1})
	g.pending = nil
}

// finish records a job's end, frees its buffer slot and wakes its waiters.
// A record is finished once; later calls do nothing.
func (d *Driver) finish(r *record, res Result) {
	d.mu.Lock()
	select {
	case <-r.done:
		d.mu.Unlock()
		return
	default:
	}
	res.Key = r.key
	if res.Err != nil {
		res.Exit = -1
	}
	if r.cause != nil {
		var je *JobError
		if errors.As(res.Err, &je) && je.Cause == nil {
			je.Cause = r.cause
			if je.Reason == "" || je.State == "X" {
				je.Reason = "cancelled: " + r.cause.Error()
			}
		}
	}
	if r.stopCtx != nil {
		r.stopCtx()
	}
	r.res = res
	close(r.done)
	d.live--
	if d.live == 0 {
		d.allEnded.Broadcast()
	}
	if r.abandoned {
		d.dropped--
		r.prod.dropped--
		d.forget(r) // its waiter gave up on it: nobody will collect it
		// Results loops waiting for it must look again: it may have been
		// the last job they were waiting for.
		for s := range d.subs {
			s.poke()
		}
	} else {
		for s := range d.subs {
			s.push(r)
		}
	}
	d.mu.Unlock()
	<-d.slots
}

// deleteJob deletes (kills) a job whose context was cancelled or whose
// waiter gave up: at the CLS, or here in local mode. It ends as deleted
// (state X) with a *JobError whose Cause is cause, unless it ended first.
func (d *Driver) deleteJob(r *record, cause error) {
	d.mu.Lock()
	select {
	case <-r.done:
		d.mu.Unlock()
		return
	default:
	}
	if r.cause != nil {
		d.mu.Unlock()
		return
	}
	r.cause = cause
	close(r.killed)
	if r.grp != nil && d.state == 1 {
		d.sendGroup(r.grp) // so it ends now, not at the group timeout
	}
	d.mu.Unlock()
	d.be.kill(r)
}

// abandon deletes the jobs of rs that have not ended, for a wait whose
// context ended, and forgets their results when they end.
func (d *Driver) abandon(rs []*record, cause error) {
	var open []*record
	d.mu.Lock()
	for _, r := range rs {
		select {
		case <-r.done:
			continue // ended: its result stays to be collected
		default:
		}
		if !r.abandoned {
			r.abandoned = true
			d.dropped++
			r.prod.dropped++
		}
		open = append(open, r)
	}
	d.mu.Unlock()
	for _, r := range open {
		d.deleteJob(r, cause)
	}
}

// await waits until the job or ctx ends and reports whether the job did.
// A job that has already ended wins over an ended context (select alone
// would pick at random): its result is reported, not dropped.
func (r *record) await(ctx context.Context) bool {
	select {
	case <-r.done:
		return true
	default:
	}
	select {
	case <-r.done:
		return true
	case <-ctx.Done():
		return false
	}
}

// cancelled reports whether the job was cancelled (cheap, no lock).
func (r *record) cancelled() bool {
	select {
	case <-r.killed:
		return true
	default:
		return false
	}
}

// WaitForOne waits for the job with key k to end and returns how it ended;
// the error is res.Err (a *JobError when the job has no exit status: deleted,
// blocked, lost). Its result is then collected: a later wait on k is an
// error, and WaitForAll does not return it again.
//
// If ctx ends first, WaitForOne returns ctx's error and the job is given
// up: deleted (killed if running) and its result dropped when it ends, as
// exec.CommandContext's process is. To look without giving up, use Results
// or a WaitForOne whose context does not end.
func (d *Driver) WaitForOne(ctx context.Context, k Key) (Result, error) {
	d.mu.Lock()
	r := d.records[k]
	d.mu.Unlock()
	if r == nil {
		return Result{Key: k, Exit: -1}, fmt.Errorf("driver: no job with key %d waits to be collected", k)
	}
	d.flushFor([]*record{r})
	if !r.await(ctx) {
		d.abandon([]*record{r}, context.Cause(ctx))
		d.mu.Lock()
		id := r.id // 0 if it was never submitted
		d.mu.Unlock()
		return Result{Key: k, ID: id, Exit: -1}, ctx.Err()
	}
	d.collect([]*record{r})
	return r.res, r.res.Err
}

// WaitForAll waits for every job issued by any producer and not yet
// collected, and returns their results in issue order. The error, if any,
// counts the jobs without an exit status and names the first. If ctx ends
// first, the jobs not yet ended are deleted, as with WaitForOne; jobs an
// earlier wait gave up on that way are not waited for again.
func (d *Driver) WaitForAll(ctx context.Context) ([]Result, error) {
	d.mu.Lock()
	rs := make([]*record, 0, len(d.records))
	for _, r := range d.records {
		if !r.abandoned { // given up by an earlier wait: not waited for again
			rs = append(rs, r)
		}
	}
	d.mu.Unlock()
	slices.SortFunc(rs, func(a, b *record) int { return int(a.key - b.key) })
	return d.waitAll(ctx, rs)
}

// WaitForAll waits for every job this producer issued and has not
// collected, and returns their results in issue order.
func (p *Producer) WaitForAll(ctx context.Context) ([]Result, error) {
	d := p.d
	d.mu.Lock()
	rs := make([]*record, 0, p.live)
	for _, k := range p.keys {
		if r := d.records[k]; r != nil && !r.abandoned {
			rs = append(rs, r)
		}
	}
	d.mu.Unlock()
	return d.waitAll(ctx, rs)
}

func (d *Driver) waitAll(ctx context.Context, rs []*record) ([]Result, error) {
	d.flushFor(rs)
	for _, r := range rs {
		if !r.await(ctx) {
			d.abandon(rs, context.Cause(ctx))
			return nil, ctx.Err()
		}
	}
	d.collect(rs)
	out := make([]Result, len(rs))
	var first error
	bad := 0
	for i, r := range rs {
		out[i] = r.res
		if r.res.Err != nil {
			bad++
			if first == nil {
				first = r.res.Err
			}
		}
	}
	if bad > 0 {
		return out, fmt.Errorf("%d of %d jobs have no exit status; the first: %w", bad, len(rs), first)
	}
	return out, nil
}

// flushFor sends the incomplete group bundles that hold any of rs: a
// program waiting for a job gains nothing from its bundle waiting for the
// group timeout.
func (d *Driver) flushFor(rs []*record) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.state != 1 {
		return
	}
	for _, r := range rs {
		if r.grp != nil {
			d.sendGroup(r.grp)
		}
	}
}

// collect forgets ended records whose results were handed out.
func (d *Driver) collect(rs []*record) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range rs {
		d.forget(r)
	}
}

// forget drops a record; d.mu is held. It reports whether the record was
// still there (not collected before).
func (d *Driver) forget(r *record) bool {
	if d.records[r.key] != r {
		return false
	}
	delete(d.records, r.key)
	p := r.prod
	p.live--
	// Drop collected keys from the producer's list once they dominate,
	// so a program that only uses WaitForOne stays bounded too.
	if len(p.keys) > 64 && len(p.keys) > 2*p.live {
		p.keys = slices.DeleteFunc(p.keys, func(k Key) bool { return d.records[k] == nil })
	}
	return true
}

// Pending is how many issued jobs have not ended yet (at most the buffer
// size).
func (d *Driver) Pending() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.live
}
