package login

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"io"
	"net"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/mq-hpc/mq/internal/stage/sftptest"
)

// sftpLogin is an in-process login host that serves SFTP (pkg/sftp's
// server standing in for OpenSSH's sftp-server) and nothing else; kill
// ends every SFTP session it serves, leaving the SSH connections up.
type sftpLogin struct {
	addr, keyFile, knownHosts string

	mu       sync.Mutex
	sessions []ssh.Channel
	// exec, if set, runs an exec request's command: what it writes, and
	// its exit status. stdin ends when the client closes the session.
	exec func(cmd string, stdin io.Reader, stdout, stderr io.Writer) int
	// stall leaves channel opens unanswered, the connection otherwise
	// up (keepalives answered): a stalled peer.
	stall atomic.Bool
	// silent leaves global requests (keepalives) unanswered too.
	silent atomic.Bool
	// sftpStall leaves SFTP sessions unserved: an sftp-server stuck (on a
	// home directory whose network filesystem hangs, say).
	sftpStall atomic.Bool
	// sftpFreezeAt, if set, makes an SFTP session's server stop reading
	// past that many bytes, until the test ends (thaw), saying so in
	// frozen: an sftp-server hung mid-transfer, its channel left full.
	sftpFreezeAt atomic.Int64
	frozen       atomic.Bool
	thaw         chan struct{}
	// maxSessions, if set, refuses a session channel beyond that many
	// open on one connection, as sshd's MaxSessions does.
	maxSessions atomic.Int32
}

// freezing is an SFTP session's channel as its server reads it
// (sftpFreezeAt).
type freezing struct {
	ssh.Channel
	l    *sftpLogin
	read int64
}

func (f *freezing) Read(b []byte) (int, error) {
	if at := f.l.sftpFreezeAt.Load(); at > 0 && f.read >= at {
		f.l.frozen.Store(true)
		<-f.l.thaw
	}
	n, err := f.Channel.Read(b)
	f.read += int64(n)
	return n, err
}

func startSFTPLogin(t *testing.T) *sftpLogin {
	t.Helper()
	dir := t.TempDir()
	_, hostPriv, _ := ed25519.GenerateKey(rand.Reader)
	hostSigner, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	_, userPriv, _ := ed25519.GenerateKey(rand.Reader)
	block, err := ssh.MarshalPrivateKey(userPriv, "")
	if err != nil {
		t.Fatal(err)
	}
	userSigner, _ := ssh.NewSignerFromKey(userPriv)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &sftpLogin{addr: ln.Addr().String(), keyFile: filepath.Join(dir, "key"), knownHosts: filepath.Join(dir, "known_hosts"), thaw: make(chan struct{})}
	t.Cleanup(func() { ln.Close(); close(l.thaw) })
	os.WriteFile(l.keyFile, pem.EncodeToMemory(block), 0o600)
	os.WriteFile(l.knownHosts, []byte("[127.0.0.1]:"+portOf(l.addr)+" "+string(ssh.MarshalAuthorizedKey(hostSigner.PublicKey()))), 0o600)
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		if string(k.Marshal()) == string(userSigner.PublicKey().Marshal()) {
			return nil, nil
		}
		return nil, errAuth
	}}
	cfg.AddHostKey(hostSigner)
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go l.serve(nc, cfg)
		}
	}()
	return l
}

func portOf(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// dial connects to l with cfg, its user, address, key and known hosts
// filled in. The connection is closed after the test, not waited for:
// where closing deadlocks, the test's own failure is said first.
func (l *sftpLogin) dial(t *testing.T, cfg SSHConfig) *SSH {
	t.Helper()
	cfg.User, cfg.Addr, cfg.KeyFile, cfg.KnownHosts = "u", l.addr, l.keyFile, l.knownHosts
	s, err := DialSSH(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { go s.Close() })
	return s
}

// async runs f on its own goroutine; its error arrives on the channel.
func async(f func() error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	return done
}

// returned is the error arriving on done. The test fails if it still
// waits after 30 s: what never returns holds its site, and the site's
// removal, change and the CLS's stop behind it, for ever.
func returned(t *testing.T, done <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("%s still waits after 30 s", what)
		return nil
	}
}

func (l *sftpLogin) serve(nc net.Conn, cfg *ssh.ServerConfig) {
	sc, chans, reqs, err := ssh.NewServerConn(nc, cfg)
	if err != nil {
		nc.Close()
		return
	}
	go func() {
		for r := range reqs {
			switch {
			case !r.WantReply || l.silent.Load():
			case r.Type == "tcpip-forward":
				port, ok := forward(sc)
				r.Reply(ok, ssh.Marshal(struct{ Port uint32 }{port}))
			default:
				r.Reply(false, nil)
			}
		}
	}()
	var open atomic.Int32 // session channels open on this connection
	for nch := range chans {
		if l.stall.Load() {
			continue
		}
		if nch.ChannelType() != "session" {
			nch.Reject(ssh.UnknownChannelType, "session only")
			continue
		}
		if max := l.maxSessions.Load(); max > 0 && open.Load() >= max {
			nch.Reject(ssh.Prohibited, "open failed")
			continue
		}
		ch, creqs, err := nch.Accept()
		if err != nil {
			continue
		}
		open.Add(1)
		go func() {
			defer open.Add(-1) // creqs ends with the channel
			for r := range creqs {
				if r.Type == "exec" && l.exec != nil && len(r.Payload) > 4 {
					r.Reply(true, nil)
					go func(cmd string) {
						status := l.exec(cmd, ch, ch, ch.Stderr())
						ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(status)}))
						ch.Close()
					}(string(r.Payload[4:]))
					continue
				}
				ok := r.Type == "subsystem" && len(r.Payload) > 4 && string(r.Payload[4:]) == "sftp"
				r.Reply(ok, nil)
				if !ok {
					continue
				}
				l.mu.Lock()
				l.sessions = append(l.sessions, ch)
				l.mu.Unlock()
				if l.sftpStall.Load() {
					continue
				}
				srv, err := sftp.NewServer(&freezing{Channel: ch, l: l})
				if err != nil {
					ch.Close()
					return
				}
				go func() {
					srv.Serve()
					ch.Close()
				}()
			}
		}()
	}
}

func (l *sftpLogin) kill() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ch := range l.sessions {
		ch.Close()
	}
	l.sessions = nil
}

// An SFTP session that ended (its sftp-server killed, the connection
// under it kept) is not handed out again: the next call opens a new one,
// so staging to the site does not fail for as long as the connection
// lives.
func TestSFTPSessionLostIsReplaced(t *testing.T) {
	l := startSFTPLogin(t)
	s := l.dial(t, SSHConfig{})
	c1, err := s.SFTP()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c1.Getwd(); err != nil {
		t.Fatal(err)
	}
	l.kill()
	if _, err := c1.Getwd(); err == nil {
		t.Fatal("the killed session still answers")
	}
	eventually(t, "a new SFTP session", func() bool {
		c2, err := s.SFTP()
		if err != nil {
			t.Fatal(err)
		}
		if c2 == c1 {
			return false
		}
		_, err = c2.Getwd()
		return err == nil
	})
	select {
	case <-s.Done():
		t.Error("the SSH connection was closed with the session")
	default:
	}
}

// A login host's command that prints without end (a broken wrapper, a
// listing gone wrong) is cut off at maxRunStdout and fails, instead of
// holding the CLS's memory for as long as its step may take; its stderr
// is kept only up to maxRunStderr. A command within the bounds is read
// whole.
func TestRunOutputBounded(t *testing.T) {
	l := startSFTPLogin(t)
	l.exec = func(cmd string, _ io.Reader, stdout, stderr io.Writer) int {
		chunk := bytes.Repeat([]byte("x"), 1<<20)
		n := 2
		if strings.Contains(cmd, "flood") {
			n = maxRunStdout>>20 + 8
		}
		for range n {
			stdout.Write(chunk)
			stderr.Write(chunk[:64<<10])
		}
		return 0
	}
	s := l.dial(t, SSHConfig{})
	out, err := s.Run(context.Background(), "squeue flood")
	if err == nil || !strings.Contains(err.Error(), "printed more than") || out != nil {
		t.Fatalf("a command printing %d MiB: %d bytes, %v; want an error saying it printed too much", maxRunStdout>>20+8, len(out), err)
	}
	out, err = s.Run(context.Background(), "squeue")
	if err != nil || len(out) != 2<<20 {
		t.Fatalf("a command printing 2 MiB: %d bytes, %v", len(out), err)
	}
}

// privateFirst is an in-memory SFTP server that notes, for each file,
// whether it was made private (mode without group or other bits) before
// its first byte was written.
type privateFirst struct {
	mem     sftp.Handlers
	mu      sync.Mutex
	private map[string]bool
	exposed []string // files written before they were private
}

func (p *privateFirst) Filewrite(r *sftp.Request) (io.WriterAt, error) {
	w, err := p.mem.FilePut.Filewrite(r)
	return privateWriter{w, r.Filepath, p}, err
}

func (p *privateFirst) Filecmd(r *sftp.Request) error {
	if r.Method == "Setstat" && r.AttrFlags().Permissions && r.Attributes().FileMode().Perm()&0o077 == 0 {
		p.mu.Lock()
		p.private[r.Filepath] = true
		p.mu.Unlock()
	}
	return p.mem.FileCmd.Filecmd(r)
}

type privateWriter struct {
	io.WriterAt
	path string
	p    *privateFirst
}

func (w privateWriter) WriteAt(b []byte, off int64) (int, error) {
	w.p.mu.Lock()
	if !w.p.private[w.path] {
		w.p.exposed = append(w.p.exposed, w.path)
	}
	w.p.mu.Unlock()
	return w.WriterAt.WriteAt(b, off)
}

// An upload's temporary file is private before the key's first byte
// reaches it: a site directory that stood open to others before the site
// was added keeps its mode (mkdir -p), and the file would be readable
// there while it is written.
func TestWriteTempPrivateFirst(t *testing.T) {
	t.Parallel()
	p := &privateFirst{mem: sftp.InMemHandler(), private: map[string]bool{}}
	h := p.mem
	h.FilePut, h.FileCmd = p, p
	server, client := net.Pipe()
	srv := sftp.NewRequestServer(server, h)
	go srv.Serve()
	t.Cleanup(func() { srv.Close() })
	c, err := sftp.NewClientPipe(client, client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	key := bytes.Repeat([]byte("-----BEGIN OPENSSH PRIVATE KEY-----\n"), 4096)
	if err := writeTemp(c, "/key.tmp-1", key); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.exposed) > 0 {
		t.Fatalf("written before it was made private: %v", p.exposed)
	}
}

// An upload makes its temporary file only in a directory already private
// (a site directory may have stood open to others before the site was
// added: mkdir -p keeps its mode), and leaves the file, and nothing else,
// at its path.
func TestUploadInPrivateDir(t *testing.T) {
	t.Parallel()
	p, h := sftptest.New()
	server, client := net.Pipe()
	srv := sftp.NewRequestServer(server, h)
	go srv.Serve()
	t.Cleanup(func() { srv.Close() })
	c, err := sftp.NewClientPipe(client, client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Mkdir("/site"); err != nil {
		t.Fatal(err)
	}
	key := []byte("-----BEGIN OPENSSH PRIVATE KEY-----\n")
	verified := ""
	if err := upload(c, "/site/key", key, 0o600, func(tmp string) error { verified = tmp; return nil }); err != nil {
		t.Fatal(err)
	}
	open := p.Open()
	if len(open) > 0 {
		t.Errorf("made in a directory others may enter: %v", open)
	}
	if verified == "" || path.Dir(verified) == "/site" {
		t.Errorf("verified %q, want the temporary file in a directory of its own", verified)
	}
	f, err := c.Open("/site/key")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(f)
	f.Close()
	if !bytes.Equal(got, key) {
		t.Errorf("/site/key holds %q, want the key", got)
	}
	ents, err := c.ReadDir("/site")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(names) != 1 || names[0] != "key" {
		t.Errorf("/site holds %v, want the key alone", names)
	}
}
