// Package clscmd implements the cls command: serve (the CLS), agent (a
// placeholder), key, site, queue and files. It links the metaqueue, SQLite and
// the SSH server, which the user commands of cmd/internal/cli do not.
package clscmd

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/mq-hpc/mq/cmd/internal/acct"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/cmd/internal/agentcmd"
	mqcli "github.com/mq-hpc/mq/cmd/internal/cli"
	"github.com/mq-hpc/mq/internal/cls"
	"github.com/mq-hpc/mq/internal/metaqueue"
	"github.com/mq-hpc/mq/internal/metaqueue/dc"
	"github.com/mq-hpc/mq/internal/mqhome"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/internal/walltime"
	"github.com/mq-hpc/mq/internal/web"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// Cls returns the cls command: the command-line server and its admin verbs.
func Cls(env mqcli.Env) *cli.App {
	app := mqcli.NewApp("cls", "the mq command-line server (CLS) and its administration", env)
	app.Commands = []*cli.Command{clsServe(), clsStop(), clsQueue(env), clsKey(env), clsAgent(), clsSite(env), clsFiles(env), clsPlan(env), mqcli.Purge(env), clsDashboard(), clsDocs()}
	app.Action = func(c *cli.Context) error {
		if c.NArg() > 0 {
			return mqcli.Usagef("unknown command %q", c.Args().First())
		}
		return mqcli.Usagef("missing command (serve, stop, queue, key, agent, site, files, plan, purge, dashboard)")
	}
	for _, cmd := range app.Commands {
		if len(cmd.Subcommands) > 0 && cmd.Action == nil {
			cmd.Action = unknownSubcommand(cmd)
		}
	}
	return app
}

// unknownSubcommand is the action of a command of subcommands given none
// of them: a usage error naming them ("cls site rm" said "No help topic
// for 'rm'", exit 1).
func unknownSubcommand(cmd *cli.Command) cli.ActionFunc {
	var names []string
	for _, sc := range cmd.Subcommands {
		if !sc.Hidden {
			names = append(names, sc.Name)
		}
	}
	return func(c *cli.Context) error {
		if c.NArg() > 0 {
			return mqcli.Usagef("unknown command %q of cls %s (one of: %s)", c.Args().First(), cmd.Name, strings.Join(names, ", "))
		}
		return mqcli.Usagef("missing command of cls %s (one of: %s)", cmd.Name, strings.Join(names, ", "))
	}
}

func clsServe() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "run the CLS in the foreground (stop with SIGINT or SIGTERM; SIGUSR1 stops it leaving local placeholders running their jobs, as cls stop --keep-running)",
		Description: `Keeps the metaqueue in $MQ_HOME (default ~/.mq): mq.db (SQLite), cls.sock (the
socket mqsub/mqstat/mqdel use), cls.log, and output/ (jobs' stdout and stderr
from local placeholders).`,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "local", Usage: "local placeholders to keep running, the site local of cls site list (0 = none)", Value: runtime.NumCPU(), DefaultText: "number of CPUs"},
			&cli.IntFlag{Name: "slots", Usage: "jobs each local placeholder runs at once", Value: 1},
			&cli.StringFlag{Name: "max-output", Usage: "most a job run by a local placeholder may write to stdout and stderr together, `SIZE` (512K, 1G; 0 = no cap); a job that writes more is stopped and fails", Value: "1G"},
			&cli.StringFlag{Name: "output-reserve", Usage: "free space jobs' output leaves on MQ_HOME's filesystem for the database, `SIZE` (0 = none), and free inodes too (a tenth of them, at most 65536; none where the filesystem counts none); below either placeholders take no new jobs, and a job whose output would leave less is stopped: it runs again later, or fails if it wrote the reserve itself", DefaultText: "a tenth of the filesystem, at most 64M"},
			&cli.StringFlag{Name: "output", Usage: "how placeholders keep jobs' stdout and stderr: streams (a few stream files per placeholder, under output/streams, read through the metaqueue's index; remote placeholders ship theirs to copies there in bulk) or files (one per output, under output/, copied one by one from remote placeholders); a site (cls site add --output) or a queue (cls queue set --output files) may choose otherwise", Value: "streams"},
			&cli.DurationFlag{Name: "lease", Usage: "requeue a job when its placeholder is silent this long", Value: 30 * time.Second},
			&cli.StringFlag{Name: "sync", Usage: "commit durability: submit (users' changes survive power loss; placeholder traffic survives a crash of the CLS, so after a power loss jobs that just ended may rerun), full (every commit survives power loss) or normal (every commit survives a crash of the CLS)", Value: string(metaqueue.SyncSubmit)},
			&cli.StringFlag{Name: "log-level", Usage: "debug, info, warn or error", Value: "info"},
			&cli.StringFlag{Name: "log-format", Usage: "cls.log's format: text or json (one JSON object a line); SIGHUP reopens cls.log (logrotate)", Value: "text"},
			&cli.StringFlag{Name: "http", Usage: "serve the read-only dashboard and /metrics on `ADDR` (host:port, e.g. 127.0.0.1:8642; :8642 is loopback); a non-loopback address needs --http-public"},
			&cli.StringFlag{Name: "http-path", Usage: "serve the dashboard under `PATH` (e.g. /node/c001/8642/), for a proxy that passes its path prefix on (Open OnDemand's /node/, jupyter-server-proxy's /proxy/absolute/); one that strips it needs none"},
			&cli.BoolFlag{Name: "http-public", Usage: "allow --http on a non-loopback address: every request then needs the token in $MQ_HOME/http.token (made when missing)"},
			&cli.BoolFlag{Name: "noop", Usage: "local placeholders report jobs done without running them (benchmarks the scheduling path)"},
			&cli.StringFlag{Name: "ssh", Usage: "also accept SSH connections on `ADDR` (host:port), authenticated by the keys of cls key"},
			&cli.GenericFlag{Name: "site-net", Value: &siteNets{}, Usage: "network of a site for dc queues, `SITE=LATENCY_S,BANDWIDTH` (bytes/s, units allowed: 100M); SITE default applies to sites not named (repeat)"},
			&cli.StringFlag{Name: "cpuprofile", Usage: "write a CPU profile of the CLS to `FILE` (performance work)", Hidden: true},
			&cli.StringFlag{Name: "memprofile", Usage: "write a heap profile of the CLS to `FILE` as it stops (performance work)", Hidden: true},
			&cli.StringFlag{Name: "agents", Usage: "directory of placeholder agents for remote sites (mqagent-linux-amd64, ...; default: beside cls)"},
			&cli.DurationFlag{Name: "site-poll", Usage: "how often each site's placeholders are looked at", Value: 2 * time.Second},
			&cli.DurationFlag{Name: "site-throttle", Usage: "a site whose placeholder waits this long in its batch queue is throttled: it keeps one queued and submits no more, so the work goes to sites whose placeholders start sooner", Value: 5 * time.Minute},
			&cli.Float64Flag{Name: "lp-min-util", Usage: "seed 001's minimum utilisation W_MIN for sites that follow --provision lp: each job slot the LP plans for a stage is busy at least this share of the time (0 to 0.99)", Value: 0},
			&cli.BoolFlag{Name: "allow-network-fs", Usage: "serve an MQ_HOME on a network filesystem (NFS, SMB, Lustre, GPFS, BeeGFS, CephFS, FUSE...), which is refused otherwise: the database's locks and shared memory may not work there, and it can be corrupted"},
			&cli.DurationFlag{Name: "connect-timeout", Usage: "a remote site's placeholder that runs this long without connecting is cancelled and its site marked degraded (cls site add --connect-timeout sets it per site)", Value: 2 * time.Minute},
			&cli.DurationFlag{Name: "partition-grace", Usage: "keep the jobs of a remote site's placeholders that fell silent while the site cannot be reached either (a network cut), their leases held, this long before they are requeued; 0: requeue at the lease", Value: cls.DefaultPartitionGrace},
			&cli.DurationFlag{Name: "agent-reconnect", Usage: "how long a local placeholder that lost its CLS (stopped with cls stop --keep-running, killed) keeps trying to reach one before it gives up; it then leaves the reports of the jobs it ran in output/spool, for the next cls serve to apply", Value: 10 * time.Minute},
		},
		Action: serve,
	}
}

// checkHTTPFlags checks the dashboard's flags that need --http.
func checkHTTPFlags(c *cli.Context) error {
	if c.Bool("http-public") && c.String("http") == "" {
		return mqcli.Usagef("--http-public needs --http ADDR")
	}
	if p := c.String("http-path"); p != "" && c.String("http") == "" {
		return mqcli.Usagef("--http-path needs --http ADDR")
	} else if web.CheckPath(p) != nil {
		return mqcli.Usagef("--http-path %q must be an absolute path ending in / without dot segments, spaces, escapes, ? or # (e.g. /node/c001/8642/)", p)
	}
	return nil
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
	maxOutput, err := protocol.ParseSize(c.String("max-output"))
	if err != nil || maxOutput < 0 {
		return mqcli.Usagef("--max-output must be a size such as 512K or 1G (0 = no cap), not %q", c.String("max-output"))
	}
	if maxOutput == 0 {
		maxOutput = -1 // no cap
	}
	var outReserve int64 // the default
	if c.IsSet("output-reserve") {
		if outReserve, err = protocol.ParseSize(c.String("output-reserve")); err != nil || outReserve < 0 {
			return mqcli.Usagef("--output-reserve must be a size such as 64M (0 = none), not %q", c.String("output-reserve"))
		}
		if outReserve == 0 {
			outReserve = -1 // none
		}
	}
	switch o := c.String("output"); o {
	case "files", "streams":
	default:
		return mqcli.Usagef("--output must be files or streams, not %q", o)
	}
	if err := checkDurations(c, map[string][2]time.Duration{
		"lease":           {time.Second, 24 * time.Hour},
		"site-poll":       {100 * time.Millisecond, time.Hour},
		"site-throttle":   {time.Second, 366 * 24 * time.Hour},
		"agent-reconnect": {time.Second, 366 * 24 * time.Hour},
		"partition-grace": {0, 366 * 24 * time.Hour},
	}); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.String("log-level"))); err != nil {
		return mqcli.Usagef("--log-level: %v", err)
	}
	switch f := c.String("log-format"); f {
	case "text", "json":
	default:
		return mqcli.Usagef("--log-format must be text or json, not %q", f)
	}
	if err := checkHTTPFlags(c); err != nil {
		return err
	}
	switch metaqueue.Sync(c.String("sync")) {
	case metaqueue.SyncSubmit, metaqueue.SyncFull, metaqueue.SyncNormal:
	default:
		return mqcli.Usagef("--sync must be submit, full or normal, not %q", c.String("sync"))
	}
	if u := c.Float64("lp-min-util"); !(u >= 0 && u < 1) {
		return mqcli.Usagef("--lp-min-util must be at least 0 and below 1, not %v", u)
	}
	if c.Duration("connect-timeout") < time.Second {
		return mqcli.Usagef("--connect-timeout must be at least 1s, not %s", c.Duration("connect-timeout"))
	}
	home, err := client.Home()
	if err != nil {
		return err
	}
	nets := c.Generic("site-net").(*siteNets)
	cfg := cls.Config{
		Home: home, Local: n, Slots: slots, NoOp: c.Bool("noop"),
		MaxOutput: maxOutput, OutputReserve: outReserve, OutputFiles: c.String("output") == "files",
		Lease: c.Duration("lease"), Sync: metaqueue.Sync(c.String("sync")),
		Links: nets.links, DefaultLink: nets.def,
		SSHAddr: c.String("ssh"), Commands: sshExec,
		Agents: c.String("agents"), SitePoll: c.Duration("site-poll"),
		SiteThrottle: c.Duration("site-throttle"), ConnectTimeout: c.Duration("connect-timeout"),
		AgentReconnect: c.Duration("agent-reconnect"), PartitionGrace: cmp.Or(c.Duration("partition-grace"), -1),
		LogLevel: level, LogFormat: c.String("log-format"), Notes: c.App.ErrWriter, Version: mqcli.Version,
		HTTPAddr: c.String("http"), HTTPPublic: c.Bool("http-public"), HTTPPath: c.String("http-path"),
		LPMinUtil: c.Float64("lp-min-util"), AllowNetworkFS: c.Bool("allow-network-fs"),
	}
	stopProfile, err := startProfile(c.String("cpuprofile"))
	if err != nil {
		return err
	}
	defer stopProfile()
	ctx, stop := context.WithCancel(c.Context)
	defer stop()
	serving, endSignals := catchSignals(c.App.ErrWriter, stop)
	defer endSignals()
	srv, err := cls.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer srv.Close()
	if path := c.String("memprofile"); path != "" {
		// Before Close, while the metaqueue is still held.
		defer writeHeapProfile(path, c.App.ErrWriter)
	}
	fmt.Fprintf(c.App.ErrWriter, "cls: serving MQ_HOME=%s with %s (log: %s)\n",
		srv.Home(), plural(n, "local placeholder"), filepath.Join(srv.Home(), "cls.log"))
	serving(srv)
	return srv.Run(ctx)
}

// catchSignals catches the signals cls serve takes besides SIGINT and
// SIGTERM: SIGHUP reopens cls.log (after logrotate moved it away), and
// cls.KeepSignal stops the CLS (stop) leaving its local placeholders
// running. It is called before cls.New writes the pid cls stop reads,
// since a Go program ignores a signal it does not catch; what comes
// before serving is given the CLS waits until then. end stops it all.
func catchSignals(errw io.Writer, stop context.CancelFunc) (serving func(*cls.CLS), end func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	keep := make(chan os.Signal, 1)
	signal.Notify(keep, cls.KeepSignal)
	done := make(chan struct{})
	serving = func(srv *cls.CLS) {
		go func() {
			for {
				select {
				case <-hup:
					if err := srv.ReopenLog(); err != nil {
						fmt.Fprintf(errw, "cls: %v\n", err)
					}
				case <-keep:
					srv.KeepRunning()
					stop()
				case <-done:
					return
				}
			}
		}()
	}
	return serving, func() { signal.Stop(hup); signal.Stop(keep); close(done) }
}

// startProfile writes a CPU profile to path until stop is called ("" = none).
func startProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := createProfile(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// createProfile creates or empties the profile file path as os.Create
// does, but never through a link, symbolic or hard, and only a file of the
// user's that others cannot write: profiles go to /tmp, where another user
// may have put a file of that name first.
func createProfile(path string) (*os.File, error) {
	return mqhome.CreateFile(path, 0o600)
}

// writeHeapProfile writes the live heap to path, after a collection.
func writeHeapProfile(path string, errw io.Writer) {
	runtime.GC()
	f, err := createProfile(path)
	if err == nil {
		err = errors.Join(pprof.WriteHeapProfile(f), f.Close())
	}
	if err != nil {
		fmt.Fprintf(errw, "cls: memprofile: %v\n", err)
	}
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
mqagent's, declared once in cmd/internal/agentcmd).`,
		SkipFlagParsing: true,
		Action: func(c *cli.Context) error {
			err := agentcmd.Run(c.Context, "cls agent", agentcmd.Local, c.Args().Slice(), c.App.ErrWriter)
			var ue agentcmd.UsageError
			if errors.As(err, &ue) {
				return mqcli.UsageOf("cls agent", ue.Msg)
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
				Usage: "list queues and their properties, with what each has spent (site price x elapsed hours of its attempts)",
				Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON"}},
				Action: func(c *cli.Context) error {
					if c.NArg() > 0 {
						return mqcli.Usagef("queue list takes no arguments")
					}
					cl, err := mqcli.Dial(c.Context, env, "cls")
					if err != nil {
						return err
					}
					defer cl.Close()
					ql, err := client.Do(c.Context, cl, protocol.OpQueueList, protocol.Empty{})
					if err != nil {
						return err
					}
					if c.Bool("json") {
						enc := json.NewEncoder(c.App.Writer)
						enc.SetIndent("", "  ")
						return enc.Encode(ql)
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
		Flags:           queueSetFlags(&queueSetValues{}),
		Action: func(c *cli.Context) error {
			var v queueSetValues
			names, set, err := parseFlags(c, queueSetFlags(&v))
			if errors.Is(err, flag.ErrHelp) {
				return cli.ShowSubcommandHelp(c)
			}
			if err != nil {
				return err
			}
			if len(names) != 1 {
				return mqcli.Usagef("queue set takes exactly one QUEUE")
			}
			if err := job.ValidName("queue", names[0]); err != nil {
				return mqcli.Usagef("%v", err) // as mqsub -q refuses it
			}
			qs := protocol.QueueSet{Name: names[0]}
			if set["ceiling"] {
				d, err := parseSeconds(v.ceiling)
				if err != nil {
					return mqcli.Usagef("--ceiling: %v", err)
				}
				qs.Ceiling = &d
			}
			if set["max-attempts"] && (v.maxAttempts < 1 || v.maxAttempts > 1000) {
				return mqcli.Usagef("--max-attempts must be 1..1000, not %d", v.maxAttempts)
			}
			if set["max-attempts"] {
				qs.MaxAttempts = &v.maxAttempts
			}
			if set["retry-failed"] {
				qs.RetryFailed = &v.retryFailed
			}
			if set["max-copies"] {
				if v.maxCopies < 0 || v.maxCopies > 1000 {
					return mqcli.Usagef("--max-copies must be 0..1000, not %d", v.maxCopies)
				}
				qs.MaxCopies = &v.maxCopies
			}
			if set["max-output"] {
				n, err := protocol.ParseSize(v.maxOutput)
				if err == nil {
					err = protocol.CheckQueueOutput(n)
				}
				if err != nil {
					return mqcli.Usagef("--max-output must be a size such as 1M or 2G, at most 1T (0 = none but the placeholder's), not %q", v.maxOutput)
				}
				qs.MaxOutput = &n
			}
			if set["output"] {
				switch v.output {
				case protocol.OutputModeFiles:
				case "default":
					v.output = ""
				default:
					return mqcli.Usagef("--output %q: want files or default (as the placeholder does)", protocol.Printable(v.output))
				}
				qs.Output = &v.output
			}
			if set["policy"] {
				if err := checkQueuePolicy(v.policy); err != nil {
					return err
				}
				qs.Policy = &v.policy
			}
			if set["deadline"] {
				t, err := parseDeadline(v.deadline, time.Now())
				if err != nil {
					return mqcli.Usagef("--deadline: %v", err)
				}
				qs.Deadline = &t
			}
			if set["budget"] {
				b, err := strconv.ParseFloat(v.budget, 64)
				if err == nil {
					err = protocol.CheckBudget(b)
				}
				if err != nil {
					return mqcli.Usagef("--budget: %q is not 0..%g (0 = none)", v.budget, float64(protocol.MaxBudget))
				}
				qs.Budget = &b
			}
			res, err := v.resources(set)
			if err != nil {
				return err
			}
			cl, err := mqcli.Dial(c.Context, env, "cls")
			if err != nil {
				return err
			}
			defer cl.Close()
			if qs.Defaults, err = queueDefaults(c.Context, cl, qs.Name, res, set["no-defaults"]); err != nil {
				return err
			}
			qi, err := client.Do(c.Context, cl, protocol.OpQueueSet, qs)
			if err != nil {
				return err
			}
			printQueues(c.App.Writer, []protocol.QueueInfo{qi})
			return nil
		},
	}
}

// queueSetFlags declares cls queue set's flags once, for --help and for
// parsing (parseFlags), with their values in v.
func queueSetFlags(v *queueSetValues) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "ceiling", Usage: "longest a job may run, e.g. 90, 90s, 2h, 04:00:00 (0 = no limit)", Destination: &v.ceiling, DefaultText: "0 for a new queue"},
		&cli.IntFlag{Name: "max-attempts", Usage: "times a job may be dispatched before it fails", Destination: &v.maxAttempts, DefaultText: "3 for a new queue"},
		&cli.BoolFlag{Name: "retry-failed", Usage: "retry jobs that exit non-zero (within max-attempts)", Destination: &v.retryFailed},
		&cli.IntFlag{Name: "max-copies", Usage: "most attempts of one job running at once (job replication: an idle placeholder copies a running job when nothing is ready; the first to finish wins, the others are killed): 0 = the policy's default (sa, wqr: no bound; others: none), 1 = never copy, 2 or more also turns it on for fcfs, sjf and cp", Destination: &v.maxCopies, DefaultText: "0"},
		&cli.StringFlag{Name: "max-output", Usage: "most one attempt of a job of the queue may write to stdout and stderr together, `SIZE` (1M, 2G; 0 = no cap but the placeholder's, cls serve --max-output, 1G by default); the smaller cap applies, and a job that writes more is stopped and fails with the reason", Destination: &v.maxOutput, DefaultText: "0"},
		&cli.StringFlag{Name: "output", Usage: "files: a job of the queue keeps a file per stdout and stderr wherever it runs, for tools that expect them (copied back one by one from remote sites), whatever its placeholder's mode; default (the default): as its placeholder does (cls serve --output, cls site add --output)", Destination: &v.output},
		&cli.StringFlag{Name: "policy", Usage: "scheduling policy: " + policyHelp(), Destination: &v.policy},
		&cli.StringFlag{Name: "deadline", Usage: "when the queue's jobs should have ended: a duration from now (2h) or an RFC 3339 time (none or 0 = no deadline); stored for deadline-and-budget planning", Destination: &v.deadline},
		&cli.StringFlag{Name: "budget", Usage: "what the queue's jobs may cost, in the sites' price unit (0 = no budget); stored for deadline-and-budget planning", Destination: &v.budget},
		&cli.StringFlag{Name: "cpus", Usage: "cores a job of the queue asks for unless it says (mqsub -c): `N`, or auto", Destination: &v.cpus},
		&cli.StringFlag{Name: "mem", Usage: "memory a job of the queue asks for unless it says (mqsub --mem): `SIZE` (8G, 500M), or auto", Destination: &v.mem},
		&cli.StringFlag{Name: "gpus", Usage: "GPUs a job of the queue asks for unless it says (mqsub --gpus): `N`", Destination: &v.gpus},
		&cli.GenericFlag{Name: "resource", Usage: "an amount of a named resource a job of the queue asks for unless it says, `NAME=N` (repeat)", Value: &v.named},
		&cli.BoolFlag{Name: "no-defaults", Usage: "clear the queue's resource defaults (before any --cpus, --mem, --gpus, --resource given with it)", Destination: &v.noDefaults},
	}
}

type queueSetValues struct {
	ceiling, policy  string
	deadline, budget string
	maxOutput        string
	output           string
	maxAttempts      int
	maxCopies        int
	retryFailed      bool

	cpus, mem, gpus string
	named           namedList
	noDefaults      bool
}

// parseFlags parses a command's flags (declared once, as urfave/cli
// flags, for --help and for this) wherever they are among its arguments,
// for commands that skip urfave/cli's parsing because it stops at the
// first argument. It returns the other arguments and the names of the
// flags given.
func parseFlags(c *cli.Context, flags []cli.Flag) (args []string, set map[string]bool, err error) {
	fs := flag.NewFlagSet(c.Command.FullName(), flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for _, f := range flags {
		if err := f.Apply(fs); err != nil {
			return nil, nil, err
		}
	}
	if args, err = parseInterspersed(fs, c.Args().Slice()); err != nil {
		return nil, nil, err
	}
	set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return args, set, nil
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

// parseSeconds reads a time span: seconds ("90"), a Go duration ("1h30m")
// or a batch system's clock form ("04:00:00", "1-12:00:00").
func parseSeconds(s string) (float64, error) { return walltime.Parse(s) }

// parseDeadline reads a deadline: "none" or "0" (none), a duration from
// now (90, 90s, 2h) or an RFC 3339 time; it returns Unix seconds.
func parseDeadline(s string, now time.Time) (float64, error) {
	if s == "none" || s == "0" {
		return 0, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		u := float64(t.UnixNano()) / 1e9
		if err := protocol.CheckDeadline(u); err != nil || u <= 0 {
			return 0, fmt.Errorf("%q is not a time after 1970 and before year 5000", s)
		}
		return u, nil
	}
	d, err := parseSeconds(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not none, a duration from now (e.g. 2h) or an RFC 3339 time", s)
	}
	return float64(now.UnixNano())/1e9 + d, nil
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

// printQueues prints the queues' table, then a line for each queue with
// resource defaults and one for each with an output cap.
func printQueues(w io.Writer, qs []protocol.QueueInfo) {
	printQueueTable(w, qs)
	for _, q := range qs {
		if q.Defaults.Asks() {
			fmt.Fprintf(w, "%s: a job asks for %s unless it says\n", protocol.Printable(q.Name), q.Defaults.Describe())
		}
		if q.MaxOutput > 0 {
			fmt.Fprintf(w, "%s: a job's stdout and stderr are capped at %s together\n", protocol.Printable(q.Name), acct.HumanBytes(q.MaxOutput))
		}
		if q.Output == protocol.OutputModeFiles {
			fmt.Fprintf(w, "%s: a job keeps a file per stdout and stderr (--output files)\n", protocol.Printable(q.Name))
		}
	}
}

func printQueueTable(w io.Writer, qs []protocol.QueueInfo) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tCEILING\tMAX ATTEMPTS\tRETRY FAILED\tPOLICY\tDEADLINE\tBUDGET\tSPENT\tUNFINISHABLE\tINFEASIBLE\tOVER BUDGET\tMAX COPIES")
	for _, q := range qs {
		ceiling, deadline, budget := "none", "none", "none"
		if q.Ceiling > 0 {
			ceiling = protocol.Duration(q.Ceiling).String()
		}
		if q.Deadline > 0 {
			deadline = time.Unix(0, int64(q.Deadline*1e9)).UTC().Format(time.RFC3339)
		}
		if q.Budget > 0 {
			budget = strconv.FormatFloat(q.Budget, 'g', -1, 64)
		}
		spent := "-"
		if q.Spent > 0 || len(q.SpentBySite) > 0 {
			spent = strconv.FormatFloat(q.Spent, 'g', 6, 64)
			sites := slices.Sorted(maps.Keys(q.SpentBySite))
			var parts []string
			for _, s := range sites {
				parts = append(parts, protocol.Printable(s)+" "+strconv.FormatFloat(q.SpentBySite[s], 'g', 6, 64))
			}
			spent += " (" + strings.Join(parts, ", ") + ")"
		}
		copies := "default"
		if q.MaxCopies > 0 {
			copies = strconv.Itoa(q.MaxCopies)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%v\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", protocol.Printable(q.Name), ceiling, q.MaxAttempts, q.RetryFailed, protocol.Printable(q.Policy), deadline, budget, spent, q.Unfinishable, q.Infeasible, q.OverBudget, copies)
	}
	tw.Flush()
}

// siteNets collects --site-net SITE=LATENCY_S,BANDWIDTH values.
type siteNets struct {
	links map[string]dc.Link
	def   dc.Link
}

func (n *siteNets) Set(v string) error {
	site, spec, ok := strings.Cut(v, "=")
	lat, bw, ok2 := strings.Cut(spec, ",")
	if !ok || !ok2 || site == "" {
		return fmt.Errorf("%q is not SITE=LATENCY_S,BANDWIDTH (e.g. clusterA=0.5,10M)", v)
	}
	var l dc.Link
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
		n.links = map[string]dc.Link{}
	}
	n.links[site] = l
	return nil
}

func (n *siteNets) String() string { return "" }

// policyHelp lists the policies for --help, from the one registry.
func policyHelp() string {
	var b strings.Builder
	for _, p := range policy.All() {
		if p.Kind == policy.Provisioning {
			continue // for sites: cls site add --provision
		}
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s (%s)", p.Name, p.Summary)
	}
	return b.String()
}

// checkQueuePolicy refuses, as a usage error, a --policy that is not a
// queue's: a name no policy has, or a provisioning one, which is a site's
// (cls site set --provision) whatever the CLS holds.
func checkQueuePolicy(name string) error {
	p, err := policy.Lookup(name)
	if err == nil && p.Kind != policy.Provisioning {
		return nil
	}
	var names []string
	for _, q := range policy.All() {
		if q.Kind != policy.Provisioning {
			names = append(names, q.Name)
		}
	}
	if err == nil {
		return mqcli.Usagef("--policy %s decides how many placeholders sites hold, not which job a queue runs: cls site set NAME --provision %s; a queue's policy is one of %s", p.Name, p.Name, strings.Join(names, ", "))
	}
	return mqcli.Usagef("--policy: unknown policy %q (known: %s)", protocol.Printable(name), strings.Join(names, ", "))
}

// plural is "1 thing", "2 things".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
