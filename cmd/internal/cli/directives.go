package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/cmd/internal/jobscript"
)

// notInScript are the flags that choose what mqsub does rather than
// describe the job: they go on the command line.
var notInScript = []string{"f", "rerun", "wfformat", "all", "command", "version", "help", "s", "t", "Q"}

// applyDirectives sets the flags a job script's #MQ lines give
// (jobscript) that the command line does not, for mqsub TARGET COMMAND:
// the script COMMAND runs, found from the directory mqsub runs in or the
// command line's -d. A flag on the command line replaces the script's (a
// repeated one, such as -v, all of the script's). It warns when the
// script's top has other batch systems' directives only. A command that
// runs no script, or one mqsub cannot read, has none.
func applyDirectives(c *cli.Context, env Env) error {
	if c.NArg() < 2 || c.Bool("rerun") || c.IsSet("wfformat") || c.IsSet("f") {
		return nil
	}
	script := jobscript.Of(c.Args().Tail())
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
	h, ok, err := jobscript.ReadFile(path)
	if err != nil {
		return Usagef("%s: %v", script, err)
	} else if !ok {
		return nil // a program on PATH, a script elsewhere, not a file: nothing to read
	}
	if !jobscript.ViaShell(c.Args().Tail()) {
		warnRunnable(c, env, script, path)
	}
	if h.BOM {
		fmt.Fprintf(c.App.ErrWriter, "%s: warning: %s begins with a UTF-8 byte order mark, which the system and shells take as part of its first line (its #! is not seen): save it without one\n",
			c.App.Name, script)
	}
	if len(h.Lines) == 0 && len(h.Foreign) > 0 {
		fmt.Fprintf(c.App.ErrWriter, "%s: warning: %s's %s lines are not read: write them as %s lines of mqsub's flags (%s --time 4:00:00 -c 8 --mem 16G)\n",
			c.App.Name, script, strings.Join(h.Foreign, ", "), jobscript.Prefix, jobscript.Prefix)
	}
	return setDirectives(c, script, h)
}

// setDirectives sets the flags h gives, of script, that were not set on
// the command line.
func setDirectives(c *cli.Context, script string, h jobscript.Head) error {
	byName := map[string]jobscript.Flag{}
	onCommandLine := map[string]bool{}
	for _, f := range c.App.Flags {
		jf := jobscript.Flag{Name: f.Names()[0], TakesValue: true}
		if g, ok := f.(cli.DocGenerationFlag); ok {
			jf.TakesValue = g.TakesValue()
		}
		for _, n := range f.Names() {
			byName[n] = jf
		}
		onCommandLine[jf.Name] = c.IsSet(jf.Name)
	}
	settings, err := jobscript.Settings(h, script, func(name string) (jobscript.Flag, bool) {
		f, ok := byName[name]
		return f, ok
	})
	if err != nil {
		return Usagef("%v", err)
	}
	for _, s := range settings {
		if slices.Contains(notInScript, s.Name) {
			return Usagef("%s: goes on mqsub's command line, not in a script", s.Where)
		}
		if onCommandLine[s.Name] {
			continue // the command line's replaces it
		}
		if err := c.Set(s.Name, s.Value); err != nil {
			return Usagef("%s: %v", s.Where, err)
		}
	}
	return nil
}

// warnRunnable warns when the job's command is a script file it would
// fail to run, as sbatch job.sh runs it whatever its mode: one named
// without a '/' that is not on PATH (the job's shell looks there, not
// in its directory: exit 127), or one not executable (exit 126).
func warnRunnable(c *cli.Context, env Env, script, path string) {
	name := c.App.Name
	if !strings.Contains(script, "/") && env.Environ != nil && !onPath(script, env.Environ()) {
		fmt.Fprintf(c.App.ErrWriter, "%s: warning: %s is a file in the job's directory, but the job's shell looks for a command without a '/' on PATH, and PATH has no %s: write ./%s (or sh %s)\n", name, script, script, script, script)
		return
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o111 == 0 {
		fmt.Fprintf(c.App.ErrWriter, "%s: warning: %s is not executable, so the job would fail (exit 126): chmod +x %s, or run it with sh %s\n", name, script, script, script)
	}
}

// onPath says whether name is an executable file in a directory of
// environ's PATH.
func onPath(name string, environ []string) bool {
	for _, kv := range environ {
		if path, ok := strings.CutPrefix(kv, "PATH="); ok {
			for _, dir := range filepath.SplitList(path) {
				if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
					return true
				}
			}
		}
	}
	return false
}
