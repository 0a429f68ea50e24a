package login

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// openSSHLogin is an in-process login host (shellLogin) reached with the
// system's ssh, which reads no config but the test's (-F): the wrapper
// script is the config's Program, as MQ_SSH is the CLS's.
func openSSHLogin(t *testing.T) (*sftpLogin, OpenSSHConfig) {
	t.Helper()
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("no ssh command")
	}
	l := shellLogin(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "config")
	if err := os.WriteFile(conf, []byte("Host *\n  IdentitiesOnly yes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wrapper := filepath.Join(dir, "sshwrap")
	if err := os.WriteFile(wrapper, []byte("#!/bin/sh\nexec ssh -F "+conf+" \"$@\"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(l.addr)
	p, _ := strconv.Atoi(port)
	return l, OpenSSHConfig{Dest: "u@" + host, Port: p, KeyFile: l.keyFile, KnownHosts: l.knownHosts,
		ControlDir: ControlDir(dir), Program: wrapper, Timeout: 20 * time.Second, LoginHint: "cls site login s"}
}

func mustDial(t *testing.T, cfg OpenSSHConfig) *OpenSSH {
	t.Helper()
	s, err := DialOpenSSH(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A site reached with the system's ssh runs commands (their output and
// status kept as mq's own client keeps them), puts files (only when
// changed), gives its SFTP session to staging, and says whom it logged
// in as, as ssh resolved the destination.
func TestOpenSSHRunPut(t *testing.T) {
	_, cfg := openSSHLogin(t)
	s := mustDial(t, cfg)
	ctx := context.Background()

	out, err := s.Run(ctx, "echo out; echo why >&2; exit 3")
	if err == nil || !strings.Contains(err.Error(), "exit status 3: why") || string(out) != "out\n" {
		t.Fatalf("Run = %q, %v; want out and exit status 3: why", out, err)
	}
	out, err = s.Run(ctx, "printf '%s' ok")
	if err != nil || string(out) != "ok" {
		t.Fatalf("Run = %q, %v", out, err)
	}

	p := filepath.Join(t.TempDir(), "d", "agent")
	for i, want := range []bool{true, false} {
		wrote, err := s.Put(ctx, p, []byte("bytes"), 0o700)
		if err != nil || wrote != want {
			t.Fatalf("Put #%d = %v, %v; want %v", i, wrote, err, want)
		}
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "bytes" {
		t.Fatalf("put file holds %q, %v", b, err)
	}
	c, err := s.SFTP()
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := c.Stat(p); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("stat over SFTP: %v, %v", fi, err)
	}
	if user, addr := s.Login(); user != "u" || addr != "127.0.0.1:"+strconv.Itoa(cfg.Port) {
		t.Fatalf("Login = %s, %s", user, addr)
	}
	if fi, err := os.Stat(cfg.ControlDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("control dir: %v, %v", fi, err)
	}
}

// A command whose context ends is killed on the login host, as mq's own
// client's are (withSession): the ssh process's end ends its session.
func TestOpenSSHRunCancelKillsCommand(t *testing.T) {
	_, cfg := openSSHLogin(t)
	s := mustDial(t, cfg)
	pidFile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := s.Run(ctx, "echo $$ > "+pidFile+"; exec sleep 600"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run = %v, want the deadline", err)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	deadline := time.Now().Add(30 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the command (pid %d) still runs 30 s after its context ended", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive says whether pid runs (a zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// Where ssh cannot log in without asking (here: no key it may use), a
// master connection the user opened by hand carries the CLS's: the
// connection rides on it, and ends when it does. Without it the error
// says to log in by hand, and is taken for one that retrying soon does
// not mend.
func TestOpenSSHRidesOnMaster(t *testing.T) {
	l, cfg := openSSHLogin(t)
	noKey := cfg
	noKey.KeyFile = filepath.Join(t.TempDir(), "absent")
	_, err := DialOpenSSH(context.Background(), noKey)
	if !Permanent(err) || !strings.Contains(err.Error(), "Permission denied") || !strings.Contains(err.Error(), "log in by hand, once, with: cls site login s (") {
		t.Fatalf("dial without a key = %v; want a permanent Permission denied saying cls site login", err)
	}

	// The user's login: the key given to this ssh alone.
	withKey := cfg
	if err := PrivateControlDir(cfg.ControlDir); err != nil {
		t.Fatal(err)
	}
	login := exec.Command(cfg.Program, append([]string{"-o", "BatchMode=yes", "-i", l.keyFile}, withKey.LoginArgs()...)...)
	if out, err := login.CombinedOutput(); err != nil {
		t.Fatalf("ssh %v: %v: %s", login.Args, err, out)
	}
	t.Cleanup(func() { exec.Command(cfg.Program, cfg.args(false, "-O", "exit", "--", cfg.Dest)...).Run() })
	pid := masterPID(t, cfg)
	s := mustDial(t, noKey)
	if got := masterPID(t, cfg); got != pid {
		t.Fatalf("the master is pid %d after the dial, the user's was %d", got, pid)
	}
	if out, err := s.Run(context.Background(), "echo rode"); err != nil || string(out) != "rode\n" {
		t.Fatalf("Run on the user's master = %q, %v", out, err)
	}
	exit := exec.Command(cfg.Program, cfg.args(false, "-O", "exit", "--", cfg.Dest)...)
	if out, err := exit.CombinedOutput(); err != nil {
		t.Fatalf("ssh -O exit: %v: %s", err, out)
	}
	select {
	case <-s.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the connection is not done 30 s after its master exited")
	}
	if _, err := s.Run(context.Background(), "true"); err == nil {
		t.Fatal("Run after the master exited succeeded")
	}
}

// masterPID is the pid of the master connection to cfg's destination,
// as ssh -O check says it; 0 if none answers.
func masterPID(t *testing.T, cfg OpenSSHConfig) int {
	t.Helper()
	out, err := exec.Command(cfg.Program, cfg.args(false, "-O", "check", "--", cfg.Dest)...).CombinedOutput()
	if err != nil {
		return 0
	}
	_, rest, ok := strings.Cut(string(out), "pid=")
	pid, err := strconv.Atoi(strings.TrimRight(strings.TrimSpace(rest), ")"))
	if !ok || err != nil {
		t.Fatalf("ssh -O check said %q", out)
	}
	return pid
}

// A login host that refused the CLS's own login is not asked again
// (each try is a failed login there, and centres ban an address after a
// run of them) until the user's login answers; once that ends, one try
// again, then none.
func TestOpenSSHDialerTriesOneLogin(t *testing.T) {
	l, cfg := openSSHLogin(t)
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	logged := filepath.Join(dir, "logged")
	os.WriteFile(logged, []byte("#!/bin/sh\necho \"$*\" >> "+calls+"\nexec "+cfg.Program+" \"$@\"\n"), 0o700)
	logins := func() int {
		b, _ := os.ReadFile(calls)
		return strings.Count(string(b), "ControlMaster=yes")
	}
	noKey := cfg
	noKey.Program, noKey.KeyFile = logged, filepath.Join(dir, "absent")
	d := &OpenSSHDialer{Config: noKey}
	tries := func(n int) {
		t.Helper()
		for range n {
			if _, err := d.Dial(context.Background()); !Permanent(err) {
				t.Fatalf("dial without a login = %v, want the refusal", err)
			}
		}
	}
	tries(3)
	if n := logins(); n != 1 {
		t.Fatalf("3 dials tried %d logins of their own, want 1", n)
	}

	if err := PrivateControlDir(cfg.ControlDir); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cfg.Program, append([]string{"-o", "BatchMode=yes", "-i", l.keyFile}, cfg.LoginArgs()...)...).CombinedOutput(); err != nil {
		t.Fatalf("the user's login: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command(cfg.Program, cfg.ControlArgs("exit")...).Run() })
	s, err := d.Dial(context.Background())
	if err != nil {
		t.Fatalf("dial with the user's login up: %v", err)
	}
	s.Close()
	if out, err := exec.Command(cfg.Program, cfg.ControlArgs("exit")...).CombinedOutput(); err != nil {
		t.Fatalf("ssh -O exit: %v %s", err, out)
	}
	tries(3)
	if n := logins(); n != 2 {
		t.Fatalf("after the user's login ended, %d logins of its own in all, want 2", n)
	}
}

// A master the CLS started ends its Persist after the last connection on
// it: nothing of the CLS's stays logged in to the login host once its
// sites are gone. One killed (with the CLS, say) leaves a socket that is
// not in the way of the next.
func TestOpenSSHMasterEndsAfterLastUse(t *testing.T) {
	_, cfg := openSSHLogin(t)
	cfg.Persist = time.Second
	// busy keeps a command running on s until the func it returns is
	// called: with no session open a master ends a Persist (1 s) later,
	// which a busy machine could let pass before a check that it answers.
	busy := func(s *OpenSSH) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan struct{})
		go func() {
			defer close(ran)
			s.Run(ctx, "sleep 600")
		}()
		return func() { cancel(); <-ran }
	}
	s := mustDial(t, cfg)
	stop := busy(s)
	eventually(t, "a master answering while a command runs", func() bool { return masterPID(t, cfg) != 0 })
	stop()
	s.Close()
	select {
	case <-s.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("not done 30 s after Close")
	}
	eventually(t, "the master gone after its last use", func() bool {
		_, err := os.Lstat(s.path)
		return masterPID(t, cfg) == 0 && errors.Is(err, os.ErrNotExist)
	})

	s2 := mustDial(t, cfg)
	stop = busy(s2)
	var pid int
	eventually(t, "a master answering while a command runs", func() bool { pid = masterPID(t, cfg); return pid != 0 })
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s2.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("not done 30 s after its master was killed")
	}
	stop()
	if _, err := os.Lstat(s2.path); err != nil {
		t.Fatalf("the killed master left no socket behind (%v): this test no longer tests what it says", err)
	}
	s3 := mustDial(t, cfg)
	if out, err := s3.Run(context.Background(), "echo again"); err != nil || string(out) != "again\n" {
		t.Fatalf("Run after a killed master = %q, %v", out, err)
	}
}

// Sites on one login host dial it at once (the CLS's start): one master
// is started, and every connection rides on it.
func TestOpenSSHDialsAtOnceShareAMaster(t *testing.T) {
	_, cfg := openSSHLogin(t)
	const n = 4
	errs := make(chan error, n)
	conns := make(chan *OpenSSH, n)
	for range n {
		go func() {
			s, err := DialOpenSSH(context.Background(), cfg)
			if err == nil {
				conns <- s
				_, err = s.Run(context.Background(), "true")
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		s := <-conns
		t.Cleanup(func() { s.Close() })
	}
	if masters := mastersOf(t, cfg); masters != 1 {
		t.Fatalf("%d master processes for one login host, want 1", masters)
	}
}

// mastersOf counts the ssh processes that are masters of cfg's login host.
func mastersOf(t *testing.T, cfg OpenSSHConfig) int {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	n := 0
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if slices.Contains(args, "ControlMaster=yes") && slices.Contains(args, strconv.Itoa(cfg.Port)) {
			n++
		}
	}
	return n
}

// The login host's key is checked strictly, whatever the user's config
// says: unknown, or changed, the dial fails saying so.
func TestOpenSSHHostKey(t *testing.T) {
	l, cfg := openSSHLogin(t)
	empty := filepath.Join(t.TempDir(), "known_hosts")
	os.WriteFile(empty, nil, 0o600)
	cfg.KnownHosts = empty
	if _, err := DialOpenSSH(context.Background(), cfg); !errors.Is(err, ErrHostUnknown) {
		t.Fatalf("dial with no key known = %v, want ErrHostUnknown", err)
	}
	other, _ := openSSHLogin(t) // another host's key under this one's address
	b, _ := os.ReadFile(other.knownHosts)
	line := strings.Replace(string(b), portOf(other.addr), portOf(l.addr), 1)
	os.WriteFile(empty, []byte(line), 0o600)
	if _, err := DialOpenSSH(context.Background(), cfg); !errors.Is(err, ErrHostKeyChanged) {
		t.Fatalf("dial with another key known = %v, want ErrHostKeyChanged", err)
	}
}

// A login host ssh cannot reach is said as such, in ssh's words, not as
// a connection lost.
func TestOpenSSHUnreachable(t *testing.T) {
	_, cfg := openSSHLogin(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Port = ln.Addr().(*net.TCPAddr).Port
	ln.Close() // nothing listens there now
	_, err = DialOpenSSH(context.Background(), cfg)
	var ce *ConnError
	if err == nil || !strings.HasPrefix(err.Error(), "cannot reach the login host with ssh u@127.0.0.1: connect to host 127.0.0.1 port") || errors.As(err, &ce) {
		t.Fatalf("dial of a port nothing listens on = %v", err)
	}
}

// The user and host ssh resolves the destination to go into batch
// scripts: a config that makes one of them more than a plain word is
// refused, saying so.
func TestOpenSSHRefusesOddLogin(t *testing.T) {
	_, cfg := openSSHLogin(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "config")
	os.WriteFile(conf, []byte("Host *\n  User x;y"), 0o600)
	wrapper := filepath.Join(dir, "sshwrap")
	os.WriteFile(wrapper, []byte("#!/bin/sh\nexec ssh -F "+conf+" \"$@\"\n"), 0o700)
	cfg.Program, cfg.Dest = wrapper, "127.0.0.1"
	if _, err := DialOpenSSH(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "is not one plain word") {
		t.Fatalf("dial as a user named x;y = %v", err)
	}
}

// Every site on one login host shares its master connection, so sshd's
// MaxSessions counts their sessions together. A command the master
// cannot open a session for falls back to a connection of its own (ssh
// does that): where ssh logs in without asking it runs; where only the
// user's login can, it fails saying MaxSessions, not only ssh's words.
func TestOpenSSHMaxSessions(t *testing.T) {
	for _, keyed := range []bool{true, false} {
		t.Run(map[bool]string{true: "keys", false: "login by hand"}[keyed], func(t *testing.T) {
			l, cfg := openSSHLogin(t)
			l.maxSessions.Store(2) // the SFTP session and one command
			if !keyed {
				cfg = loginByHand(t, cfg)
			}
			s := mustDial(t, cfg)
			started := filepath.Join(t.TempDir(), "started")
			done := async(func() error {
				_, err := s.Run(context.Background(), "touch "+started+"; sleep 3")
				return err
			})
			eventually(t, "the first command running", func() bool { _, err := os.Stat(started); return err == nil })
			out, err := s.Run(context.Background(), "echo second")
			switch {
			case keyed && (err != nil || string(out) != "second\n"):
				t.Errorf("a command beyond MaxSessions, with keys = %q, %v; want it run on a connection of its own", out, err)
			case !keyed && (err == nil || !strings.Contains(err.Error(), "sshd's MaxSessions")):
				t.Errorf("a command beyond MaxSessions, with only the user's login = %v; want an error saying MaxSessions", err)
			}
			if err := returned(t, done, "the first command"); err != nil {
				t.Fatalf("the first command: %v", err)
			}
		})
	}
}

// loginByHand opens the master as the user's cls site login would, and
// returns cfg with a key that logs in nowhere: only that login does.
func loginByHand(t *testing.T, cfg OpenSSHConfig) OpenSSHConfig {
	t.Helper()
	if err := PrivateControlDir(cfg.ControlDir); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cfg.Program, append([]string{"-o", "BatchMode=yes"}, cfg.LoginArgs()...)...).CombinedOutput(); err != nil {
		t.Fatalf("the user's login: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command(cfg.Program, cfg.ControlArgs("exit")...).Run() })
	cfg.KeyFile = filepath.Join(t.TempDir(), "absent")
	return cfg
}

// Sessions bound the CLS's sessions on a master to sshd's MaxSessions:
// commands beyond it wait for one to end and then run, where only the
// user's login can log in (ssh's try of a connection of its own would
// be a failed login); two sites on the login host share the bound; a
// command that waits past its context says why.
func TestOpenSSHSessionsBounded(t *testing.T) {
	l, cfg := openSSHLogin(t)
	l.maxSessions.Store(3) // each site's SFTP session and one command
	cfg = loginByHand(t, cfg)
	cfg.Sessions = &Sessions{Max: 3}
	a, b := mustDial(t, cfg), mustDial(t, cfg)
	var runs []<-chan error
	for i := range 4 {
		s := []*OpenSSH{a, b}[i%2]
		runs = append(runs, async(func() error {
			out, err := s.Run(context.Background(), fmt.Sprintf("sleep 0.3; echo %d", i))
			if err == nil && string(out) != fmt.Sprintf("%d\n", i) {
				err = fmt.Errorf("printed %q", out)
			}
			return err
		}))
	}
	for i, done := range runs {
		if err := returned(t, done, "a command"); err != nil {
			t.Errorf("command %d of 4 at once, one session free: %v", i, err)
		}
	}

	hold := async(func() error { _, err := a.Run(context.Background(), "sleep 3"); return err })
	eventually(t, "the free session taken", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		release, err := cfg.Sessions.take(ctx, a.path)
		if err == nil {
			release()
		}
		return err != nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := b.Run(ctx, "echo late"); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "every one of the 3 sessions") {
		t.Errorf("a command waiting past its context for a session = %v; want it to say the sessions stayed in use", err)
	}
	if err := returned(t, hold, "the command holding the session"); err != nil {
		t.Fatal(err)
	}
}

// A tunnel's reverse forward through the master: a connection to the
// port on the login host reaches what dial gives, and the login host's
// key, read there, is what placeholders pin.
func TestOpenSSHForward(t *testing.T) {
	l, cfg := openSSHLogin(t)
	s := mustDial(t, cfg)
	far, near := net.Pipe()
	defer far.Close()
	dialed := make(chan struct{}, 1)
	port, err := s.Forward("127.0.0.1:0", func() (net.Conn, error) { dialed <- struct{}{}; return near, nil })
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("ping"))
	buf := make([]byte, 4)
	far.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadFull(far, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("through the forward: %q, %v", buf, err)
	}
	b, _ := os.ReadFile(l.knownHosts)
	_, _, want, _, _, err := ssh.ParseKnownHosts(b)
	if err != nil {
		t.Fatal(err)
	}
	if k := s.HostKey(); k == nil || !bytes.Equal(k.Marshal(), want.Marshal()) {
		t.Fatalf("HostKey = %v, want known_hosts' %s", k, ssh.FingerprintSHA256(want))
	}
}

// The key placeholders pin is the one the user's known_hosts has for the
// login host, ed25519 first; none where only a CA vouches, or the file
// is not there or is writable by others.
func TestKnownHostKey(t *testing.T) {
	dir := t.TempDir()
	key := func() ssh.PublicKey {
		_, priv, _ := ed25519.GenerateKey(rand.Reader)
		s, _ := ssh.NewSignerFromKey(priv)
		return s.PublicKey()
	}
	ecKey := func() ssh.PublicKey {
		priv, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		s, _ := ssh.NewSignerFromKey(priv)
		return s.PublicKey()
	}
	line := func(marker, host string, k ssh.PublicKey) string {
		return strings.TrimSpace(marker+" "+host) + " " + string(ssh.MarshalAuthorizedKey(k))
	}
	ed, ec, ca := key(), ecKey(), key()
	write := func(name string, mode os.FileMode, lines ...string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(strings.Join(lines, "")), 0o600)
		os.Chmod(p, mode)
		return p
	}
	both := write("both", 0o600, line("", "[login]:2222", ec), line("", "[login]:2222", ed), line("", "other", key()))
	caOnly := write("ca", 0o600, line("@cert-authority", "*", ca))
	open := write("open", 0o666, line("", "[login]:2222", ed))
	for _, c := range []struct {
		name  string
		files []string
		want  ssh.PublicKey
	}{
		{"ed25519 first", []string{both}, ed},
		{"a CA's line is no host's key", []string{caOnly}, nil},
		{"the CA's file, then the host's", []string{caOnly, both}, ed},
		{"missing", []string{filepath.Join(dir, "absent")}, nil},
		{"writable by others", []string{open}, nil},
	} {
		got := knownHostKey(c.files, "login:2222")
		if (got == nil) != (c.want == nil) || got != nil && !bytes.Equal(got.Marshal(), c.want.Marshal()) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

// eventually waits up to 30 s for cond, failing the test as what.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// The socket directory is the user's alone: made 0700, made private
// again if it was opened, and refused, untouched, where it is a link
// (another user's, in the temporary directory, aimed at a directory of
// this user's) or not a directory.
func TestPrivateControlDir(t *testing.T) {
	dir := t.TempDir()
	fresh := filepath.Join(dir, "fresh")
	if err := PrivateControlDir(fresh); err != nil {
		t.Fatal(err)
	}
	opened := filepath.Join(dir, "opened")
	os.Mkdir(opened, 0o755)
	if err := PrivateControlDir(opened); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{fresh, opened} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v, %v; want a directory of mode 0700", d, fi.Mode(), err)
		}
	}
	target := filepath.Join(dir, "target")
	os.Mkdir(target, 0o755)
	link := filepath.Join(dir, "link")
	os.Symlink(target, link)
	if err := PrivateControlDir(link); err == nil {
		t.Error("a link was taken for the socket directory")
	}
	if fi, _ := os.Stat(target); fi.Mode().Perm() != 0o755 {
		t.Errorf("the link's target was changed to %v", fi.Mode().Perm())
	}
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o600)
	if err := PrivateControlDir(file); err == nil {
		t.Error("a file was taken for the socket directory")
	}
}
