//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// docMarker, on the line before a page's ```sh block, has the block run as
// written by a test of this package.
const docMarker = "<!-- e2e: run as written -->"

// guideStep is one command of a marked block: its line, what it printed
// (stdout and stderr) and its exit status.
type guideStep struct {
	cmd, out string
	rc       int
}

// heredocStart finds a here-document's opening (<<EOF, <<'EOF', <<-"EOF")
// and its delimiter word; a here-string (<<<) is not one.
var heredocStart = regexp.MustCompile(`(?:^|[^<])<<(-?)\s*['"]?([A-Za-z_][A-Za-z0-9_]*)['"]?`)

// docCommand is one command of a marked block and, in a transcript, the
// lines the page shows it printing.
type docCommand struct {
	cmd        string
	transcript bool
	want       []string // "..." stands for any lines
}

// docCommands is the commands of the blocks of text that docMarker marks,
// in order. In a ```sh block a line is a command; " # " starts its
// comment. A line ending in a backslash goes on on the next, as in a
// shell: the command is its lines, each up to its comment, joined by
// newlines (bash reads the backslash-newlines as written). A line that
// opens a here-document is one command with the
// lines after it, up to and including its delimiter line, taken as
// written (no comments). A plain ``` block is a transcript: a line "$ CMD"
// is a command, the lines up to the next one what it prints.
func docCommands(text string) ([]docCommand, error) {
	var cmds []docCommand
	for _, part := range strings.Split(text, docMarker+"\n")[1:] {
		if block, ok := strings.CutPrefix(part, "```\n"); ok {
			block, _, _ = strings.Cut(block, "\n```")
			for _, line := range strings.Split(block, "\n") {
				if cmd, ok := strings.CutPrefix(line, "$ "); ok {
					cmds = append(cmds, docCommand{cmd: cmd, transcript: true})
				} else if len(cmds) == 0 || !cmds[len(cmds)-1].transcript {
					return nil, fmt.Errorf("a transcript does not start with \"$ \": %q", line)
				} else {
					cmds[len(cmds)-1].want = append(cmds[len(cmds)-1].want, line)
				}
			}
			continue
		}
		block, ok := strings.CutPrefix(part, "```sh\n")
		if !ok {
			return nil, fmt.Errorf("%s is not followed by a ```sh or ``` block", docMarker)
		}
		block, _, _ = strings.Cut(block, "\n```")
		lines := strings.Split(block, "\n")
		for i := 0; i < len(lines); i++ {
			cmd := strings.TrimSpace(strings.SplitN(lines[i], " # ", 2)[0])
			if cmd == "" {
				continue
			}
			for strings.HasSuffix(cmd, `\`) {
				if i++; i == len(lines) {
					return nil, fmt.Errorf("%q goes on past its block", cmd)
				}
				cmd += "\n" + strings.TrimRight(strings.SplitN(lines[i], " # ", 2)[0], " ")
			}
			if m := heredocStart.FindStringSubmatch(cmd); m != nil {
				body := []string{cmd}
				for i++; ; i++ {
					if i == len(lines) {
						return nil, fmt.Errorf("here-document %q is not closed by %s", cmd, m[2])
					}
					body = append(body, lines[i])
					if end := lines[i]; end == m[2] || (m[1] == "-" && strings.TrimLeft(end, "\t") == m[2]) {
						break
					}
				}
				cmd = strings.Join(body, "\n")
			}
			cmds = append(cmds, docCommand{cmd: cmd})
		}
	}
	return cmds, nil
}

// shows says whether out is what a transcript shows, line by line, a
// line "..." standing for any lines.
func (c docCommand) shows(out string) bool {
	var re strings.Builder
	re.WriteString(`^`)
	for _, l := range c.want {
		if l == "..." {
			re.WriteString(`(?:.*\n)*?`)
		} else {
			re.WriteString(regexp.QuoteMeta(l) + `\n`)
		}
	}
	return regexp.MustCompile(re.String() + `$`).MatchString(out)
}

// runGuideBlocks runs the marked blocks of the guide page docs/guide/page
// as runDocBlocks does.
func runGuideBlocks(t *testing.T, h *harness, page string) []guideStep {
	t.Helper()
	return runDocBlocks(t, h, filepath.Join("docs", "guide", page), nil)
}

// runDocBlocks runs the commands of every block that docMarker marks on
// the page (a path from the repository's root), in order, in the
// harness's job directory with the binaries of this suite first on PATH.
// Each command is one bash (a here-document and its body too) that starts
// with the variables the commands before it exported and the directory
// they left (export, cd carry over as in one shell; unset does not); what
// it starts in the background (cls serve &) runs on until the harness
// ends, its output lost after its command's step. A command that runs
// until interrupted (mqstat --watch) is named in
// interrupt with what its output must show first: then its process group
// gets SIGINT, as Ctrl-C would send. It fails the test if the page has no
// marked block or a command of interrupt is not on it, and marks it
// failed when a transcript's command prints other than the page shows.
func runDocBlocks(t *testing.T, h *harness, page string, interrupt map[string]*regexp.Regexp) []guideStep {
	t.Helper()
	return runDocBlocksIn(t, h, page, h.dir, interrupt)
}

// runDocBlocksIn is runDocBlocks with the first command started in dir
// (the repository's root, for a page whose commands name its files).
func runDocBlocksIn(t *testing.T, h *harness, page, dir string, interrupt map[string]*regexp.Regexp) []guideStep {
	t.Helper()
	return runDocBlocksEnv(t, h, page, dir, nil, interrupt)
}

// runDocBlocksEnv is runDocBlocksIn with the variables of extra (HOME=DIR:
// a user's ~ the test made) set over the harness's.
func runDocBlocksEnv(t *testing.T, h *harness, page, dir string, extra []string, interrupt map[string]*regexp.Regexp) []guideStep {
	t.Helper()
	cmds, err := docCommands(readFile(t, filepath.Join("..", "..", page)))
	if err != nil {
		t.Fatalf("%s: %v", page, err)
	}
	if len(cmds) == 0 {
		t.Fatalf("%s has no block marked %s", page, docMarker)
	}
	for cmd := range interrupt {
		if !slices.ContainsFunc(cmds, func(c docCommand) bool { return c.cmd == cmd }) {
			t.Fatalf("%s no longer runs %s", page, cmd)
		}
	}
	env := append(append(h.env(), "PATH="+binDir+":"+getenv(h.env(), "PATH")), extra...)
	state := filepath.Join(t.TempDir(), "state")
	var steps []guideStep
	for _, c := range cmds {
		script := fmt.Sprintf("if [ -f %[1]q ]; then . %[1]q; fi\n%[2]s\nrc=$?\n{ export -p; printf 'cd %%q\\n' \"$PWD\"; } >%[1]q\nexit $rc\n", state, c.cmd)
		s := runDocCommand(t, env, dir, c.cmd, script, interrupt[c.cmd])
		if c.transcript && !c.shows(s.out) {
			t.Errorf("%s: $ %s printed:\n%s\nthe page shows:\n%s", page, c.cmd, s.out, strings.Join(c.want, "\n"))
		}
		steps = append(steps, s)
	}
	return steps
}

// runDocCommand runs script, the shell of cmd, in dir and returns its step; with
// until, it interrupts it once its output matches until.
func runDocCommand(t *testing.T, env []string, dir, cmd, script string, until *regexp.Regexp) guideStep {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, "bash", "-c", script)
	c.Env, c.Dir = env, dir
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	// A file, not a pipe: a process the command starts in the background
	// (cls serve &) keeps its output open, and Wait would wait for it.
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c.Stdout, c.Stderr = f, f
	output := func() string {
		b, err := os.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if err := c.Start(); err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	if until != nil {
		tick := time.NewTicker(50 * time.Millisecond)
	poll:
		for {
			select {
			case err = <-done:
				t.Fatalf("%s ended before it showed %s (interrupted by the test): %v\n%s", cmd, until, err, output())
			case <-ctx.Done():
				break poll
			case <-tick.C:
				if until.MatchString(output()) {
					syscall.Kill(-c.Process.Pid, syscall.SIGINT)
					break poll
				}
			}
		}
		tick.Stop()
	}
	err = <-done
	if ctx.Err() != nil {
		t.Fatalf("%s did not end in 5 minutes:\n%s", cmd, output())
	}
	rc := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("%s: %v\n%s", cmd, err, output())
		}
		rc = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			rc = 128 + int(ws.Signal()) // as a shell reports it
		}
	}
	return guideStep{cmd, output(), rc}
}

// getenv is NAME's value in env.
func getenv(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if n, val, ok := strings.Cut(kv, "="); ok && n == name {
			v = val
		}
	}
	return v
}

// logSteps logs every step, for a failed test.
func logSteps(t *testing.T, steps []guideStep) {
	t.Helper()
	for _, s := range steps {
		t.Logf("$ %s (exit %d)\n%s", s.cmd, s.rc, clip(s.out))
	}
}

// wantStep is what a test knows of one command of a page's marked
// blocks: the command, its exit status and what it prints (stdout and
// stderr; nil: anything).
type wantStep struct {
	cmd string
	rc  int
	out *regexp.Regexp
}

// checkSteps checks that the page (named so in messages) ran the
// commands want knows, in order, each with its exit status and output.
func checkSteps(t *testing.T, page string, steps []guideStep, want []wantStep) {
	t.Helper()
	if len(steps) != len(want) {
		logSteps(t, steps)
		t.Fatalf("%s runs %d commands; the test knows %d", page, len(steps), len(want))
	}
	for i, s := range steps {
		w := want[i]
		if s.cmd != w.cmd {
			t.Fatalf("command %d is %s; the test knows %s", i+1, s.cmd, w.cmd)
		}
		if s.rc != w.rc || (w.out != nil && !w.out.MatchString(s.out)) {
			t.Errorf("%s: exit %d, printed:\n%s\nwant exit %d and %s", s.cmd, s.rc, clip(s.out), w.rc, w.out)
		}
	}
}
