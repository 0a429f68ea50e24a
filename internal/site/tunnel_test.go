package site

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/site/login"
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
	for _, sh := range testShells() {
		t.Run(sh, func(t *testing.T) {
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
					stale, waitErr, exited := startNamed(t, "sleep")
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
					if out, ended := endStale(t, sh, env, file); ended != tc.want {
						t.Errorf("printed %q; want ended %v", out, tc.want)
					}
					checkEnded(t, tc.want, waitErr, exited)
				})
			}

			t.Run("note", func(t *testing.T) {
				dir, env := fakePS(t)
				os.WriteFile(filepath.Join(dir, "ppid"), []byte(ours+"\n"), 0o644)
				os.WriteFile(filepath.Join(dir, ours+".comm"), []byte("sshd\n"), 0o644)
				os.WriteFile(filepath.Join(dir, ours+".lstart"), []byte("Tue Dec  1 14:58:21 2026\n"), 0o644)
				file := filepath.Join(t.TempDir(), tunnelSessionFile)
				c := exec.Command(sh, "-c", noteSessionCommand(file))
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
				c = exec.Command(sh, "-c", noteSessionCommand(file))
				c.Env = env
				if out, err := c.CombinedOutput(); err != nil {
					t.Fatalf("%v: %s", err, out)
				}
				if _, err := os.Stat(file); !os.IsNotExist(err) {
					t.Errorf("a note under no sshd: %v", err)
				}
			})
		})
	}
}

// testShells is the shells the login host's commands are run by in
// tests: /bin/sh, and bash (the /bin/sh of some login hosts).
func testShells() []string {
	shells := []string{"sh"}
	if _, err := exec.LookPath("bash"); err == nil {
		shells = append(shells, "bash")
	}
	return shells
}

// busyboxPS puts a ps first on PATH that fails as BusyBox's does, which
// has neither -p nor lstart.
func busyboxPS(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	ps := "#!/bin/sh\necho \"ps: invalid option -- 'p'\" >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(dir, "ps"), []byte(ps), 0o755); err != nil {
		t.Fatal(err)
	}
	return []string{"PATH=" + dir + ":" + os.Getenv("PATH")}
}

// procStart is pid's start time in clock ticks, field 22 of its
// /proc/PID/stat.
func procStart(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 20 {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	return f[19]
}

// startNamed starts sleep as name, the command name /proc/PID/comm then
// gives, and ends it when the test does. exited is closed when it has,
// and *waitErr is then how.
func startNamed(t *testing.T, name string) (p *exec.Cmd, waitErr *error, exited chan struct{}) {
	t.Helper()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip(err)
	}
	bin := filepath.Join(t.TempDir(), name)
	if err := os.Symlink(sleep, bin); err != nil {
		t.Fatal(err)
	}
	p = exec.Command(bin, "300")
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	waitErr, exited = new(error), make(chan struct{})
	go func() { *waitErr = p.Wait(); close(exited) }()
	t.Cleanup(func() { p.Process.Kill(); <-exited })
	return p, waitErr, exited
}

// endStale runs endStaleSessionCommand(file) by sh, with env, and
// reports what it printed and whether that says it ended the session.
func endStale(t *testing.T, sh string, env []string, file string) ([]byte, bool) {
	t.Helper()
	c := exec.Command(sh, "-c", endStaleSessionCommand(file))
	c.Env = env
	out, err := c.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return out, strings.TrimSpace(string(out)) == staleEnded
}

// checkEnded checks that the process ended, by SIGTERM, within a
// generous deadline; or, when want is false, that it is still running
// a while after.
func checkEnded(t *testing.T, want bool, waitErr *error, exited chan struct{}) {
	t.Helper()
	if !want {
		select {
		case <-exited:
			t.Errorf("the process ended: %v", *waitErr)
		case <-time.After(100 * time.Millisecond):
		}
		return
	}
	select {
	case <-exited:
		var ee *exec.ExitError
		if !errors.As(*waitErr, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
			t.Errorf("the process ended with %v; want SIGTERM", *waitErr)
		}
	case <-time.After(30 * time.Second):
		t.Error("the stale session was not ended")
	}
}

// Where ps cannot say a process's start time (BusyBox's ps, which has
// neither -p nor lstart), or its parent or command name, they are read
// from /proc; a start time noted from one is compared only with one from
// the same. Against real processes, whose command name holds spaces and
// ')', as /proc/PID/stat gives it in parentheses.
func TestEndStaleSessionProc(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc:", err)
	}
	for _, cmd := range []string{noteSessionCommand("/x"), endStaleSessionCommand("/x")} {
		if strings.Contains(cmd, "\n") {
			t.Errorf("a newline, which a csh login shell refuses in quotes: %q", cmd)
		}
	}
	const hostile = "sshd) a b) c"
	for _, sh := range testShells() {
		t.Run(sh, func(t *testing.T) {
			for _, tc := range []struct {
				name string
				ps   string // "busybox", or "no lstart": ppid and comm from fakePS
				comm string // the stale process's name
				note string // PID and TICKS are its own; TICKS1 a tick later
				want bool   // ended
			}{
				{"stale session", "busybox", hostile, "PID\nproc TICKS\n", true},
				{"sshd-session", "busybox", "sshd-session", "PID\nproc TICKS\n", true},
				{"ps without lstart", "no lstart", "sleep", "PID\nproc TICKS\n", true},
				{"pid reused: started later", "busybox", hostile, "PID\nproc TICKS1\n", false},
				{"pid reused by another program", "busybox", "sleep", "PID\nproc TICKS\n", false},
				{"noted by ps", "busybox", hostile, "PID\nTue Dec 1 14:58:21 2026\n", false},
				{"noted by ps, now ps without lstart", "no lstart", "sleep", "PID\nTue Dec 1 14:58:21 2026\n", false},
				{"no ticks", "busybox", hostile, "PID\nproc \n", false},
				{"not ticks", "busybox", hostile, "PID\nproc x\n", false},
			} {
				t.Run(tc.name, func(t *testing.T) {
					stale, waitErr, exited := startNamed(t, tc.comm)
					pid := strconv.Itoa(stale.Process.Pid)
					env := busyboxPS(t)
					if tc.ps == "no lstart" {
						var dir string
						dir, env = fakePS(t)
						os.WriteFile(filepath.Join(dir, "ppid"), []byte(" 4000000\n"), 0o644)
						os.WriteFile(filepath.Join(dir, pid+".comm"), []byte("sshd\n"), 0o644)
					}
					ticks := procStart(t, stale.Process.Pid)
					next, _ := strconv.Atoi(ticks)
					note := strings.NewReplacer("PID", pid, "TICKS1", strconv.Itoa(next+1), "TICKS", ticks).Replace(tc.note)
					file := filepath.Join(t.TempDir(), tunnelSessionFile)
					os.WriteFile(file, []byte(note), 0o600)
					if out, ended := endStale(t, sh, env, file); ended != tc.want {
						t.Fatalf("printed %q; want ended %v", out, tc.want)
					}
					checkEnded(t, tc.want, waitErr, exited)
				})
			}

			// A session (a shell named as sshd) notes itself, through
			// /proc alone, and its own connection leaves it be; another
			// connection ends it.
			t.Run("note", func(t *testing.T) {
				env := busyboxPS(t)
				dir := t.TempDir()
				file, out := filepath.Join(dir, tunnelSessionFile), filepath.Join(dir, "out")
				bin := filepath.Join(t.TempDir(), hostile)
				if err := os.Symlink("/bin/sh", bin); err != nil {
					t.Fatal(err)
				}
				session := exec.Command(bin, "-c", `"$1" -c "$2"; "$1" -c "$3" >"$4.tmp" 2>&1; mv "$4.tmp" "$4"; sleep 300; :`,
					"session", sh, noteSessionCommand(file), endStaleSessionCommand(file), out)
				session.Env = env
				session.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
				if err := session.Start(); err != nil {
					t.Fatal(err)
				}
				waitErr, exited := new(error), make(chan struct{})
				go func() { *waitErr = session.Wait(); close(exited) }()
				t.Cleanup(func() { syscall.Kill(-session.Process.Pid, syscall.SIGKILL); <-exited })
				var own []byte
				for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
					var err error
					if own, err = os.ReadFile(out); err == nil {
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("the session did not run its commands:", err)
					}
				}
				if len(own) != 0 {
					t.Errorf("its own connection printed %q", own)
				}
				b, err := os.ReadFile(file)
				want := fmt.Sprintf("%d\nproc %s\n", session.Process.Pid, procStart(t, session.Process.Pid))
				if err != nil || string(b) != want {
					t.Fatalf("noted %q, %v; want %q", b, err, want)
				}
				checkEnded(t, false, waitErr, exited)
				if out, ended := endStale(t, sh, env, file); !ended {
					t.Errorf("printed %q; want %s", out, staleEnded)
				}
				checkEnded(t, true, waitErr, exited)
			})
		})
	}
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
			r.Dial = func(context.Context) (login.Runner, error) {
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

// loginPool reads where the connection reached the login host and how
// many addresses the login host's name has there (more than one: a pool
// of login nodes).
func TestLoginPool(t *testing.T) {
	for _, tc := range []struct {
		name, out, at string
		names         int
	}{
		{"one address", "at 10.0.0.5 22\nname 10.0.0.5\n", "10.0.0.5", 1},
		{"no getent", "at 10.0.0.5 22\n", "10.0.0.5", 0},
		{"pool", "at 10.0.0.6 22\nname 10.0.0.5\nname 10.0.0.6\nname 10.0.0.6\nname 10.0.0.7\n", "10.0.0.6", 3},
		{"pool, v4-mapped", "at ::ffff:10.0.0.6 22\nname 10.0.0.5\nname ::ffff:10.0.0.6\n", "10.0.0.6", 2},
		{"pool, v6", "at fd00::6 22\nname fd00::5\nname fd00::6\n", "fd00::6", 2},
		{"one dual-stack node", "at 10.0.0.5 22\nname 10.0.0.5\nname fd00::5\n", "10.0.0.5", 1},
		{"pool of dual-stack nodes", "at fd00::6 22\nname 10.0.0.5\nname 10.0.0.6\nname fd00::5\nname fd00::6\n", "fd00::6", 2},
		{"pool, no SSH_CONNECTION", "name 10.0.0.5\nname 10.0.0.6\n", "", 2},
		{"garbage", "at 10.0.0.6; rm -rf / 22\nat $(x) 22\nname $(x)\nname 10.0.0.6\n", "", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if at, names := loginPool([]byte(tc.out)); at != tc.at || names != tc.names {
				t.Errorf("loginPool = %q, %d; want %q, %d", at, names, tc.at, tc.names)
			}
		})
	}
}

// loginNodeCommand says where sshd took the connection and the name's
// addresses, under sh and bash, with getent's output as glibc prints it.
func TestLoginNodeCommand(t *testing.T) {
	bin := t.TempDir()
	getent := "#!/bin/sh\n[ \"$1 $2\" = 'ahosts login.example.org' ] || exit 2\n" +
		"printf '10.0.0.5        STREAM login.example.org\\n10.0.0.5        DGRAM  \\n10.0.0.6        STREAM \\n'\n"
	if err := os.WriteFile(filepath.Join(bin, "getent"), []byte(getent), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, shell := range []string{"sh", "bash"} {
		if _, err := exec.LookPath(shell); err != nil {
			continue
		}
		cmd := exec.Command(shell, "-c", loginNodeCommand("login.example.org"))
		cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "SSH_CONNECTION=192.0.2.9 50000 10.0.0.6 22"}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v", shell, err)
		}
		if at, names := loginPool(out); at != "10.0.0.6" || names != 2 {
			t.Errorf("%s printed %q: at %q, %d names; want 10.0.0.6, 2", shell, out, at, names)
		}
	}
}

// poolRunner is a tunnelRunner on a login node of a pool: its commands
// see the connection reach 10.0.0.6:22 (SSH_CONNECTION) and a getent
// that gives the pool's name, h, two addresses.
type poolRunner struct {
	tunnelRunner
	bin string
}

func (r poolRunner) Run(ctx context.Context, cmd string) ([]byte, error) {
	return r.tunnelRunner.Run(ctx, "SSH_CONNECTION='192.0.2.9 50000 10.0.0.6 22' PATH="+Quote(r.bin)+":$PATH; export SSH_CONNECTION PATH; "+cmd)
}

// A tunnel site whose login host's name is a pool of login nodes says
// so, and which node holds the forward; placeholders still dial the name.
func TestTunnelPoolWarns(t *testing.T) {
	bin := t.TempDir()
	getent := "#!/bin/sh\n[ \"$1 $2\" = 'ahosts h' ] || exit 2\nprintf '10.0.0.5 STREAM h\\n10.0.0.6 STREAM\\n'\n"
	if err := os.WriteFile(filepath.Join(bin, "getent"), []byte(getent), 0o755); err != nil {
		t.Fatal(err)
	}
	spec, open := tunnelSites(t)
	r, binds := open(spec, t.TempDir(), 0, 5000)
	var logged bytes.Buffer
	r.Log = slog.New(slog.NewTextHandler(&logged, nil))
	home := t.TempDir()
	r.Dial = func(context.Context) (login.Runner, error) {
		return poolRunner{tunnelRunner{shRunner{home}, binds, 0, 5000}, bin}, nil
	}
	if _, err := r.runner(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(r.script); err != nil || !strings.Contains(string(b), "u@h:22") {
		t.Errorf("the batch script does not send placeholders to the --ssh address (%v):\n%s", err, b)
	}
	if l := logged.String(); !strings.Contains(l, "a pool of login nodes") || !strings.Contains(l, "reached=10.0.0.6") || !strings.Contains(l, "addresses=2") {
		t.Errorf("no warning of the pool:\n%s", l)
	}
}
