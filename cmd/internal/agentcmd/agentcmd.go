// Package agentcmd is the placeholder agent's command line, one flag set
// and one set of checks for both `mqagent` (the small binary sites upload)
// and `cls agent` (which also runs local placeholders over the Unix
// socket). It links no metaqueue, SQLite or CLI framework, so mqagent stays
// small.
package agentcmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/cmd/internal/flagmsg"
	"github.com/mq-hpc/mq/internal/jobexec"
	"github.com/mq-hpc/mq/internal/mqhome"
	"github.com/mq-hpc/mq/internal/placeholder"
	"github.com/mq-hpc/mq/internal/placeholder/capacity"
	"github.com/mq-hpc/mq/internal/resource"
	"github.com/mq-hpc/mq/internal/sshkey"
	"github.com/mq-hpc/mq/protocol"
)

// UsageError is a wrong command line (exit status 2); other errors are
// failures (1).
type UsageError struct{ Msg string }

func (e UsageError) Error() string { return e.Msg }

func usagef(format string, a ...any) error { return UsageError{fmt.Sprintf(format, a...)} }

// Mode says which command parses: Remote is mqagent (the CLS over SSH
// only); Local is `cls agent`, whose default is the Unix socket of
// $MQ_HOME and which has the flags the CLS gives its own placeholders.
type Mode int

const (
	Remote Mode = iota
	Local
)

// flags is the command line, one declaration per flag.
type flags struct {
	cls, hostKey, key, user, via, viaHostKey string
	site, host, out, logLevel, dataRoot      string
	logFormat                                string
	maxOutput, outputReserve                 string
	slots                                    int
	// What the placeholder was asked for (its site's --cpus, --mem,
	// --gpus, --resource); see capacity.
	cpus, gpus                int
	mem                       string
	named                     []string
	walltime, idle, reconnect time.Duration
	// Local only.
	orphanExit, noop     bool
	streams, streamsSync bool // streams: both modes
	cpuprofile, umask    string

	set map[string]bool // the flags given
}

func (f *flags) register(fs *flag.FlagSet, mode Mode) {
	clsUsage, siteDefault, outUsage := "the CLS's SSH endpoint `HOST:PORT` (required)", "", "directory for jobs' stdout/stderr (required; made 0700, refused if others can write it)"
	if mode == Local {
		clsUsage = "reach the CLS over SSH at `HOST:PORT` (default: the Unix socket of $MQ_HOME)"
		siteDefault, outUsage = "local", "directory for jobs' stdout/stderr (default $MQ_HOME/output)"
	}
	fs.StringVar(&f.cls, "cls", "", clsUsage)
	fs.StringVar(&f.hostKey, "host-key", "", "with --cls: the CLS host key to accept, as `SHA256:...` or a public key file")
	fs.StringVar(&f.key, "key", "", "with --cls: the placeholder's private key `FILE` (mode 0600)")
	fs.StringVar(&f.user, "user", "mq", "with --cls: SSH user name (any; the key is what counts)")
	fs.StringVar(&f.via, "via", "", "with --cls: reach it through this SSH server, `USER@HOST:PORT` (tunnel mode: the login host)")
	fs.StringVar(&f.viaHostKey, "via-host-key", "", "with --via: its host public key (\"ssh-ed25519 AAAA...\")")
	fs.StringVar(&f.site, "site", siteDefault, "site name reported to the CLS")
	fs.StringVar(&f.host, "host", "", "host name reported to the CLS (default: this host's)")
	fs.IntVar(&f.slots, "slots", 1, "cores this placeholder holds: as many 1-core jobs run at once (--cpus is the same)")
	fs.IntVar(&f.cpus, "cpus", 0, "cores this placeholder was asked for (default --slots); it offers fewer if its batch system or cgroup gave fewer")
	fs.StringVar(&f.mem, "mem", "", "memory this placeholder was asked for, `SIZE` (8G, 500M; default: what it was given, else the machine's); jobs are granted parts of it")
	fs.IntVar(&f.gpus, "gpus", 0, "GPUs this placeholder was asked for (default: those CUDA_VISIBLE_DEVICES or SLURM_JOB_GPUS name; 0 = none); their ids come from those variables, else 0..N-1")
	fs.Func("resource", "a site-declared amount this placeholder holds, `NAME=N` (licences, scratch; repeat)", func(s string) error {
		f.named = append(f.named, s)
		return nil
	})
	fs.StringVar(&f.dataRoot, "data-root", "", "where this site keeps staged files, `DIR` (relative: to $HOME; made 0700, refused if others can write it); declared path P is DIR/P and jobs run in DIR/CWD (default: none, the CLS host's filesystem is shared)")
	fs.StringVar(&f.out, "out", "", outUsage)
	fs.BoolVar(&f.streams, "streams", true, "write jobs' stdout and stderr to a few stream files under --out/streams instead of a file each; with --cls they are shipped to the CLS in bulk (false, or a CLS serving --output files: a file each)")
	fs.StringVar(&f.maxOutput, "max-output", "1G", "most a job may write to stdout and stderr together, `SIZE` (512K, 1G; 0 = no cap): a job that writes more is stopped and fails")
	fs.StringVar(&f.outputReserve, "output-reserve", "0", "free space to keep on the filesystem of --out, `SIZE`, and free inodes too when it is set (a tenth of them, at most 65536; none where the filesystem counts none): below either the agent takes no new jobs, and a job whose output would leave less is stopped: it runs again later, or fails if it wrote the reserve itself (the CLS passes its own to local placeholders)")
	fs.DurationVar(&f.walltime, "walltime", 0, "this placeholder's own time limit (0 = none)")
	fs.DurationVar(&f.idle, "idle", 0, "exit after this long without work (0 = never)")
	fs.DurationVar(&f.reconnect, "reconnect", 10*time.Minute, "give up on a CLS unreachable this long: take no more jobs, let the running ones end, and leave the reports it never took in --out/spool for the CLS to apply when it is back")
	fs.StringVar(&f.logLevel, "log-level", "warn", "debug, info, warn or error (to stderr)")
	fs.StringVar(&f.logFormat, "log-format", "text", "text or json (one JSON object a line; the CLS passes its own to local placeholders, which write to cls.log)")
	if mode == Local {
		fs.BoolVar(&f.orphanExit, "orphan-exit", false, "exit when idle if the parent process dies")
		fs.BoolVar(&f.noop, "noop", false, "report jobs done without running them (benchmarks only)")
		fs.BoolVar(&f.streamsSync, "streams-sync", true, "with --streams: fsync a stream file before reporting the jobs whose output it holds, so the output survives a power loss (the CLS passes false unless cls serve --sync full: its reports do not survive one either)")
		fs.StringVar(&f.cpuprofile, "cpuprofile", "", "write a CPU profile to `FILE` (performance work)")
		fs.StringVar(&f.umask, "umask", "", "the umask jobs run with, octal (the CLS passes its user's to local placeholders)")
	}
}

// Run parses args (after the command's name) and runs the agent until ctx
// ends or the agent stops. Help goes to stderr and returns nil.
func Run(ctx context.Context, name string, mode Mode, args []string, stderr io.Writer) error {
	if mode == Local {
		// At once: a signal that came before it is caught is ignored.
		var stop func()
		ctx, stop = stopWithCLS(ctx)
		defer stop()
	}
	f, set, err := parse(name, mode, args, stderr)
	if f == nil || err != nil {
		return err // nil: help was asked for
	}
	o, err := f.check(mode)
	if err != nil {
		return err
	}
	dial, err := f.dialer(set)
	if err != nil {
		return err
	}
	if err := f.defaultOut(); err != nil {
		return err
	}
	// Whoever else could write the data root could swap a staged input for
	// bytes of their own before a job reads it; the output directory, a
	// job's output. Both are checked as MQ_HOME is.
	if o.dataRoot != "" {
		if o.dataRoot, err = privateDir("--data-root", o.dataRoot); err != nil {
			return err
		}
	}
	if f.out, err = privateDir("--out", f.out); err != nil {
		return err
	}
	if f.cpuprofile != "" {
		// Never through a link, nor into another user's file (see cls's).
		pf, err := mqhome.CreateFile(f.cpuprofile, 0o600)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			pf.Close()
			return err
		}
		defer func() { pprof.StopCPUProfile(); pf.Close() }()
	}
	var handler slog.Handler = slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: o.level})
	if f.logFormat == "json" {
		handler = slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: o.level})
	}
	log := slog.New(handler).With("pid", os.Getpid())
	placeholder.OneProc()
	jobexec.KeepInherited() // what started the agent left open is not the jobs'
	given := capacity.Detect(os.Getenv, os.DirFS("/"), capacity.Affinity)
	if !set["gpus"] && len(given.GPUIDs) > 0 {
		o.asked.GPUIDs = given.GPUIDs // none asked: the GPUs it was given
	} else if set["gpus"] && o.asked.GPUIDs == nil {
		given.GPUIDs, given.GPUsFrom = nil, "" // --gpus 0: none, whatever a variable says
	}
	offered, note := capacity.Advertise(o.asked, given)
	if note != "" {
		// Less than asked is news for the site's owner; more jobs than
		// the machine has cores (asked so) is only worth a line at info.
		level := slog.LevelInfo
		if offered.CPUs < o.asked.CPUs || offered.Mem < o.asked.Mem || len(offered.GPUIDs) < len(o.asked.GPUIDs) {
			level = slog.LevelWarn
		}
		log.Log(ctx, level, "this placeholder offers what it was given, not what it was asked", "asked", o.asked.String(), "offers", offered.String(), "why", note)
	}
	a := placeholder.New(placeholder.Config{
		Dial: dial, Site: f.site, Host: f.host, Slots: f.slots, OutDir: f.out,
		Capacity: offered, Asked: o.asked, CapacityNote: note,
		MaxOutput: o.maxOutput, OutputReserve: o.reserve, Streams: f.streams, StreamNoSync: !f.streamsSync,
		BatchID:  placeholder.BatchJobID(os.Getenv),
		Walltime: f.walltime, IdleTimeout: f.idle, Reconnect: f.reconnect,
		ExitWhenOrphaned: f.orphanExit, NoOp: f.noop, StageOutput: f.cls != "", DataRoot: o.dataRoot, Log: log,
	})
	if err := a.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// stopWithCLS is ctx, also ended, with the cause
// placeholder.ErrCLSStopped, when protocol.CLSStopSignal arrives: the
// CLS that started this local placeholder is stopping, and the jobs it
// stops are not counted against their attempts. stop releases the signal.
func stopWithCLS(ctx context.Context) (_ context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, protocol.CLSStopSignal)
	go func() {
		select {
		case <-sig:
			cancel(placeholder.ErrCLSStopped)
		case <-ctx.Done():
		}
	}()
	return ctx, func() { signal.Stop(sig); cancel(nil) }
}

// Parse parses args as Run does and runs nothing: a UsageError for a
// command line Run would refuse before it starts (a test holds the agent
// command lines the docs show to the flags this way).
func Parse(name string, mode Mode, args []string) error {
	_, _, err := parse(name, mode, args, io.Discard)
	return err
}

// parse parses args into flags; set holds the flags given. A nil f with
// a nil error means help was asked for (and printed to stderr).
func parse(name string, mode Mode, args []string, stderr io.Writer) (f *flags, set map[string]bool, err error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// A mistake is one line (the caller prints it); the flag list is for
	// -help only.
	fs.SetOutput(io.Discard)
	f = new(flags)
	f.register(fs, mode)
	if msg := withoutValue(fs, args); msg != "" {
		return nil, nil, UsageError{msg}
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fs.Usage()
			return nil, nil, nil
		}
		return nil, nil, UsageError{flagmsg.Reword(err)}
	}
	if fs.NArg() > 0 {
		return nil, nil, usagef("unexpected argument %q", fs.Arg(0))
	}
	set = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	f.set = set
	return f, set, nil
}

// withoutValue finds a value flag given without its value, which the
// flag package would give the flag after it as its value (--key --cls
// HOST:PORT), and says so; "" if none. It reads args as fs.Parse will: up
// to the first argument that is no flag, or "--".
func withoutValue(fs *flag.FlagSet, args []string) string {
	for i := 0; i+1 < len(args); i++ {
		dashes, name, hasValue := flagmsg.FlagWord(args[i])
		if dashes == "" {
			return "" // "--", or the first argument that is no flag
		}
		fl := fs.Lookup(name)
		if hasValue || fl == nil {
			continue
		}
		if b, ok := fl.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		i++
		nd, n, _ := flagmsg.FlagWord(args[i])
		if nd != "" && (fs.Lookup(n) != nil || n == "h" || n == "help") {
			// Both named without what follows an '=': short whatever was typed.
			return flagmsg.WithoutValue(dashes+name, nd+n)
		}
	}
	return ""
}

// options are the flags' values the agent takes in another form.
type options struct {
	maxOutput int64 // negative: no cap
	reserve   int64
	level     slog.Level
	dataRoot  string            // absolute, or "" for none
	asked     resource.Capacity // what the flags ask for (cores, memory, GPUs, named)
}

// check checks the flags' values, sets the umask --umask asks for and
// fills in the host name.
func (f *flags) check(mode Mode) (options, error) {
	var o options
	if mode == Remote && (f.cls == "" || f.site == "" || f.out == "") {
		return o, usagef("--cls, --host-key, --key, --site and --out are required")
	}
	var err error
	o.maxOutput, err = protocol.ParseSize(f.maxOutput)
	if err != nil || o.maxOutput < 0 {
		return o, usagef("--max-output must be a size such as 512K or 1G (0 = no cap), not %q", f.maxOutput)
	}
	if o.maxOutput == 0 {
		o.maxOutput = -1 // no cap
	}
	o.reserve, err = protocol.ParseSize(f.outputReserve)
	if err != nil || o.reserve < 0 {
		return o, usagef("--output-reserve must be a size such as 64M, not %q", f.outputReserve)
	}
	if f.slots < 1 || f.slots > 4096 {
		return o, usagef("--slots must be 1..4096, not %d", f.slots)
	}
	if o.asked, err = f.askedCapacity(f.set); err != nil {
		return o, err
	}
	if err := placeholder.CheckTimes(f.walltime, f.idle, f.reconnect); err != nil {
		return o, usagef("%v", err)
	}
	if err := o.level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return o, usagef("--log-level: %v", err)
	}
	if f.logFormat != "text" && f.logFormat != "json" {
		return o, usagef("--log-format must be text or json, not %q", f.logFormat)
	}
	if f.umask != "" {
		u, err := strconv.ParseUint(f.umask, 8, 32)
		if err != nil || u > 0o777 {
			return o, usagef("--umask must be octal 0..777, not %q", f.umask)
		}
		syscall.Umask(int(u))
	}
	if f.host == "" {
		f.host, _ = os.Hostname()
	}
	o.dataRoot, err = resolveDataRoot(f.dataRoot, os.UserHomeDir)
	return o, err
}

// askedCapacity is what the flags ask for: --cpus (or --slots) cores,
// --mem, --gpus (ids 0..N-1 until detection names them) and each
// --resource.
func (f *flags) askedCapacity(set map[string]bool) (resource.Capacity, error) {
	c := resource.Capacity{CPUs: f.slots}
	if set["cpus"] {
		if f.cpus < 1 || f.cpus > 4096 {
			return c, usagef("--cpus must be 1..4096, not %d", f.cpus)
		}
		if set["slots"] && f.slots != f.cpus {
			return c, usagef("--cpus %d and --slots %d say the same thing (the cores this placeholder holds) differently; give one", f.cpus, f.slots)
		}
		c.CPUs, f.slots = f.cpus, f.cpus
	}
	if f.mem != "" {
		n, err := resource.ParseMem(f.mem)
		if err != nil {
			return c, usagef("--mem: %v", err)
		}
		c.Mem = n
	}
	if set["mem"] && f.mem == "" {
		return c, usagef("--mem: empty; want a size such as 8G or 500M")
	}
	if f.gpus < 0 || f.gpus > resource.MaxGPUs {
		return c, usagef("--gpus must be 0..%d, not %d", resource.MaxGPUs, f.gpus)
	}
	for i := range f.gpus {
		c.GPUIDs = append(c.GPUIDs, strconv.Itoa(i))
	}
	for _, s := range f.named {
		name, n, err := resource.ParseNamed(s)
		if err != nil {
			return c, usagef("--resource: %v", err)
		}
		if _, dup := c.Named[name]; dup {
			return c, usagef("--resource %s given twice", name)
		}
		if c.Named == nil {
			c.Named = map[string]int{}
		}
		c.Named[name] = n
	}
	return c, nil
}

// dialer is how the agent reaches the CLS: over SSH with --cls, else
// through the Unix socket of $MQ_HOME.
func (f *flags) dialer(set map[string]bool) (func(ctx context.Context) (io.ReadWriteCloser, error), error) {
	if f.cls != "" {
		if f.key == "" || f.hostKey == "" {
			return nil, usagef("--cls needs --key (a placeholder key) and --host-key (the CLS's, from `cls key host`)")
		}
		signer, err := sshkey.LoadSigner(f.key)
		if err != nil {
			return nil, err
		}
		pin, err := sshkey.Pin(f.hostKey)
		if err != nil {
			return nil, err
		}
		cfg := client.SSH{Addr: f.cls, User: f.user, Signer: signer, HostKey: pin}
		if f.via != "" || f.viaHostKey != "" {
			if cfg.Via, err = client.ParseHop(f.via, f.viaHostKey); err != nil {
				return nil, usagef("%v", err)
			}
		}
		return func(ctx context.Context) (io.ReadWriteCloser, error) { return client.DialSSH(ctx, cfg) }, nil
	}
	for _, name := range []string{"host-key", "key", "via", "via-host-key"} {
		if set[name] {
			return nil, usagef("--%s is only for --cls", name)
		}
	}
	home, err := client.Home()
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (io.ReadWriteCloser, error) { return client.DialSocket(ctx, home) }, nil
}

// defaultOut gives --out its default, $MQ_HOME/output, when it was not
// given (mqagent requires it; cls agent, with --cls or not, has it).
func (f *flags) defaultOut() error {
	if f.out != "" {
		return nil
	}
	home, err := client.Home()
	if err != nil {
		return err
	}
	f.out = filepath.Join(home, "output")
	return nil
}

// privateDir makes dir (mode 0700, with its missing parents) and checks
// that it is the user's alone (mqhome.CheckPrivate); it returns its real
// path.
func privateDir(what, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	return mqhome.CheckPrivate(what, dir)
}

// resolveDataRoot makes --data-root absolute: a relative one is under the
// home directory, as the CLS's default (.mq-data/CLSID) is.
func resolveDataRoot(dir string, home func() (string, error)) (string, error) {
	switch {
	case dir == "":
		return "", nil
	case filepath.IsAbs(dir):
		return filepath.Clean(dir), nil
	}
	h, err := home()
	if err != nil {
		return "", fmt.Errorf("--data-root %s: %w", dir, err)
	}
	return filepath.Join(h, dir), nil
}

// FlagsMarkdown lists mode's flags as the CLI reference shows every
// command's (docs/reference/cli.md): from these declarations, so the
// reference cannot drift from them.
func FlagsMarkdown(mode Mode) string {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	new(flags).register(fs, mode)
	var b strings.Builder
	fs.VisitAll(func(fl *flag.Flag) {
		b.WriteString("**--" + fl.Name + "**")
		if _, isBool := fl.Value.(interface{ IsBoolFlag() bool }); !isBool {
			b.WriteString(`=""`)
		}
		b.WriteString(": " + fl.Usage)
		switch fl.DefValue {
		case "", "0", "0s", "false", "[]":
		default:
			b.WriteString(" (default: " + fl.DefValue + ")")
		}
		b.WriteString("\n\n")
	})
	return strings.TrimSpace(b.String())
}
