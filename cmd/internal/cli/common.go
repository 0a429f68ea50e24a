// Package cli implements the user commands (mqsub, mqstat, mqdel) and what
// every mq command shares: exit codes, usage errors, dialling the CLS. Each
// command is an urfave/cli App writing to injected writers, so tests run
// them in-process; cmd/*/main.go only call Main. The cls command is in
// cmd/internal/clscmd and mqsim in cmd/internal/simcmd, so that these stay small
// and start fast.
package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/cmd/internal/argfile"
	"github.com/mq-hpc/mq/cmd/internal/flagmsg"
	"github.com/mq-hpc/mq/cmd/internal/flagnames"
	"github.com/mq-hpc/mq/cmd/internal/flagorder"
	"github.com/mq-hpc/mq/cmd/internal/rewait"
	"github.com/mq-hpc/mq/internal/version"
	"github.com/mq-hpc/mq/protocol"
)

// Version is the mq version: the build information's module version and
// VCS revision (internal/version).
var Version = version.String()

// Exit codes shared by every command.
const (
	ExitOK     = 0
	ExitFailed = 1 // the request failed: the server said no, or could not be reached
	ExitUsage  = 2 // the command line was wrong
	// ExitInterrupted is a command stopped by SIGINT or SIGTERM while it
	// waited (mqsub -b), as a shell reports it: 128+SIGINT.
	ExitInterrupted = 130
	exitUnknown     = 1
)

// usageError is a mistake on the command line (exit 2). help is the
// command whose --help the message points to ("cls serve"); the program's
// name when empty.
type usageError struct{ msg, help string }

func (e usageError) Error() string { return e.msg }

func Usagef(format string, args ...any) error { return usageError{msg: fmt.Sprintf(format, args...)} }

// UsageOf is a usage error of the (sub)command help, e.g. "cls agent",
// whose own parser found it.
func UsageOf(help, msg string) error { return usageError{msg: msg, help: help} }

// exitError carries a specific exit status (mqsub -b passes the job's).
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

// Env is what a command sees of its process: arguments, streams.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getwd          func() (string, error)
	// Dial, if set, opens the connection to the CLS (the SSH endpoint runs
	// commands in-process over a pipe); else the Unix socket of $MQ_HOME.
	Dial func(ctx context.Context) (io.ReadWriteCloser, error)
	// Environ is the user's environment (mqsub -V); nil where the command
	// has none of the user's (run in-process by the SSH endpoint).
	Environ func() []string
	// InCLS says the command runs inside the CLS's process for an SSH
	// client: a file an argument names (mqsub -f, --wfformat) is read
	// only if it is a regular file (argfile).
	InCLS bool
	// SlowAfter is how long a request goes unanswered before the command
	// says so on Stderr (0: slowAfter).
	SlowAfter time.Duration
}

// slowAfter is how long a command waits for an answer of the CLS before
// it says it is still waiting.
const slowAfter = 15 * time.Second

// slowNotice says on env.Stderr, once a request has waited, that the CLS
// has not answered: a CLS stopped (SIGSTOP), wedged or swamped would
// otherwise leave the command silent.
func slowNotice(env Env, name string) client.Option {
	return client.SlowNotice(cmp.Or(env.SlowAfter, slowAfter), func(op string, waited time.Duration) {
		fmt.Fprintf(env.Stderr, "%s: the CLS has not answered %s for %s (stopped, wedged or very busy?); still waiting, Ctrl-C to stop\n", name, op, waited)
	})
}

// openArg opens the file an argument names, a relative name against the
// command's directory (Getwd: over SSH the home directory, not the CLS
// process's), as argfile.Open does where the command runs.
func openArg(env Env, name string) (*os.File, error) {
	path, err := argfile.Path(name, func() (string, error) { return getwd(env) })
	if err != nil {
		return nil, err
	}
	f, err := argfile.Open(path, env.InCLS)
	if errors.Is(err, argfile.ErrNotRegular) {
		return nil, fmt.Errorf("cannot read %s: not a regular file (over SSH mq reads only regular files of the CLS host)", protocol.Quote(name))
	} else if err != nil && env.InCLS && path != name && errors.Is(err, fs.ErrNotExist) {
		// Over SSH the file is looked for on the CLS host, where the user
		// may not think to look.
		return nil, fmt.Errorf("cannot read %s: %w (over SSH it is %s, on the CLS host)", protocol.Quote(name), errors.Unwrap(err), protocol.Quote(path))
	} else if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", protocol.Quote(name), errors.Unwrap(err))
	}
	return f, nil
}

// OSEnv is the real process environment.
func OSEnv() Env {
	return Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getwd: os.Getwd, Environ: os.Environ}
}

// cutShort is err, or, for a connection lost before the CLS answered an
// action on many jobs (the CLS died or restarted), a line that says what
// became of them: the action goes in batches, each committed, so some may
// be done; goesOn says so (batchesDone). Without it users read
// "connection closed" as nothing done.
func cutShort(err error, goesOn string) error {
	if errors.Is(err, client.ErrClosed) {
		return fmt.Errorf("%w before it answered: %s", err, goesOn)
	}
	return err
}

// batchesDone is cutShort's goesOn for an action on selected jobs; again
// is the command that does the rest.
func batchesDone(again string) string {
	return "the jobs of the batches it committed stay so, the others do not (mqstat shows which; " + again + " again for the rest)"
}

// interrupted is err, or, once ctx ended (Ctrl-C, SIGTERM), exit 130
// with a line saying so and what goes on: a command that follows jobs
// stops following, nothing else.
func interrupted(ctx context.Context, err error, goesOn string) error {
	if err != nil && ctx.Err() != nil {
		return exitError{code: ExitInterrupted, msg: "interrupted; " + goesOn}
	}
	return err
}

// Main runs app with args and returns the exit status, printing any error
// as one line on stderr prefixed by the command name.
func Main(ctx context.Context, app *cli.App, args []string) int {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Run(ctx, app, args)
}

// Run is Main without signal handling: the SSH endpoint runs commands with
// it, cancelling ctx when the client goes away.
func Run(ctx context.Context, app *cli.App, args []string) int {
	Tidy(app)
	flagnames.Cache(app)
	app.ExitErrHandler = func(*cli.Context, error) {} // we map errors ourselves
	app.OnUsageError = func(_ *cli.Context, err error, _ bool) error {
		return usageError{msg: flagMessageIn(app.Flags, err)}
	}
	if f, ok := app.Metadata[rewriteArgs].(func([]string) []string); ok {
		args = f(args)
	}
	var err error
	if msg, help := flagorder.WithoutValue(app, args); msg != "" {
		err = usageError{msg: msg, help: help}
	} else {
		err = app.RunContext(ctx, args)
	}
	if err == nil {
		return ExitOK
	}
	name := app.Name
	var ue usageError
	var ee exitError
	switch {
	case errors.As(err, &ee):
		for _, line := range strings.Split(ee.msg, "\n") {
			if line != "" {
				fmt.Fprintf(app.ErrWriter, "%s: %s\n", name, protocol.Printable(line))
			}
		}
		return ee.code
	case errors.As(err, &ue):
		help := name
		if ue.help != "" {
			help = ue.help
		}
		fmt.Fprintf(app.ErrWriter, "%s: %s (see %s --help)\n", name, protocol.Printable(oneLine(ue.msg)), help)
		return ExitUsage
	case isFlagError(err):
		fmt.Fprintf(app.ErrWriter, "%s: %s (see %s --help)\n", name, protocol.Printable(oneLine(flagMessageIn(app.Flags, err))), name)
		return ExitUsage
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		// Ctrl-C where the command has nothing more to say (interrupted
		// says what goes on where it has).
		fmt.Fprintf(app.ErrWriter, "%s: interrupted\n", name)
		return ExitInterrupted
	}
	// Error messages quote names, hosts, paths and reasons from peers:
	// escaped, nothing in them reaches the terminal raw.
	fmt.Fprintf(app.ErrWriter, "%s: %s\n", name, protocol.Printable(oneLine(err.Error())))
	return ExitFailed
}

// rewriteArgs keys an App's Metadata entry func([]string) []string that
// Run applies to the arguments before parsing (mqstat's --watch [INTERVAL]:
// urfave/cli has no flag with an optional value).
const rewriteArgs = "rewriteArgs"

// Tidy sets what every mq command's help shares, on app and all its
// commands: no "help" command listed (--help is the way), no "(default:
// false)" on booleans.
func Tidy(app *cli.App) {
	app.HideHelpCommand = true
	tidyFlags(app.Flags)
	var walk func([]*cli.Command)
	walk = func(cs []*cli.Command) {
		for _, c := range cs {
			c.HideHelpCommand = true
			if c.OnUsageError == nil {
				// Else urfave/cli prints the whole help after a bad flag
				// value (cls serve --lease 1e308): one line is the rule.
				flags := c.Flags
				c.OnUsageError = func(cc *cli.Context, err error, _ bool) error {
					return usageError{msg: flagMessageIn(flags, err), help: cc.Command.HelpName}
				}
			}
			if act := c.Action; act != nil {
				// A usage error found by the command's action points to
				// that command's help, not the program's.
				c.Action = func(cc *cli.Context) error {
					err := act(cc)
					var ue usageError
					if errors.As(err, &ue) && ue.help == "" {
						ue.help = cc.Command.HelpName
						return ue
					}
					return err
				}
			}
			tidyFlags(c.Flags)
			walk(c.Subcommands)
		}
	}
	walk(app.Commands)
}

func tidyFlags(fs []cli.Flag) {
	for _, f := range fs {
		if b, ok := f.(*cli.BoolFlag); ok && !b.Value {
			b.DisableDefaultText = true
		}
	}
}

// isFlagError recognises urfave/cli's own usage errors that bypass
// OnUsageError (a flag given a bad value, a required flag missing).
func isFlagError(err error) bool {
	s := err.Error()
	return strings.HasPrefix(s, "invalid value") || strings.HasPrefix(s, "invalid boolean value") || strings.HasPrefix(s, "Required flag") ||
		strings.Contains(s, "flag needs an argument") || strings.HasPrefix(s, "flag provided but not defined")
}

// flagMessageIn is FlagMessage saying what a value of the flag among flags
// must be, where the flag package says only "parse error".
func flagMessageIn(flags []cli.Flag, err error) string {
	msg := FlagMessage(err)
	head, ok := strings.CutSuffix(msg, ": not a valid value")
	if !ok {
		return msg
	}
	name, _, _ := strings.Cut(strings.TrimLeft(head, "-"), ":")
	for _, f := range flags {
		if !slices.Contains(f.Names(), name) {
			continue
		}
		switch flagnames.Unwrap(f).(type) {
		case *cli.DurationFlag:
			return head + ": not a duration (e.g. 30s, 5m, 1h30m)"
		case *cli.IntFlag, *cli.Int64Flag, *cli.UintFlag, *cli.Uint64Flag:
			return head + ": not a whole number in range"
		case *cli.Float64Flag:
			return head + ": not a number"
		}
	}
	return msg
}

// FlagMessage rewords the flag package's errors.
func FlagMessage(err error) string { return flagmsg.Reword(err) }

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// NewApp returns an App with the shared settings.
func NewApp(name, usage string, env Env) *cli.App {
	return &cli.App{
		Name:                   name,
		Usage:                  usage,
		Version:                Version,
		Writer:                 env.Stdout,
		ErrWriter:              env.Stderr,
		Reader:                 env.Stdin,
		UseShortOptionHandling: false,
		HideHelpCommand:        true,
		// Shell completion asks the command (scripts/gendocs).
		EnableBashCompletion: true,
	}
}

// Dial connects to the CLS with the most its transport allows (admin on
// the owner's socket; over SSH, the key's role): through env.Dial if set,
// else the Unix socket of $MQ_HOME.
func Dial(ctx context.Context, env Env, name string) (*client.Client, error) {
	if env.Dial != nil {
		rwc, err := env.Dial(ctx)
		if err != nil {
			return nil, err
		}
		cl, err := client.New(ctx, rwc, "", name, slowNotice(env, name))
		if err != nil {
			rwc.Close()
			return nil, err
		}
		warnOtherBuild(env.Stderr, name, cl.Server)
		return cl, nil
	}
	home, err := client.Home()
	if err != nil {
		return nil, err
	}
	cl, err := client.Dial(ctx, home, "", name, slowNotice(env, name))
	if err == nil {
		warnOtherBuild(env.Stderr, name, cl.Server)
	}
	return cl, err
}

// reconnectVar names how long mqwait and mqsub -b wait for a CLS that
// went away to come back (rewait.Patience if unset).
const reconnectVar = "MQ_RECONNECT"

// waiter waits for jobs across a restart of the CLS, for as long as the
// user's MQ_RECONNECT says (a duration; 0: not at all).
func waiter(env Env, name string, note io.Writer) rewait.Waiter {
	w := rewait.Waiter{Dial: func(ctx context.Context) (*client.Client, error) { return Dial(ctx, env, name) }, Name: name, Note: note}
	if v, ok := userEnv(env, reconnectVar); ok {
		d, err := time.ParseDuration(v)
		switch {
		case err != nil || d < 0:
			fmt.Fprintf(note, "%s: warning: %s=%s is not a duration such as 10m (%s used)\n", name, reconnectVar, protocol.Quote(v), rewait.Patience)
		case d == 0:
			w.Dial = nil // fail as the CLS goes
		default:
			w.Patience = d
		}
	}
	return w
}

// userEnv is the value of the user's variable name, where the command
// has the user's environment (not over SSH).
func userEnv(env Env, name string) (string, bool) {
	if env.Environ == nil {
		return "", false
	}
	for _, kv := range env.Environ() {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// warnOtherBuild warns when the CLS is another build than this command
// (server, as its hello said): after an upgrade the old CLS serves on
// until restarted, and takes a newer option it does not know without
// doing it (a job submitted held runs at once).
func warnOtherBuild(w io.Writer, name, server string) {
	if w == nil || server == "" || server == Version {
		return
	}
	fmt.Fprintf(w, "%s: warning: the CLS runs mq %s, this %s is mq %s: restart the CLS (cls serve) after an upgrade; until then it ignores options it does not know\n",
		name, protocol.ClipText(server, 200), name, Version)
}
