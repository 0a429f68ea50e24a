//go:build e2e

package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestStdioFiles: mqsub -o and -e as sbatch users type them. The job's
// stdout and stderr are also written to the files named, in its working
// directory, with %j and %x expanded (and, without -e, stderr with
// stdout); mqstat still shows the attempt's own output. An -o into a
// directory that does not exist fails the job with that reason; the old
// meanings of the letters are refused in one line.
func TestStdioFiles(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "1")
	both := h.submit("-o", "both-%j.log", "t", "echo out; echo err >&2")
	apart := h.submit("-o", "%x-%j.out", "-e", "%x-%j.err", "apart", "echo out; echo err >&2")
	nodir := h.submit("-o", "nodir/x.log", "nodir", "echo never")
	for _, id := range []int64{both, apart} {
		if d := h.waitState(id, "DF", time.Minute); d.State != "D" {
			t.Fatalf("job %d ended %s (%s)", id, d.State, d.Reason)
		}
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(h.dir, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		return string(b)
	}
	if got := read("both-" + strconv.FormatInt(both, 10) + ".log"); !strings.Contains(got, "out\n") || !strings.Contains(got, "err\n") {
		t.Errorf("-o alone: the file holds %q, want both streams", got)
	}
	a := strconv.FormatInt(apart, 10)
	if out, errs := read("apart-"+a+".out"), read("apart-"+a+".err"); out != "out\n" || errs != "err\n" {
		t.Errorf("-o and -e: %q and %q", out, errs)
	}
	if out := h.ok("mqstat", "--cat", a); out != "out\n" {
		t.Errorf("mqstat --cat %s: %q; mq keeps the attempt's output too", a, out)
	}
	d := h.waitState(nodir, "DF", time.Minute)
	if d.State != "F" || !strings.Contains(d.Reason, "nodir/x.log: no such file or directory") {
		t.Errorf("-o into a missing directory: %s %q, want F naming the path", d.State, d.Reason)
	}
	for _, args := range [][]string{{"-e", "2h"}, {"-o", "x.dat:10M"}, {"-i", "in.txt"}, {"--output", "x"}} {
		r := h.run("mqsub", append(args, "t", "true")...)
		oneLineErr(t, "mqsub", r)
		if r.code != 2 {
			t.Errorf("mqsub %v: exit %d, want 2", args, r.code)
		}
	}
}

// TestTimeLimit: mqsub --time kills the job at its limit and it ends F
// with that reason; a queue's shorter ceiling still stops it first; bad
// limits are one line, exit 2.
func TestTimeLimit(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "2")
	h.ok("cls", "queue", "set", "short", "--ceiling", "1")
	limited := h.submit("--time", "1", "limited", "sleep 120")
	capped := h.submit("-q", "short", "--time", "1h", "capped", "sleep 120")
	if d := h.waitState(limited, "DF", time.Minute); d.State != "F" || !strings.Contains(d.Reason, "time limit") {
		t.Errorf("--time 1: %s %q, want F for its time limit", d.State, d.Reason)
	}
	if d := h.waitState(capped, "DF", time.Minute); d.State != "F" || !strings.Contains(d.Reason, "ceiling") {
		t.Errorf("--time 1h in a queue with --ceiling 1: %s %q, want F at the ceiling", d.State, d.Reason)
	}
	for _, v := range []string{"0", "-5"} {
		r := h.run("mqsub", "--time", v, "t", "true")
		oneLineErr(t, "mqsub", r)
		if r.code != 2 {
			t.Errorf("mqsub --time %s: exit %d, want 2", v, r.code)
		}
	}
}

// TestStdinRefused: `echo data | mqsub t cat` is refused in one line
// (mq would otherwise drop the data: the job reads /dev/null), nothing is
// added; with stdin at /dev/null, or a pipe at its end, mqsub submits.
func TestStdinRefused(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "1")
	r := h.runIn(h.dir, strings.NewReader("data\n"), "mqsub", "t", "cat")
	oneLineErr(t, "mqsub", r)
	if r.code != 2 || !strings.Contains(r.stderr, "stdin has data") {
		t.Errorf("echo data | mqsub t cat: %s; want exit 2, stdin has data", r)
	}
	if js := h.jobs(); len(js) != 0 {
		t.Errorf("a refused mqsub added %d jobs", len(js))
	}
	id := h.submit("t", "cat")
	if r := h.runIn(h.dir, strings.NewReader(""), "mqsub", "t", "cat"); r.code != 0 {
		t.Errorf("mqsub with an empty pipe: %s", r)
	}
	if d := h.waitState(id, "DF", time.Minute); d.State != "D" {
		t.Errorf("mqsub t cat < /dev/null: %s %q", d.State, d.Reason)
	}
}

// TestExport: the submitter's environment goes with the job only when
// asked (-V, --export=NAME): by default the job sees none of it; the
// values are not in mqstat's output or the CLS's log; an environment
// over the limit is one line, exit 2, nothing added.
func TestExport(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "2")
	submit := func(extra []string, args ...string) result {
		cmd := exec.Command(filepath.Join(binDir, "mqsub"), args...)
		cmd.Env = append(h.env(), extra...)
		cmd.Dir = h.dir
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		r := result{stdout: out.String(), stderr: errb.String()}
		if ee, ok := err.(*exec.ExitError); ok {
			r.code = ee.ExitCode()
		}
		return r
	}
	const secret = "MYVAR=s3cret-value"
	ids := map[string]int64{}
	for _, c := range []struct{ name, flag string }{{"default", ""}, {"V", "-V"}, {"named", "--export=MYVAR"}} {
		args := []string{"envt-" + c.name, "echo [$MYVAR]"}
		if c.flag != "" {
			args = append([]string{c.flag}, args...)
		}
		r := submit([]string{secret}, args...)
		id, err := strconv.ParseInt(strings.TrimSpace(r.stdout), 10, 64)
		if r.code != 0 || err != nil {
			t.Fatalf("mqsub %v: %s", args, r)
		}
		ids[c.name] = id
	}
	want := map[string]string{"default": "[]\n", "V": "[s3cret-value]\n", "named": "[s3cret-value]\n"}
	for name, id := range ids {
		if d := h.waitState(id, "DF", time.Minute); d.State != "D" {
			t.Fatalf("%s: %s %q", name, d.State, d.Reason)
		}
		if out := h.ok("mqstat", "--cat", strconv.FormatInt(id, 10)); out != want[name] {
			t.Errorf("%s: the job printed %q, want %q", name, out, want[name])
		}
		if out := h.ok("mqstat", "-j", strconv.FormatInt(id, 10)); strings.Contains(out, "s3cret") {
			t.Errorf("mqstat -j shows the exported value:\n%s", out)
		}
	}
	big := "BIG=" + strings.Repeat("x", 100<<10)
	r := submit([]string{big}, "--export=BIG", "t", "true")
	oneLineErr(t, "mqsub", r)
	if r.code != 2 || !strings.Contains(r.stderr, "the limit is 65536") {
		t.Errorf("--export of 100 KiB: %s", r)
	}
	if js := h.jobs(); len(js) != 3 {
		t.Errorf("%d jobs, want the 3 submitted", len(js))
	}
	h.ok("mqstat", "--json")
	if b, _ := os.ReadFile(filepath.Join(h.home, "cls.log")); bytes.Contains(b, []byte("s3cret")) {
		t.Error("the CLS's log holds an exported value")
	}
}

// TestSSHStdinRefused: `echo data | ssh cls-host mqsub t cat` is refused
// as on the CLS's host; with no stdin data (ssh's stdin at its end) it
// submits; -V over SSH, which has none of the user's environment, is
// refused.
func TestSSHStdinRefused(t *testing.T) {
	requireSSH(t)
	h := newHarness(t)
	s := h.startSSHCLS("--local", "0")
	user := h.newKey("user", "alice")
	r := s.sshIn(user, nil, strings.NewReader("data\n"), "mqsub", "t", "cat")
	if r.code != 2 || !strings.Contains(r.stderr, "stdin has data") {
		t.Errorf("echo data | ssh mqsub t cat: %s; want exit 2, stdin has data", r)
	}
	if r := s.ssh(user, "mqsub", "t", "cat"); r.code != 0 {
		t.Errorf("ssh mqsub t cat: %s", r)
	}
	if r := s.ssh(user, "mqsub", "-V", "t", "true"); r.code != 2 || !strings.Contains(r.stderr, "over SSH give the variables with -v") {
		t.Errorf("ssh mqsub -V: %s", r)
	}
	if js := h.jobs(); len(js) != 1 {
		t.Errorf("%d jobs, want 1", len(js))
	}
}
