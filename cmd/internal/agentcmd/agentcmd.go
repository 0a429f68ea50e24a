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
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"syscall"
	"time"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/internal/mqhome"
	"github.com/mq-hpc/mq/internal/sshkey"
	"github.com/mq-hpc/mq/placeholder"
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
	walltime, idle, reconnect                time.Duration
	// Local only.
	orphanExit, noop  bool
	cpuprofile, umask string
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
	fs.IntVar(&f.slots, "slots", 1, "jobs to run at once")
	fs.StringVar(&f.dataRoot, "data-root", "", "where this site keeps staged files, `DIR` (relative: to $HOME; made 0700, refused if others can write it); declared path P is DIR/P and jobs run in DIR/CWD (default: none, the CLS host's filesystem is shared)")
	fs.StringVar(&f.out, "out", "", outUsage)
	fs.StringVar(&f.maxOutput, "max-output", "1G", "most a job may write to stdout and stderr together, `SIZE` (512K, 1G; 0 = no cap): a job that writes more is stopped and fails")
	fs.StringVar(&f.outputReserve, "output-reserve", "0", "free space to keep on the filesystem of --out, `SIZE`: a job whose output would leave less is stopped and fails (the CLS passes its own to local placeholders)")
	fs.DurationVar(&f.walltime, "walltime", 0, "this placeholder's own time limit (0 = none)")
	fs.DurationVar(&f.idle, "idle", 0, "exit after this long without work (0 = never)")
	fs.DurationVar(&f.reconnect, "reconnect", 10*time.Minute, "give up after the CLS is unreachable this long")
	fs.StringVar(&f.logLevel, "log-level", "warn", "debug, info, warn or error (to stderr)")
	fs.StringVar(&f.logFormat, "log-format", "text", "text or json (one JSON object a line; the CLS passes its own to local placeholders, which write to cls.log)")
	if mode == Local {
		fs.BoolVar(&f.orphanExit, "orphan-exit", false, "exit when idle if the parent process dies")
		fs.BoolVar(&f.noop, "noop", false, "report jobs done without running them (benchmarks only)")
		fs.StringVar(&f.cpuprofile, "cpuprofile", "", "write a CPU profile to `FILE` (performance work)")
		fs.StringVar(&f.umask, "umask", "", "the umask jobs run with, octal (the CLS passes its user's to local placeholders)")
	}
}

// Run parses args (after the command's name) and runs the agent until ctx
// ends or the agent stops. Help goes to stderr and returns nil.
func Run(ctx context.Context, name string, mode Mode, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// A mistake is one line (the caller prints it); the flag list is for
	// -help only.
	fs.SetOutput(io.Discard)
	var f flags
	f.register(fs, mode)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fs.Usage()
			return nil
		}
		return UsageError{err.Error() + " (see " + name + " -help)"}
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if mode == Remote && (f.cls == "" || f.site == "" || f.out == "") {
		return usagef("--cls, --host-key, --key, --site and --out are required")
	}
	maxOutput, err := protocol.ParseSize(f.maxOutput)
	if err != nil || maxOutput < 0 {
		return usagef("--max-output must be a size such as 512K or 1G (0 = no cap), not %q", f.maxOutput)
	}
	if maxOutput == 0 {
		maxOutput = -1 // no cap
	}
	reserve, err := protocol.ParseSize(f.outputReserve)
	if err != nil || reserve < 0 {
		return usagef("--output-reserve must be a size such as 64M, not %q", f.outputReserve)
	}
	if f.slots < 1 || f.slots > 4096 {
		return usagef("--slots must be 1..4096, not %d", f.slots)
	}
	if err := placeholder.CheckTimes(f.walltime, f.idle, f.reconnect); err != nil {
		return usagef("%v", err)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return usagef("--log-level: %v", err)
	}
	if f.logFormat != "text" && f.logFormat != "json" {
		return usagef("--log-format must be text or json, not %q", f.logFormat)
	}
	if f.umask != "" {
		u, err := strconv.ParseUint(f.umask, 8, 32)
		if err != nil || u > 0o777 {
			return usagef("--umask must be octal 0..777, not %q", f.umask)
		}
		syscall.Umask(int(u))
	}
	if f.host == "" {
		f.host, _ = os.Hostname()
	}
	dataRoot, err := resolveDataRoot(f.dataRoot, os.UserHomeDir)
	if err != nil {
		return err
	}
	var dial func(ctx context.Context) (io.ReadWriteCloser, error)
	remote := f.cls != ""
	if remote {
		if f.key == "" || f.hostKey == "" {
			return usagef("--cls needs --key (a placeholder key) and --host-key (the CLS's, from `cls key host`)")
		}
		signer, err := sshkey.LoadSigner(f.key)
		if err != nil {
			return err
		}
		pin, err := sshkey.Pin(f.hostKey)
		if err != nil {
			return err
		}
		cfg := client.SSH{Addr: f.cls, User: f.user, Signer: signer, HostKey: pin}
		if f.via != "" || f.viaHostKey != "" {
			if cfg.Via, err = client.ParseHop(f.via, f.viaHostKey); err != nil {
				return usagef("%v", err)
			}
		}
		dial = func(ctx context.Context) (io.ReadWriteCloser, error) { return client.DialSSH(ctx, cfg) }
	} else {
		for _, name := range []string{"host-key", "key", "via", "via-host-key"} {
			if set[name] {
				return usagef("--%s is only for --cls", name)
			}
		}
		home, err := client.Home()
		if err != nil {
			return err
		}
		if f.out == "" {
			f.out = filepath.Join(home, "output")
		}
		dial = func(ctx context.Context) (io.ReadWriteCloser, error) { return client.DialSocket(ctx, home) }
	}
	// Whoever else could write the data root could swap a staged input for
	// bytes of their own before a job reads it; the output directory, a
	// job's output. Both are checked as MQ_HOME is.
	if dataRoot != "" {
		if dataRoot, err = privateDir("--data-root", dataRoot); err != nil {
			return err
		}
	}
	if f.out, err = privateDir("--out", f.out); err != nil {
		return err
	}
	if f.cpuprofile != "" {
		pf, err := os.Create(f.cpuprofile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			pf.Close()
			return err
		}
		defer func() { pprof.StopCPUProfile(); pf.Close() }()
	}
	var handler slog.Handler = slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})
	if f.logFormat == "json" {
		handler = slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level})
	}
	log := slog.New(handler).With("pid", os.Getpid())
	placeholder.OneProc()
	a := placeholder.New(placeholder.Config{
		Dial: dial, Site: f.site, Host: f.host, Slots: f.slots, OutDir: f.out,
		MaxOutput: maxOutput, OutputReserve: reserve,
		BatchID:  placeholder.BatchJobID(os.Getenv),
		Walltime: f.walltime, IdleTimeout: f.idle, Reconnect: f.reconnect,
		ExitWhenOrphaned: f.orphanExit, NoOp: f.noop, StageOutput: remote, DataRoot: dataRoot, Log: log,
	})
	if err := a.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
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
