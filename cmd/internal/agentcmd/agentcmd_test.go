package agentcmd

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestUsage: both commands check their command line the same way, before
// anything is dialled; each refusal is a UsageError naming the flag.
func TestUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode Mode
		args string
		want string
	}{
		{Remote, "--site s --out /tmp", "--cls, --host-key, --key, --site and --out are required"},
		{Remote, "--cls h:1 --site s", "required"},
		{Remote, "--cls h:1 --site s --out /tmp", "--cls needs --key"},
		{Remote, "--noop", "flag provided but not defined: -noop"},
		{Local, "--slots 0", "--slots must be 1..4096, not 0"},
		{Local, "--slots 5000", "--slots must be 1..4096"},
		{Local, "--walltime -1s", "walltime"},
		{Local, "--log-level loud", "--log-level"},
		{Local, "--umask 999", "--umask must be octal"},
		{Local, "--key k", "--key is only for --cls"},
		{Local, "--via u@h:22", "--via is only for --cls"},
		{Local, "extra", `unexpected argument "extra"`},
	} {
		err := Run(context.Background(), "test", tc.mode, strings.Fields(tc.args), io.Discard)
		var ue UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("mode %d %q: %v, want a usage error with %q", tc.mode, tc.args, err, tc.want)
		}
	}
	if err := Run(context.Background(), "test", Local, []string{"--help"}, io.Discard); err != nil {
		t.Errorf("--help: %v", err)
	}
}
