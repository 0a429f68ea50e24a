package cli

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// flagsFirst returns a rewrite (see rewriteArgs) that moves the flags
// written after positional arguments ahead of them, so that
// "mqwait 720-723 --timeout 2h" means what it says: urfave/cli, like package
// flag, stops parsing flags at the first argument that is not one, and
// would take "--timeout" and "2h" as job ids. A value flag keeps the
// argument after it (one written last, with no value, is left for the
// parser to refuse); everything after "--" stays where it is. args[0] is
// the program's name.
func flagsFirst(flags []cli.Flag) func([]string) []string {
	takesValue := valueFlags(flags)
	return func(args []string) []string {
		if len(args) < 2 || args[len(args)-1] == completionFlag {
			return args // a shell completing: urfave/cli looks for the flag last
		}
		out := make([]string, 1, len(args))
		out[0] = args[0]
		var positional []string
		rest := args[1:]
		for i := 0; i < len(rest); i++ {
			a := rest[i]
			if a == "--" {
				positional = append(positional, rest[i:]...)
				break
			}
			if len(a) < 2 || a[0] != '-' {
				positional = append(positional, a)
				continue
			}
			out = append(out, a)
			name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if !hasValue && takesValue[name] {
				if i+1 == len(rest) {
					// A value flag with no value: left where it was, so
					// the error names what the user wrote last.
					return args
				}
				i++
				out = append(out, rest[i])
			}
		}
		return append(out, positional...)
	}
}

// completionFlag is what a shell's completion script puts last on the
// line it asks urfave/cli to complete.
const completionFlag = "--generate-bash-completion"

// rerunFlagsFirst is flagsFirst for mqsub --rerun only ("mqsub --rerun
// 720-723 -Q"): in every other form what follows TARGET is the job's
// command, whose own flags are not mqsub's.
func rerunFlagsFirst(flags []cli.Flag) func([]string) []string {
	move := flagsFirst(flags)
	takesValue := valueFlags(flags)
	return func(args []string) []string {
		for i := 1; i < len(args); i++ {
			a := args[i]
			switch {
			case a == "--rerun" || a == "-rerun":
				return move(args)
			case a == "--" || len(a) < 2 || a[0] != '-':
				return args // a positional argument first: TARGET
			}
			if name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "="); !hasValue && takesValue[name] {
				i++ // the flag's value
			}
		}
		return args
	}
}

// valueFlags says, by every name of flags, whether the flag takes a value.
func valueFlags(flags []cli.Flag) map[string]bool {
	takesValue := map[string]bool{}
	for _, f := range flags {
		v := true
		if d, ok := f.(cli.DocGenerationFlag); ok {
			v = d.TakesValue()
		}
		for _, n := range f.Names() {
			takesValue[n] = v
		}
	}
	return takesValue
}

// nameList collects -p's values as given. A StringSliceFlag copies them
// to its aliases through JSON, which makes bytes that are not UTF-8
// U+FFFD: such a name then passed the check that refuses it, and the
// job waited for a target no one meant.
type nameList struct{ names []string }

// Serialize is what urfave/cli copies to the flag's aliases.
func (l *nameList) Serialize() string { return aliasCopy }

func (l *nameList) Set(v string) error {
	if v != aliasCopy {
		l.names = append(l.names, v)
	}
	return nil
}

func (l *nameList) String() string { return strings.Join(l.names, ",") }

// prereqFlag is -p's targets.
func prereqFlag(c *cli.Context) []string { return splitList(c.Generic("p").(*nameList).names) }
