//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// shellQuote quotes s for /bin/sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// background is a command left running while the test watches its output.
type background struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan error
}

// start runs an mq command in the background; with pty it runs under a
// real pseudo-terminal of 120x30 (util-linux script), stdout and stderr
// both going to it.
func (h *harness) start(pty bool, name string, args ...string) *background {
	h.t.Helper()
	var cmd *exec.Cmd
	if pty {
		line := "stty cols 120 rows 30; exec " + shellQuote(filepath.Join(binDir, name))
		for _, a := range args {
			line += " " + shellQuote(a)
		}
		cmd = exec.Command("script", "-qefc", line, "/dev/null")
	} else {
		cmd = exec.Command(filepath.Join(binDir, name), args...)
	}
	cmd.Env, cmd.Dir = h.env(), h.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	b := &background{cmd: cmd, out: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = b.out, b.out
	if err := cmd.Start(); err != nil {
		h.t.Fatalf("start %s: %v", name, err)
	}
	go func() { b.done <- cmd.Wait() }()
	h.t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	return b
}

// wait waits for the command to exit and returns its exit status.
func (b *background) wait(t *testing.T) int {
	t.Helper()
	select {
	case err := <-b.done:
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(90 * time.Second):
		t.Fatalf("%v did not exit; output %q", b.cmd.Args, clip(b.out.String()))
	}
	return -1
}

func needScript(t *testing.T) {
	if _, err := exec.LookPath("script"); err != nil {
		t.Skip("no script(1) (util-linux): cannot run a command under a pseudo-terminal")
	}
}

// TestMqwait: mqwait follows ids, a range, a target, a queue or
// everything, prints a line per change into a pipe and a bar on a
// terminal, and exits 0 only when every job ended done, else 1 naming the
// others.
func TestMqwait(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "2")
	var good []string
	for i := 0; i < 4; i++ {
		good = append(good, fmt.Sprint(h.submit("-q", "w", "ok", "sleep 0.3")))
	}
	bad := h.submit("-q", "w", "bad", "exit 3")

	// A pipe: one line per change, the last saying all ended.
	r := h.run("mqwait", "--interval", "100ms", good[0], good[1], good[2], good[3])
	if r.code != 0 || !strings.Contains(r.stdout, "4/4 ended: 4 done") {
		t.Fatalf("mqwait ids: %s", r)
	}
	r = h.run("mqwait", good[0]+"-"+fmt.Sprint(bad))
	if r.code != 1 || !strings.Contains(r.stderr, fmt.Sprintf("job %d failed (exit 3)", bad)) || !strings.Contains(r.stdout, "5/5 ended: 4 done, 1 failed") {
		t.Fatalf("mqwait range: %s", r)
	}
	if r = h.run("mqwait", "-t", "ok", "-Q"); r.code != 0 || r.stdout != "" {
		t.Fatalf("mqwait -t ok -Q: %s", r)
	}
	if r = h.run("mqwait", "-q", "w"); r.code != 1 || !strings.Contains(r.stderr, "1 of 5 jobs did not end done") {
		t.Fatalf("mqwait -q w: %s", r)
	}
	if r = h.run("mqwait", "-t", "nope"); r.code != 1 || !strings.Contains(r.stderr, "target nope does not exist") {
		t.Fatalf("mqwait -t nope: %s", r)
	}
	for _, args := range [][]string{{"1-"}, {"x"}, {"-q", "w", "1"}, {"--interval", "1ms"}} {
		if r = h.run("mqwait", args...); r.code != 2 {
			t.Fatalf("mqwait %v: %s, want usage error", args, r)
		}
	}
	// A job waiting on a target with no jobs: --timeout gives up.
	w := h.submit("-p", "never", "-q", "stuck", "stuck", "true")
	start := time.Now()
	if r = h.run("mqwait", "--timeout", "1s", fmt.Sprint(w)); r.code != 1 || !strings.Contains(r.stderr, "timed out after 1s") {
		t.Fatalf("mqwait --timeout: %s", r)
	}
	if time.Since(start) > 60*time.Second {
		t.Fatalf("mqwait --timeout 1s took %v", time.Since(start))
	}
	// Everything: the stuck job keeps it from ending.
	if r = h.run("mqwait", "--timeout", "500ms"); r.code != 1 || !strings.Contains(r.stderr, "1 of 6 jobs not ended") {
		t.Fatalf("mqwait (everything): %s", r)
	}
	h.ok("mqdel", fmt.Sprint(w))

	// A terminal: a bar redrawn in place, with rate and counts. The jobs
	// wait for a file the test makes once the bar is drawn, so the bar is
	// drawn before they end and again after, however busy the machine.
	needScript(t)
	gate := filepath.Join(h.dir, "bar-go")
	for i := 0; i < 6; i++ {
		h.submit("-q", "w", "bar", "until [ -e "+shellQuote(gate)+" ]; do sleep 0.1; done")
	}
	b := h.start(true, "mqwait", "--interval", "100ms", "-t", "bar")
	waitFor(t, 90*time.Second, func() error {
		if !strings.Contains(b.out.String(), "0/6 [") {
			return fmt.Errorf("no bar yet: %q", b.out.String())
		}
		return nil
	})
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := b.wait(t); code != 0 {
		t.Fatalf("mqwait under a pty: exit %d, output %q", code, b.out.String())
	}
	out := b.out.String()
	for _, want := range []string{"6/6 [", "100 %", "6 done", "/s", "\x1b["} {
		if !strings.Contains(out, want) {
			t.Fatalf("mqwait's bar lacks %q: %q", want, out)
		}
	}
	if strings.Contains(out, "ended:") {
		t.Fatalf("mqwait printed plain lines on a terminal: %q", out)
	}
}

// TestMqsubWaits: mqsub -b -f waits for every job of the file and fails
// naming the failed ones; mqsub -b warns about a prerequisite target with
// no jobs and gives up at --timeout; mqstat --summary honours -q and -t.
func TestMqsubWaits(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "2")
	file := filepath.Join(h.dir, "jobs.jsonl")
	os.WriteFile(file, []byte(`{"target":"f","command":"sleep 0.5"}
{"target":"f","command":"sleep 0.2; exit 4"}
{"target":"g","prereqs":["f"],"command":"true"}
`), 0o644)
	r := h.run("mqsub", "-b", "-f", file)
	ids := strings.Fields(r.stdout)
	if r.code != 1 || len(ids) != 3 {
		t.Fatalf("mqsub -b -f: %s", r)
	}
	for _, want := range []string{"2 of 3 jobs did not end done", "job " + ids[1] + " failed (exit 4)", "job " + ids[2] + " blocked"} {
		if !strings.Contains(r.stderr, want) {
			t.Fatalf("mqsub -b -f: stderr lacks %q: %s", want, r)
		}
	}
	if d := h.job(mustID(t, ids[0])); d.State != "D" {
		t.Fatalf("job %s is %s: mqsub -b -f returned before it ended", ids[0], d.State)
	}
	os.WriteFile(file, []byte(`{"target":"h","command":"sleep 0.3"}
{"target":"h","command":"true"}
`), 0o644)
	if r = h.run("mqsub", "-b", "-f", file); r.code != 0 || len(strings.Fields(r.stdout)) != 2 {
		t.Fatalf("mqsub -b -f (all good): %s", r)
	}

	r = h.run("mqsub", "-b", "--timeout", "1s", "-p", "later", "x", "true")
	if r.code != 1 || !strings.Contains(r.stderr, "waits for target later, which has no jobs yet") || !strings.Contains(r.stderr, "timed out after 1s") {
		t.Fatalf("mqsub -b --timeout: %s", r)
	}
	// So do -b --array and -b -f, once per missing target.
	r = h.run("mqsub", "-b", "--timeout", "1s", "--array", "1-3", "-p", "later2", "xa", "true")
	if r.code != 1 || strings.Count(r.stderr, "wait for target later2, which has no jobs yet") != 1 || !strings.Contains(r.stderr, "timed out after 1s") {
		t.Fatalf("mqsub -b --array --timeout: %s", r)
	}
	os.WriteFile(file, []byte(`{"target":"xf","prereqs":["later3"],"command":"true"}
{"target":"xf","prereqs":["later3"],"command":"true"}
{"target":"xg","prereqs":["later4","xf"],"command":"true"}
`), 0o644)
	r = h.run("mqsub", "-b", "--timeout", "1s", "-f", file)
	if r.code != 1 || strings.Count(r.stderr, "wait for targets later3, later4, which have no jobs yet") != 1 || strings.Contains(r.stderr, "xf,") {
		t.Fatalf("mqsub -b -f --timeout: %s", r)
	}
	if r = h.run("mqsub", "--timeout", "1s", "x", "true"); r.code != 2 {
		t.Fatalf("mqsub --timeout without -b: %s", r)
	}

	h.submit("-q", "other", "h", "true")
	r = h.run("mqstat", "--summary", "-t", "h")
	if r.code != 0 || !strings.Contains(r.stdout, "all target h") || !strings.Contains(r.stdout, "TOTAL") {
		t.Fatalf("mqstat --summary -t h: %s", r)
	}
	if f := strings.Fields(lastLine(r.stdout)); len(f) < 10 || f[len(f)-1] != "3" {
		t.Fatalf("mqstat --summary -t h: want a total of 3: %s", r)
	}
	r = h.run("mqstat", "--summary", "-q", "other", "-t", "h")
	if f := strings.Fields(lastLine(r.stdout)); r.code != 0 || f[len(f)-1] != "1" {
		t.Fatalf("mqstat --summary -q other -t h: %s", r)
	}
	r = h.run("mqstat", "--summary", "-q", "other")
	if r.code != 0 || strings.Contains(r.stdout, "default") || !strings.Contains(r.stdout, "other") {
		t.Fatalf("mqstat --summary -q other: %s", r)
	}
}

func mustID(t *testing.T, s string) int64 {
	var id int64
	if _, err := fmt.Sscan(s, &id); err != nil {
		t.Fatalf("%q is not a job id", s)
	}
	return id
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestMqstatWatch: --watch INTERVAL repeats the view, one after another
// into a pipe and in place on a terminal, until interrupted (exit 0).
func TestMqstatWatch(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "1")
	h.submit("t", "true")
	for _, pty := range []bool{false, true} {
		if pty {
			needScript(t)
		}
		b := h.start(pty, "mqstat", "--watch", "0.2", "--summary")
		waitFor(t, 60*time.Second, func() error {
			if n := strings.Count(b.out.String(), "every 200ms"); n < 3 {
				return fmt.Errorf("%d views so far: %q", n, b.out.String())
			}
			return nil
		})
		out := b.out.String()
		if got := strings.Contains(out, "\x1b["); got != pty {
			t.Fatalf("pty %v: escape codes %v in %q", pty, got, out)
		}
		if !strings.Contains(out, "QUEUE") {
			t.Fatalf("pty %v: no summary in %q", pty, out)
		}
		if pty {
			syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
			b.wait(t)
			continue
		}
		b.cmd.Process.Signal(os.Interrupt)
		if code := b.wait(t); code != 0 {
			t.Fatalf("mqstat --watch exited %d on an interrupt", code)
		}
	}
	if r := h.run("mqstat", "--watch", "0.01"); r.code != 2 {
		t.Fatalf("mqstat --watch 0.01: %s", r)
	}
	if r := h.run("mqstat", "--interval", "1s"); r.code != 2 {
		t.Fatalf("mqstat --interval without --watch: %s", r)
	}
}
