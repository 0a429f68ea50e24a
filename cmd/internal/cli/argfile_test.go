package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/wfformat"
)

// TestFileArgsWhereRead: the files mqsub -f and --wfformat name are read
// relative to the command's directory (over SSH the home directory, not
// the CLS process's), and a command run inside the CLS for an SSH
// client reads only regular files: /dev/stdin would be the CLS's own
// stdin, /dev/zero and a FIFO never end (or never open). A local mqsub
// still reads a pipe (/dev/stdin, a shell's <(...)).
func TestFileArgsWhereRead(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	home := t.TempDir()
	const jobs = `{"target":"t","command":"true"}` + "\n"
	if err := os.WriteFile(filepath.Join(home, "jobs.jsonl"), []byte(jobs), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "trace.json"), []byte(smallTrace), 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(home, "big.json")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, wfformat.MaxBytes+1); err != nil { // sparse: costs no disk
		t.Fatal(err)
	}
	fifo := filepath.Join(home, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// A pipe with the jobs in it and its writer closed, as a shell's
	// <(...) or mqsub -f /dev/stdin < jobs gives one.
	pipe := func() string {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		w.WriteString(jobs)
		w.Close()
		return fmt.Sprintf("/dev/fd/%d", r.Fd())
	}
	const notRegular = "not a regular file (over SSH mq reads only regular files of the CLS host)"
	for _, tc := range []struct {
		name  string
		inCLS bool
		args  []string
		code  int
		msg   string // in stderr, one line; "" for success
	}{
		{"relative -f, local", false, []string{"-f", "jobs.jsonl"}, ExitOK, ""},
		{"relative -f, over SSH", true, []string{"-f", "jobs.jsonl"}, ExitOK, ""},
		{"absolute -f, over SSH", true, []string{"-f", filepath.Join(home, "jobs.jsonl")}, ExitOK, ""},
		{"-f -, over SSH: the session's stdin", true, []string{"-f", "-"}, ExitOK, ""},
		{"a pipe, local", false, []string{"-f", pipe()}, ExitOK, ""},
		{"a pipe, over SSH", true, []string{"-f", pipe()}, ExitFailed, notRegular},
		{"/dev/stdin, over SSH", true, []string{"-f", "/dev/stdin"}, ExitFailed, `cannot read "/dev/stdin": ` + notRegular},
		{"/dev/zero, over SSH", true, []string{"-f", "/dev/zero"}, ExitFailed, notRegular},
		{"a FIFO nobody writes, over SSH", true, []string{"-f", fifo}, ExitFailed, notRegular},
		{"a directory, over SSH", true, []string{"-f", home}, ExitFailed, notRegular},
		{"no such file, over SSH", true, []string{"-f", "nosuch"}, ExitFailed, `cannot read "nosuch": no such file or directory (over SSH it is "` + filepath.Join(home, "nosuch") + `", on the CLS host)`},
		{"no such file, local", false, []string{"-f", "nosuch"}, ExitFailed, `cannot read "nosuch": no such file or directory`},
		{"relative --wfformat, over SSH", true, []string{"--wfformat", "trace.json"}, ExitOK, ""},
		{"--wfformat /dev/zero, over SSH", true, []string{"--wfformat", "/dev/zero"}, ExitFailed, notRegular},
		{"--wfformat /dev/stdin, over SSH", true, []string{"--wfformat", "/dev/stdin"}, ExitFailed, notRegular},
		{"--wfformat a FIFO, over SSH", true, []string{"--wfformat", fifo}, ExitFailed, notRegular},
		{"--wfformat too large, refused unread", false, []string{"--wfformat", big}, ExitFailed, fmt.Sprintf("%d bytes, larger than 256 MiB", wfformat.MaxBytes+1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var o, e bytes.Buffer
			env := tb.env(&o, &e)
			env.Stdin = strings.NewReader(jobs)
			env.Getwd = func() (string, error) { return home, nil }
			env.InCLS = tc.inCLS
			done := make(chan int, 1)
			go func() { done <- Run(context.Background(), Mqsub(env), append([]string{"mqsub"}, tc.args...)) }()
			var code int
			select {
			case code = <-done:
			case <-time.After(60 * time.Second):
				t.Fatalf("mqsub %s: still running after 60s", strings.Join(tc.args, " "))
			}
			stderr := e.String()
			if code != tc.code || tc.msg == "" && stderr != "" || tc.msg != "" && (!strings.Contains(stderr, tc.msg) || strings.Count(stderr, "\n") != 1) {
				t.Errorf("mqsub %s: exit %d, stderr %q; want exit %d, %q", strings.Join(tc.args, " "), code, stderr, tc.code, tc.msg)
			}
		})
	}
}

// TestJobDirRelative: mqsub -d DIR with a relative DIR is taken from the
// command's directory (Getwd), as every relative name of mqsub is: over
// SSH that is the home directory, not the CLS process's.
func TestJobDirRelative(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	home := t.TempDir()
	for _, tc := range []struct{ d, want string }{
		{"proj", filepath.Join(home, "proj")},
		{"proj/../data/", filepath.Join(home, "data")},
		{".", home},
		{"/abs//dir/", "/abs/dir"},
	} {
		var o, e bytes.Buffer
		env := tb.env(&o, &e)
		env.Getwd = func() (string, error) { return home, nil }
		env.InCLS = true
		if code := Run(context.Background(), Mqsub(env), []string{"mqsub", "-d", tc.d, "t", "true"}); code != 0 {
			t.Fatalf("mqsub -d %s: exit %d, %s", tc.d, code, e.String())
		}
		id, err := strconv.ParseInt(strings.TrimSpace(o.String()), 10, 64)
		if err != nil {
			t.Fatalf("mqsub printed %q", o.String())
		}
		d, err := tb.store.Inspect().Job(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if d.Cwd != tc.want {
			t.Errorf("mqsub -d %s: the job runs in %s, want %s", tc.d, d.Cwd, tc.want)
		}
	}
}
