// Package flagorder reads a command line's flags as urfave/cli will,
// before it does: flags written after positional arguments are moved ahead
// of them (urfave/cli, like package flag, stops at the first positional
// one), and a value flag given without its value is found before it takes
// the next flag as its value.
package flagorder

import (
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/cmd/internal/flagmsg"
)

// First returns a rewrite of a command line (args[0] the program) that
// moves the flags written after positional arguments ahead of them, so that
// "mqwait 720-723 --timeout 2h" means what it says: urfave/cli, like package
// flag, stops parsing flags at the first argument that is not one, and
// would take "--timeout" and "2h" as job ids. A value flag keeps the
// argument after it (one written last, with no value, is left for the
// parser to refuse); everything after "--" stays where it is. args[0] is
// the program's name.
func First(flags []cli.Flag) func([]string) []string {
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

// RerunFirst is First for mqsub --rerun only ("mqsub --rerun
// 720-723 -Q"): in every other form what follows TARGET is the job's
// command, whose own flags are not mqsub's.
func RerunFirst(flags []cli.Flag) func([]string) []string {
	move := First(flags)
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

// WithoutValue finds a value flag given without its value, which
// would take the flag after it as one (mqstat -t -s F: target "-s", then
// "F" read as a job id), and says so; "" if none. It reads the flags of
// the command args name (cls purge ...) up to its first positional
// argument, as urfave/cli does, and returns the message and the help
// (the command's name) to point to. A value that is a flag's name is
// written FLAG=VALUE.
func WithoutValue(app *cli.App, args []string) (msg, help string) {
	cmds, help := app.Commands, app.Name
	takesValue := valueFlags(app.Flags)
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return "", ""
		}
		if len(a) < 2 || a[0] != '-' {
			k := slices.IndexFunc(cmds, func(c *cli.Command) bool { return c.HasName(a) })
			if k < 0 {
				return "", ""
			}
			cmds, help, takesValue = cmds[k].Subcommands, help+" "+cmds[k].Name, valueFlags(cmds[k].Flags)
			continue
		}
		dashes, name, hasValue := flagmsg.FlagWord(a)
		if hasValue || !takesValue[name] || i+1 == len(args) {
			continue
		}
		i++
		nd, n, _ := flagmsg.FlagWord(args[i])
		if _, isFlag := takesValue[n]; nd != "" && (isFlag || n == "h" || n == "help") {
			// Both named as written without what follows an '=': flags'
			// names, short whatever the user typed.
			return flagmsg.WithoutValue(dashes+name, nd+n), help
		}
	}
	return "", ""
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
