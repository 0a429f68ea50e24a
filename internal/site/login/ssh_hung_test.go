package login

import (
	"context"
	"errors"
	"github.com/mq-hpc/mq/internal/shellwords"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pkg/sftp"
)

// shellLogin is a login host whose exec requests run in /bin/sh as sshd
// runs them: in a session of their own, with the channel as stdin, which
// ends when the client closes the session, and nothing else done to the
// command then.
func shellLogin(t *testing.T) *sftpLogin {
	l := startSFTPLogin(t)
	l.exec = func(line string, stdin io.Reader, stdout, stderr io.Writer) int {
		pr, pw, err := os.Pipe()
		if err != nil {
			return 255
		}
		go func() {
			io.Copy(pw, stdin)
			pw.Close()
		}()
		c := exec.Command("/bin/sh", "-c", line)
		c.Stdin, c.Stdout, c.Stderr = pr, stdout, stderr
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		err = c.Start()
		pr.Close()
		if err != nil {
			return 255
		}
		var ee *exec.ExitError
		if err := c.Wait(); errors.As(err, &ee) {
			return ee.ExitCode()
		}
		return 0
	}
	return l
}

// A login host's command that hangs (a qstat whose batch server does not
// answer) is killed there when the CLS gives up on it, instead of running
// on for ever, one more at every step, until the user's process limit on
// the login host is reached. A command that ends keeps its output and
// status.
func TestRunHungCommandEnds(t *testing.T) {
	l := shellLogin(t)
	s := l.dial(t, SSHConfig{})

	out, err := s.Run(context.Background(), "echo out; echo why >&2; exit 3")
	if err == nil || !strings.Contains(err.Error(), "exit status 3: why") || string(out) != "out\n" {
		t.Fatalf("a command that fails: %q, %v; want its stdout and its status with its stderr", out, err)
	}
	out, err = s.Run(context.Background(), "read x || echo eof; printf 'a\\nb'")
	if err != nil || string(out) != "eof\na\nb" {
		t.Fatalf("a command reading stdin: %q, %v; want stdin at its end at once", out, err)
	}

	out, err = s.Run(context.Background(), "for f in a; do echo $f; done; ")
	if err != nil || string(out) != "a\n" {
		t.Fatalf("a command ending in a separator: %q, %v", out, err)
	}
	if w := withSession("echo a; "); strings.Contains(w, "\n") {
		t.Errorf("the request %q has a newline, which a csh login shell refuses in quotes", w)
	}

	pidFile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = s.Run(ctx, "sleep 600 & echo $! >"+shellwords.Quote(pidFile)+"; wait")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a hung command: %v; want the context's end", err)
	}
	var pid int
	eventually(t, "the hung command's pid", func() bool {
		b, _ := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return pid > 0
	})
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Kill(pid, 0) == nil && !zombie(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the hung command (pid %d) still runs on the login host 30 s after the CLS gave up on it", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// zombie says whether pid has ended and waits to be reaped.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return strings.HasPrefix(rest, "Z")
}

// An upload to a login host whose sftp-server is stuck (its home on a
// network filesystem that hangs; sshd still answers) fails when its
// context ends, instead of holding the site, and cls site set, removal
// and shutdown behind it, for ever.
func TestPutStalledSFTP(t *testing.T) {
	l := startSFTPLogin(t)
	l.exec = func(string, io.Reader, io.Writer, io.Writer) int { return 1 } // no sha256sum: read back over SFTP
	l.sftpStall.Store(true)
	s := l.dial(t, SSHConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	done := async(func() error {
		_, err := s.Put(ctx, filepath.Join(t.TempDir(), "agent"), []byte("x"), 0o755)
		return err
	})
	if err := returned(t, done, "an upload through a stuck sftp-server, its context ended,"); err == nil {
		t.Fatal("an upload through a stuck sftp-server succeeded")
	}
}

// A command on a connection whose peer stopped answering (TCP up,
// keepalives answered, no session opened) returns when its context ends,
// not when keepalive gives up a minute later, or never. Past its deadline
// the connection is cut, for the site to dial anew; a cancel (the site's
// loop stopped) keeps it, for the others using it.
func TestRunStalledConnection(t *testing.T) {
	for _, tc := range []struct {
		name      string
		keepalive time.Duration // 0: the default, 15 s
		ctx       func() (context.Context, context.CancelFunc)
		want      error
		cutOff    bool
	}{
		// Unanswered past a keepalive interval: stalled.
		{"deadline", 100 * time.Millisecond, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 200*time.Millisecond)
		}, context.DeadlineExceeded, true},
		// A step's time run out while the opening was young: kept.
		{"deadline soon", 0, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 200*time.Millisecond)
		}, context.DeadlineExceeded, false},
		{"cancel", 0, func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(200*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := startSFTPLogin(t)
			l.exec = func(string, io.Reader, io.Writer, io.Writer) int { return 0 }
			s := l.dial(t, SSHConfig{Keepalive: tc.keepalive})
			if _, err := s.Run(context.Background(), "true"); err != nil {
				t.Fatal(err)
			}
			l.stall.Store(true)
			ctx, cancel := tc.ctx()
			defer cancel()
			done := async(func() error {
				_, err := s.Run(ctx, "squeue")
				return err
			})
			var ce *ConnError
			if err := returned(t, done, "a command on a stalled connection, its context ended,"); !errors.Is(err, tc.want) || errors.As(err, &ce) != tc.cutOff {
				t.Fatalf("a command on a stalled connection: %v; want %v, a connection error %v", err, tc.want, tc.cutOff)
			}
			if !tc.cutOff {
				select {
				case <-s.Done():
					t.Fatal("a command given up young closed the connection")
				default:
				}
				return
			}
			select {
			case <-s.Done():
			case <-time.After(30 * time.Second):
				t.Fatal("the stalled connection was kept")
			}
		})
	}
}

// An upload whose sftp-server stopped reading mid-file fills the SSH
// channel's window, and its write waits for ever; Cut (what a stalled
// transfer calls) ends it at once, where Close, SFTP first, would wait
// for the write.
func TestCutStalledUpload(t *testing.T) {
	l := startSFTPLogin(t)
	s, _, wrote := stuckUpload(t, l, 0)
	cut := make(chan struct{})
	go func() {
		s.Cut()
		close(cut)
	}()
	for _, w := range []struct {
		what string
		ch   <-chan struct{}
	}{{"Cut", cut}, {"the connection's end", s.Done()}} {
		select {
		case <-w.ch:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s still waits 30 s on an upload stuck on a silent sftp-server", w.what)
		}
	}
	wroteCut(t, wrote)
}

// A peer gone silent under an upload (its sftp-server stopped reading,
// then keepalives went unanswered) is given up by keepalive, which ends
// the connection although the upload's write is stuck on the full window.
func TestKeepaliveCutsStalledUpload(t *testing.T) {
	l := startSFTPLogin(t)
	s, _, _ := stuckUpload(t, l, 50*time.Millisecond)
	l.silent.Store(true)
	select {
	case <-s.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("keepalive has not ended a silent connection with an upload stuck on it after 30 s")
	}
}

// An upload whose sftp-server stops reading mid-file returns at its
// deadline too: the write stuck on the full window is cut with its SFTP
// session (TestPutPastDeadlineKeepsConnection: the connection is kept).
func TestPutStalledMidFile(t *testing.T) {
	l := startSFTPLogin(t)
	l.exec = func(string, io.Reader, io.Writer, io.Writer) int { return 1 } // no sha256sum
	l.sftpFreezeAt.Store(1 << 20)
	s := l.dial(t, SSHConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	done := async(func() error {
		_, err := s.Put(ctx, filepath.Join(t.TempDir(), "agent"), make([]byte, 16<<20), 0o755)
		return err
	})
	if err := returned(t, done, "an upload through a frozen sftp-server, past its deadline,"); err == nil {
		t.Fatal("an upload through a frozen sftp-server succeeded")
	}
}

// An SFTP session whose server never answers its first packet (an
// sftp-server stuck on a home directory whose network filesystem hangs,
// sshd still answering keepalives) is given up after the handshake's
// Timeout, its connection closed so that the site dials anew: its opening
// waited for ever, holding the session's lock, so every later user of
// SFTP on the connection (staging, the data root's check, uploads)
// waited too.
func TestSFTPOpenUnanswered(t *testing.T) {
	l := startSFTPLogin(t)
	l.sftpStall.Store(true)
	s := l.dial(t, SSHConfig{Timeout: 300 * time.Millisecond})
	done := async(func() error {
		_, err := s.SFTP()
		return err
	})
	var ce *ConnError
	if err := returned(t, done, "opening SFTP on a server that never answers"); !errors.As(err, &ce) || !strings.Contains(err.Error(), "no answer from the SFTP server within 300ms") {
		t.Fatalf("opening SFTP on a server that never answers: %v; want a ConnError saying so", err)
	}
	select {
	case <-s.dead:
	case <-time.After(30 * time.Second):
		t.Fatal("the connection was not closed")
	}
}

// stuckUpload dials l (keepalive every keepalive; 0: the default) and
// starts a 16 MiB upload through its SFTP session that its sftp-server
// stops reading at 1 MiB, its write left waiting on the full window; it
// returns once the server stopped, with the connection, the session and
// the write's end.
func stuckUpload(t *testing.T, l *sftpLogin, keepalive time.Duration) (*SSH, *sftp.Client, <-chan error) {
	t.Helper()
	l.sftpFreezeAt.Store(1 << 20)
	s := l.dial(t, SSHConfig{Keepalive: keepalive})
	c, err := s.SFTP()
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.Create(filepath.Join(t.TempDir(), "big"))
	if err != nil {
		t.Fatal(err)
	}
	wrote := make(chan error, 1)
	go func() {
		_, err := f.Write(make([]byte, 16<<20))
		wrote <- err
	}()
	eventually(t, "the sftp-server to stop reading", l.frozen.Load)
	return s, c, wrote
}

// wroteCut checks that the stuck write of stuckUpload returned, failed.
func wroteCut(t *testing.T, wrote <-chan error) {
	t.Helper()
	if err := returned(t, wrote, "the stuck write, cut,"); err == nil {
		t.Fatal("the cut upload succeeded")
	}
}
