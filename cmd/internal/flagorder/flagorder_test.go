package flagorder

import (
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

func TestFlagsFirst(t *testing.T) {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "q", Aliases: []string{"queue"}},
		&cli.DurationFlag{Name: "timeout"},
		&cli.BoolFlag{Name: "Q", Aliases: []string{"quiet"}},
	}
	rewrite := First(flags)
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
			t.Errorf("First(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestRerunFlagsFirst(t *testing.T) {
	flags := []cli.Flag{&cli.BoolFlag{Name: "rerun"}, &cli.BoolFlag{Name: "Q"}, &cli.StringFlag{Name: "q"}}
	rewrite := RerunFirst(flags)
	for _, tc := range []struct{ in, want []string }{
		{[]string{"mqsub", "--rerun", "720-723", "-Q"}, []string{"mqsub", "--rerun", "-Q", "720-723"}},
		{[]string{"mqsub", "-q", "a", "--rerun", "5", "-Q"}, []string{"mqsub", "-q", "a", "--rerun", "-Q", "5"}},
		// The job's command keeps its own flags.
		{[]string{"mqsub", "t", "ls", "-Q"}, []string{"mqsub", "t", "ls", "-Q"}},
		{[]string{"mqsub", "-q", "a", "t", "grep", "--rerun"}, []string{"mqsub", "-q", "a", "t", "grep", "--rerun"}},
	} {
		if got := rewrite(slices.Clone(tc.in)); !slices.Equal(got, tc.want) {
			t.Errorf("RerunFirst(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestFlagWithoutValue: a value flag whose next word is a flag of its
// command is refused, in a subcommand too; a value written FLAG=VALUE,
// one that is no flag's name, and anything after the first positional
// argument or "--" pass.
func TestFlagWithoutValue(t *testing.T) {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "t", Aliases: []string{"target"}},
		&cli.StringFlag{Name: "s", Aliases: []string{"states"}},
		&cli.IntFlag{Name: "limit"},
		&cli.BoolFlag{Name: "Q"},
	}
	app := &cli.App{Name: "mq", Flags: flags, Commands: []*cli.Command{{Name: "purge", Flags: flags[:2]}}}
	for _, tc := range []struct {
		args []string
		want string // "" = passes
	}{
		{[]string{"mq", "-t", "-s", "F"}, "-t has no value: the word after it, -s, is a flag (a value that begins with '-' is written -t=VALUE)"},
		{[]string{"mq", "-Q", "--target", "--states=" + strings.Repeat("F", 1000)}, "--target has no value: the word after it, --states, is a flag (a"},
		{[]string{"mq", "-t", "-h"}, "-t has no value"},
		{[]string{"mq", "purge", "-s", "--target"}, "-s has no value"},
		{[]string{"mq", "-t=-s", "F"}, ""},
		{[]string{"mq", "-t", "-x"}, ""},
		{[]string{"mq", "--limit", "-1"}, ""},
		{[]string{"mq", "-Q", "-t"}, ""}, // left for the parser to refuse
		{[]string{"mq", "-5", "-t", "a"}, ""},
		{[]string{"mq", "job", "-t", "-s"}, ""},
		{[]string{"mq", "--", "-t", "-s"}, ""},
		// Three dashes or more are no flag to the parser (it refuses
		// them), and never named: the message stays short.
		{[]string{"mq", strings.Repeat("-", 1000) + "t", "-s"}, ""},
		{[]string{"mq", "-t", strings.Repeat("-", 1000) + "s"}, ""},
	} {
		msg, _ := WithoutValue(app, tc.args)
		switch {
		case tc.want == "" && msg != "":
			t.Errorf("%q: %s, want it to pass", tc.args, msg)
		case tc.want != "" && !strings.HasPrefix(msg, tc.want):
			t.Errorf("%q: %q, want %q", tc.args, msg, tc.want)
		}
	}
	if _, help := WithoutValue(app, []string{"mq", "purge", "-s", "-t"}); help != "mq purge" {
		t.Errorf("a subcommand's error points to %q's help, want mq purge's", help)
	}
}

// FuzzCommandLine: whatever the words, First only moves them (none lost,
// none made, the program's name first) and WithoutValue's message is one
// short line that names flags only.
func FuzzCommandLine(f *testing.F) {
	for _, s := range []string{
		"mq 720-723 --timeout 2h", "mq -t -s F", "mq purge -s --target", "mq -t=-s F", "mq 1 -- -Q",
		"mq ---t -s", "mq -t", "mq - 1", "mq 5 - --generate-bash-completion", "mq --limit -1 -Q x",
	} {
		f.Add(s)
	}
	flags := []cli.Flag{
		&cli.StringFlag{Name: "t", Aliases: []string{"target"}},
		&cli.StringFlag{Name: "s", Aliases: []string{"states"}},
		&cli.IntFlag{Name: "limit"},
		&cli.DurationFlag{Name: "timeout"},
		&cli.BoolFlag{Name: "Q"},
	}
	app := &cli.App{Name: "mq", Flags: flags, Commands: []*cli.Command{{Name: "purge", Flags: flags[:2]}}}
	first := First(flags)
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Split(line, " ")
		got := first(slices.Clone(args))
		if got[0] != args[0] || !slices.Equal(sorted(got), sorted(args)) {
			t.Fatalf("First(%q) = %q: not the same words", args, got)
		}
		msg, _ := WithoutValue(app, args)
		if len(msg) > 200 || strings.ContainsAny(msg, "\n\r\x00") {
			t.Fatalf("WithoutValue(%q) = %q, want one short line", args, msg)
		}
	})
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
