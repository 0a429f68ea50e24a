package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestFlagValueMessages: a bad value for a command's own flag says what
// the flag takes, as the cls subcommands' do, not only "not a valid
// value" (urfave/cli reports errors of the root command's flags past
// OnUsageError).
func TestFlagValueMessages(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		app  func(Env) *cli.App
		args []string
		want string
	}{
		{Mqwait, []string{"mqwait", "--timeout", "3", "1"}, `mqwait: --timeout: "3": not a duration (e.g. 30s, 5m, 1h30m) (see mqwait --help)`},
		{Mqsub, []string{"mqsub", "-b", "--timeout", "x", "t", "true"}, `mqsub: --timeout: "x": not a duration`},
		{Mqstat, []string{"mqstat", "--limit", "x"}, `mqstat: --limit: "x": not a whole number in range`},
	} {
		var o, e bytes.Buffer
		env := Env{Stdin: strings.NewReader(""), Stdout: &o, Stderr: &e, Getwd: func() (string, error) { return "/tmp", nil }}
		code := Run(context.Background(), tc.app(env), tc.args)
		if code != ExitUsage || !strings.HasPrefix(e.String(), tc.want) || strings.Count(e.String(), "\n") != 1 || o.Len() != 0 {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d and %q", strings.Join(tc.args, " "), code, o.String(), e.String(), ExitUsage, tc.want)
		}
	}
}

// TestSelectionMessages: ids and a selection together are refused naming
// the selections the command has: cls purge has no --all, mqdel has.
func TestSelectionMessages(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		app  func(Env) *cli.App
		args []string
		want string
	}{
		{clsPurge, []string{"cls", "purge", "--ended-before", "0", "-s", "X", "5"}, "cls: give job ids or a selection (-t, -s), not both"},
		{Mqdel, []string{"mqdel", "-t", "x", "5"}, "mqdel: give job ids or a selection (-t, -s, --all), not both"},
	} {
		var o, e bytes.Buffer
		env := Env{Stdin: strings.NewReader(""), Stdout: &o, Stderr: &e, Getwd: func() (string, error) { return "/tmp", nil }}
		if code := Run(context.Background(), tc.app(env), tc.args); code != ExitUsage || !strings.HasPrefix(e.String(), tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d and %q", strings.Join(tc.args, " "), code, e.String(), ExitUsage, tc.want)
		}
	}
}
