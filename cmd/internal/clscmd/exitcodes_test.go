package clscmd

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	mqcli "github.com/mq-hpc/mq/cmd/internal/cli"
	"github.com/mq-hpc/mq/cmd/internal/simcmd"
)

// badValues are wrong values of flags that take strings, by flag name;
// flags of numbers, durations and booleans get "x" (or "=maybe").
var badValues = map[string]string{
	"ceiling": "2x", "walltime": "2x", "idle": "2x", "connect-timeout": "2x", "est": "2x", "e": "%u",
	"policy": "lifo", "sync": "sometimes", "log-level": "loud", "s": "Z", "type": "lsf",
	"connect": "pigeon", "role": "king", "site-net": "nonsense", "max-attempts": "x",
	"slots": "x", "min": "x", "max": "x", "i": ":1", "in": ":1", "out": ":1", "o": "%u", "seeds": "x",
	"placeholders": "x", "inflation": "x", "cls-addr": "host;reboot",
}

// TestExitCodesWalk runs every command of every binary with an unknown
// flag and with each flag given a wrong value: each is a usage error, exit
// 2 with one line on stderr naming the command, before any connection to
// the CLS is tried (a refusal would be 1).
func TestExitCodesWalk(t *testing.T) {
	t.Setenv("MQ_HOME", t.TempDir()) // cls serve must never get as far as starting
	apps := map[string]func(mqcli.Env) *cli.App{
		"mqsub": mqcli.Mqsub, "mqstat": mqcli.Mqstat, "mqdel": mqcli.Mqdel, "mqhold": mqcli.Mqhold, "mqrls": mqcli.Mqrls, "mqalter": mqcli.Mqalter,
		"mqwait": mqcli.Mqwait, "cls": Cls, "mqsim": simcmd.Mqsim,
	}
	dialled := false
	env := func(o, e io.Writer) mqcli.Env {
		return mqcli.Env{Stdin: strings.NewReader(""), Stdout: o, Stderr: e, Getwd: func() (string, error) { return "/tmp", nil },
			Dial: func(context.Context) (io.ReadWriteCloser, error) {
				dialled = true
				return nil, errors.New("connection refused")
			}}
	}
	run := func(name string, args []string) (int, string) {
		var o, e bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		dialled = false
		code := mqcli.Run(ctx, apps[name](env(&o, &e)), append([]string{name}, args...))
		return code, e.String()
	}
	cases := 0
	check := func(name string, args []string) {
		t.Helper()
		cases++
		code, stderr := run(name, args)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if code != mqcli.ExitUsage || dialled || len(lines) != 1 || !strings.HasPrefix(lines[0], name+": ") {
			t.Errorf("%s %s: exit %d, dialled %v, stderr %q; want exit 2 and one line", name, strings.Join(args, " "), code, dialled, stderr)
		}
	}
	for name, mk := range apps {
		app := mk(env(io.Discard, io.Discard))
		mqcli.Tidy(app)
		var walk func(path []string, flags []cli.Flag, cmds []*cli.Command, leaf bool)
		walk = func(path []string, flags []cli.Flag, cmds []*cli.Command, leaf bool) {
			helpText(t, name, path, func(args []string) (int, string) {
				var o bytes.Buffer
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				code := mqcli.Run(ctx, apps[name](env(&o, io.Discard)), append([]string{name}, args...))
				return code, o.String()
			})
			if leaf {
				check(name, append(append([]string{}, path...), "--no-such-flag"))
				for _, f := range flags {
					fn := f.Names()[0]
					if fn == "help" || fn == "version" {
						continue
					}
					// Every flag has a long name beside any letter.
					if !slices.ContainsFunc(f.Names(), func(n string) bool { return len(n) > 1 }) {
						t.Errorf("%s %s: flag -%s has no long name", name, strings.Join(path, " "), fn)
					}
					flag := "--" + fn
					if len(fn) == 1 {
						flag = "-" + fn
					}
					var args []string
					switch f := f.(type) {
					case *cli.BoolFlag:
						args = []string{flag + "=maybe"}
					case *cli.IntFlag, *cli.Int64Flag, *cli.UintFlag, *cli.Float64Flag, *cli.DurationFlag:
						args = []string{flag, "x"}
					default:
						bad, ok := badValues[fn]
						if !ok {
							continue // any string is a value; checked where it is used
						}
						_ = f
						args = []string{flag, bad}
					}
					full := append(append([]string{}, path...), args...)
					// Arguments some commands need before they check flags.
					switch strings.Join(path, " ") {
					case "queue set", "site add":
						full = append(full, "q")
					}
					if name == "mqsub" {
						full = append(full, "t", "true")
					}
					check(name, full)
				}
			}
			for _, c := range cmds {
				if c.Name == "agent" {
					// Its own flag set (cmd/internal/agentcmd), checked there.
					check(name, []string{"agent", "--no-such-flag"})
					check(name, []string{"agent", "--slots", "x"})
					continue
				}
				walk(append(append([]string{}, path...), c.Name), c.Flags, c.Subcommands, len(c.Subcommands) == 0)
			}
		}
		walk(nil, app.Flags, app.Commands, true)
	}
	if cases < 60 {
		t.Fatalf("only %d cases: the walk missed commands", cases)
	}
}

// helpText checks the --help of one command for the rough edges: no
// "(default: false)" on booleans, no help command listed, no placeholder
// left in backticks.
func helpText(t *testing.T, name string, path []string, run func(args []string) (int, string)) {
	t.Helper()
	code, out := run(append(append([]string{}, path...), "--help"))
	what := strings.TrimSpace(name + " " + strings.Join(path, " "))
	if code != 0 || !strings.Contains(out, "USAGE:") {
		t.Errorf("%s --help: exit %d, %q", what, code, out)
		return
	}
	for _, bad := range []string{"(default: false)", "help, h ", "`"} {
		if strings.Contains(out, bad) {
			t.Errorf("%s --help shows %q:\n%s", what, bad, out)
		}
	}
}
