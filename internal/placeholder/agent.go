// Package placeholder is the agent that runs inside a placeholder (a batch
// job, or a process the CLS forks for the local site): it pulls jobs from
// the CLS, runs each with /bin/sh -c (or directly, when the line is one
// plain command) in its own process group, heartbeats their leases,
// reports how they ended, and pulls again. Local and remote placeholders
// run this same code; only the transport differs.
package placeholder

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/internal/backoff"
	"github.com/mq-hpc/mq/internal/diskroom"
	"github.com/mq-hpc/mq/internal/jobexec"
	"github.com/mq-hpc/mq/internal/outstream"
	"github.com/mq-hpc/mq/internal/placeholder/fence"
	"github.com/mq-hpc/mq/internal/placeholder/holding"
	"github.com/mq-hpc/mq/internal/placeholder/hung"
	"github.com/mq-hpc/mq/internal/placeholder/memlimit"
	"github.com/mq-hpc/mq/internal/placeholder/scratch"
	"github.com/mq-hpc/mq/internal/placeholder/started"
	"github.com/mq-hpc/mq/internal/placeholder/sumcache"
	"github.com/mq-hpc/mq/internal/placeholder/sweep"
	"github.com/mq-hpc/mq/internal/resource"
	"github.com/mq-hpc/mq/protocol"
)

// Config configures an Agent.
type Config struct {
	// Dial opens a transport to the CLS.
	Dial func(ctx context.Context) (io.ReadWriteCloser, error)
	Site string
	Host string
	// BatchID is the batch job this placeholder is, if a batch system
	// started it (see BatchJobID).
	BatchID string
	// Slots is how many jobs run at once (default 1) when Capacity is
	// not given; with it, Slots is its cores.
	Slots int
	// Capacity is what the placeholder offers its jobs (Advertise's
	// result); zero: Slots cores and nothing else. Jobs are admitted by
	// what they were granted (Assignment.Grant; none is one core) against
	// what is free, not by slots. Asked and CapacityNote go to the CLS
	// with it, for cls site list.
	Capacity     resource.Capacity
	Asked        resource.Capacity
	CapacityNote string
	// MemLimiter enforces jobs' memory grants; nil: memlimit.New's
	// choice, made when the first job with a memory grant starts (the
	// cgroup limiter moves the agent into a child cgroup).
	MemLimiter memlimit.Limiter
	// OutDir receives jobs' stdout and stderr files.
	OutDir string
	// MaxOutput is the most a job attempt may write to stdout and stderr
	// together (0: DefaultMaxOutput; negative: no cap). OutputReserve is
	// the free space kept on OutDir's filesystem (0: none). A job that
	// would go past either is killed and fails with the reason: its output
	// must not fill the disk the CLS's database may share.
	MaxOutput     int64
	OutputReserve int64
	// Streams writes jobs' stdout and stderr as chunks of a few stream
	// files under OutDir/streams instead of a file per output, and
	// reports where each lies (streams.go). StreamRotate is the size past
	// which a stream file is left for a new one (0: DefaultStreamRotate),
	// StreamAge the age (0: DefaultStreamAge).
	// StreamNoSync leaves out the fsync of a stream file before the reports
	// naming it leave: what was written survives the agent's crash all the
	// same (the kernel holds it), not the machine's; a CLS that does not
	// sync placeholders' reports either (cls serve --sync submit, normal)
	// asks for it.
	Streams      bool
	StreamRotate int64
	StreamAge    time.Duration
	StreamNoSync bool
	// Walltime is the placeholder's own time limit (0 = none): it never
	// takes a job expected to outlast it.
	Walltime time.Duration
	// IdleTimeout ends the agent after this long without work (0 = never).
	IdleTimeout time.Duration
	// Reconnect is how long to keep trying to reach a lost CLS before giving
	// up (default 10 min); running jobs go on meanwhile.
	Reconnect time.Duration
	// ExitWhenOrphaned ends the agent, once idle, if its parent process
	// changes: a local placeholder whose CLS died must not outlive it forever.
	ExitWhenOrphaned bool
	// NoOp reports every job as succeeded without running it: it measures
	// the scheduling path alone (dispatch, report, commit).
	NoOp bool
	// StageOutput copies each job's stdout and stderr to the CLS (op
	// output) before reporting it, so users read them on the CLS host. Remote
	// placeholders set it; local ones write where the CLS reads.
	StageOutput bool
	// DataRoot is where this site keeps the files staged to it (absolute):
	// a declared path P is at DataRoot+P, and a job submitted in directory
	// C runs in DataRoot+C. "" = the CLS host's filesystem is shared, and
	// paths are used as they are. See data.go.
	DataRoot string
	Log      *slog.Logger
	// Now is the clock of the agent's time-based decisions: the walltime
	// left, the reconnect deadline, the idle timeout, how long a poll has
	// been out and a job held (default time.Now; tests move it). It may be
	// called from several goroutines. Jobs' own times (their reports, how
	// long they run) are the real clock's.
	Now func() time.Time

	// prefetchWindow overrides the package's, and with it what counts as
	// short and how long a job may be held (tests: a slow machine must not
	// turn short jobs into long ones).
	prefetchWindow time.Duration
}

// BatchJobID is the id of the batch job the calling process runs in, as
// its submit command printed it: Slurm's SLURM_JOB_ID, PBS's PBS_JOBID,
// Grid Engine's JOB_ID (most specific first: JOB_ID is a common name).
func BatchJobID(getenv func(string) string) string {
	for _, v := range []string{"SLURM_JOB_ID", "PBS_JOBID", "JOB_ID"} {
		if id := getenv(v); id != "" {
			return id
		}
	}
	return ""
}

// Agent is one placeholder.
type Agent struct {
	cfg   Config
	start time.Time
	ppid  int
	// getppid is os.Getppid (a test's, to orphan the agent at will).
	getppid func() int
	log     *slog.Logger
	// lineage begins every attemptID of this agent: random, so that
	// agents on one host never share one.
	lineage string

	// id is the CLS's number for this placeholder, 0 until it registers:
	// read without mu, which a reconnection holds through its dial (up to
	// 30 s), and the job output written meanwhile needs it (streamSet).
	id atomic.Int64

	mu      sync.Mutex
	cl      *client.Client
	hbEvery time.Duration
	// connected is when cl was made; churn spaces out reconnections
	// after connections that died young (session).
	connected time.Time
	churn     backoff.Backoff

	runMu   sync.Mutex
	running map[int64]*proc
	held    map[int64]protocol.JobRef // fetched ahead, not started
	// started are jobs handed out ahead that started, for the CLS to
	// hear of on the next message (package started).
	started started.Set
	// holding are the attempts handed to this agent whose end the CLS
	// has not acknowledged (holding.Set). recvMu is read-locked from a
	// request's send until its reply's jobs are in holding, and locked
	// while a registration lists them: no job read on a connection is
	// missing from the list when the agent registers on the next.
	holding holding.Set
	recvMu  sync.RWMutex

	memOnce sync.Once
	memLim  memlimit.Limiter

	dirs sync.Map       // output shard dirs already made
	sums sumcache.Cache // staged inputs already hashed, by identity
	// create opens a job's output file; nil is createOutput (tests make
	// writes fail with it).
	create func(path string) (io.WriteCloser, error)
	statfs func(dir string) (diskroom.Free, error) // diskroom.Dir (tests fill and empty disks with it)
	// room: whether writes of jobs' output are refused for want of room
	// (room.go); the work loop pauses while they are, as for the reserve.
	room diskroom.Watch
	// diskFull: the work loop pauses for the output disk (workLoop.diskFull);
	// heartbeats go on without jobs to name, so the CLS keeps hearing of it.
	diskFull atomic.Bool
	// broken: this node cannot run jobs (broken.go): the work loop
	// drains; saidBroken: a heartbeat told the CLS so.
	broken     atomic.Pointer[error]
	saidBroken atomic.Bool
	devNull    *os.File // jobs' stdin, opened once rather than per job
	// streams holds jobs' output with Config.Streams; nil: a file each.
	// filesAsked: the CLS asked for a file each all the same
	// (RegisterReply.OutputFiles, cls serve --output files).
	streams    *streamSet
	filesAsked atomic.Bool
	// liveKick wakes the live shipper when a job is followed anew (live.go).
	liveKick chan struct{}
	// lostCLS: a heartbeat found the CLS unreachable past Config.Reconnect
	// (loseCLS); lostKick wakes the work loop to drain.
	lostCLS  atomic.Pointer[error]
	lostKick chan struct{}
	// sweep kills what attempts that ended left running.
	sweep *sweep.Sweeper

	reqMu sync.Mutex
	reqs  map[string]int64 // requests sent, by op (session.go)

	// wall reads the wall clock for jobs' start times (time.Now; tests
	// step it as NTP may).
	wall func() time.Time
	// clsAhead is how far the CLS's clock was ahead of wall at its last
	// reply that said (protocol.RegisterReply.Clock), in ns; 0: none
	// said. The spool carries it (spoolReports).
	clsAhead atomic.Int64
	// unkillable is how long a job's leader has to be reaped after
	// SIGKILL before the agent reports it ended and marks itself broken
	// (unkillable.go; defaultUnkillable). awaitExit waits for the exit
	// of attempt job's leader (jobexec.AwaitExit; tests hold it, as a
	// process in uninterruptible sleep does).
	unkillable time.Duration
	awaitExit  func(job protocol.JobRef, pidfd int) bool
	// fsWait bounds each filesystem call between a job's end and its
	// report (hangs.go; defaultFSWait); statGate and probeGate keep
	// statfs calls and room probes on a hung filesystem from piling up.
	fsWait              time.Duration
	statGate, probeGate hung.Gate
	// proc is where waitSinks looks for what a job left running: /proc
	// (tests hang a read there).
	proc string
	// statDir is os.Stat, for a job's working directory before its
	// launch (workDirWithin; tests hang it).
	statDir func(string) (os.FileInfo, error)
	// keep moves a won attempt's files from its scratch copy into the
	// job's directory ((*scratch.Dir).Commit; tests hang it).
	keep func(s *scratch.Dir, step func()) error
	// fence holds back writes to jobs' -o and -e files after the agent
	// was frozen past its lease, until the CLS says whose jobs they are.
	fence *fence.Watch
}

// New returns an agent; Run starts it.
func New(cfg Config) *Agent {
	if cfg.Slots < 1 {
		cfg.Slots = 1
	}
	if cfg.Capacity.CPUs > 0 {
		cfg.Slots = cfg.Capacity.CPUs
	} else {
		cfg.Capacity.CPUs = cfg.Slots
	}
	if cfg.Reconnect <= 0 {
		cfg.Reconnect = 10 * time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.prefetchWindow <= 0 {
		cfg.prefetchWindow = prefetchWindow
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	a := &Agent{cfg: cfg, log: cfg.Log, running: map[int64]*proc{}, held: map[int64]protocol.JobRef{}, hbEvery: time.Second, liveKick: make(chan struct{}, 1), lostKick: make(chan struct{}, 1), statfs: diskroom.Dir,
		churn: backoff.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second, Jitter: 0.5}, lineage: rand.Text()[:12]}
	a.sweep = sweep.New(a.log)
	a.wall = time.Now
	a.getppid = os.Getppid
	a.unkillable = defaultUnkillable
	a.fsWait, a.proc, a.statDir, a.keep = defaultFSWait, "/proc", os.Stat, (*scratch.Dir).Commit
	a.awaitExit = func(_ protocol.JobRef, pidfd int) bool { return jobexec.AwaitExit(pidfd) }
	a.fence = fence.New(nil)
	if cfg.Streams && !cfg.NoOp {
		a.streams = newStreamSet(cfg.OutDir, cfg.StreamRotate, cfg.Log)
		a.streams.wait = func() time.Duration { return a.fsWait }
		if cfg.StreamAge > 0 {
			a.streams.age = cfg.StreamAge
		}
		a.streams.dropShipped = cfg.StageOutput
		if cfg.StreamNoSync {
			a.streams.sync = func(*outstream.Writer) error { return nil }
		}
	}
	return a
}

func (a *Agent) now() time.Time { return a.cfg.Now() }

// ID is the placeholder id the CLS gave this agent (0 before it registered).
func (a *Agent) ID() int64 { return a.id.Load() }

// Run pulls and runs jobs until ctx ends, the CLS says exit, the idle
// timeout passes, or the CLS stays unreachable. When ctx ends, running jobs
// are killed and reported as interrupted.
func (a *Agent) Run(ctx context.Context) error {
	a.start = a.now()
	a.ppid = a.getppid()
	if err := a.cfg.Capacity.Validate(); err != nil {
		return err
	}
	if err := a.checkPlace(); err != nil {
		return err
	}
	if a.streams != nil {
		defer func() {
			// Its last sync may hang with the filesystem: the agent exits
			// all the same, and the kernel closes the files.
			if err := hung.Within(flushWait, "closing the stream files", func() error { a.streams.close(); return nil }); err != nil {
				a.log.Warn("exiting without closing the stream files", "err", err)
			}
		}()
	}
	if !a.cfg.NoOp {
		f, err := os.Open(os.DevNull)
		if err != nil {
			return err
		}
		defer f.Close()
		a.devNull = f
	}
	if _, err := a.session(ctx); err != nil {
		return err
	}
	hbCtx, stopHB := context.WithCancel(context.WithoutCancel(ctx))
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		a.heartbeats(hbCtx)
	}()
	go a.fence.Run(hbCtx)
	liveDone := make(chan struct{})
	go func() {
		defer close(liveDone)
		if a.cfg.StageOutput && !a.cfg.NoOp {
			a.shipLive(hbCtx) // live.go
		}
	}()
	filesDone := make(chan struct{})
	go func() {
		defer close(filesDone)
		if a.cfg.DataRoot != "" && !a.cfg.NoOp {
			a.serveFiles(hbCtx) // files.go
		}
	}()
	err := a.work(ctx)
	if err == nil {
		err = a.brokenErr()
	}
	a.sayBroken(ctx)
	if !a.sweep.Flush(flushWait) { // before the process may exit
		a.log.Warn("stopping without the sweep of what jobs left running: it does not end (a process in uninterruptible sleep?)")
	}
	stopHB()
	<-hbDone
	// Shipping live output and serving files read files, and a read on
	// a hung filesystem does not end: the agent waits a while for them,
	// not for ever.
	if err := hung.Within(flushWait, "reading output or staged files", func() error { <-liveDone; <-filesDone; return nil }); err != nil {
		a.log.Warn("exiting with a read of a file still out", "err", err)
	}
	a.log.Info("placeholder stopped", "placeholder", a.ID(), "requests", a.requests())
	a.mu.Lock()
	if a.cl != nil {
		a.cl.Close()
	}
	a.mu.Unlock()
	return err
}

// CheckTimes checks an agent's time settings as its command line gives
// them (--walltime, --idle, --reconnect): 0 (none, or the default) or a
// positive duration the protocol can carry.
func CheckTimes(walltime, idle, reconnect time.Duration) error {
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"walltime", walltime}, {"idle", idle}, {"reconnect", reconnect}} {
		if f.d < 0 || f.d.Seconds() > protocol.MaxSeconds {
			return fmt.Errorf("--%s must be 0..%v, not %v", f.name, time.Duration(protocol.MaxSeconds)*time.Second, f.d)
		}
	}
	return nil
}

// pastWalltime reports whether the agent's walltime (0: none) is over:
// it stops its jobs (move.StopJobs) and starts no more.
func (a *Agent) pastWalltime() bool {
	return a.cfg.Walltime > 0 && a.now().Sub(a.start) >= a.cfg.Walltime
}

func (a *Agent) walltimeLeft() float64 {
	if a.cfg.Walltime <= 0 {
		return 0
	}
	left := a.cfg.Walltime - a.now().Sub(a.start)
	if left < time.Second {
		return 1e-3 // nothing fits; 0 would mean unlimited
	}
	return left.Seconds()
}

// heartbeatEvery is the interval the CLS asked for (it may change at a
// reconnect, under a.mu).
func (a *Agent) heartbeatEvery() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.hbEvery
}

// heartbeats renews the leases of the jobs running, held or ended with
// their reports not yet acknowledged, and kills jobs the CLS no longer
// wants.
func (a *Agent) heartbeats(ctx context.Context) {
	t := time.NewTimer(a.heartbeatEvery())
	defer t.Stop()
	saidPaused := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		seen := a.fence.Look() // before the refs: a freeze is answered for by what follows it
		// holding names every attempt read and not yet acknowledged, so
		// it holds the running and held ones too; they are named from
		// a.running and a.held as well, so that a lease never rests on
		// holding alone being complete.
		refs := a.holding.AppendTo(a.runningRefs())
		// Paused goes out while the pause lasts, and once more at its end;
		// Broken while the agent drains.
		broken := a.brokenWhy()
		if paused := a.diskFull.Load(); len(refs) > 0 || paused || saidPaused || broken != "" {
			var reply protocol.HeartbeatReply
			started := a.started.List(a.now())
			err := call(ctx, a, protocol.OpHeartbeat, func(id int64) protocol.Heartbeat {
				return protocol.Heartbeat{Placeholder: id, Running: refs, Started: started, Paused: paused, Broken: broken}
			}, &reply)
			if err == nil && broken != "" {
				a.saidBroken.Store(true)
			}
			if errors.As(err, new(unreachable)) {
				a.loseCLS(err)
			}
			if err == nil {
				saidPaused = paused
				a.started.Sent(started)
				a.fence.Settle(seen, reply.Kill)
				for _, k := range reply.Kill {
					a.kill(k, protocol.ReasonKilled)
				}
				a.setFollowed(reply.Follow) // live.go
			}
		}
		t.Reset(a.heartbeatEvery())
	}
}

// OneProc runs the Go scheduler on one thread (GOMAXPROCS=1) unless the
// environment sets GOMAXPROCS. Commands that run an agent call it first:
// the agent coordinates, it does not compute, and with a scheduler thread
// per core each job's goroutines (start, wait, output, report) hop between
// threads. Measured with `true` jobs: 11 -> 3-4 context switches and 450
// -> 290 us of agent CPU per job.
func OneProc() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}
