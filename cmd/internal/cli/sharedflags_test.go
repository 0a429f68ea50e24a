package cli

import (
	"io"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestFlagNamesMadeOnce: urfave/cli's Names runs a regular expression at
// every call, and IsSet of a name looks it up through the Names of every
// flag before it (a run asks it of every name). After Tidy, asking of an
// unset flag at the end of mqsub's list allocates about nothing; with the
// flags as urfave/cli makes them it allocates for each flag's each name.
func TestFlagNamesMadeOnce(t *testing.T) {
	app := Mqsub(Env{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard})
	last := app.Flags[len(app.Flags)-1].Names()[0]
	allocs := -1.0
	app.Action = func(c *cli.Context) error {
		if c.IsSet(last) {
			t.Fatalf("%s is set", last)
		}
		allocs = testing.AllocsPerRun(20, func() { c.IsSet(last) })
		return nil
	}
	Tidy(app)
	if err := app.Run([]string{"mqsub", "t", "true"}); err != nil {
		t.Fatal(err)
	}
	if allocs < 0 || allocs > 10 {
		t.Errorf("IsSet(%q) allocated %v times a call over %d flags, want at most 10", last, allocs, len(app.Flags))
	}
}
