package driver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/mq-hpc/mq/internal/jobexec"
	"github.com/mq-hpc/mq/protocol"
)

// localBackend runs jobs on this machine with os/exec: each consumer is a
// worker that runs one unit at a time, a bundle's jobs one after another in
// order. Jobs run as the metaqueue's placeholders run them (jobexec:
// /bin/sh -c, or the program itself for one plain command) in their own
// process group, stdin from /dev/null, exit status 128+N when
// killed by signal N.
//
// Prerequisites mean what they mean in the metaqueue, over the jobs this
// driver issued: a job runs once every job of each prerequisite target has
// succeeded (a target with no jobs yet means wait), and a failed or blocked
// one blocks it (state B). A unit that must wait is parked, not held by a
// consumer, so jobs issued after it (its prerequisites among them) still
// run; running units, parked ones released included, never exceed the
// consumers.
type localBackend struct {
	d   *Driver
	run func(context.Context, *entry) Result // b.exec; tests may replace it
	sem chan struct{}

	outDir string // this run's directory of KEY.out and KEY.err
	temp   bool   // outDir is temporary: removed by close
	host   string

	mu      sync.Mutex
	targets map[string]*targetCount
	parked  []*unit
	running sync.WaitGroup // released parked units
}

type targetCount struct{ total, done, bad int }

func newLocal(d *Driver) (*localBackend, error) {
	b := &localBackend{d: d, sem: make(chan struct{}, d.cfg.Consumers), targets: map[string]*targetCount{}}
	b.run = b.exec
	b.host, _ = os.Hostname()
	var err error
	if d.cfg.OutDir == "" {
		b.temp = true
		b.outDir, err = os.MkdirTemp("", "mq-driver-")
	} else if err = os.MkdirAll(d.cfg.OutDir, 0o755); err == nil {
		if err = checkOutDir(d.cfg.OutDir); err == nil {
			// A directory of its own per run: keys start at 1 in every
			// run, and an earlier run's KEY.out must not be overwritten.
			b.outDir, err = os.MkdirTemp(d.cfg.OutDir, time.Now().Format("run-20060102T150405-"))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("driver: output directory: %w", err)
	}
	return b, nil
}

// checkOutDir refuses an OutDir whose run directories another user could
// rename away and replace with a link to a directory of theirs, which
// would then receive (and could forge) the jobs' output: one that
// another user made first (in /tmp, say), one inside a directory another
// user owns, or one in a directory every user may write that is not
// sticky. A group's shared directory is the group's to trust.
func checkOutDir(dir string) error {
	real, err := filepath.Abs(dir)
	if err == nil {
		real, err = filepath.EvalSymlinks(real)
	}
	if err != nil {
		return fmt.Errorf("driver: output directory: %w", err)
	}
	for d := real; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("driver: output directory: %w", err)
		}
		st, _ := fi.Sys().(*syscall.Stat_t)
		foreign := st != nil && st.Uid != 0 && int(st.Uid) != os.Geteuid()
		if d == real && foreign {
			return fmt.Errorf("driver: output directory %s is owned by uid %d, not by you: they could read and replace the jobs' output; use a directory of your own", dir, st.Uid)
		}
		if fi.Mode().Perm()&0o002 != 0 && fi.Mode()&os.ModeSticky == 0 {
			return fmt.Errorf("driver: output directory %s: %s is writable by every user and not sticky (mode %04o): they could replace the jobs' output; use a directory of your own", dir, d, fi.Mode().Perm())
		}
		if foreign {
			return fmt.Errorf("driver: output directory %s is inside %s, owned by uid %d (not you or root): they could rename it away and replace the jobs' output; use a directory of your own", dir, d, st.Uid)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// RunDir is the directory where local mode keeps this run's output, KEY.out
// and KEY.err: a new directory in Config.OutDir (or a temporary one, removed
// by Stop, with OutDir ""). "" through a CLS or before Start.
func (d *Driver) RunDir() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if b, ok := d.be.(*localBackend); ok {
		return b.outDir
	}
	return ""
}

func (b *localBackend) paths(k Key) (stdout, stderr string) {
	name := filepath.Join(b.outDir, strconv.FormatUint(uint64(k), 10))
	return name + ".out", name + ".err"
}

// kill: a queued or parked job sees r.killed when its turn comes, a
// running one at once (exec); parked units are looked at again now.
func (b *localBackend) kill(r *record) { b.release(b.d.ctx) }

// open reads a job's output file.
func (b *localBackend) open(ctx context.Context, r *Result, s Stream) (io.ReadCloser, error) {
	out, errPath := b.paths(r.Key)
	path := out
	if s == Stderr {
		path = errPath
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) && b.temp {
		return nil, fmt.Errorf("driver: %s's %v is gone: it was in a temporary directory, removed by Stop (set Config.OutDir to keep output)", r.name(), s)
	}
	if err != nil {
		return nil, fmt.Errorf("driver: %s's %v: %w", r.name(), s, err)
	}
	if fi, err := f.Stat(); err == nil && fi.Size() > MaxOutput {
		f.Close()
		return nil, fmt.Errorf("driver: %s's %v is %d bytes (in %s): %w", r.name(), s, fi.Size(), path, ErrOutputTooLarge)
	}
	return f, nil
}

// issue counts a job of target as soon as it is issued, so its dependents
// wait for it even while it sits in the buffer.
func (b *localBackend) issue(target string) {
	b.mu.Lock()
	b.count(target).total++
	b.mu.Unlock()
}

// unissue takes back an issue whose job was never accepted.
func (b *localBackend) unissue(target string) {
	b.mu.Lock()
	b.count(target).total--
	b.mu.Unlock()
	b.release(b.d.ctx)
}

func (b *localBackend) count(target string) *targetCount {
	t := b.targets[target]
	if t == nil {
		t = &targetCount{}
		b.targets[target] = t
	}
	return t
}

// readiness says whether a unit may run now: every prerequisite of its jobs
// complete and every after-any one ended (ready), a prerequisite bad
// (blocked), else wait. Call with b.mu held.
func (b *localBackend) readiness(u *unit) (ready, blocked bool) {
	if !slices.ContainsFunc(u.jobs, func(e *entry) bool { return !e.rec.cancelled() }) {
		return true, false // all cancelled: runUnit ends them
	}
	ready = true
	for _, e := range u.jobs {
		for _, p := range e.spec.Prereqs {
			t := b.targets[p]
			switch {
			case t != nil && t.bad > 0:
				return false, true
			case t == nil || t.total == 0 || t.done < t.total:
				ready = false
			}
		}
		for _, p := range e.spec.AfterAny {
			if t := b.targets[p]; t == nil || t.total == 0 || t.done+t.bad < t.total {
				ready = false
			}
		}
	}
	return ready, false
}

func (b *localBackend) close() {
	b.running.Wait()
	if b.temp {
		defer os.RemoveAll(b.outDir)
	}
	b.mu.Lock()
	parked := b.parked
	b.parked = nil
	b.mu.Unlock()
	for _, u := range parked {
		for _, e := range u.jobs {
			b.d.finish(e.rec, Result{Err: &JobError{Key: e.rec.key, Reason: "driver stopped while it waited for its prerequisites"}})
		}
	}
}

func (b *localBackend) consume(ctx context.Context) {
	for u := range b.d.ready {
		b.mu.Lock()
		ready, blocked := b.readiness(u)
		if !ready && !blocked {
			b.parked = append(b.parked, u)
			b.mu.Unlock()
			continue
		}
		b.mu.Unlock()
		b.runUnit(ctx, u, blocked)
	}
}

// runUnit runs a unit (or reports it blocked), then releases parked units
// its end made ready.
func (b *localBackend) runUnit(ctx context.Context, u *unit, blocked bool) {
	for _, e := range u.jobs {
		var res Result
		switch {
		case e.rec.cancelled():
			res = Result{State: "X", Err: &JobError{Key: e.rec.key, State: "X"}}
		case blocked:
			res = Result{State: "B", Err: &JobError{Key: e.rec.key, State: "B"}}
		case ctx.Err() != nil:
			res = Result{Err: &JobError{Key: e.rec.key, Reason: "driver stopped before it ran"}}
		default:
			b.sem <- struct{}{}
			res = b.run(ctx, e)
			<-b.sem
		}
		b.mu.Lock()
		t := b.count(e.spec.Target)
		if res.State == "D" {
			t.done++
		} else {
			t.bad++ // failed, blocked or never run: its dependents cannot run
		}
		b.mu.Unlock()
		b.d.finish(e.rec, res)
	}
	b.release(ctx)
}

// release runs the parked units that are now ready or blocked.
func (b *localBackend) release(ctx context.Context) {
	b.mu.Lock()
	var keep []*unit
	type pending struct {
		u       *unit
		blocked bool
	}
	var start []pending
	for _, u := range b.parked {
		ready, blocked := b.readiness(u)
		if ready || blocked {
			start = append(start, pending{u, blocked})
		} else {
			keep = append(keep, u)
		}
	}
	b.parked = keep
	b.running.Add(len(start))
	b.mu.Unlock()
	for _, s := range start {
		go func() {
			defer b.running.Done()
			b.runUnit(ctx, s.u, s.blocked)
		}()
	}
}

func (b *localBackend) exec(ctx context.Context, e *entry) Result {
	k := e.rec.key
	fail := func(err error) Result { // as a placeholder reports it: exit 127
		return Result{State: "F", Exit: 127, Reason: "could not start: " + err.Error()}
	}
	env := append(os.Environ(), "MQ_TARGET="+e.spec.Target, "MQ_QUEUE="+e.spec.Queue, "MQ_DRIVER_KEY="+strconv.FormatUint(uint64(k), 10))
	for _, name := range slices.Sorted(maps.Keys(e.spec.Env)) { // the job's own, as a placeholder adds them
		env = append(env, name+"="+e.spec.Env[name])
	}
	cmd, direct := jobexec.Command(e.spec.Command, env, e.spec.Cwd)
	// O_EXCL: a run's directory is new, so a file there is never an
	// earlier run's.
	outPath, errPath := b.paths(k)
	out, err := os.OpenFile(outPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fail(err)
	}
	defer out.Close()
	errf, err := os.OpenFile(errPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fail(err)
	}
	defer errf.Close()
	start := func(cmd *exec.Cmd) error {
		cmd.Dir = e.spec.Cwd
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Stdout, cmd.Stderr = out, errf
		return cmd.Start()
	}
	ran := Result{Attempt: 1, Site: "local", Host: b.host, Started: time.Now(), out: b}
	if why := inputsMissing(e.spec); why != "" {
		// As a placeholder: the command does not run.
		ran.Finished, ran.State, ran.Exit, ran.Reason = ran.Started, "F", 127, why
		return ran
	}
	err = start(cmd)
	if err != nil && direct {
		cmd = jobexec.Shell(e.spec.Command, env) // as a placeholder does
		err = start(cmd)
	}
	if err != nil {
		// A chdir failing in the child is reported as fork/exec of
		// /bin/sh: name the directory instead, as a placeholder does.
		if fi, serr := os.Stat(e.spec.Cwd); serr != nil {
			err = fmt.Errorf("working directory %s: %w", e.spec.Cwd, errors.Unwrap(serr))
		} else if !fi.IsDir() {
			err = fmt.Errorf("working directory %s is not a directory", e.spec.Cwd)
		}
		return fail(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	stop := func(why error) {
		pg := cmd.Process.Pid
		syscall.Kill(-pg, syscall.SIGTERM)
		t := time.AfterFunc(time.Second, func() { syscall.Kill(-pg, syscall.SIGKILL) }) // a placeholder's grace
		<-waited
		t.Stop()
		syscall.Kill(-pg, syscall.SIGKILL)
		ran.Finished = time.Now()
		ran.Exit = -1
		ran.Err = why
	}
	select {
	case <-waited:
	case <-e.rec.killed:
		stop(&JobError{Key: k, State: "X", Reason: "killed"})
		ran.State = "X"
		return ran
	case <-ctx.Done():
		stop(&JobError{Key: k, Reason: fmt.Sprintf("killed: driver stopped (%v)", ctx.Err())})
		return ran
	}
	ran.Finished = time.Now()
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // leave no stragglers, like a placeholder
	ps := cmd.ProcessState
	ran.Exit = ps.ExitCode()
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		ran.Exit = 128 + int(ws.Signal())
	}
	u := jobexec.UsageOf(ps) // as a placeholder measures it
	ran.Usage.CPU, ran.Usage.MaxRSS = time.Duration((u.CPUUser+u.CPUSys)*float64(time.Second)), u.MaxRSS
	ran.State = "D"
	if ran.Exit != 0 {
		ran.State = "F"
	} else if why := outputsMissing(e.spec); why != "" {
		// Exit 1, as a placeholder reports it: a job that exited 0 and
		// failed must not read as a success to Run, Output or ExecSync.
		ran.State, ran.Exit, ran.Reason = "F", 1, why
	}
	return ran
}

// inputsMissing says why a job's declared inputs keep it from running,
// as a placeholder sharing this machine's files would ("" when nothing
// does): each must be a regular file. Sizes are not compared: without the
// CLS's catalog the size taken at submit is stale once a prerequisite
// writes the file again.
func inputsMissing(js protocol.JobSpec) string {
	for _, f := range js.Inputs {
		fi, err := os.Stat(f.Path) // absolute: ValidateSpec made it so
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return "input: " + f.Path + " missing"
		case err != nil:
			return "input: " + err.Error()
		case !fi.Mode().IsRegular():
			return "input: " + f.Path + " is not a regular file"
		}
	}
	return ""
}

// outputsMissing says which declared output a job that exited 0 did not
// write, as a placeholder fails it ("" when it wrote them all). Paths
// are absolute: ValidateSpec made them so.
func outputsMissing(js protocol.JobSpec) string {
	for _, f := range js.Outputs {
		if _, err := os.Stat(f.Path); errors.Is(err, fs.ErrNotExist) {
			return "output: " + f.Path + " was not created"
		} else if err != nil {
			return "output: " + err.Error()
		}
	}
	return ""
}
