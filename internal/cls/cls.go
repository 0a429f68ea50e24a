// Package cls is the command-line server: the one process per user that
// keeps the metaqueue and serves it. New assembles it in an MQ_HOME (lock,
// log, store, the Unix socket, the optional SSH endpoint, the site
// manager with the embedded local site); Run serves until its context
// ends; Close releases what is left.
//
// The cls command (cmd/internal/clscmd) turns flags into a Config; tests start
// a CLS in-process the same way.
package cls

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mq-hpc/mq/internal/filelock"
	"github.com/mq-hpc/mq/internal/metaqueue/catalog"
	"github.com/mq-hpc/mq/internal/metaqueue/dc"

	"golang.org/x/crypto/ssh"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/internal/metaqueue"
	"github.com/mq-hpc/mq/internal/metaqueue/inspect"
	"github.com/mq-hpc/mq/internal/mqhome"
	"github.com/mq-hpc/mq/internal/netfs"
	"github.com/mq-hpc/mq/internal/placeholder"
	"github.com/mq-hpc/mq/internal/server"
	"github.com/mq-hpc/mq/internal/site"
	"github.com/mq-hpc/mq/internal/sshserver"
	"github.com/mq-hpc/mq/internal/stage"
	"github.com/mq-hpc/mq/internal/web"
	"github.com/mq-hpc/mq/protocol"
)

// Config is what a CLS is started with. The zero value of each field but
// Home is a sensible default.
type Config struct {
	// Home is MQ_HOME: mq.db, cls.sock, cls.log, output/, sites/ and the
	// SSH keys live there. It is made (mode 0700) when missing and refused
	// when anyone else could write it (see mqhome).
	Home string

	// Local is how many placeholders the CLS keeps running as its own
	// children (the site "local"); each runs Slots jobs at once.
	Local int
	Slots int
	// NoOp makes those local placeholders report jobs done without
	// running them (benchmarks of the scheduling path).
	NoOp bool
	// AgentExe is the program local placeholders run, with `agent` and
	// its flags (default: this executable, which must then be cls).
	AgentExe string

	// Lease requeues a job whose placeholder is silent this long
	// (default 30s). Sync is the commit durability (default SyncSubmit).
	Lease time.Duration
	Sync  metaqueue.Sync
	// Links and DefaultLink price transfers for dc queues (--site-net).
	Links       map[string]dc.Link
	DefaultLink dc.Link

	// MaxOutput is the most a job attempt run by a local placeholder may
	// write to stdout and stderr together (0: placeholder.DefaultMaxOutput;
	// negative: no cap). OutputReserve is the free space jobs' output
	// leaves on MQ_HOME's filesystem, for the database (0:
	// DefaultOutputReserve; negative: none). See reserve.go.
	MaxOutput     int64
	OutputReserve int64
	// OutputFiles makes placeholders write a file per job's stdout and
	// stderr (output/) instead of a few stream files each
	// (output/streams), the default: local ones by their command line,
	// remote ones told when they register (RegisterReply.OutputFiles),
	// whose streams are shipped to the CLS's copies (op output.ship).
	OutputFiles bool

	// StageWorkers is how many files the CLS moves at once for data
	// staging (default DefaultStageWorkers).
	StageWorkers int

	// SSHAddr, when set, is where the SSH endpoint listens (host:port).
	SSHAddr string
	// Commands runs a command line a user key sends over SSH (mqsub,
	// mqstat, ...); dial connects it to this CLS with the key's role. Nil
	// refuses every command.
	Commands func(dial func(server.Peer) io.ReadWriteCloser) sshserver.ExecFunc

	// Agents is the directory of mqagent-OS-ARCH binaries uploaded to
	// remote sites (default: beside this executable).
	Agents string
	// SitePoll is how often each site's placeholders are looked at
	// (default 2s); SiteThrottle throttles a site whose placeholder waits
	// this long in its batch queue (default 5m); ConnectTimeout cancels a
	// remote placeholder that runs this long without connecting (default
	// 2m).
	SitePoll       time.Duration
	SiteThrottle   time.Duration
	ConnectTimeout time.Duration
	// PartitionGrace is how long the jobs of a remote site's placeholders
	// that fell silent keep running, their leases held, while the site
	// cannot be reached either: a network cut, not dead placeholders, may
	// be why (metaqueue.Options.PartitionGrace). 0: 30m; negative: their
	// leases lapse as they run out.
	PartitionGrace time.Duration
	// AgentReconnect is how long local placeholders try to reach a lost
	// CLS before they give up, spooling the reports they could not
	// deliver (their --reconnect; 0: theirs, 10m).
	AgentReconnect time.Duration
	// LPMinUtil is seed 001's W_MIN for sites that follow lp, in [0, 1).
	LPMinUtil float64

	// LogLevel filters what goes to Home/cls.log; LogFormat is text (the
	// default) or json. ReopenLog reopens the file (logrotate).
	LogLevel  slog.Level
	LogFormat string
	// LogMax bounds cls.log: a write that would take it past this moves
	// it to cls.log.1 first (0: DefaultLogMax; negative: no bound).
	LogMax int64

	// HTTPAddr, when set, is where the read-only dashboard and /metrics
	// listen (package web); an empty host (":8642") is 127.0.0.1. A
	// non-loopback address needs HTTPPublic. Every request needs the
	// token in Home/http.token (made, mode 0600, when missing), on
	// loopback too; DashboardURL says the address with it.
	HTTPAddr   string
	HTTPPublic bool
	// HTTPPath is the path the dashboard is served under ("": the root),
	// for a proxy that passes its prefix on (web.Config.Path).
	HTTPPath string
	// HTTPConns bounds the dashboard's connections open at once (0:
	// web.DefaultMaxConns).
	HTTPConns int
	// Follow, when set, replaces how a running job's output streams to
	// its dashboard page (default: the CLS's own, CLS.Output).
	Follow web.Follow
	// Notes receives the few lines a person starting the CLS should see
	// (warnings about MQ_HOME, the SSH host key); nil discards them.
	Notes io.Writer
	// Version is reported to clients in hello.
	Version string
	// AllowNetworkFS serves a home on a network filesystem all the same
	// (checkLocalHome refuses it otherwise).
	AllowNetworkFS bool

	// fsKind says what filesystem a directory is on (nil: netfs.Of;
	// tests stand in for NFS with it).
	fsKind func(dir string) (netfs.Kind, error)
}

// DefaultPartitionGrace is Config.PartitionGrace's default: past the
// placeholders' own wait for a lost CLS (10m), after which they spool
// their jobs' reports for it to read when the site is back.
const DefaultPartitionGrace = 30 * time.Minute

func (cfg *Config) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&cfg.Lease, 30*time.Second)
	def(&cfg.SitePoll, 2*time.Second)
	def(&cfg.SiteThrottle, 5*time.Minute)
	def(&cfg.ConnectTimeout, 2*time.Minute)
	def(&cfg.PartitionGrace, DefaultPartitionGrace)
	if cfg.Slots == 0 {
		cfg.Slots = 1
	}
	if cfg.Sync == "" {
		cfg.Sync = metaqueue.SyncSubmit
	}
	if cfg.Notes == nil {
		cfg.Notes = io.Discard
	}
}

// prior is a site's configured link (--site-net), which the measured one
// replaces only in what is measured.
func (cfg *Config) prior(site string) dc.Link {
	if l, ok := cfg.Links[site]; ok && l.Latency > 0 && l.Bandwidth > 0 {
		return l
	}
	if l := cfg.DefaultLink; l.Latency > 0 && l.Bandwidth > 0 {
		return l
	}
	return dc.DefaultSiteLink
}

// check refuses settings no CLS could run with. The cls command checks
// its flags first, with messages that name them; this is the backstop for
// programs that fill a Config themselves.
func (cfg *Config) check() error {
	switch {
	case cfg.Home == "":
		return errors.New("cls: Config.Home is empty")
	case cfg.Local < 0 || cfg.Local > 4096:
		return fmt.Errorf("cls: %d local placeholders is not 0..4096", cfg.Local)
	case cfg.Slots < 1 || cfg.Slots > 4096:
		return fmt.Errorf("cls: %d slots is not 1..4096", cfg.Slots)
	case cfg.Lease < time.Second:
		return fmt.Errorf("cls: a lease of %v is shorter than a second", cfg.Lease)
	case cfg.StageWorkers < 0 || cfg.StageWorkers > 1024:
		return fmt.Errorf("cls: %d stage workers is not 0..1024", cfg.StageWorkers)
	case cfg.ConnectTimeout < time.Second:
		return fmt.Errorf("cls: a connect timeout of %v is shorter than a second", cfg.ConnectTimeout)
	case cfg.LogFormat != "" && cfg.LogFormat != "text" && cfg.LogFormat != "json":
		return fmt.Errorf("cls: log format %q is not text or json", cfg.LogFormat)
	case cfg.HTTPPublic && cfg.HTTPAddr == "":
		return errors.New("cls: HTTPPublic without HTTPAddr")
	case cfg.HTTPPath != "" && cfg.HTTPAddr == "":
		return errors.New("cls: --http-path without --http")
	case web.CheckPath(cfg.HTTPPath) != nil:
		return fmt.Errorf("cls: --http-path: %w", web.CheckPath(cfg.HTTPPath))
	}
	return nil
}

// CLS is a running command-line server.
type CLS struct {
	cfg  Config
	home string
	log  *slog.Logger

	// closers run in reverse order by Close; each part New made adds one.
	closers []func()
	// umask is the process's umask before New set 077: local
	// placeholders give it back to their jobs.
	umask int

	logf    *logFile
	store   *metaqueue.Store
	metrics *web.Metrics // nil without HTTPAddr
	dash    *dashboard   // nil without HTTPAddr
	srv     *server.Server
	ln      net.Listener // the socket
	sshLn   net.Listener // nil without SSHAddr
	sshSrv  *sshserver.Server
	sites   *sites
	stager  *stager
	// outputs serves jobs' output as it is written (op output.stream,
	// Output).
	outputs *outputs

	runOnce   sync.Once
	closeOnce sync.Once
	// keepRunning: Run's stop leaves local placeholders running (KeepRunning).
	keepRunning atomic.Bool

	beforeStart func() // a test's hook: runs in Run before the sites start
	// spoolCheck, a test's hook, wraps the site check the store's core
	// runs for each spool file (deliverSpool).
	spoolCheck func(check func(site string) bool) func(site string) bool
}

// New opens the CLS of cfg.Home: it takes the home's lock (one CLS per
// home), opens the log and the metaqueue, and listens on the socket and,
// with SSHAddr, on the SSH port. It serves nothing until Run.
//
// While a CLS is open the process's umask is 077, so that everything the
// CLS makes (the socket included) is its user's alone; Close restores it.
// It is process-wide: run one CLS per process.
func New(ctx context.Context, cfg Config) (*CLS, error) {
	cfg.setDefaults()
	if err := cfg.check(); err != nil {
		return nil, err
	}
	c := &CLS{cfg: cfg}
	if err := c.open(ctx); err != nil {
		c.release()
		return nil, err
	}
	return c, nil
}

// open does New's work; on error, release undoes what it did.
func (c *CLS) open(ctx context.Context) error {
	if err := c.openHome(); err != nil {
		return err
	}
	outReserve, err := c.openStore(ctx)
	if err != nil {
		return err
	}
	if err := c.serveSites(outReserve); err != nil {
		return err
	}
	if c.cfg.SSHAddr != "" {
		if err := c.listenSSH(); err != nil {
			return err
		}
	}
	if err := c.listenHTTP(); err != nil { // or says there is no dashboard
		return err
	}
	// The socket last: a command that finds it answering (cls dashboard
	// url reads MQ_HOME/http.url then) finds all the rest in place.
	return c.listenSocket()
}

// outputDir is where jobs' output is kept.
func (c *CLS) outputDir() string { return filepath.Join(c.home, "output") }

// openHome sets the umask, takes the home's lock, and opens the log.
func (c *CLS) openHome() error {
	cfg := c.cfg
	c.umask = syscall.Umask(0o077)
	c.closers = append(c.closers, func() { syscall.Umask(c.umask) })

	home, warning, err := OpenHome(cfg.Home)
	if err != nil {
		return err
	}
	c.home = home
	fsName, err := checkLocalHome(home, cfg.fsKind, cfg.AllowNetworkFS)
	if err != nil {
		return err
	}
	unlock, err := lockHome(home)
	if err != nil {
		return err
	}
	c.closers = append(c.closers, unlock)
	logMax := cfg.LogMax
	if logMax == 0 {
		logMax = DefaultLogMax
	}
	logf, err := openLogFile(filepath.Join(home, "cls.log"), max(logMax, 0))
	if err != nil {
		return err
	}
	c.logf = logf
	c.closers = append(c.closers, func() { logf.Close() })
	if c.log, err = newLogger(logf, cfg.LogFormat, cfg.LogLevel); err != nil {
		return err
	}
	if fsName != "" {
		warning = joinWarnings(warning, fmt.Sprintf("MQ_HOME %s is on %s, a network filesystem: served there as --allow-network-fs asks", home, fsName))
	}
	if warning != "" {
		c.log.Warn(warning)
		fmt.Fprintf(cfg.Notes, "cls: warning: %s\n", warning)
	}
	return mqhome.MkdirAll(c.outputDir())
}

// openStore opens the metaqueue, with the stager it reports to and the
// disk reserve it frees when the disk fills. It returns the free space
// staged output leaves on the output directory's filesystem.
func (c *CLS) openStore(ctx context.Context) (outReserve int64, err error) {
	cfg := c.cfg
	// The stager serves the store, and reports to it: it is made first,
	// finds places through the sites (made after the store) and starts
	// once both exist. Whatever the sites, it is there: with only the
	// local site nothing ever needs moving.
	c.stager = newStager(cfg.StageWorkers, func(ctx context.Context, p catalog.Place) (stage.Place, bool, error) {
		return c.sites.place(ctx, p)
	}, cfg.prior, c.log)
	var observer metaqueue.Observer
	if cfg.HTTPAddr != "" {
		c.metrics = web.NewMetrics()
		observer = c.metrics
	}
	outReserve = cfg.OutputReserve
	if outReserve == 0 {
		if outReserve, err = DefaultOutputReserve(c.home); err != nil {
			return 0, err
		}
	}
	outReserve = max(outReserve, 0)
	reserve, err := newDiskReserve(filepath.Join(c.home, "reserve"), c.log)
	if err != nil {
		return 0, err
	}
	keepDone := make(chan struct{})
	go tend(keepDone, 10*time.Second, reserve.make, newWALWatch(filepath.Join(c.home, "mq.db"), c.log).check)
	c.closers = append(c.closers, func() { close(keepDone) })
	// After a commit failed for want of room, placeholders' writes and
	// submits wait for twice the reserve free: the reserve, released for
	// deletes, does not count as room for them.
	c.store, err = metaqueue.Open(ctx, metaqueue.Options{
		Path: filepath.Join(c.home, "mq.db"), Sync: cfg.Sync, Lease: cfg.Lease, PartitionGrace: max(cfg.PartitionGrace, 0),
		Logger: c.log, OutputDir: c.outputDir(), Links: cfg.Links, DefaultLink: cfg.DefaultLink,
		Stager: c.stager, Observer: observer, OnFull: reserve.release, MinFree: 2 * reserve.size,
	})
	if err != nil {
		return 0, err
	}
	c.closers = append(c.closers, func() { c.store.Close() })
	if err := raiseStreamMark(ctx, filepath.Join(c.home, "mq.db"), filepath.Join(c.outputDir(), protocol.StreamDir)); err != nil {
		c.log.Warn("could not keep the ids of the placeholders whose stream copies are kept from being given again", "err", err)
	}
	noteLocked(ctx, filepath.Join(c.home, "mq.db"), cfg.Notes)
	// Loading a large metaqueue leaves garbage of its scan behind: give it
	// back now rather than carry it until the heap grows into it.
	debug.FreeOSMemory()
	return outReserve, nil
}

// listenSocket listens on the home's Unix socket; Run serves it.
func (c *CLS) listenSocket() error {
	sock := client.SocketPath(c.home)
	if len(sock) > 100 {
		return fmt.Errorf("socket path %s is too long for a Unix socket; use a shorter MQ_HOME", sock)
	}
	os.Remove(sock) // the lock says no live CLS owns it
	var err error
	if c.ln, err = net.Listen("unix", sock); err != nil {
		return fmt.Errorf("cannot listen on %s: %w", sock, err)
	}
	c.closers = append(c.closers, func() { c.ln.Close(); os.Remove(sock) })
	return nil
}

// serveSites makes the request server and the sites, installs the ops
// beyond the metaqueue's (sites, plans, files, output), and starts the
// stager.
func (c *CLS) serveSites(outReserve int64) error {
	cfg := c.cfg
	c.srv = &server.Server{Store: c.store, Log: c.log, Version: cfg.Version, OutputDir: c.outputDir(), OutputReserve: outReserve,
		OutputFiles: cfg.OutputFiles, SyncStreams: cfg.Sync == metaqueue.SyncFull}
	var err error
	if c.sites, err = newSites(c.home, c.store, c.log, cfg.SitePoll, cfg.SiteThrottle, cfg.Agents); err != nil {
		return err
	}
	c.sites.mgr.ConnectTimeout = cfg.ConnectTimeout
	c.sites.reconnect = cfg.AgentReconnect
	c.sites.mgr.LPMinUtil = cfg.LPMinUtil
	// Local is the site "local", run by the same Manager as every other:
	// its placeholders are children of this process, replaced when they
	// end (their jobs requeued at once), stopped with the CLS. The Config
	// is the whole truth about it; it is never stored.
	c.sites.agentLog, c.sites.noop, c.sites.umask, c.sites.agentExe = c.logf, cfg.NoOp, c.umask, cfg.AgentExe
	c.sites.logJSON = cfg.LogFormat == "json"
	// A stream is synced before its reports leave only where the CLS
	// syncs their commits: a power loss loses both alike otherwise.
	c.sites.streams, c.sites.streamsSync = !cfg.OutputFiles, cfg.Sync == metaqueue.SyncFull
	c.sites.maxOutput, c.sites.outputReserve = max(cfg.MaxOutput, 0), outReserve
	if cfg.MaxOutput == 0 {
		c.sites.maxOutput = placeholder.DefaultMaxOutput
	}
	if cfg.Local > 0 {
		c.sites.mgr.Embedded = []protocol.SiteSpec{{Name: site.EmbeddedName, Type: site.Local, Min: cfg.Local, Max: cfg.Local, Slots: cfg.Slots}}
		// Never stored: the store learns of it here, so that a job
		// submitted before its placeholders register is not warned of
		// as too long for the stored sites' walltimes.
		if err := c.store.Resources().Embedded(context.Background(), site.EmbeddedName); err != nil {
			return err
		}
	}
	c.sites.install(c.srv)
	prev := c.srv.OnPlaceholder
	c.srv.OnPlaceholder = func(id int64, reg protocol.Register, connected bool) {
		prev(id, reg, connected)
		c.sites.connected.set(id, reg, connected)
	}
	(&plans{store: c.store, sites: c.sites, log: c.log}).install(c.srv)
	fl := &files{store: newStoreFiles(c.store), places: c.sites.place, home: c.home, local: c.sites.local(), stager: c.stager, log: c.log, now: time.Now}
	fl.install(c.srv)
	c.outputs = &outputs{store: jobWaiter{c.store.Inspect(), c.store}, streamDir: filepath.Join(c.outputDir(), protocol.StreamDir)}
	c.outputs.install(c.srv)
	c.stager.alt = c.sites.agentAlt
	c.sites.stagingNote = c.stager.full.note
	c.stager.start(newStoreFiles(c.store))
	c.closers = append(c.closers, c.stager.stop) // runs before the store closes
	return nil
}

// listenSSH opens the SSH endpoint; Run serves it.
func (c *CLS) listenSSH() error {
	hostKey, err := sshserver.LoadOrCreateHostKey(filepath.Join(c.home, sshserver.HostKeyFileName))
	if err != nil {
		return err
	}
	c.sshLn, err = net.Listen("tcp", c.cfg.SSHAddr)
	if err != nil {
		return fmt.Errorf("SSH endpoint: %w", err)
	}
	c.closers = append(c.closers, func() { c.sshLn.Close() })
	c.sshSrv = &sshserver.Server{HostKey: hostKey, Log: c.log, Proto: c.srv,
		Keys: sshserver.NewKeyFile(filepath.Join(c.home, sshserver.KeyFileName))}
	c.sites.sshAddr = c.sshLn.Addr()
	fp := ssh.FingerprintSHA256(hostKey.PublicKey())
	c.log.Info("SSH endpoint listening", "addr", c.sshLn.Addr().String(), "host_key", fp)
	fmt.Fprintf(c.cfg.Notes, "cls: SSH on %s, host key %s\n", c.sshLn.Addr(), fp)
	return nil
}

// Home is the real path of the CLS's MQ_HOME.
func (c *CLS) Home() string { return c.home }

// SSHAddr is the address the SSH endpoint listens on (nil without one).
func (c *CLS) SSHAddr() net.Addr {
	if c.sshLn == nil {
		return nil
	}
	return c.sshLn.Addr()
}

// Run serves the socket, the SSH endpoint and the sites until ctx ends or
// a listener fails, then stops them: local placeholders report their
// interrupted jobs before the store closes. Run may be called once;
// Close must still be called after it.
func (c *CLS) Run(ctx context.Context) error {
	err := errors.New("cls: Run called twice")
	c.runOnce.Do(func() { err = c.run(ctx) })
	return err
}

func (c *CLS) run(ctx context.Context) (err error) {
	// The server outlives ctx by the time the sites need to stop.
	srvCtx, stopSrv := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSrv()
	// Everything a request may reach is started before anything is
	// served: a client that waits for the socket to answer (mqstat in a
	// script, the tests) may then do anything else at once, `cls site add`
	// included. The listeners were opened by New, so a client connecting
	// meanwhile waits in the backlog; it is not refused.
	if c.beforeStart != nil {
		c.beforeStart()
	}
	if err := c.sites.start(srvCtx); err != nil {
		c.sites.stop(false)
		return err
	}
	spooled := c.deliverSpool(srvCtx)
	serveErr := make(chan error, 3)
	go func() { serveErr <- c.srv.Serve(srvCtx, c.ln, protocol.RoleAdmin) }() // the socket is the owner's
	if c.sshSrv != nil {
		if c.cfg.Commands != nil {
			c.sshSrv.Exec = c.cfg.Commands(func(who server.Peer) io.ReadWriteCloser {
				a, b := net.Pipe()
				go c.srv.ServePeer(srvCtx, b, who)
				return a
			})
		}
		go func() { serveErr <- c.sshSrv.Serve(srvCtx, c.sshLn) }()
	}
	// The dashboard stops first: its pages read the store.
	dashCtx, stopDash := context.WithCancel(srvCtx)
	dashDone := make(chan struct{})
	if c.dash != nil {
		go func() {
			defer close(dashDone)
			if err := c.dash.serve(dashCtx); err != nil {
				serveErr <- err
			}
		}()
	} else {
		close(dashDone)
	}
	defer func() { stopDash(); <-dashDone }()
	c.log.Info("CLS started", "home", c.home, "local", c.cfg.Local, "version", c.cfg.Version)

	select {
	case <-ctx.Done():
	case err = <-serveErr:
	}
	c.log.Info("CLS stopping")
	stopDash()
	<-dashDone
	c.stager.stop()                    // transfers end unreported: the store asks again after a restart
	c.sites.stop(c.keepRunning.Load()) // local placeholders report their interrupted jobs first, unless kept running
	stopSrv()
	<-spooled
	c.ln.Close()
	c.store.Close()
	c.srv.Wait()
	c.srv.FlushLog()
	if c.sshSrv != nil {
		c.sshSrv.Wait()
		c.sshSrv.FlushLog()
	}
	c.log.Info("CLS stopped")
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// Close releases everything New opened (after Run returned, or instead of
// it): the listeners and the socket file, the store, the log, the lock,
// and the umask.
func (c *CLS) Close() error {
	c.closeOnce.Do(c.release)
	return nil
}

func (c *CLS) release() {
	for i := len(c.closers) - 1; i >= 0; i-- {
		c.closers[i]()
	}
	c.closers = nil
}

// lockHome makes sure one CLS owns a home at a time. The lock dies with the
// process, so a killed CLS never leaves a stale lock.
func lockHome(home string) (func(), error) {
	f, err := mqhome.OpenFile(filepath.Join(home, "cls.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cannot lock MQ_HOME: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another CLS is already serving %s", home)
		}
		return nil, fmt.Errorf("cannot lock MQ_HOME: %w", err)
	}
	f.Truncate(0)
	fmt.Fprintf(f, "%d\n", os.Getpid())
	return func() { filelock.Close(f) }, nil
}

// jobWaiter is the store as reading jobs' output uses it: a job's detail
// from the read side, waits from the core.
type jobWaiter struct {
	*inspect.Reader
	*metaqueue.Store
}
