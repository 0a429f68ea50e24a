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
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/protocol"
)

// Bounds of the configuration (thesis table 5.1).
const (
	MinConsumers = 2
	MaxConsumers = 512
	MinBuffer    = 100
	MaxBuffer    = 10000
)

// Defaults for zero fields of Config.
const (
	DefaultConsumers    = 4
	DefaultBuffer       = 1000
	DefaultTarget       = "driver"
	DefaultGroupTimeout = time.Second
	DefaultReconnect    = 10 * time.Minute
)

// Config configures a Driver. A zero field takes its default; a value out
// of range is an error from New, never silently clamped.
type Config struct {
	// Consumers is how many goroutines take jobs from the buffer: they
	// submit to the CLS, or, in local mode, run the jobs (so it is the
	// local parallelism). 2..512, default 4.
	Consumers int
	// Buffer is how many jobs may be issued and not yet ended: Exec blocks
	// while it is full. 100..10,000, default 1,000.
	Buffer int
	// Queue is the metaqueue queue jobs go to ("" = the default queue).
	Queue string
	// Target is the target of jobs that name none (default "driver").
	Target string
	// Dir is the working directory of jobs that name none (default: the
	// program's working directory when New is called).
	Dir string

	// Home is the MQ_HOME of the CLS to use (its socket is Home/cls.sock);
	// empty means what the commands use: $MQ_HOME, else ~/.mq.
	Home string
	// Dial, if set, opens the connection to the CLS instead of Home.
	Dial func(ctx context.Context) (io.ReadWriteCloser, error)
	// Local runs jobs in this process, up to Consumers at a time, without
	// a CLS (for trying a workflow out). Only when asked for: a driver
	// never falls back to it.
	Local bool
	// Reconnect is how long to keep trying to reach a lost CLS before the
	// jobs waited on fail (default 10 min). Jobs are durable in the CLS, so
	// a restarted CLS is simply waited for.
	Reconnect time.Duration

	// GroupTimeout is how long an incomplete group bundle waits for more
	// jobs before it is sent as it is (1 ms..1 h, default 1 s).
	GroupTimeout time.Duration

	// OutDir, in local mode, keeps each job's stdout and stderr: Start
	// creates it if missing, and in it a new directory for this run
	// (run-TIME-RANDOM, see Driver.RunDir) holding KEY.out and KEY.err, so
	// an earlier run's files are never overwritten. With OutDir "" the
	// output goes to a temporary directory removed by Stop. Either way
	// Result.Stdout and Result.Stderr read it. (With a CLS, output goes
	// where the placeholder puts it and is read through the CLS.)
	OutDir string

	Log *slog.Logger
}

// Validate checks every field's range.
func (c Config) Validate() error {
	if c.Consumers != 0 && (c.Consumers < MinConsumers || c.Consumers > MaxConsumers) {
		return fmt.Errorf("driver: consumers must be %d..%d, not %d", MinConsumers, MaxConsumers, c.Consumers)
	}
	if c.Buffer != 0 && (c.Buffer < MinBuffer || c.Buffer > MaxBuffer) {
		return fmt.Errorf("driver: buffer size must be %d..%d, not %d", MinBuffer, MaxBuffer, c.Buffer)
	}
	if c.GroupTimeout != 0 && (c.GroupTimeout < time.Millisecond || c.GroupTimeout > time.Hour) {
		return fmt.Errorf("driver: group timeout must be 1ms..1h, not %v", c.GroupTimeout)
	}
	if c.Reconnect < 0 {
		return fmt.Errorf("driver: reconnect time must not be negative (%v)", c.Reconnect)
	}
	if c.Local && (c.Home != "" || c.Dial != nil) {
		return errors.New("driver: Local runs jobs in this process: it takes no Home or Dial")
	}
	probe := protocol.JobSpec{Queue: c.Queue, Target: c.Target, Command: "true", Cwd: c.Dir}
	if probe.Target == "" {
		probe.Target = DefaultTarget
	}
	if err := protocol.ValidateSpec(&probe); err != nil {
		return fmt.Errorf("driver: %w", err)
	}
	return nil
}

func (c *Config) fill() error {
	if c.Consumers == 0 {
		c.Consumers = DefaultConsumers
	}
	if c.Buffer == 0 {
		c.Buffer = DefaultBuffer
	}
	if c.Target == "" {
		c.Target = DefaultTarget
	}
	if c.GroupTimeout == 0 {
		c.GroupTimeout = DefaultGroupTimeout
	}
	if c.Reconnect == 0 {
		c.Reconnect = DefaultReconnect
	}
	if !c.Local && c.Home == "" && c.Dial == nil {
		home, err := client.Home()
		if err != nil {
			return fmt.Errorf("driver: %w", err)
		}
		c.Home = home
	}
	if c.Dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("driver: working directory: %w", err)
		}
		c.Dir = wd
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

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

// cancelled reports whether the job was cancelled (cheap, no lock).
func (r *record) cancelled() bool {
	select {
	case <-r.killed:
		return true
	default:
		return false
	}
}

// Producer is a part of a program that issues jobs and waits for its own
// (the thesis's prod_id): WaitForAll on a producer waits only for its jobs.
type Producer struct {
	d       *Driver
	keys    []Key // issued and not yet collected (may hold collected ones until compacted)
	live    int   // records of this producer not yet collected
	dropped int   // of them, abandoned and not yet ended (Driver.dropped)
}

// Producer returns a new producer handle.
func (d *Driver) Producer() *Producer { return &Producer{d: d} }

// Option adds to a job what a command line does not say.
type Option func(*execOptions)

type execOptions struct {
	group   string
	target  string
	prereqs []string
	dir     string
	est     time.Duration
	inputs  []protocol.File
	outputs []protocol.File
	wrap    wrap
}

// Env adds environment variables, each "NAME=value", to the job's
// environment: the placeholder's (or, in local mode, this program's), plus
// MQ_* variables. A later entry for a name wins. NAME must be a shell
// variable name (letters, digits, _); values may hold any byte but NUL.
func Env(vars ...string) Option {
	return func(o *execOptions) { o.wrap.env = append(o.wrap.env, vars...) }
}

// Stdin gives the job data as its standard input (by default it reads
// /dev/null). At most MaxStdin bytes: the data travels in the job's
// command line. For more, use StdinFile.
func Stdin(data []byte) Option {
	return func(o *execOptions) { o.wrap.stdin, o.wrap.hasStdin = data, true }
}

// StdinFile makes the file at path, on the host where the job runs, its
// standard input (relative: to the job's directory). The file must be
// there when the job starts: on a shared file system, or declared with
// Input so data staging can bring it. A missing file fails the job (exit 2
// from the shell).
func StdinFile(path string) Option {
	return func(o *execOptions) { o.wrap.stdinFile = path }
}

// Group puts the job in a group (SetGroup) or pipeline (CreatePipeline).
func Group(name string) Option { return func(o *execOptions) { o.group = name } }

// Target names the job's target (default Config.Target).
func Target(name string) Option { return func(o *execOptions) { o.target = name } }

// Prereqs names targets that must be complete (every job of them done)
// before the job runs: the metaqueue's prerequisites.
func Prereqs(targets ...string) Option {
	return func(o *execOptions) { o.prereqs = append(o.prereqs, targets...) }
}

// Dir sets the job's working directory (absolute).
func Dir(dir string) Option { return func(o *execOptions) { o.dir = dir } }

// Estimate is the job's expected runtime, for scheduling.
func Estimate(d time.Duration) Option { return func(o *execOptions) { o.est = d } }

// Files declares files the job reads, of unknown size (Input with size
// -1 for each). Use Output for the files it writes.
func Files(paths ...string) Option {
	return func(o *execOptions) {
		for _, p := range paths {
			o.inputs = append(o.inputs, protocol.File{Path: p})
		}
	}
}

// Input declares a file the job reads and its size in bytes; a negative
// size means unknown, and then the file's size when the job is issued is
// taken if it exists. A queue with policy dc prefers placeholders near
// where the file was produced. A relative path is in the job's directory.
func Input(path string, size int64) Option {
	return func(o *execOptions) { o.inputs = append(o.inputs, declared(path, size)) }
}

// Output declares a file the job writes and its size in bytes (negative:
// unknown). When the job is done the CLS records where it was produced.
func Output(path string, size int64) Option {
	return func(o *execOptions) { o.outputs = append(o.outputs, declared(path, size)) }
}

func declared(path string, size int64) protocol.File {
	f := protocol.File{Path: path}
	if size >= 0 {
		f.Size = &size
	}
	return f
}

// Exec issues a job from the default producer; see Producer.Exec.
func (d *Driver) Exec(ctx context.Context, command string, opts ...Option) (Key, error) {
	return d.def.Exec(ctx, command, opts...)
}

// ExecSync runs a job from the default producer and returns its exit
// status; see Producer.ExecSync.
func (d *Driver) ExecSync(ctx context.Context, command string, opts ...Option) (int, error) {
	return d.def.ExecSync(ctx, command, opts...)
}

// Exec issues a job and returns its key once the job is in the buffer. It
// blocks while the buffer is full (until a job ends) or ctx ends. A bad
// command line or option is an error here, not later.
//
// As with exec.CommandContext, ctx bounds the job's life: if ctx ends
// before the job does, the job is deleted (killed if running), at the CLS
// or here alike, and ends with a *JobError (state X) that wraps ctx's
// error. Pass a context that lives as long as the job should; Stop, by
// contrast, lets issued jobs run to their end.
func (p *Producer) Exec(ctx context.Context, command string, opts ...Option) (Key, error) {
	d := p.d
	var o execOptions
	for _, opt := range opts {
		opt(&o)
	}
	command, err := o.wrap.script(command)
	if err != nil {
		return 0, fmt.Errorf("driver: %w", err)
	}
	spec := protocol.JobSpec{Queue: d.cfg.Queue, Target: o.target, Prereqs: o.prereqs, Command: command, Cwd: o.dir, Est: o.est.Seconds(),
		Inputs: o.inputs, Outputs: o.outputs}
	if spec.Target == "" {
		spec.Target = d.cfg.Target
	}
	if spec.Cwd == "" {
		spec.Cwd = d.cfg.Dir
	}
	if err := protocol.ValidateSpec(&spec); err != nil {
		return 0, fmt.Errorf("driver: %w", err)
	}
	protocol.FillSizes(&spec, os.Stat)
	if err := d.checkGroup(o.group); err != nil {
		return 0, err
	}
	// Take a buffer slot: this is the backpressure.
	select {
	case d.slots <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-d.stopping:
		return 0, ErrStopped
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	release := func(err error) (Key, error) {
		<-d.slots
		return 0, err
	}
	switch d.state {
	case 0:
		return release(ErrNotStarted)
	case 2:
		return release(ErrStopped)
	}
	d.nextKey++
	r := &record{key: d.nextKey, prod: p, done: make(chan struct{}), killed: make(chan struct{})}
	e := &entry{rec: r, spec: spec}
	lb, _ := d.be.(*localBackend)
	if lb != nil {
		lb.issue(spec.Target) // its dependents wait for it from now on
	}
	switch {
	case o.group == "":
		d.send(&unit{jobs: []*entry{e}})
	case d.groups[o.group] != nil:
		g := d.groups[o.group]
		r.grp = g
		g.pending = append(g.pending, e)
		if len(g.pending) >= g.bf {
			d.sendGroup(g)
		} else if len(g.pending) == 1 {
			gen := g.gen
			g.timer = time.AfterFunc(d.cfg.GroupTimeout, func() { d.groupTimeout(g, gen) })
		}
	case d.pipes[o.group] != nil:
		pl := d.pipes[o.group]
		pl.pending = append(pl.pending, e)
		if len(pl.pending) == pl.length {
			delete(d.pipes, o.group)
			d.send(&unit{jobs: pl.pending, bundle: pl.length > 1})
		}
	default:
		// The pipeline completed (another producer filled it) since checkGroup.
		if lb != nil {
			lb.unissue(spec.Target)
		}
		return release(fmt.Errorf("driver: no group or pipeline named %s", o.group))
	}
	d.records[r.key] = r
	d.live++
	p.keys = append(p.keys, r.key)
	p.live++
	if ctx.Done() != nil {
		// Like exec.CommandContext: the job lives no longer than ctx.
		r.stopCtx = context.AfterFunc(ctx, func() { d.deleteJob(r, context.Cause(ctx)) })
	}
	return r.key, nil
}

func (d *Driver) checkGroup(name string) error {
	if name == "" {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.groups[name] == nil && d.pipes[name] == nil {
		return fmt.Errorf("driver: no group or pipeline named %s", name)
	}
	return nil
}

func (d *Driver) groupTimeout(g *group, gen int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if g.gen == gen && d.state == 1 {
		d.sendGroup(g)
	}
}

// ExecSync issues a job and waits for it: it returns the job's own exit
// status, or an error (a *JobError if the job has none). If ctx ends
// first, the job is deleted and ExecSync returns ctx's error.
func (p *Producer) ExecSync(ctx context.Context, command string, opts ...Option) (int, error) {
	k, err := p.Exec(ctx, command, opts...)
	if err != nil {
		return -1, err
	}
	res, err := p.d.WaitForOne(ctx, k)
	return res.Exit, err
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
	select {
	case <-r.done:
	case <-ctx.Done():
		d.abandon([]*record{r}, context.Cause(ctx))
		return Result{Key: k, Exit: -1}, ctx.Err()
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
		select {
		case <-r.done:
		case <-ctx.Done():
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
