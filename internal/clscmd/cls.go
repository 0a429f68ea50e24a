// Package clscmd implements the cls command: serve (the CLS), agent (a
// placeholder), key, site and queue. It links the metaqueue, SQLite and
// the SSH server, which the user commands of internal/cli do not.
package clscmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/crypto/ssh"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/internal/agentcmd"
	mqcli "github.com/mq-hpc/mq/internal/cli"
	"github.com/mq-hpc/mq/internal/mqhome"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/metaqueue"
	"github.com/mq-hpc/mq/policy"
	"github.com/mq-hpc/mq/protocol"
	"github.com/mq-hpc/mq/server"
	"github.com/mq-hpc/mq/site"
	"github.com/mq-hpc/mq/sshserver"
)

// Cls returns the cls command: the command-line server and its admin verbs.
func Cls(env mqcli.Env) *cli.App {
	app := mqcli.NewApp("cls", "the mq command-line server (CLS) and its administration", env)
	app.Commands = []*cli.Command{clsServe(), clsQueue(env), clsKey(env), clsAgent(), clsSite(env)}
	app.Action = func(c *cli.Context) error {
		if c.NArg() > 0 {
			return mqcli.Usagef("unknown command %q", c.Args().First())
		}
		return mqcli.Usagef("missing command (serve, queue, key, agent, site)")
	}
	return app
}

func clsServe() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "run the CLS in the foreground (stop with SIGINT or SIGTERM)",
		Description: `Keeps the metaqueue in $MQ_HOME (default ~/.mq): mq.db (SQLite), cls.sock (the
socket mqsub/mqstat/mqdel use), cls.log, and output/ (jobs' stdout and stderr
from local placeholders).`,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "local", Usage: "local placeholders to keep running, the site local of cls site list (0 = none)", Value: runtime.NumCPU()},
			&cli.IntFlag{Name: "slots", Usage: "jobs each local placeholder runs at once", Value: 1},
			&cli.DurationFlag{Name: "lease", Usage: "requeue a job when its placeholder is silent this long", Value: 30 * time.Second},
			&cli.StringFlag{Name: "sync", Usage: "commit durability: submit (users' changes survive power loss; placeholder traffic survives a crash of the CLS, so after a power loss jobs that just ended may rerun), full (every commit survives power loss) or normal (every commit survives a crash of the CLS)", Value: string(metaqueue.SyncSubmit)},
			&cli.StringFlag{Name: "log-level", Usage: "debug, info, warn or error", Value: "info"},
			&cli.BoolFlag{Name: "noop", Usage: "local placeholders report jobs done without running them (benchmarks the scheduling path)"},
			&cli.StringFlag{Name: "ssh", Usage: "also accept SSH connections on `ADDR` (host:port), authenticated by the keys of `cls key`"},
			&cli.GenericFlag{Name: "site-net", Value: &siteNets{}, Usage: "network of a site for dc queues, `SITE=LATENCY_S,BANDWIDTH` (bytes/s, units allowed: 100M); SITE default applies to sites not named (repeat)"},
			&cli.StringFlag{Name: "cpuprofile", Usage: "write a CPU profile of the CLS to `FILE` (performance work)", Hidden: true},
			&cli.StringFlag{Name: "agents", Usage: "directory of placeholder agents for remote sites (mqagent-linux-amd64, ...; default: beside cls)"},
			&cli.DurationFlag{Name: "site-poll", Usage: "how often each site's placeholders are looked at", Value: 2 * time.Second},
			&cli.DurationFlag{Name: "site-throttle", Usage: "a site whose placeholder waits this long in its batch queue is throttled: it keeps one queued and submits no more, so the work goes to sites whose placeholders start sooner", Value: 5 * time.Minute},
			&cli.DurationFlag{Name: "connect-timeout", Usage: "a remote site's placeholder that runs this long without connecting is cancelled and its site marked degraded (cls site add --connect-timeout sets it per site)", Value: 2 * time.Minute},
		},
		Action: serve,
	}
}

func serve(c *cli.Context) error {
	if c.NArg() > 0 {
		return mqcli.Usagef("serve takes no arguments (got %q)", c.Args().First())
	}
	n := c.Int("local")
	if n < 0 || n > 4096 {
		return mqcli.Usagef("--local must be 0..4096, not %d", n)
	}
	slots := c.Int("slots")
	if slots < 1 || slots > 4096 {
		return mqcli.Usagef("--slots must be 1..4096, not %d", slots)
	}
	if err := checkDurations(c, map[string][2]time.Duration{
		"lease":         {time.Second, 24 * time.Hour},
		"site-poll":     {100 * time.Millisecond, time.Hour},
		"site-throttle": {time.Second, 366 * 24 * time.Hour},
	}); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.String("log-level"))); err != nil {
		return mqcli.Usagef("--log-level: %v", err)
	}
	if c.Duration("connect-timeout") < time.Second {
		return mqcli.Usagef("--connect-timeout must be at least 1s, not %s", c.Duration("connect-timeout"))
	}
	// Everything the CLS makes is its user's alone. Local placeholders
	// get the umask back for their jobs (cls agent --umask).
	jobUmask := syscall.Umask(0o077)
	defer syscall.Umask(jobUmask)
	home, warning, err := openHome()
	if err != nil {
		return err
	}
	unlock, err := lockHome(home)
	if err != nil {
		return err
	}
	defer unlock()
	logf, err := mqhome.OpenFile(filepath.Join(home, "cls.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("cannot open the log: %w", err)
	}
	defer logf.Close()
	log := slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: level}))
	if warning != "" {
		log.Warn(warning)
		fmt.Fprintf(c.App.ErrWriter, "cls: warning: %s\n", warning)
	}
	if err := mqhome.MkdirAll(filepath.Join(home, "output")); err != nil {
		return err
	}

	stopProfile, err := startProfile(c.String("cpuprofile"))
	if err != nil {
		return err
	}
	defer stopProfile()
	ctx := c.Context
	nets := c.Generic("site-net").(*siteNets)
	store, err := metaqueue.Open(ctx, metaqueue.Options{
		Path: filepath.Join(home, "mq.db"), Sync: metaqueue.Sync(c.String("sync")),
		Lease: c.Duration("lease"), Logger: log, OutputDir: filepath.Join(home, "output"),
		Links: nets.links, DefaultLink: nets.def,
	})
	if err != nil {
		return err
	}
	defer store.Close()
	// Loading a large metaqueue leaves garbage of its scan behind: give it
	// back now rather than carry it until the heap grows into it.
	debug.FreeOSMemory()

	sock := client.SocketPath(home)
	if len(sock) > 100 {
		return fmt.Errorf("socket path %s is too long for a Unix socket; use a shorter MQ_HOME", sock)
	}
	os.Remove(sock)                     // the lock says no live CLS owns it
	ln, err := net.Listen("unix", sock) // mode 0600: the umask
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w", sock, err)
	}
	defer os.Remove(sock)

	srvCtx, stopSrv := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSrv()
	srv := &server.Server{Store: store, Log: log, Version: mqcli.Version, OutputDir: filepath.Join(home, "output")}
	st, err := newSites(home, store, log, c.Duration("site-poll"), c.Duration("site-throttle"), c.String("agents"))
	if err != nil {
		return err
	}
	st.mgr.ConnectTimeout = c.Duration("connect-timeout")
	// --local N is the site "local", run by the same Manager as every
	// other: its N placeholders are children of this process, replaced
	// when they end (their jobs requeued at once), stopped with the CLS.
	// The flag is the whole truth about it; it is never stored.
	st.agentLog, st.noop, st.umask = logf, c.Bool("noop"), jobUmask
	if n > 0 {
		st.mgr.Embedded = []protocol.SiteSpec{{Name: site.EmbeddedName, Type: site.Local, Min: n, Max: n, Slots: slots}}
	}
	st.install(srv)
	serveErr := make(chan error, 2)
	go func() { serveErr <- srv.Serve(srvCtx, ln, protocol.RoleAdmin) }() // the socket is the owner's

	var sshSrv *sshserver.Server
	if addr := c.String("ssh"); addr != "" {
		hostKey, err := sshserver.LoadOrCreateHostKey(filepath.Join(home, sshserver.HostKeyFileName))
		if err != nil {
			return err
		}
		sln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("--ssh: %w", err)
		}
		defer sln.Close()
		sshSrv = &sshserver.Server{HostKey: hostKey, Log: log, Proto: srv,
			Keys: sshserver.NewKeyFile(filepath.Join(home, sshserver.KeyFileName)),
			Exec: sshExec(func(who server.Peer) io.ReadWriteCloser {
				a, b := net.Pipe()
				go srv.ServePeer(srvCtx, b, who)
				return a
			}),
		}
		go func() { serveErr <- sshSrv.Serve(srvCtx, sln) }()
		st.sshAddr = sln.Addr()
		fp := ssh.FingerprintSHA256(hostKey.PublicKey())
		log.Info("SSH endpoint listening", "addr", sln.Addr().String(), "host_key", fp)
		fmt.Fprintf(c.App.ErrWriter, "cls: SSH on %s, host key %s\n", sln.Addr(), fp)
	}

	if err := st.start(srvCtx); err != nil {
		return err
	}
	log.Info("CLS started", "home", home, "local", n, "version", mqcli.Version)
	fmt.Fprintf(c.App.ErrWriter, "cls: serving MQ_HOME=%s with %d local placeholders (log: %s)\n", home, n, logf.Name())

	select {
	case <-ctx.Done():
	case err = <-serveErr:
	}
	log.Info("CLS stopping")
	st.stop() // local placeholders report their interrupted jobs first

	stopSrv()
	ln.Close()
	store.Close()
	srv.Wait()
	if sshSrv != nil {
		sshSrv.Wait()
	}
	log.Info("CLS stopped")
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// startProfile writes a CPU profile to path until stop is called ("" = none).
func startProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
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
	return func() { f.Close() }, nil
}

func clsAgent() *cli.Command {
	return &cli.Command{
		Name:  "agent",
		Usage: "run a placeholder agent: pull jobs from a CLS, run them, report",
		Description: `Without --cls the agent reaches the CLS of $MQ_HOME over its Unix socket (what
local placeholders do). With --cls HOST:PORT it keeps one SSH connection to
that CLS, authenticating with a placeholder key (--key) and accepting only the
CLS host key pinned with --host-key (the fingerprint or public key that
` + "`cls key host`" + ` prints); jobs' stdout and stderr are kept in --out and
copied to the CLS when each job ends. Flags: cls agent --help (the same as
mqagent's, declared once in internal/agentcmd).`,
		SkipFlagParsing: true,
		Action: func(c *cli.Context) error {
			err := agentcmd.Run(c.Context, "cls agent", agentcmd.Local, c.Args().Slice(), c.App.ErrWriter)
			var ue agentcmd.UsageError
			if errors.As(err, &ue) {
				return mqcli.Usagef("%s", ue.Msg)
			}
			return err
		},
	}
}

func clsQueue(env mqcli.Env) *cli.Command {
	return &cli.Command{
		Name:  "queue",
		Usage: "show and set queue properties",
		Subcommands: []*cli.Command{
			{
				Name:  "list",
				Usage: "list queues and their properties",
				Action: func(c *cli.Context) error {
					cl, err := mqcli.Dial(c.Context, env, "cls")
					if err != nil {
						return err
					}
					defer cl.Close()
					ql, err := client.Do(c.Context, cl, protocol.OpQueueList, protocol.Empty{})
					if err != nil {
						return err
					}
					printQueues(c.App.Writer, ql.Queues)
					return nil
				},
			},
			queueSet(env),
		},
	}
}

// queueSet parses its own flags so they may come before or after QUEUE
// (`cls queue set q --ceiling 2h`), which urfave/cli's flag parsing does not
// allow.
func queueSet(env mqcli.Env) *cli.Command {
	return &cli.Command{
		Name:            "set",
		Usage:           "create a queue or change its properties",
		ArgsUsage:       "QUEUE",
		SkipFlagParsing: true,
		Flags: []cli.Flag{ // for --help; parsed below
			&cli.StringFlag{Name: "ceiling", Usage: "longest a job may run, e.g. 90, 90s, 2h (0 = no limit)"},
			&cli.IntFlag{Name: "max-attempts", Usage: "times a job may be dispatched before it fails"},
			&cli.BoolFlag{Name: "retry-failed", Usage: "retry jobs that exit non-zero (within max-attempts)"},
			&cli.StringFlag{Name: "policy", Usage: "scheduling policy: " + policyHelp()},
		},
		Action: func(c *cli.Context) error {
			fs := flag.NewFlagSet("cls queue set", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			ceiling := fs.String("ceiling", "", "")
			maxAttempts := fs.Int("max-attempts", 0, "")
			retry := fs.Bool("retry-failed", false, "")
			pol := fs.String("policy", "", "")
			names, err := parseInterspersed(fs, c.Args().Slice())
			if errors.Is(err, flag.ErrHelp) {
				return cli.ShowSubcommandHelp(c)
			}
			if err != nil {
				return err
			}
			if len(names) != 1 {
				return mqcli.Usagef("queue set takes exactly one QUEUE")
			}
			qs := protocol.QueueSet{Name: names[0]}
			fs.Visit(func(f *flag.Flag) {
				switch f.Name {
				case "ceiling":
					d, perr := parseSeconds(*ceiling)
					if perr != nil {
						err = mqcli.Usagef("--ceiling: %v", perr)
					}
					qs.Ceiling = &d
				case "max-attempts":
					qs.MaxAttempts = maxAttempts
				case "retry-failed":
					qs.RetryFailed = retry
				case "policy":
					qs.Policy = pol
				}
			})
			if err != nil {
				return err
			}
			cl, err := mqcli.Dial(c.Context, env, "cls")
			if err != nil {
				return err
			}
			defer cl.Close()
			qi, err := client.Do(c.Context, cl, protocol.OpQueueSet, qs)
			if err != nil {
				return err
			}
			printQueues(c.App.Writer, []protocol.QueueInfo{qi})
			return nil
		},
	}
}

// parseInterspersed parses fs's flags wherever they are among args (flag
// stops at the first argument; urfave/cli too) and returns the other
// arguments: `cls queue set q --ceiling 2h` and `cls queue set --ceiling 2h q`
// mean the same. flag.ErrHelp comes back as is.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var names []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, mqcli.Usagef("%s", mqcli.FlagMessage(err))
		}
		if fs.NArg() == 0 {
			return names, nil
		}
		names = append(names, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// parseSeconds reads "90" (seconds) or a Go duration such as "1h30m",
// 0..protocol.MaxSeconds.
func parseSeconds(s string) (float64, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if !(f >= 0 && f <= protocol.MaxSeconds) { // also NaN
			return 0, fmt.Errorf("%q is not 0..%g seconds (about 31 years)", s, float64(protocol.MaxSeconds))
		}
		return f, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not a duration (e.g. 90, 90s, 2h)", s)
	}
	if d.Seconds() > protocol.MaxSeconds {
		return 0, fmt.Errorf("%q is more than %g seconds (about 31 years)", s, float64(protocol.MaxSeconds))
	}
	return d.Seconds(), nil
}

// checkDurations checks duration flags against their ranges; a flag whose
// value is out of range is a usage error naming it.
func checkDurations(c *cli.Context, ranges map[string][2]time.Duration) error {
	for name, r := range ranges {
		if d := c.Duration(name); d < r[0] || d > r[1] {
			return mqcli.Usagef("--%s must be %v..%v, not %v", name, r[0], r[1], d)
		}
	}
	return nil
}

func printQueues(w io.Writer, qs []protocol.QueueInfo) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tCEILING\tMAX ATTEMPTS\tRETRY FAILED\tPOLICY")
	for _, q := range qs {
		ceiling := "none"
		if q.Ceiling > 0 {
			ceiling = protocol.Duration(q.Ceiling).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%v\t%s\n", protocol.Printable(q.Name), ceiling, q.MaxAttempts, q.RetryFailed, protocol.Printable(q.Policy))
	}
	tw.Flush()
}

// siteNets collects --site-net SITE=LATENCY_S,BANDWIDTH values.
type siteNets struct {
	links map[string]metaqueue.Link
	def   metaqueue.Link
}

func (n *siteNets) Set(v string) error {
	site, spec, ok := strings.Cut(v, "=")
	lat, bw, ok2 := strings.Cut(spec, ",")
	if !ok || !ok2 || site == "" {
		return fmt.Errorf("%q is not SITE=LATENCY_S,BANDWIDTH (e.g. clusterA=0.5,10M)", v)
	}
	var l metaqueue.Link
	var err error
	if l.Latency, err = strconv.ParseFloat(lat, 64); err != nil || !(l.Latency > 0) || l.Latency > 3600 {
		return fmt.Errorf("%s: latency %q is not a number of seconds > 0", site, lat)
	}
	b, err := protocol.ParseSize(bw)
	if err != nil || b == 0 {
		return fmt.Errorf("%s: bandwidth %q is not a number of bytes per second > 0 (e.g. 10M)", site, bw)
	}
	l.Bandwidth = float64(b)
	if site == "default" {
		n.def = l
		return nil
	}
	if err := job.ValidName("site", site); err != nil {
		return err
	}
	if n.links == nil {
		n.links = map[string]metaqueue.Link{}
	}
	n.links[site] = l
	return nil
}

func (n *siteNets) String() string { return "" }

// policyHelp lists the policies for --help, from the one registry.
func policyHelp() string {
	var b strings.Builder
	for i, p := range policy.All() {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s (%s)", p.Name, p.Summary)
	}
	return b.String()
}
