package site

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakePS puts a ps first on PATH that answers `ps -o FIELD= -p PID` from
// files in dir: ppid (the parent of every pid), PID.comm (default sh)
// and PID.lstart (else it fails, as for a pid that is gone).
func fakePS(t *testing.T) (dir string, env []string) {
	t.Helper()
	dir = t.TempDir()
	ps := `#!/bin/sh
f=$2 pid=$4
case "$f" in
ppid=) cat "` + dir + `/ppid";;
comm=) if [ -f "` + dir + `/$pid.comm" ]; then cat "` + dir + `/$pid.comm"; else echo sh; fi;;
lstart=) cat "` + dir + `/$pid.lstart" 2>/dev/null || exit 1;;
*) exit 2;;
esac
`
	if err := os.WriteFile(filepath.Join(dir, "ps"), []byte(ps), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, []string{"PATH=" + dir + ":" + os.Getenv("PATH")}
}

// endStaleSessionCommand ends the session noted only if it is still that
// process (same start time, an sshd) and not the connection's own; and
// noteSessionCommand notes the session's pid and start time, or nothing
// where the command's parent is no sshd.
func TestEndStaleSession(t *testing.T) {
	const ours = "4000000"
	for _, tc := range []struct {
		name       string
		note       string // the file's text; "" for none
		comm       string // the stale process's comm
		lstart     string // its start time now
		ourSession bool   // the noted pid is the connection's own
		want       bool   // ended
	}{
		{"stale session", "PID\nTue Dec  1 14:58:21 2026\n", "sshd", "Tue Dec 1 14:58:21 2026", false, true},
		{"OpenSSH 9.8's sshd-session", "PID\nTue Dec 1 14:58:21 2026\n", "sshd-session", "Tue Dec 1 14:58:21 2026", false, true},
		{"no note", "", "sshd", "Tue Dec 1 14:58:21 2026", false, false},
		{"pid reused: started later", "PID\nTue Dec 1 14:58:21 2026\n", "sshd", "Tue Dec 1 15:00:00 2026", false, false},
		{"pid reused by another program", "PID\nTue Dec 1 14:58:21 2026\n", "bash", "Tue Dec 1 14:58:21 2026", false, false},
		{"the connection's own session", "PID\nTue Dec 1 14:58:21 2026\n", "sshd", "Tue Dec 1 14:58:21 2026", true, false},
		{"not a pid", "-1\nTue Dec 1 14:58:21 2026\n", "sshd", "Tue Dec 1 14:58:21 2026", false, false},
		{"a pid list", "1 2\nTue Dec 1 14:58:21 2026\n", "sshd", "Tue Dec 1 14:58:21 2026", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, env := fakePS(t)
			stale := exec.Command("sleep", "300")
			if err := stale.Start(); err != nil {
				t.Fatal(err)
			}
			var waitErr error
			exited := make(chan struct{})
			go func() { waitErr = stale.Wait(); close(exited) }()
			t.Cleanup(func() { stale.Process.Kill(); <-exited })
			pid := strconv.Itoa(stale.Process.Pid)
			session := ours
			if tc.ourSession {
				session = pid
			}
			os.WriteFile(filepath.Join(dir, "ppid"), []byte(" "+session+"\n"), 0o644)
			os.WriteFile(filepath.Join(dir, session+".comm"), []byte("sshd\n"), 0o644)
			if !tc.ourSession {
				os.WriteFile(filepath.Join(dir, pid+".comm"), []byte(tc.comm+"\n"), 0o644)
			}
			os.WriteFile(filepath.Join(dir, pid+".lstart"), []byte(tc.lstart+"\n"), 0o644)
			file := filepath.Join(t.TempDir(), tunnelSessionFile)
			if tc.note != "" {
				os.WriteFile(file, []byte(strings.ReplaceAll(tc.note, "PID", pid)), 0o600)
			}
			c := exec.Command("/bin/sh", "-c", endStaleSessionCommand(file))
			c.Env = env
			out, err := c.Output()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if ended := strings.TrimSpace(string(out)) == staleEnded; ended != tc.want {
				t.Errorf("printed %q; want ended %v", out, tc.want)
			}
			if !tc.want {
				select {
				case <-exited:
					t.Errorf("the process ended: %v", waitErr)
				case <-time.After(100 * time.Millisecond):
				}
				return
			}
			select {
			case <-exited:
				var ee *exec.ExitError
				if !errors.As(waitErr, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
					t.Errorf("the process ended with %v; want SIGTERM", waitErr)
				}
			case <-time.After(30 * time.Second):
				t.Error("the stale session was not ended")
			}
		})
	}

	t.Run("note", func(t *testing.T) {
		dir, env := fakePS(t)
		os.WriteFile(filepath.Join(dir, "ppid"), []byte(ours+"\n"), 0o644)
		os.WriteFile(filepath.Join(dir, ours+".comm"), []byte("sshd\n"), 0o644)
		os.WriteFile(filepath.Join(dir, ours+".lstart"), []byte("Tue Dec  1 14:58:21 2026\n"), 0o644)
		file := filepath.Join(t.TempDir(), tunnelSessionFile)
		c := exec.Command("/bin/sh", "-c", noteSessionCommand(file))
		c.Env = env
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		b, err := os.ReadFile(file)
		if want := ours + "\nTue Dec 1 14:58:21 2026\n"; err != nil || string(b) != want {
			t.Errorf("noted %q, %v; want %q", b, err, want)
		}
		if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("note's mode: %v, %v", fi.Mode(), err)
		}
		// Under no sshd (a command's parent that is not one): nothing.
		os.Remove(file)
		os.WriteFile(filepath.Join(dir, ours+".comm"), []byte("bash\n"), 0o644)
		c = exec.Command("/bin/sh", "-c", noteSessionCommand(file))
		c.Env = env
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if _, err := os.Stat(file); !os.IsNotExist(err) {
			t.Errorf("a note under no sshd: %v", err)
		}
	})
}

// staleRunner is a tunnelRunner whose taken port is held by a stale
// session that endStaleSessionCommand ends (when stale), freeing it.
type staleRunner struct {
	tunnelRunner
	stale, ended *bool
}

func (r staleRunner) Run(ctx context.Context, cmd string) ([]byte, error) {
	if strings.Contains(cmd, "kill \"$pid\"") {
		if !*r.stale {
			return nil, nil
		}
		*r.ended = true
		return []byte(staleEnded + "\n"), nil
	}
	return r.tunnelRunner.Run(ctx, cmd)
}

func (r staleRunner) Forward(bind string, dial func() (net.Conn, error)) (int, error) {
	if *r.ended {
		r.taken = 0
	}
	return r.tunnelRunner.Forward(bind, dial)
}

// A tunnel site whose port the login host refuses ends the stale session
// that holds it and binds it again; where no stale session holds it, it
// binds another.
func TestTunnelReclaimsPort(t *testing.T) {
	for _, stale := range []bool{true, false} {
		t.Run(fmt.Sprint("stale ", stale), func(t *testing.T) {
			spec, open := tunnelSites(t)
			r, binds := open(spec, t.TempDir(), 5000, 6000)
			ended, home := false, t.TempDir()
			r.Dial = func(context.Context) (Runner, error) {
				return staleRunner{tunnelRunner{shRunner{home}, binds, 5000, 6000}, &stale, &ended}, nil
			}
			r.tunnel = 5000 // the port of an earlier connection
			if _, err := r.runner(context.Background()); err != nil {
				t.Fatal(err)
			}
			want, wantBinds := 5000, "127.0.0.1:5000 127.0.0.1:5000"
			if !stale {
				want, wantBinds = 6000, "127.0.0.1:5000 127.0.0.1:0"
			}
			if got := strings.Join(*binds, " "); r.tunnel != want || got != wantBinds || ended != stale {
				t.Errorf("port %d, binds %s, ended %v; want %d, %s, %v", r.tunnel, got, ended, want, wantBinds, stale)
			}
		})
	}
}
