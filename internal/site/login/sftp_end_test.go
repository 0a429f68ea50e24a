package login

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pkg/sftp"

	"github.com/mq-hpc/mq/internal/stage"
)

// echo is a reverse forward's far end on the CLS's side: it sends back
// what it is sent.
func echo() (net.Conn, error) {
	a, b := net.Pipe()
	go func() {
		io.Copy(b, b)
		b.Close()
	}()
	return a, nil
}

// roundTrip sends b through c and reads it back, within 30 s.
func roundTrip(c net.Conn, b string) error {
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, b); err != nil {
		return err
	}
	got := make([]byte, len(b))
	if _, err := io.ReadFull(c, got); err != nil {
		return err
	}
	if string(got) != b {
		return errors.New("got " + string(got) + ", want " + b)
	}
	return nil
}

// A transfer whose sftp-server hangs mid-file (its filesystem gone) while
// sshd still answers ends the SFTP session alone: the connection stays
// up, and with it the reverse forward placeholders reach the CLS
// through, a command running on it, and new commands and SFTP sessions.
// Cutting the connection, as a stall did, broke them all.
func TestStalledSFTPKeepsConnection(t *testing.T) {
	l := startSFTPLogin(t)
	b := startBusy(t, l)
	s := b.s

	c, err := s.SFTP()
	if err != nil {
		t.Fatal(err)
	}
	local := t.TempDir()
	data := bytes.Repeat([]byte("0123456789abcdef"), 4<<20/16)
	if err := os.MkdirAll(filepath.Join(local, "in"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(local, "in", "big"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	var ended atomic.Int32
	places := map[string]stage.Place{
		"local": stage.Dir{Root: local},
		"site": stage.SFTP{Client: c, Root: t.TempDir(), Drop: func() bool {
			ended.Add(1)
			return s.EndSFTP(c)
		}},
	}
	m := &stage.Mover{Places: func(p string) (stage.Place, error) { return places[p], nil }, Stall: 300 * time.Millisecond}
	h := sha256.Sum256(data)
	done := make(chan stage.Result, 1)
	go func() {
		done <- m.Move(context.Background(), stage.Transfer{Path: "/in/big", From: "local", To: "site", Size: int64(len(data)), SHA256: hex.EncodeToString(h[:])})
	}()
	select {
	case res := <-done:
		if !errors.Is(res.Err, stage.ErrStalled) || !strings.Contains(res.Err.Error(), "SFTP session was ended") {
			t.Errorf("a transfer through a hung sftp-server: %v; want ErrStalled, saying its SFTP session was ended", res.Err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a transfer through a hung sftp-server still waits after 30 s")
	}
	if !l.frozen.Load() || ended.Load() != 1 {
		t.Fatalf("frozen %v, ended %d times: the test proves nothing", l.frozen.Load(), ended.Load())
	}

	b.kept(t, "the stall")
	if _, err := c.Getwd(); err == nil {
		t.Error("the ended SFTP session still answers")
	}
	c2, err := s.SFTP()
	if err != nil || c2 == c {
		t.Fatalf("SFTP after the stall: %v, the ended session again: %v", err, c2 == c)
	}
	if _, err := c2.Getwd(); err != nil {
		t.Errorf("a new SFTP session after the stall: %v", err)
	}
}

// A stalled SFTP session on a connection that no longer answers (its
// peer gone silent) cuts the connection, as before: the write stuck on
// the full window returns with it.
func TestEndSFTPSilentConnection(t *testing.T) {
	l := startSFTPLogin(t)
	s, c, wrote := stuckUpload(t, l, 200*time.Millisecond)
	l.silent.Store(true)
	if !s.EndSFTP(c) {
		t.Error("EndSFTP kept a connection that answers no keepalive")
	}
	select {
	case <-s.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the connection has not ended 30 s after EndSFTP")
	}
	wroteCut(t, wrote)
}

// A connection ends at most maxEndedSFTP SFTP sessions alone: sshd keeps
// each whose sftp-server hangs against its MaxSessions, which the site's
// commands need. Past that a stall cuts the connection. A client already
// ended is left.
func TestEndSFTPBounded(t *testing.T) {
	l := startSFTPLogin(t)
	s := l.dial(t, SSHConfig{})
	for i := range maxEndedSFTP + 1 {
		c, err := s.SFTP()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Getwd(); err != nil {
			t.Fatal(err)
		}
		conn := s.EndSFTP(c)
		if want := i == maxEndedSFTP; conn != want {
			t.Fatalf("session %d ended: connection cut %v, want %v", i+1, conn, want)
		}
		if _, err := c.Getwd(); err == nil {
			t.Fatalf("session %d still answers after EndSFTP", i+1)
		}
		if !conn && s.EndSFTP(c) {
			t.Fatal("ending a session already ended cut the connection")
		}
	}
	select {
	case <-s.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the connection was kept past maxEndedSFTP")
	}
}

// windowless is a channel's stdin whose peer gives no more window past
// left bytes and never answers the channel's close, as sshd does for an
// sftp-server that stopped reading: a write past left waits for ever.
type windowless struct {
	w    io.WriteCloser
	left atomic.Int64
	held chan struct{} // told when a write is held
	gone chan struct{} // closed when the test ends
}

func (w *windowless) Write(b []byte) (int, error) {
	if w.left.Add(-int64(len(b))) < 0 {
		w.held <- struct{}{}
		<-w.gone // x/crypto/ssh's window.reserve, never given room
		return 0, io.EOF
	}
	return w.w.Write(b)
}

func (w *windowless) Close() error { return nil }

// Ending an SFTP session returns every request waiting on it at once,
// though its channel neither takes more data nor closes: a write waiting
// for window space, and a request waiting for its answer.
func TestEndSFTPWindowless(t *testing.T) {
	toServer, fromClient := io.Pipe()
	toClient, fromServer := io.Pipe()
	srv, err := sftp.NewServer(struct {
		io.Reader
		io.WriteCloser
	}{toServer, fromServer})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	stdin := &windowless{w: fromClient, held: make(chan struct{}, 1), gone: make(chan struct{})}
	t.Cleanup(func() {
		close(stdin.gone)
		// The server's answers, no longer read, and its requests end.
		toClient.Close()
		toServer.Close()
		srv.Close()
	})
	stdin.left.Store(1 << 20)
	p, err := newSFTPSession(stdin, toClient, func() error { return nil }, nil, sftp.UseConcurrentWrites(true))
	if err != nil {
		t.Fatal(err)
	}
	f, err := p.c.Create(filepath.Join(t.TempDir(), "big"))
	if err != nil {
		t.Fatal(err)
	}
	wrote := make(chan error, 1)
	go func() {
		_, err := f.Write(make([]byte, 16<<20))
		wrote <- err
	}()
	<-stdin.held
	asked := make(chan error, 1)
	go func() {
		_, err := p.c.Getwd()
		asked <- err
	}()
	ended := make(chan struct{})
	go func() {
		p.end()
		close(ended)
	}()
	for _, w := range []struct {
		what string
		err  chan error
	}{{"the write waiting for window space", wrote}, {"a request waiting behind it", asked}} {
		select {
		case err := <-w.err:
			if err == nil {
				t.Errorf("%s succeeded on the ended session", w.what)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s still waits 30 s after the session was ended", w.what)
		}
	}
	select {
	case <-ended:
	case <-time.After(30 * time.Second):
		t.Fatal("end still waits after 30 s")
	}
}

// An upload past its deadline on a hung sftp-server (stopped reading
// mid-file, sshd still answering) ends only its SFTP session, as a
// stalled transfer does: the reverse forward, a command running and new
// commands, SFTP sessions and uploads go on over the connection. Put cut
// the connection at its deadline, and all of them with it.
func TestPutPastDeadlineKeepsConnection(t *testing.T) {
	l := startSFTPLogin(t)
	b := startBusy(t, l)
	s := b.s

	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	done := async(func() error {
		_, err := s.Put(ctx, filepath.Join(dir, "agent"), make([]byte, 16<<20), 0o755)
		return err
	})
	if err := returned(t, done, "an upload through a frozen sftp-server, past its deadline,"); err == nil {
		t.Fatal("an upload through a frozen sftp-server succeeded")
	}
	if !l.frozen.Load() {
		t.Fatal("the sftp-server never froze: the test proves nothing")
	}

	b.kept(t, "the upload")
	// A small file, under the point where the sftp-server freezes, goes
	// through a new session.
	if wrote, err := s.Put(context.Background(), filepath.Join(dir, "key"), []byte("k"), 0o600); err != nil || !wrote {
		t.Errorf("an upload after the stalled one: wrote %v, %v", wrote, err)
	}
}

// An upload whose sftp-server never answers the session's opening ends
// that opening at its deadline, the connection kept while it answers:
// Put returned only when the connection was cut.
func TestPutPastDeadlineOpeningKeepsConnection(t *testing.T) {
	l := startSFTPLogin(t)
	l.exec = func(cmd string, _ io.Reader, _, _ io.Writer) int {
		if strings.Contains(cmd, "sha256sum") {
			return 1 // none: Put reads back over SFTP
		}
		return 0
	}
	l.sftpStall.Store(true)
	s := l.dial(t, SSHConfig{Keepalive: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	done := async(func() error {
		_, err := s.Put(ctx, filepath.Join(t.TempDir(), "agent"), []byte("x"), 0o755)
		return err
	})
	var ce *ConnError
	if err := returned(t, done, "an upload whose sftp-server never answers, past its deadline,"); !errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ce) {
		t.Fatalf("an upload whose sftp-server never answers: %v; want its deadline, no connection error", err)
	}
	select {
	case <-s.Done():
		t.Fatal("the connection, still answering, was closed with the unanswered SFTP opening")
	default:
	}
	if _, err := s.Run(context.Background(), "true"); err != nil {
		t.Errorf("a command after the upload: %v", err)
	}
	l.sftpStall.Store(false)
	if _, err := s.Put(context.Background(), filepath.Join(t.TempDir(), "key"), []byte("k"), 0o600); err != nil {
		t.Errorf("an upload once the sftp-server answers: %v", err)
	}
}

// A cancelled upload (its site's loop stopped, for the site's removal,
// a change or the CLS's shutdown, which wait for it) that returns within
// a keepalive interval ends nothing: its SFTP session, shared with
// staging, and the connection stay. One stuck on a hung sftp-server
// past that ends its SFTP session alone, the connection answering: it
// waited for ever, and the removal, change or shutdown behind it.
func TestPutCancelled(t *testing.T) {
	for _, tc := range []struct {
		name      string
		keepalive time.Duration
		freezeAt  int64 // the sftp-server stops reading there (0: never)
		ended     int   // SFTP sessions ended
	}{
		{"stuck", 200 * time.Millisecond, 1 << 20, 1},
		{"returning", 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := startSFTPLogin(t)
			var verifying atomic.Bool
			l.exec = func(cmd string, stdin io.Reader, _, _ io.Writer) int {
				if strings.Contains(cmd, ".mq-upload-") {
					// The written file's check: held until the
					// client gives up on it.
					verifying.Store(true)
					io.Copy(io.Discard, stdin)
				}
				return 1 // no sha256sum: Put reads back over SFTP
			}
			l.sftpFreezeAt.Store(tc.freezeAt)
			s := l.dial(t, SSHConfig{Keepalive: tc.keepalive})
			c, err := s.SFTP()
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := async(func() error {
				_, err := s.Put(ctx, filepath.Join(t.TempDir(), "agent"), make([]byte, 16<<20), 0o755)
				return err
			})
			eventually(t, "the upload to be stopped", func() bool { return l.frozen.Load() || verifying.Load() })
			cancel()
			if err := returned(t, done, "a cancelled upload"); !errors.Is(err, context.Canceled) {
				t.Errorf("a cancelled upload: %v; want the cancel", err)
			}
			select {
			case <-s.Done():
				t.Fatal("a cancelled upload cut the connection")
			default:
			}
			s.sftpMu.Lock()
			kept, ended := s.sftp != nil && s.sftp.c == c, s.ended
			s.sftpMu.Unlock()
			if kept != (tc.ended == 0) || ended != tc.ended {
				t.Errorf("a cancelled upload: its SFTP session kept %v, sessions ended %d; want %d ended", kept, ended, tc.ended)
			}
			var ce *ConnError
			if _, err := s.Run(context.Background(), "true"); err == nil || errors.As(err, &ce) {
				t.Errorf("a command after the cancelled upload: %v; want its exit status", err)
			}
		})
	}
}

// busy is a connection to a login host (keepalive every 200 ms) whose
// sftp-server stops reading at 1 MiB, with a reverse forward through it
// and a command running on it: what a stall of SFTP alone must leave.
type busy struct {
	s       *SSH
	tunnel  net.Conn
	ran     chan error
	release chan struct{}
}

// startBusy dials l and starts the forward and the long command. The
// login host has no sha256sum: Put reads back over SFTP.
func startBusy(t *testing.T, l *sftpLogin) *busy {
	t.Helper()
	b := &busy{ran: make(chan error, 1), release: make(chan struct{})}
	var long atomic.Bool
	l.exec = func(cmd string, _ io.Reader, stdout, _ io.Writer) int {
		switch {
		case strings.Contains(cmd, "sha256sum"):
			return 1
		case strings.Contains(cmd, "long-command"):
			long.Store(true)
			<-b.release
		}
		io.WriteString(stdout, "ok\n")
		return 0
	}
	l.sftpFreezeAt.Store(1 << 20)
	b.s = l.dial(t, SSHConfig{Keepalive: 200 * time.Millisecond})
	port, err := b.s.Forward("127.0.0.1:0", echo)
	if err != nil {
		t.Fatal(err)
	}
	b.tunnel, err = net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.tunnel.Close() })
	if err := roundTrip(b.tunnel, "before"); err != nil {
		t.Fatalf("through the tunnel before: %v", err)
	}
	go func() {
		out, err := b.s.Run(context.Background(), "long-command")
		if err == nil && string(out) != "ok\n" {
			err = errors.New("printed " + string(out))
		}
		b.ran <- err
	}()
	eventually(t, "the long command to start", long.Load)
	return b
}

// kept checks that after what (a stall, an upload given up) the
// connection is up, the tunnel carries bytes, the command running across
// it ends well and a new command runs.
func (b *busy) kept(t *testing.T, what string) {
	t.Helper()
	select {
	case <-b.s.Done():
		t.Fatalf("the connection, still answering, was closed after %s", what)
	default:
	}
	if err := roundTrip(b.tunnel, "after"); err != nil {
		t.Errorf("the tunnel after %s: %v", what, err)
	}
	close(b.release)
	select {
	case err := <-b.ran:
		if err != nil {
			t.Errorf("the command running over %s: %v", what, err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("the command running over %s has not returned 30 s after its end", what)
	}
	if out, err := b.s.Run(context.Background(), "true"); err != nil || string(out) != "ok\n" {
		t.Errorf("a command after %s: %q, %v", what, out, err)
	}
}
