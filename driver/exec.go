package driver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

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
	after   []string // after-any
	dir     string
	est     time.Duration
	inputs  []protocol.File
	outputs []protocol.File
	wrap    wrap
	env     map[string]string // the job's environment, taken out of a Cmd's wrap
	res     protocol.Resources
	hold    bool
	prio    int
}

// Env adds environment variables, each "NAME=value", to the job's
// environment: the placeholder's (or, in local mode, this program's), plus
// MQ_* variables. A later entry for a name wins. NAME must be a shell
// variable name (letters, digits, _); values may hold any byte but NUL.
// They travel in the job's environment, which only its owner can read,
// not in its command line, which any user of its host can while it runs
// (ps); except a value that is not UTF-8, a name of mq's own (MQ_...) and
// what passes protocol.MaxEnvBytes (64 KiB) in all, which are exported by
// the command line.
func Env(vars ...string) Option {
	return func(o *execOptions) { o.wrap.env = append(o.wrap.env, vars...) }
}

// Stdin gives the job data as its standard input (by default it reads
// /dev/null). At most MaxStdin bytes: the data travels with the job, in
// its environment as Env's values do (in its command line when Env's
// leave no room). For more, use StdinFile.
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

// AfterAny names targets every job of which must have ended, in any
// state (done, failed, deleted or blocked), before the job runs: sbatch's
// afterany (mqsub --after-any). A cleanup job that must run even when the
// work before it fails; a failure never blocks it.
func AfterAny(targets ...string) Option {
	return func(o *execOptions) { o.after = append(o.after, targets...) }
}

// Dir sets the job's working directory (absolute).
func Dir(dir string) Option { return func(o *execOptions) { o.dir = dir } }

// Hold submits the job held (mqsub -H): it does not run, and jobs that
// need its target wait, until mqrls releases it. It needs a CLS: local
// mode refuses it, as nothing there could release the job.
func Hold() Option { return func(o *execOptions) { o.hold = true } }

// Priority orders the job among its queue's ready jobs (mqsub --priority):
// higher first, in -1024..1023. Local mode runs jobs in its own order and
// ignores it.
func Priority(p int) Option { return func(o *execOptions) { o.prio = p } }

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

// Resources says what the job asks of a placeholder: cores, memory,
// GPUs, named amounts (as mqsub -c, --mem, --gpus, --resource). A Cmd has
// it as a field. In local mode it is checked, not enforced.
func Resources(r protocol.Resources) Option { return func(o *execOptions) { o.res = r } }

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
// blocks while the buffer is full (until a job ends) or ctx ends; a ctx
// already ended is its error at once. A bad command line or option is an
// error here, not later.
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
	env, err := o.wrap.private()
	if err != nil {
		return 0, fmt.Errorf("driver: %w", err)
	}
	command, err = o.wrap.script(command)
	if err != nil {
		return 0, fmt.Errorf("driver: %w", err)
	}
	if o.env != nil {
		env = o.env
	}
	spec := protocol.JobSpec{Queue: d.cfg.Queue, Target: o.target, Prereqs: o.prereqs, AfterAny: o.after, Command: command, Cwd: o.dir, Est: o.est.Seconds(),
		Inputs: o.inputs, Outputs: o.outputs, Resources: o.res, Hold: o.hold, Priority: o.prio, Env: env}
	if spec.Target == "" {
		spec.Target = d.cfg.Target
	}
	if spec.Cwd == "" {
		spec.Cwd = d.cfg.Dir
	}
	if err := protocol.ValidateSpec(&spec); err != nil {
		return 0, fmt.Errorf("driver: %w", err)
	}
	if _, local := d.be.(*localBackend); local && o.hold {
		return 0, errors.New("driver: Hold needs a CLS; local mode has nothing to release the job")
	}
	if err := protocol.FillSizes(&spec, os.Stat); err != nil {
		return 0, fmt.Errorf("driver: %w", err)
	}
	if err := d.checkGroup(o.group); err != nil {
		return 0, err
	}
	// As exec.Cmd.Start does, an ended context issues nothing (the select
	// below could still take a free slot).
	if err := ctx.Err(); err != nil {
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
