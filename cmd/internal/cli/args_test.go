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
		// A shell completing "mqstat 5 -": the completion flag stays last.
		{[]string{"mqstat", "5", "-", "--generate-bash-completion"}, []string{"mqstat", "5", "-", "--generate-bash-completion"}},
	} {
		if got := rewrite(slices.Clone(tc.in)); !slices.Equal(got, tc.want) {
			t.Errorf("flagsFirst(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestRerunFlagsFirst(t *testing.T) {
	flags := []cli.Flag{&cli.BoolFlag{Name: "rerun"}, &cli.BoolFlag{Name: "Q"}, &cli.StringFlag{Name: "q"}}
	rewrite := rerunFlagsFirst(flags)
	for _, tc := range []struct{ in, want []string }{
		{[]string{"mqsub", "--rerun", "720-723", "-Q"}, []string{"mqsub", "--rerun", "-Q", "720-723"}},
		{[]string{"mqsub", "-q", "a", "--rerun", "5", "-Q"}, []string{"mqsub", "-q", "a", "--rerun", "-Q", "5"}},
		// The job's command keeps its own flags.
		{[]string{"mqsub", "t", "ls", "-Q"}, []string{"mqsub", "t", "ls", "-Q"}},
		{[]string{"mqsub", "-q", "a", "t", "grep", "--rerun"}, []string{"mqsub", "-q", "a", "t", "grep", "--rerun"}},
	} {
		if got := rewrite(slices.Clone(tc.in)); !slices.Equal(got, tc.want) {
			t.Errorf("rerunFlagsFirst(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
