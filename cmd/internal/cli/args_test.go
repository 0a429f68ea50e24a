package cli

import (
	"slices"
	"testing"

	"github.com/urfave/cli/v2"
)

func TestFlagsFirst(t *testing.T) {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "q", Aliases: []string{"queue"}},
		&cli.DurationFlag{Name: "timeout"},
		&cli.BoolFlag{Name: "Q", Aliases: []string{"quiet"}},
	}
	rewrite := flagsFirst(flags)
	for _, tc := range []struct{ in, want []string }{
		{[]string{"mqwait"}, []string{"mqwait"}},
		{[]string{"mqwait", "720-723", "--timeout", "2h"}, []string{"mqwait", "--timeout", "2h", "720-723"}},
		{[]string{"mqwait", "720-723", "-Q"}, []string{"mqwait", "-Q", "720-723"}},
		{[]string{"mqwait", "1", "-Q", "2", "--timeout=1m", "3"}, []string{"mqwait", "-Q", "--timeout=1m", "1", "2", "3"}},
		{[]string{"mqwait", "-q", "a", "1"}, []string{"mqwait", "-q", "a", "1"}},
		// A bool flag does not take the next argument.
		{[]string{"mqwait", "--quiet", "5"}, []string{"mqwait", "--quiet", "5"}},
		// After "--" nothing is a flag.
		{[]string{"mqwait", "1", "--", "-Q"}, []string{"mqwait", "1", "--", "-Q"}},
		// A value flag at the end with no value is left for the parser to refuse.
		{[]string{"mqwait", "1", "--timeout"}, []string{"mqwait", "1", "--timeout"}},
		{[]string{"mqwait", "-", "1"}, []string{"mqwait", "-", "1"}},
	} {
		if got := rewrite(slices.Clone(tc.in)); !slices.Equal(got, tc.want) {
			t.Errorf("flagsFirst(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
