package cli

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/internal/shellwords"
)

// A job script may carry its own mqsub flags, one or more a line, on #MQ
// lines at its top, as sbatch reads #SBATCH lines and HyperQueue #HQ
// lines:
//
//	#!/bin/sh
//	#MQ --time 4:00:00 -c 8 --mem 16G
//	#MQ -o align.%j.out
//	bwa mem ...
//
// mqsub reads them when COMMAND runs a script (its first word, or the
// second after a shell: sh job.sh), found from the directory mqsub runs in
// or the command line's -d. A flag on the command line replaces the
// script's (a repeated one, such as -v, all of the script's). The lines are
// read until the first that is neither blank nor a comment, as sbatch does.

// directivePrefix begins a directive line.
const directivePrefix = "#MQ"

// maxScriptHead bounds what is read of a script for its directives.
const maxScriptHead = 64 << 10

// shells run a script named as their first argument.
var shells = []string{"sh", "bash", "dash", "ksh", "zsh", "/bin/sh", "/bin/bash", "/usr/bin/sh", "/usr/bin/bash"}

// notInScript are the flags that choose what mqsub does rather than
// describe the job: they go on the command line.
var notInScript = []string{"f", "rerun", "wfformat", "all", "command", "version", "help", "s", "t", "Q"}

// directive is one #MQ line: its number and its words.
type directive struct {
	line  int
	words []string
}

// scriptHead reads the directives at the top of a script, and the other
// batch systems' prefixes that its top uses (#SBATCH, #PBS, #$, #BSUB),
// which mqsub does not read.
func scriptHead(r io.Reader) (dirs []directive, foreign []string, err error) {
	sc := bufio.NewScanner(io.LimitReader(r, maxScriptHead))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "#") {
			break // the first command: directives end
		}
		if rest, ok := strings.CutPrefix(line, directivePrefix); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t') {
			words, err := shellwords.Split(rest)
			if err != nil {
				return nil, nil, fmt.Errorf("line %d: %s: %w", n, directivePrefix, err)
			}
			dirs = append(dirs, directive{line: n, words: words})
			continue
		}
		for _, p := range []string{"#SBATCH", "#PBS", "#$", "#BSUB"} {
			if strings.HasPrefix(line, p+" ") && !slices.Contains(foreign, p) {
				foreign = append(foreign, p)
			}
		}
	}
	// A line longer than the scanner's buffer ends the head: what came
	// before it stands.
	return dirs, foreign, nil
}

// scriptOf is the script a job's command words run, "" when they run
// none: its first word, or the second after a shell.
func scriptOf(words []string) string {
	cmd := strings.Fields(strings.Join(words, " "))
	switch {
	case len(cmd) == 0:
		return ""
	case len(cmd) >= 2 && slices.Contains(shells, cmd[0]):
		if strings.HasPrefix(cmd[1], "-") {
			return "" // sh -c '...', bash -x job.sh: not a plain script run
		}
		return cmd[1]
	}
	return cmd[0]
}

// applyDirectives sets the flags a job script's #MQ lines give that the
// command line does not, for mqsub TARGET COMMAND; it warns when the
// script's top has other batch systems' directives only, which mqsub
// does not read. A command that runs no script, or one mqsub cannot read,
// has none.
func applyDirectives(c *cli.Context, env Env) error {
	if c.NArg() < 2 || c.Bool("rerun") || c.IsSet("wfformat") || c.IsSet("f") {
		return nil
	}
	script := scriptOf(c.Args().Tail())
	if script == "" {
		return nil
	}
	dir, err := jobDir(c, env)
	if err != nil {
		return nil // said when the job is made
	}
	path := script
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil // a program on PATH, or a script elsewhere: nothing to read
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	dirs, foreign, err := scriptHead(f)
	if err != nil {
		return Usagef("%s: %v", script, err)
	}
	if len(dirs) == 0 {
		if len(foreign) > 0 {
			fmt.Fprintf(c.App.ErrWriter, "%s: warning: %s's %s lines are not read: write them as %s lines of mqsub's flags (%s --time 4:00:00 -c 8 --mem 16G)\n",
				c.App.Name, script, strings.Join(foreign, ", "), directivePrefix, directivePrefix)
		}
		return nil
	}
	return setDirectives(c, script, dirs)
}

// setDirectives sets the flags dirs give, of script, that were not set on
// the command line.
func setDirectives(c *cli.Context, script string, dirs []directive) error {
	byName := map[string]cli.Flag{}
	for _, f := range c.App.Flags {
		for _, n := range f.Names() {
			byName[n] = f
		}
	}
	onCommandLine := map[string]bool{}
	for _, f := range c.App.Flags {
		onCommandLine[f.Names()[0]] = c.IsSet(f.Names()[0])
	}
	for _, d := range dirs {
		for i := 0; i < len(d.words); i++ {
			w := d.words[i]
			where := fmt.Sprintf("%s:%d: %s %s", script, d.line, directivePrefix, w)
			if len(w) < 2 || w[0] != '-' {
				return Usagef("%s: not a flag (a script's %s lines give mqsub's flags only)", where, directivePrefix)
			}
			name, value, hasValue := strings.Cut(strings.TrimLeft(w, "-"), "=")
			f, ok := byName[name]
			if !ok {
				return Usagef("%s: mqsub has no such flag", where)
			}
			primary := f.Names()[0]
			if slices.Contains(notInScript, primary) {
				return Usagef("%s: goes on mqsub's command line, not in a script", where)
			}
			takes := true
			if g, ok := f.(cli.DocGenerationFlag); ok {
				takes = g.TakesValue()
			}
			switch {
			case !takes && !hasValue:
				value = "true"
			case takes && !hasValue:
				if i+1 == len(d.words) {
					return Usagef("%s: needs a value", where)
				}
				i++
				value = d.words[i]
			}
			if onCommandLine[primary] {
				continue // the command line's replaces it
			}
			if err := c.Set(primary, value); err != nil {
				return Usagef("%s: %v", where, err)
			}
		}
	}
	return nil
}
