package cli

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestFlagNamesMadeOnce: Run caches the flags' names (flagnames.Cache).
// urfave/cli's own Names runs a regular expression at every call, and
// IsSet of a name looks it up through the Names of every flag before it.
// With the flags as Run has them, asking of an unset flag near the end of
// mqsub's list allocates little; as urfave/cli makes them, for each
// flag's each name.
func TestFlagNamesMadeOnce(t *testing.T) {
	app := Mqsub(Env{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard})
	var last string // the last flag Cache wraps (not a hidden boolean)
	for _, f := range app.Flags {
		if b, ok := f.(*cli.BoolFlag); !ok || !b.Hidden {
			last = f.Names()[0]
		}
	}
	allocs := -1.0
	app.Action = func(c *cli.Context) error {
		if c.IsSet(last) {
			t.Fatalf("%s is set", last)
		}
		allocs = testing.AllocsPerRun(20, func() { c.IsSet(last) })
		return nil
	}
	if code := Run(context.Background(), app, []string{"mqsub", "t", "true"}); code != ExitOK {
		t.Fatalf("exit %d", code)
	}
	// Hidden booleans keep urfave/cli's Names (a few allocations each).
	if want := float64(len(app.Flags)) / 2; allocs < 0 || allocs > want {
		t.Errorf("IsSet(%q) allocated %v times a call over %d flags, want at most %v", last, allocs, len(app.Flags), want)
	}
}
