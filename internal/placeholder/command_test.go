package placeholder

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// TestRunDirectLikeShell: a job run directly sees what it would see under
// /bin/sh -c (its output, exit status, PWD and environment), and lines the
// fast path cannot start go to the shell.
func TestRunDirectLikeShell(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "noshebang"), "echo from a script without a shebang\nexit 4\n")
	if err := os.Chmod(filepath.Join(dir, "noshebang"), 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "notexec"), "#!/bin/sh\necho never\n")
	a := runner(t, "")
	// The same line through the shell and directly (the second form is not
	// simple: a trailing `;` sends it to the shell, changing nothing else).
	lines := []string{
		"printenv PWD",
		"env",
		"./noshebang",
		"./notexec",
		"no-such-program-mq",
		"sh -c 'kill -9 $$'",
		"'/usr/bin/printf' '%s|' 'a b' \"c d\" e\\ f",
		"expr 1 + 1",
		"expr 1 = 2",
	}
	var n int64
	for _, line := range lines {
		for _, cwd := range []string{dir, link} {
			var got [2]string
			for k, l := range []string{line, line + ";"} {
				n++
				id := n
				rep := a.run(context.Background(), protocol.Assignment{ID: id, Attempt: 1, Command: l, Cwd: cwd, Target: "t", Queue: "q"})
				out, errp := job.OutputPaths(a.cfg.OutDir, id, 1)
				b, _ := os.ReadFile(out) // none: the job wrote nothing
				text := string(b)
				if line == "env" {
					text = stableEnv(text)
				}
				e, _ := os.ReadFile(errp)
				// The one difference: a shell whose child a signal killed
				// says so on stderr (the exit status says it either way).
				e = bytes.TrimSuffix(e, []byte("Killed\n"))
				got[k] = "exit " + strconv.Itoa(rep.Exit) + "\n" + text + "\nstderr: " + string(e)
			}
			if got[0] != got[1] {
				t.Errorf("%q in %s:\ndirect: %s\nshell:  %s", line, cwd, got[0], got[1])
			}
		}
	}
}

// stableEnv drops what differs between two runs of env, the job's own ids,
// and sorts the rest: a shell reorders the environment.
func stableEnv(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(l, "MQ_JOB_ID=") && !strings.HasPrefix(l, attemptVar+"=") && !strings.HasPrefix(l, "_=") {
			keep = append(keep, l)
		}
	}
	slices.Sort(keep)
	return strings.Join(keep, "\n")
}

// TestRunDirect: a simple line runs as the placeholder's own child, with no
// shell between them.
func TestRunDirect(t *testing.T) {
	t.Parallel()
	a := runner(t, "")
	rep := a.run(context.Background(), protocol.Assignment{ID: 1, Attempt: 1, Command: "sh -c 'echo $PPID'", Target: "t", Queue: "q"})
	out, _ := job.OutputPaths(a.cfg.OutDir, 1, 1)
	b, err := os.ReadFile(out)
	if err != nil || rep.Exit != 0 {
		t.Fatalf("exit %d, %v", rep.Exit, err)
	}
	if got, want := strings.TrimSpace(string(b)), strconv.Itoa(os.Getpid()); got != want {
		t.Fatalf("the job's parent is %s, want the placeholder (%s)", got, want)
	}
}
