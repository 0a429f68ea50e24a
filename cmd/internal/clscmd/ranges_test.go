package clscmd

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	mqcli "github.com/mq-hpc/mq/cmd/internal/cli"
)

// Every duration and size flag of every command is range-checked before
// anything is sent or started: out of range is a one-line usage error
// naming the flag (exit 2), never a value that wraps (`--ceiling 1e10`
// once became a negative duration that killed every job at once).
func TestDurationAndSizeFlagRanges(t *testing.T) {
	// MQ_HOME is a file: a command that got past its checks fails at
	// once instead of serving or waiting for a CLS.
	notDir := filepath.Join(t.TempDir(), "file")
	os.WriteFile(notDir, nil, 0o600)
	t.Setenv("MQ_HOME", notDir)
	apps := map[string]func(mqcli.Env) *cli.App{"cls": Cls, "mqsub": mqcli.Mqsub, "mqstat": mqcli.Mqstat, "mqdel": mqcli.Mqdel}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cls", "queue", "set", "q", "--ceiling", "1e10"}, `--ceiling: "1e10" is not 0..1e+09 seconds`},
		{[]string{"cls", "queue", "set", "q", "--ceiling", "NaN"}, `--ceiling: "NaN" is not 0..`},
		{[]string{"cls", "queue", "set", "q", "--ceiling", "Inf"}, `--ceiling: "Inf" is not 0..`},
		{[]string{"cls", "queue", "set", "q", "--ceiling", "-1"}, `--ceiling: "-1" is not 0..`},
		{[]string{"cls", "queue", "set", "q", "--ceiling", "1e400"}, `--ceiling: "1e400" is not a duration`},
		{[]string{"cls", "queue", "set", "q", "--ceiling", "2000000h"}, `--ceiling: "2000000h" is more than 1e+09 seconds`},
		{[]string{"cls", "queue", "set", "q", "--ceiling", "99999999999h"}, `--ceiling: "99999999999h" is not a duration`},
		{[]string{"cls", "queue", "set", "q", "--deadline", "soon"}, `--deadline: "soon" is not none, a duration`},
		{[]string{"cls", "queue", "set", "q", "--deadline", "1969-01-01T00:00:00Z"}, `--deadline: "1969-01-01T00:00:00Z" is not a time after 1970`},
		{[]string{"cls", "queue", "set", "q", "--budget", "NaN"}, `--budget: "NaN" is not 0..`},
		{[]string{"cls", "queue", "set", "q", "--budget", "-1"}, `--budget: "-1" is not 0..`},
		{[]string{"cls", "queue", "set", "q", "--max-output", "2T"}, `--max-output must be a size such as 1M or 2G, at most 1T`},
		{[]string{"cls", "queue", "set", "q", "--max-output", "-1"}, `--max-output must be a size`},
		{[]string{"cls", "queue", "set", "q", "--max-output", "lots"}, `--max-output must be a size`},
		{[]string{"cls", "queue", "set", "q", "--output", "streams"}, `--output "streams": want files or default`},
		{[]string{"cls", "site", "add", "s", "--type", "local", "--walltime", "1e10"}, `--walltime: "1e10" is not 0..`},
		{[]string{"cls", "site", "add", "s", "--type", "local", "--price", "-1"}, `--price must be 0..`},
		{[]string{"cls", "site", "add", "s", "--type", "local", "--price", "NaN"}, `--price must be 0..`},
		{[]string{"cls", "site", "add", "s", "--type", "local", "--walltime", "NaN"}, `--walltime: "NaN" is not 0..`},
		{[]string{"cls", "site", "add", "s", "--type", "local", "--walltime", "1000d"}, `--walltime: "1000d" is not a duration`},
		{[]string{"cls", "site", "add", "s", "--type", "local", "--walltime", "1e8"}, `--walltime must be between 1m and 366 days`},
		{[]string{"cls", "site", "add", "s", "--type", "local", "--idle", "-1s"}, `--idle: "-1s" is not a duration`},
		{[]string{"cls", "site", "add", "s", "--type", "local", "--idle", "2h"}, `--idle must be between 1s and the walltime`},
		{[]string{"cls", "serve", "--lease", "0s"}, "--lease must be 1s..24h0m0s, not 0s"},
		{[]string{"cls", "serve", "--lease", "1000h"}, "--lease must be 1s..24h0m0s"},
		{[]string{"cls", "serve", "--site-poll", "0s"}, "--site-poll must be 100ms..1h0m0s, not 0s"},
		{[]string{"cls", "serve", "--site-throttle", "-1m"}, "--site-throttle must be 1s.."},
		{[]string{"cls", "serve", "--site-net", "a=1e10,10M"}, "latency"},
		{[]string{"cls", "serve", "--http-path", "/a/"}, "--http-path needs --http ADDR"},
		{[]string{"cls", "serve", "--http", "127.0.0.1:0", "--http-path", "/a/../b/"}, `--http-path "/a/../b/" must be an absolute path`},
		{[]string{"cls", "serve", "--http", "127.0.0.1:0", "--http-path", "node/"}, `--http-path "node/" must be`},
		{[]string{"cls", "serve", "--site-net", "a=1,1e30"}, "bandwidth"},
		{[]string{"cls", "serve", "--lp-min-util", "1"}, "--lp-min-util must be at least 0 and below 1, not 1"},
		// A value the flag package cannot parse: one line, not the help.
		{[]string{"cls", "serve", "--lease", "1e308"}, `cls: --lease: "1e308": not a duration (e.g. 30s, 5m, 1h30m) (see cls serve --help)`},
		{[]string{"cls", "serve", "--local", "1e3"}, `cls: --local: "1e3": not a whole number in range (see cls serve --help)`},
		{[]string{"cls", "serve", "--lp-min-util", "NaN"}, "--lp-min-util must be at least 0 and below 1"},
		{[]string{"cls", "agent", "--walltime", "-1s"}, "--walltime must be 0.."},
		{[]string{"cls", "agent", "--idle", "-1s"}, "--idle must be 0.."},
		{[]string{"cls", "agent", "--reconnect", "-1s"}, "--reconnect must be 0.."},
		{[]string{"cls", "agent", "--walltime", "2000000h"}, "--walltime must be 0.."},
		{[]string{"mqsub", "--est", "1e10", "t", "true"}, "--est: \"1e10\" is not 0..1e+09 seconds"},
		{[]string{"mqsub", "--est", "NaN", "t", "true"}, "--est: \"NaN\" is not 0.."},
		{[]string{"mqsub", "--est", "-1", "t", "true"}, "--est: \"-1\" is not 0.."},
		// -p without its value took the next flag: refused before a job
		// waits for ever on a target named "-t".
		{[]string{"mqsub", "-p", "-t", "x", "true"}, `-p has no value: the word after it, -t, is a flag (a value that begins with '-' is written -p=VALUE)`},
		{[]string{"mqsub", "-p=-t", "x", "true"}, `prerequisite target name "-t" begins with '-': was a flag given without its value?`},
		{[]string{"mqstat", "-t", "-s", "F"}, `-t has no value: the word after it, -s, is a flag`},
		{[]string{"mqdel", "-q", "--help"}, `-q has no value: the word after it, --help, is a flag`},
		{[]string{"cls", "purge", "--ended-before", "-s", "F"}, `cls: --ended-before has no value: the word after it, -s, is a flag (a value that begins with '-' is written --ended-before=VALUE) (see cls purge --help)`},
		{[]string{"mqsub", "--", "-x", "true"}, `target name "-x" begins with '-'`},
		// "/data/x:1e10" and "/data/x:-5" are file names: a size is written
		// as one (protocol.ParseFileArg).
		{[]string{"mqsub", "--in", "/data/x:99999999T", "t", "true"}, "is not a size"},
		{[]string{"mqstat", "--limit", "-1"}, "--limit must be 0 (no limit) or more"},
		{[]string{"mqstat", "-j", "-1"}, "-j"},
		// Job ids are decimal, as mqdel reads them: Slurm's array task
		// 25_3 was read as job 253, 0x19 as 25.
		{[]string{"mqstat", "-j", "25_3"}, `mqstat: -j: "25_3": not a job id (see mqstat --help)`},
		{[]string{"mqstat", "-j", "0x19"}, `-j: "0x19": not a job id`},
		{[]string{"mqstat", "--array", "25_3"}, `--array: "25_3": not a job id`},
		{[]string{"mqstat", "-o", "1_0"}, `-o: "1_0": not a job id`},
		{[]string{"mqdel", "-5"}, ""},
		// A queue name mqsub -q refuses is a usage error here too (it
		// was the CLS's refusal, exit 1).
		{[]string{"cls", "queue", "set", "", "--policy", "sjf"}, "empty queue name"},
		{[]string{"cls", "queue", "set", "a b", "--policy", "sjf"}, `queue name "a b" has a space, comma or control character`},
	} {
		var out, errOut bytes.Buffer
		dialled := false
		env := mqcli.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getwd: os.Getwd,
			Dial: func(context.Context) (io.ReadWriteCloser, error) {
				dialled = true
				return nil, errors.New("no CLS in this test")
			}}
		if tc.args[0] == "cls" && (tc.args[1] == "serve" || tc.args[1] == "agent") {
			env.Dial = nil // these do not dial through env; MQ_HOME stops them
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		code := mqcli.Run(ctx, apps[tc.args[0]](env), tc.args)
		cancel()
		if code != 2 || !strings.Contains(errOut.String(), tc.want) || strings.Count(errOut.String(), "\n") != 1 || dialled {
			t.Errorf("%s: exit %d, stderr %q, dialled %v; want exit 2 and one line with %q",
				strings.Join(tc.args, " "), code, errOut.String(), dialled, tc.want)
		}
	}
}

// TestUsageErrorNamesItsCommand: a usage error is one line pointing to the
// help of the command that was mistyped (it pointed to cls --help, and
// cls agent's said "(see cls agent -help) (see cls --help)").
func TestUsageErrorNamesItsCommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cls", "serve", "--foo"}, "cls: unknown flag --foo (see cls serve --help)\n"},
		{[]string{"cls", "agent", "--foo"}, "cls: unknown flag --foo (see cls agent --help)\n"},
		{[]string{"cls", "agent", "-slots", "x"}, "cls: --slots: \"x\": not a valid value (see cls agent --help)\n"},
		{[]string{"cls", "site", "add", "--foo"}, "cls: unknown flag --foo (see cls site add --help)\n"},
		{[]string{"cls", "queue", "set"}, "(see cls queue set --help)\n"},
		{[]string{"cls", "bogus"}, "(see cls --help)\n"},
	} {
		var out, errOut bytes.Buffer
		env := mqcli.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getwd: os.Getwd,
			Dial: func(context.Context) (io.ReadWriteCloser, error) { return nil, errors.New("no CLS in this test") }}
		if tc.args[1] == "serve" || tc.args[1] == "agent" {
			env.Dial = nil
		}
		code := mqcli.Run(context.Background(), Cls(env), tc.args)
		if code != 2 || !strings.HasSuffix(errOut.String(), tc.want) || strings.Count(errOut.String(), "\n") != 1 {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 and one line ending %q", strings.Join(tc.args, " "), code, errOut.String(), tc.want)
		}
	}
}
