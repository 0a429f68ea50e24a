package placeholder

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/internal/otheruser"
	"github.com/mq-hpc/mq/internal/placeholder/scratch"
	"github.com/mq-hpc/mq/protocol"
)

// TestScratchKeepsAttemptsApart: two attempts of one job run in scratch
// directories of their own, reading the working directory's files through
// links; the winner's commit moves its outputs (declared, in a directory
// that exists, and undeclared) into place, and the loser's removal leaves
// the winner's files and the working directory's own untouched.
func TestScratchKeepsAttemptsApart(t *testing.T) {
	work := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(work, "in"), []byte("input\n"), 0o600))
	must(os.MkdirAll(filepath.Join(work, "out"), 0o700))
	must(os.WriteFile(filepath.Join(work, "out", "old"), []byte("old\n"), 0o600))
	a := &Agent{}
	asg := func(attempt int) protocol.Assignment {
		return protocol.Assignment{ID: 7, Attempt: attempt, Scratch: true, Cwd: work,
			Outputs: []protocol.AssignedFile{{Path: filepath.Join(work, "out", "res")}}}
	}
	run := func(s *scratch.Dir, who string) {
		t.Helper()
		cmd := exec.Command("/bin/sh", "-c", "cat in out/old > out/res && echo "+who+" >> out/res && echo "+who+" > new.txt")
		cmd.Dir = s.Path()
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", who, err, b)
		}
	}
	win, err := a.newScratch(work, asg(1))
	must(err)
	lose, err := a.newScratch(work, asg(2))
	must(err)
	run(win, "winner")
	run(lose, "loser")
	for _, f := range []string{"out/res", "new.txt"} {
		if _, err := os.Stat(filepath.Join(work, f)); err == nil {
			t.Fatalf("%s in place before any attempt won", f)
		}
	}
	must(win.Commit(func() {}))
	win.Remove()
	lose.Remove()
	for f, want := range map[string]string{"out/res": "input\nold\nwinner\n", "new.txt": "winner\n", "in": "input\n", "out/old": "old\n"} {
		b, err := os.ReadFile(filepath.Join(work, f))
		if err != nil || string(b) != want {
			t.Fatalf("%s = %q, %v; want %q", f, b, err, want)
		}
	}
	if fi, err := os.Lstat(filepath.Join(work, "out", "old")); err != nil || fi.Mode()&os.ModeSymlink != 0 {
		t.Fatalf("out/old became a link: %v", err)
	}
	if _, err := os.Stat(filepath.Join(work, scratch.Root)); !os.IsNotExist(err) {
		t.Fatalf("scratch left behind: %v", err)
	}
}

// TestScratchRefusesOutputOutside: an output outside the working
// directory cannot be kept apart: the attempt does not start.
func TestScratchRefusesOutputOutside(t *testing.T) {
	work := t.TempDir()
	a := &Agent{}
	_, err := a.newScratch(work, protocol.Assignment{ID: 1, Attempt: 1, Scratch: true,
		Outputs: []protocol.AssignedFile{{Path: filepath.Join(filepath.Dir(work), "x")}}})
	if err == nil {
		t.Fatal("no error")
	}
}

// TestScratchRefusesPlantedDir: in a shared sticky working directory
// another user (mqagent, through runuser) put a link at .mq-copies to a
// directory of theirs: the attempt does not start, and nothing of it is
// made in their directory.
func TestScratchRefusesPlantedDir(t *testing.T) {
	otheruser.Need(t)
	work := otheruser.SharedDir(t, "mqscratch-shared-")
	theirs := filepath.Join(work, "theirs")
	script := "umask 0 && mkdir " + theirs + " && ln -s " + theirs + " " + filepath.Join(work, scratch.Root)
	if out, err := exec.Command("runuser", "-u", "mqagent", "--", "sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("mqagent's setup: %v: %s", err, out)
	}
	a := &Agent{}
	_, err := a.newScratch(work, protocol.Assignment{ID: 7, Attempt: 1, Scratch: true, Cwd: work})
	if err == nil || !strings.Contains(err.Error(), "not a directory of yours") {
		t.Errorf("newScratch through mqagent's link: %v, want refused", err)
	}
	if ents, _ := os.ReadDir(theirs); len(ents) != 0 {
		t.Errorf("the attempt's scratch was made in mqagent's directory: %v", ents)
	}
}
