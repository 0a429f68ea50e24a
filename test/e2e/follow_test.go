//go:build e2e

package e2e

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// followProc is a running `mqstat --output ID --follow` (or any command
// printing lines), whose stdout lines arrive on a channel as they come.
type followProc struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr *syncBuffer
	done   chan struct{}
}

func (h *harness) startFollow(prog string, args ...string) *followProc {
	h.t.Helper()
	cmd := exec.Command(prog, args...)
	cmd.Env = h.env()
	cmd.Dir = h.dir
	out, err := cmd.StdoutPipe()
	if err != nil {
		h.t.Fatal(err)
	}
	f := &followProc{cmd: cmd, lines: make(chan string, 100), stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = f.stderr
	if err := cmd.Start(); err != nil {
		h.t.Fatalf("start %s: %v", prog, err)
	}
	go func() {
		defer close(f.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f.lines <- sc.Text()
		}
		close(f.lines)
		cmd.Wait()
	}()
	h.t.Cleanup(func() {
		cmd.Process.Kill()
		<-f.done
	})
	return f
}

// line waits for the next line and checks it.
func (f *followProc) line(t *testing.T, want string) {
	t.Helper()
	select {
	case got, ok := <-f.lines:
		if !ok {
			<-f.done
			t.Fatalf("%s ended (%v) before printing %q; stderr: %s", f.cmd.Args[0], f.cmd.ProcessState, want, f.stderr.String())
		}
		if got != want {
			t.Fatalf("%s printed %q, want %q", f.cmd.Args[0], got, want)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("%s printed nothing for 60s; want %q; stderr: %s", f.cmd.Args[0], want, f.stderr.String())
	}
}

// exit waits for the end of the output and of the process, and returns
// its exit status.
func (f *followProc) exit(t *testing.T) int {
	t.Helper()
	select {
	case <-f.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("%s still running 60s after the job's end; stderr: %s", f.cmd.Args[0], f.stderr.String())
	}
	if extra, ok := <-f.lines; ok {
		t.Errorf("%s printed %q after the last line", f.cmd.Args[0], extra)
	}
	return f.cmd.ProcessState.ExitCode()
}

// gated is a job that prints a line, then waits for gate file 1 to exist
// before printing the next, and so on; the test makes each gate only after
// it saw the line before it, so every line it sees came before the job's
// end.
func gated(lines []string, exit int) string {
	var b strings.Builder
	for i, l := range lines {
		if i > 0 {
			b.WriteString("while [ ! -e gate" + string(rune('0'+i)) + " ]; do sleep 0.02; done; ")
		}
		b.WriteString("echo " + l + "; echo err-" + l + " >&2; ")
	}
	b.WriteString("exit " + string(rune('0'+exit)))
	return b.String()
}

func (h *harness) openGate(i int) {
	h.t.Helper()
	if err := os.WriteFile(filepath.Join(h.dir, "gate"+string(rune('0'+i))), nil, 0o600); err != nil {
		h.t.Fatal(err)
	}
}

// TestFollowLocal: mqstat --output ID --follow prints a local job's lines
// as it writes them (stdout, and stderr with --stderr), and exits with the
// job's exit status when it ends; in either output mode (the default,
// streams, read from the placeholder's stream file as its chunks come, and
// files).
func TestFollowLocal(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"streams", "files"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.startCLS("--local", "1", "--output", mode)
			id := h.submit("t", gated([]string{"first", "second"}, 4))
			out := h.startFollow(filepath.Join(binDir, "mqstat"), "--output", idStr(id), "--follow")
			errs := h.startFollow(filepath.Join(binDir, "mqstat"), "--output", idStr(id), "--follow", "--stderr")
			out.line(t, "first")
			errs.line(t, "err-first")
			if d := h.job(id); d.State != "E" {
				t.Fatalf("job %d is %s while its gate is shut", id, d.State)
			}
			h.openGate(1)
			out.line(t, "second")
			errs.line(t, "err-second")
			if code := out.exit(t); code != 4 {
				t.Errorf("mqstat --follow exited %d, want the job's 4; stderr: %s", code, out.stderr.String())
			}
			if code := errs.exit(t); code != 4 {
				t.Errorf("mqstat --follow --stderr exited %d, want 4", code)
			}
			if !strings.Contains(out.stderr.String(), "job "+idStr(id)+" failed") {
				t.Errorf("stderr %q does not say the job failed", out.stderr.String())
			}
			// A job that has ended replays and exits at once.
			r := h.run("mqstat", "--output", idStr(id), "--follow")
			if r.stdout != "first\nsecond\n" || r.code != 4 {
				t.Errorf("--follow of an ended job: %s", r)
			}
			if d := h.job(id); (d.StdoutStream != nil) != (mode == "streams") {
				t.Errorf("under --output %s, job %d's stdout stream is %+v", mode, id, d.StdoutStream)
			}
		})
	}
}

// TestSSHFollow: a job run by a remote agent over SSH is followed by
// mqstat on the CLS host and by a user over `ssh ... mqstat`: each line
// arrives before the job goes on, also after the agent's connection was
// cut and it reconnected; both exit 0 when the job ends, which ran once.
// In either output mode: streams (the default: the agent ships its stream
// file's growth while the job is followed) and files (the live path).
func TestSSHFollow(t *testing.T) {
	requireSSH(t)
	for _, mode := range []string{"streams", "files"} {
		t.Run(mode, func(t *testing.T) {
			h := newHarness(t)
			s := h.startSSHCLS("--local", "0", "--output", mode)
			proxy := startProxy(t, s.addr)
			a := s.startAgent(agentOpts{key: h.newKey("placeholder", "ph"), addr: proxy.addr()})
			a.waitConnected(t, 1, time.Minute)
			user := h.newKey("user", "u")

			id := h.submit("t", "mkdir -p runs; echo $MQ_ATTEMPT >> runs/$MQ_JOB_ID; "+gated([]string{"first", "second", "third"}, 0))
			local := h.startFollow(filepath.Join(binDir, "mqstat"), "--output", idStr(id), "--follow")
			remote := h.startFollow("ssh", append(s.sshArgs(user), "127.0.0.1", "mqstat", "--output", idStr(id), "--follow")...)
			local.line(t, "first")
			remote.line(t, "first")
			if d := h.sshJob(id); d.State != "E" || d.Site != "remote" {
				t.Fatalf("job %d is %s at site %q while its gate is shut", id, d.State, d.Site)
			}

			h.openGate(1)
			local.line(t, "second")
			remote.line(t, "second")

			if n := proxy.cut(); n != 1 {
				t.Fatalf("cut %d connections; want the agent's one", n)
			}
			a.waitConnected(t, 2, 30*time.Second)
			h.openGate(2)
			local.line(t, "third")
			remote.line(t, "third")

			for _, f := range []*followProc{local, remote} {
				if code := f.exit(t); code != 0 {
					t.Errorf("%s exited %d; stderr: %s", f.cmd.Args[0], code, f.stderr.String())
				}
			}
			d := h.waitState(id, "D", time.Minute)
			if d.Attempts != 1 {
				t.Errorf("job ran %d attempts, want 1", d.Attempts)
			}
			if runs := runLog(t, h.dir, id); len(runs) != 1 {
				t.Errorf("job started %v times; want once", runs)
			}
			// The CLS's copy is whole: shipped live, then the rest at the end.
			if got := h.ok("mqstat", "--output", idStr(id)); got != "first\nsecond\nthird\n" {
				t.Errorf("--output printed %q", got)
			}
			if got := h.ok("mqstat", "--output", idStr(id), "--stderr"); got != "err-first\nerr-second\nerr-third\n" {
				t.Errorf("--output --stderr printed %q", got)
			}
			if d := h.job(id); (d.StdoutStream != nil) != (mode == "streams") {
				t.Errorf("under --output %s, job %d's stdout stream is %+v", mode, id, d.StdoutStream)
			}
		})
	}
}
