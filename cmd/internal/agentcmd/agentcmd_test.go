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
		{Local, "--log-format xml", "--log-format must be text or json"},
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

func TestResolveDataRoot(t *testing.T) {
	t.Parallel()
	home := func() (string, error) { return "/home/u", nil }
	noHome := func() (string, error) { return "", errors.New("no home") }
	for _, tc := range []struct {
		in, want string
		home     func() (string, error)
		err      bool
	}{
		{"", "", noHome, false},
		{"/scratch/mq/", "/scratch/mq", noHome, false},
		{".mq-data/cls1", "/home/u/.mq-data/cls1", home, false},
		{"data", "", noHome, true},
	} {
		got, err := resolveDataRoot(tc.in, tc.home)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("resolveDataRoot(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}
