package login

import (
	"bytes"
	"cmp"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/mq-hpc/mq/internal/filelock"
	"github.com/mq-hpc/mq/protocol"
)

// OpenSSHConfig is how the system's ssh command reaches a login host, for
// a site added with --openssh: the user's ssh config applies whole
// (ProxyCommand, several jumps, Kerberos, Match), and a login host that
// asks for a second factor at each login is reached through a master
// connection the user opened once (cls site login, LoginArgs).
type OpenSSHConfig struct {
	// Dest is ssh's destination: a Host of the user's ssh config, or
	// [user@]host. Port, Jump, KeyFile and KnownHosts, if set, are given
	// to ssh as -p, -J, -i and UserKnownHostsFile.
	Dest                      string
	Port                      int
	Jump, KeyFile, KnownHosts string
	// ControlDir holds the master connections' sockets (one per
	// destination, ssh's %C). It is made private to the user.
	ControlDir string
	// Program is the ssh command; "" is ssh on $PATH.
	Program string
	// Timeout bounds the connection to the login host (ConnectTimeout)
	// and the first answer on it; default 20 s.
	Timeout time.Duration
	// LoginHint is what to run to log in by hand (a master connection),
	// said when the login host refused every way ssh had without asking.
	LoginHint string
	// ForwardName names a tunnel's reverse forward, the same for a site
	// across restarts of the CLS: asked again of a master that outlived
	// the CLS, the same forward is taken up, not refused.
	ForwardName string
	// Persist is how long a master the CLS started outlives the last
	// connection on it; default 60 s.
	Persist time.Duration
	// Sessions, shared by every site of the CLS, bounds the sessions
	// open at once on each master; nil bounds none.
	Sessions *Sessions
}

// ControlDir is where the master sockets of the CLS of home live:
// home/ssh, unless a socket's path there would be too long for a Unix
// socket (ssh's %C is 40 characters, and it adds 17 while it binds);
// then a directory of the user's in the system's temporary directory.
func ControlDir(home string) string {
	if d := filepath.Join(home, "ssh"); len(d)+1+40+17 < maxSocketPath {
		return d
	}
	return filepath.Join(os.TempDir(), "mq-ssh-"+strconv.Itoa(os.Getuid()))
}

// maxSocketPath is the shortest sun_path of the systems mq runs on
// (104 bytes on the BSDs and macOS, 108 on Linux).
const maxSocketPath = 104

// errOpenSSHAuth: the login host refused ssh's ways to log in that ask
// nothing (keys, agent, Kerberos): it wants a password or a second
// factor, which only a master connection opened by hand gives.
var errOpenSSHAuth = errors.New("the login host refused ssh's login without asking (it may want a password or a second factor)")

// NeedsLogin says err is a refusal that only the user's own login (cls
// site login) gets past.
func NeedsLogin(err error) bool { return errors.Is(err, errOpenSSHAuth) }

// args are ssh's options for a connection that never asks (BatchMode),
// checks the host key strictly, and rides on the destination's master
// connection if one runs (ControlMaster=no: it never becomes one), then
// extra, then "--" and the destination.
func (c OpenSSHConfig) args(master bool, extra ...string) []string {
	cm := "no"
	if master {
		cm = "yes"
	}
	a := []string{"-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "-o", "LogLevel=ERROR",
		"-o", "ControlMaster=" + cm, "-o", "ControlPath=" + c.controlPath(),
		"-o", "ConnectTimeout=" + strconv.Itoa(int(c.timeout().Seconds())),
		"-o", keepalive, "-o", keepaliveCount}
	return append(append(a, c.common()...), extra...)
}

// A master connection probes the login host every 5 s, and gives up
// after 30 s without an answer. The probe is also when a master finds a
// command's ssh gone (its context ended) and ends its session, which
// kills the command (withSession): it waits on nothing else then.
const (
	keepalive      = "ServerAliveInterval=5"
	keepaliveCount = "ServerAliveCountMax=6"
)

// common are the options of a connection as the site's flags say.
func (c OpenSSHConfig) common() []string {
	var a []string
	if c.Port > 0 {
		a = append(a, "-p", strconv.Itoa(c.Port))
	}
	if c.Jump != "" {
		a = append(a, "-J", c.Jump)
	}
	// ssh expands %-tokens in both.
	if c.KeyFile != "" {
		a = append(a, "-i", strings.ReplaceAll(c.KeyFile, "%", "%%"))
	}
	if c.KnownHosts != "" {
		a = append(a, "-o", "UserKnownHostsFile="+sshQuote(strings.ReplaceAll(c.KnownHosts, "%", "%%")))
	}
	return a
}

// LoginArgs are ssh's arguments that open the master connection the
// CLS's connections to this login host ride on, asking the user what the
// login host asks (a password, a one-time code), then running true there
// and staying in the background (ControlPersist) until the login host's
// connection ends or ssh -O exit. The command, rather than -f -N, makes
// ssh's exit status say a command ran: a login host can accept the
// answers and then close the connection (its PAM refusing the session,
// say), where -f has gone to the background already and exits 0.
func (c OpenSSHConfig) LoginArgs() []string {
	a := []string{"-o", "ControlMaster=yes", "-o", "ControlPath=" + c.controlPath(), "-o", "ControlPersist=yes",
		"-o", keepalive, "-o", keepaliveCount, "-n"}
	return append(append(a, c.common()...), "--", c.Dest, "true")
}

// ControlArgs are ssh's arguments that ask the destination's master
// connection to do op (ssh -O: check, exit).
func (c OpenSSHConfig) ControlArgs(op string) []string {
	return c.args(false, "-O", op, "--", c.Dest)
}

func (c OpenSSHConfig) controlPath() string {
	return sshQuote(strings.ReplaceAll(c.ControlDir, "%", "%%") + "/%C")
}

func (c OpenSSHConfig) timeout() time.Duration {
	if c.Timeout <= 0 {
		return 20 * time.Second
	}
	return c.Timeout
}

func (c OpenSSHConfig) persist() time.Duration {
	if c.Persist <= 0 {
		return 60 * time.Second
	}
	return c.Persist
}

func (c OpenSSHConfig) program() string {
	if c.Program == "" {
		return "ssh"
	}
	return c.Program
}

// sshQuote is p as ssh reads an option's value: in double quotes when it
// has a space (paths with quotes are refused by Validate).
func sshQuote(p string) string {
	if strings.ContainsAny(p, " \t") {
		return `"` + p + `"`
	}
	return p
}

// OpenSSH is a connection to a login host through the system's ssh: a
// master connection (the user's, from cls site login, or one it starts
// where ssh logs in without asking, shared by the CLS's sites on that
// login host), one ssh process per command on it, and one SFTP session
// (ssh -s sftp) for files, whose end is the connection's. It is safe for
// concurrent use.
type OpenSSH struct {
	cfg         OpenSSHConfig
	path        string // the master's socket, as ssh -G expands it
	user, login string // as ssh resolves the destination: login is host:port
	// knownHosts are the files ssh checks the login host's key in, by
	// keyAddr (its HostKeyAlias, if it has one).
	knownHosts []string
	keyAddr    string

	proc *exec.Cmd // the SFTP session's ssh
	sftp *sftp.Client

	dead     chan struct{}
	deadOnce sync.Once

	mu        sync.Mutex
	closed    bool
	hostKey   ssh.PublicKey
	forwards  []string // -R specs to cancel at Close
	listeners []net.Listener
}

var (
	_ Runner   = (*OpenSSH)(nil)
	_ Tunneler = (*OpenSSH)(nil)
	_ Resolved = (*OpenSSH)(nil)
)

// DialOpenSSH connects to the login host with the system's ssh: it rides
// on the destination's master connection if one answers, else starts one
// (which works where ssh logs in without asking: keys, the agent,
// Kerberos), then opens the SFTP session, which keeps the master up.
func DialOpenSSH(ctx context.Context, cfg OpenSSHConfig) (*OpenSSH, error) {
	return dialOpenSSH(ctx, cfg, nil)
}

// OpenSSHDialer dials one site's login host as DialOpenSSH does, but
// once the login host has refused a login of the CLS's own it tries none
// again (each is a failed login there, and centres ban an address after
// a run of them) until a master answers: the user's, from cls site
// login. Until then a dial is local (ssh -G, ssh -O check) and returns
// the refusal.
type OpenSSHDialer struct {
	Config  OpenSSHConfig
	refused atomic.Pointer[error]
}

// Dial connects to the login host (DialOpenSSH).
func (d *OpenSSHDialer) Dial(ctx context.Context) (*OpenSSH, error) {
	s, err := dialOpenSSH(ctx, d.Config, d.refused.Load())
	switch {
	case err == nil:
		d.refused.Store(nil)
	case errors.Is(err, errOpenSSHAuth):
		d.refused.Store(&err)
	}
	return s, err
}

// dialOpenSSH is DialOpenSSH; with refused set, it starts no master of
// its own and returns *refused where none answers.
func dialOpenSSH(ctx context.Context, cfg OpenSSHConfig, refused *error) (*OpenSSH, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*cfg.timeout())
	defer cancel()
	if err := PrivateControlDir(cfg.ControlDir); err != nil {
		return nil, err
	}
	s := &OpenSSH{cfg: cfg, dead: make(chan struct{})}
	if err := s.resolve(ctx); err != nil {
		return nil, err
	}
	if !s.masterUp(ctx) {
		if refused != nil {
			return nil, *refused
		}
		if err := s.startMaster(ctx); err != nil {
			return nil, err
		}
	}
	if err := s.openSFTP(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// PrivateControlDir makes dir, where master sockets live, the user's
// alone: whoever can connect to a master runs commands as the user on
// the login host. A dir that is not the user's, or is a link (another
// user's, in the temporary directory), is refused before anything is
// done to it.
func PrivateControlDir(dir string) error {
	if dir == "" || strings.ContainsAny(dir, "\"'\n") {
		return fmt.Errorf("openssh: bad socket directory %q", dir)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return fmt.Errorf("openssh: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("openssh: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("openssh: %w", err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !fi.IsDir() || !ok || int(st.Uid) != os.Getuid() {
		return fmt.Errorf("openssh: %s is not a directory of this user's (a link, or another user's): remove it", dir)
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("openssh: %w", err)
		}
	}
	return nil
}

// resolve asks ssh what the destination is (ssh -G): the master's socket
// (whose length ssh limits), and the user, host and port compute nodes
// dial in tunnel mode.
func (s *OpenSSH) resolve(ctx context.Context) error {
	out, stderr, err := s.ssh(ctx, nil, s.cfg.args(false, "-G", "--", s.cfg.Dest)...)
	if err != nil {
		return fmt.Errorf("ssh -G %s: %s", s.cfg.Dest, sshMessage(stderr, err))
	}
	var host, port, alias string
	for _, line := range strings.Split(string(out), "\n") {
		k, v, _ := strings.Cut(line, " ")
		switch k {
		case "controlpath":
			s.path = v
		case "user":
			s.user = v
		case "hostname":
			host = v
		case "port":
			port = v
		case "hostkeyalias":
			alias = v
		case "userknownhostsfile", "globalknownhostsfile":
			s.knownHosts = append(s.knownHosts, strings.Fields(v)...)
		}
	}
	s.keyAddr = net.JoinHostPort(cmp.Or(alias, host), port)
	if s.path == "" || s.user == "" || host == "" || port == "" {
		return fmt.Errorf("ssh -G %s: no controlpath, user, hostname or port in its answer", s.cfg.Dest)
	}
	// The user and host go into placeholders' batch scripts (tunnel
	// mode) and messages: one word each.
	for _, v := range []string{s.user, host, port} {
		if strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r == 0x7f || strings.ContainsRune("\"'\\$`;&|<>()", r) }) {
			return fmt.Errorf("ssh -G %s: the user, host name or port it gives, %q, is not one plain word", s.cfg.Dest, protocol.ClipText(v, 100))
		}
	}
	if len(s.path)+17 >= maxSocketPath { // ssh adds 17 while it binds
		return fmt.Errorf("openssh: the master socket path %s is too long for a Unix socket", s.path)
	}
	s.login = net.JoinHostPort(host, port)
	return nil
}

// ssh runs ssh with args, stdin (nil: none), to its end or ctx's.
func (s *OpenSSH) ssh(ctx context.Context, stdin io.Reader, args ...string) (stdout, stderr []byte, err error) {
	cmd := exec.CommandContext(ctx, s.cfg.program(), args...)
	o, e := &capped{max: maxRunStdout}, &capped{max: maxRunStderr}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, o, e
	cmd.WaitDelay = time.Second
	err = cmd.Run()
	return o.Bytes(), e.Bytes(), err
}

// masterUp says whether a master connection answers at the socket.
func (s *OpenSSH) masterUp(ctx context.Context) bool {
	_, _, err := s.ssh(ctx, nil, s.cfg.args(false, "-O", "check", "--", s.cfg.Dest)...)
	return err == nil
}

// startMaster starts a master connection, under a lock that makes the
// dials of one destination at once (two sites on one login host, two
// CLSes of the user) start one: the others find it. A socket no master
// answers (one killed) is removed first: ssh would not bind over it. The
// master goes to the background once logged in (-f), and ends Persist
// after its last connection (ControlPersist): nothing of the CLS's stays
// logged in to the login host once its sites are gone, or it is.
func (s *OpenSSH) startMaster(ctx context.Context) error {
	unlock, err := lockFile(ctx, s.path+".lock")
	if err != nil {
		return err
	}
	defer unlock()
	if s.masterUp(ctx) {
		return nil
	}
	if fi, err := os.Lstat(s.path); err == nil && fi.Mode().Type() == os.ModeSocket {
		os.Remove(s.path)
	}
	// A file, not a pipe: the master in the background holds no end of
	// ours open.
	errFile, err := os.CreateTemp(s.cfg.ControlDir, "login-*.err")
	if err != nil {
		return fmt.Errorf("openssh: %w", err)
	}
	defer os.Remove(errFile.Name())
	defer errFile.Close()
	persist := "ControlPersist=" + strconv.Itoa(max(1, int(s.cfg.persist().Seconds())))
	cmd := exec.CommandContext(ctx, s.cfg.program(), s.cfg.args(true, "-f", "-N", "-o", persist, "--", s.cfg.Dest)...)
	cmd.Stderr = errFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a ^C to the CLS's terminal is the CLS's
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("cannot reach the login host with ssh %s: no login within %v", s.cfg.Dest, 3*s.cfg.timeout())
		}
		b, _ := io.ReadAll(io.NewSectionReader(errFile, 0, maxRunStderr))
		return s.loginError(b, err)
	}
	return nil
}

// lockFile takes an exclusive flock of path, waiting for it until ctx
// ends, and returns its release.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("openssh: %w", err)
	}
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { filelock.Close(f) }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("openssh: lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("openssh: another dial of the same login host holds %s", path)
		case <-time.After(wait):
		}
	}
}

// loginError is why ssh could not log in, from what it printed.
func (s *OpenSSH) loginError(stderr []byte, err error) error {
	msg := sshMessage(stderr, err)
	switch {
	case strings.Contains(msg, "Permission denied"):
		hint := ""
		if s.cfg.LoginHint != "" {
			hint = "; log in by hand, once, with: " + s.cfg.LoginHint + " (the CLS tries no login of its own again until then)"
		}
		return fmt.Errorf("%w: ssh %s: %s%s", errOpenSSHAuth, s.cfg.Dest, strings.TrimSuffix(msg, "."), hint)
	case strings.Contains(msg, "REMOTE HOST IDENTIFICATION HAS CHANGED"), strings.Contains(msg, "Host key for") && strings.Contains(msg, "has changed"):
		return fmt.Errorf("%w: ssh %s: %s", ErrHostKeyChanged, s.cfg.Dest, msg)
	case strings.Contains(msg, "Host key verification failed"), strings.Contains(msg, "No ") && strings.Contains(msg, "host key is known"):
		return fmt.Errorf("%w: ssh %s: %s (ssh %s once and check the key it shows)", ErrHostUnknown, s.cfg.Dest, msg, s.cfg.Dest)
	}
	return fmt.Errorf("cannot reach the login host with ssh %s: %s", s.cfg.Dest, strings.TrimPrefix(msg, "ssh: "))
}

// sshMessage is the line of ssh's stderr that says why it failed: the
// last that is not a banner of @s (said to be of a changed host key if
// the banner says so), else err.
func sshMessage(stderr []byte, err error) string {
	changed := ""
	if strings.Contains(string(stderr), "REMOTE HOST IDENTIFICATION HAS CHANGED") {
		changed = "REMOTE HOST IDENTIFICATION HAS CHANGED: "
	}
	lines := strings.Split(strings.TrimSpace(string(stderr)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" && !strings.HasPrefix(l, "@") {
			return changed + protocol.Printable(truncate(l, 300))
		}
	}
	if err != nil {
		return err.Error()
	}
	return "failed"
}

// openSFTP starts the SFTP session, bounded by ctx: its handshake is the
// first answer on the connection.
func (s *OpenSSH) openSFTP(ctx context.Context) (err error) {
	release, err := s.cfg.Sessions.take(ctx, s.path)
	if err != nil {
		return fmt.Errorf("ssh %s: SFTP session: %w", s.cfg.Dest, err)
	}
	defer func() {
		if err != nil {
			release()
		}
	}()
	cmd := exec.Command(s.cfg.program(), s.cfg.args(false, "-s", "--", s.cfg.Dest, "sftp")...)
	stderr := &capped{max: maxRunStderr}
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("openssh: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := context.AfterFunc(ctx, func() { cmd.Process.Kill() })
	c, err := sftp.NewClientPipe(out, in)
	stop()
	if err != nil {
		cmd.Process.Kill()
		werr := <-exited
		if ctx.Err() != nil {
			return fmt.Errorf("ssh %s: no SFTP session within %v", s.cfg.Dest, 3*s.cfg.timeout())
		}
		return s.loginError(stderr.Bytes(), cmp.Or(werr, err))
	}
	s.proc, s.sftp = cmd, c
	go func() {
		<-exited
		release()
		s.markDead()
	}()
	return nil
}

func (s *OpenSSH) markDead() { s.deadOnce.Do(func() { close(s.dead) }) }

// Done is closed when the connection is gone: its SFTP session ended
// (with the master, if the master ended).
func (s *OpenSSH) Done() <-chan struct{} { return s.dead }

// Login is the user and host:port ssh resolved the destination to.
func (s *OpenSSH) Login() (user, addr string) { return s.user, s.login }

// Resolved is a Runner that knows whom it logged in as, and where
// (OpenSSH: its destination may be a Host of the user's ssh config).
type Resolved interface {
	Login() (user, addr string)
}

// Run runs cmd with /bin/sh on the login host, one ssh process over the
// master connection. The command's stdin is held open until it ends: its
// end (the process killed at ctx's end) ends the command (withSession).
func (s *OpenSSH) Run(ctx context.Context, cmd string) ([]byte, error) {
	select {
	case <-s.dead:
		return nil, &ConnError{errors.New("ssh ended")}
	default:
	}
	release, err := s.cfg.Sessions.take(ctx, s.path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", CommandName(cmd), err)
	}
	defer release()
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer pw.Close()
	defer pr.Close()
	c := exec.CommandContext(ctx, s.cfg.program(), s.cfg.args(false, "--", s.cfg.Dest, withSession(profile+cmd))...)
	stdout, stderr := &capped{max: maxRunStdout}, &capped{max: maxRunStderr}
	c.Stdin, c.Stdout, c.Stderr = pr, stdout, stderr
	c.WaitDelay = time.Second
	err = c.Run()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.ExitCode() == 255 && !s.masterUp(ctx):
		// ssh's own failure: the connection. (With the master up, 255
		// is the command's own status.)
		return nil, &ConnError{fmt.Errorf("ssh %s: %s", s.cfg.Dest, sshMessage(stderr.Bytes(), err))}
	case errors.As(err, &ee) && ee.ExitCode() == 255 && refusedSession(stderr.Bytes()):
		// The master is up but sshd refused it another session, and
		// the connection ssh then tried on its own failed.
		return nil, fmt.Errorf("%s: the login host refused another session on the ssh connection that every site on it shares (its sshd's MaxSessions is below the %d the CLS opens at once), and ssh could not log in on its own: %s",
			CommandName(cmd), s.cfg.Sessions.max(), sshMessage(stderr.Bytes(), err))
	case errors.As(err, &ee):
		msg := firstLine(stderr.Bytes())
		if msg == "" {
			msg = firstLine(stdout.Bytes())
		}
		return stdout.Bytes(), fmt.Errorf("%s: exit status %d: %s", CommandName(cmd), ee.ExitCode(), truncate(msg, 300))
	default:
		return nil, fmt.Errorf("openssh: %w", err)
	}
	if stdout.over {
		return nil, fmt.Errorf("%s printed more than %d bytes", CommandName(cmd), maxRunStdout)
	}
	return stdout.Bytes(), nil
}

// refusedSession says whether ssh's stderr says the master could not
// open a session (sshd's MaxSessions).
func refusedSession(stderr []byte) bool {
	return bytes.Contains(stderr, []byte("Session open refused by peer")) || bytes.Contains(stderr, []byte("administratively prohibited"))
}

// SFTP is the connection's SFTP session.
func (s *OpenSSH) SFTP() (*sftp.Client, error) {
	select {
	case <-s.dead:
		return nil, &ConnError{errors.New("ssh's SFTP session ended")}
	default:
		return s.sftp, nil
	}
}

// Put uploads data to path over SFTP unless the file already holds it
// (upload). SFTP requests take no context: at ctx's end a Put still
// running ends the session, and with it the connection (the site dials
// anew): an sftp-server stuck on a hung filesystem held the site for ever.
func (s *OpenSSH) Put(ctx context.Context, p string, data []byte, mode os.FileMode) (bool, error) {
	defer context.AfterFunc(ctx, s.Cut)()
	client := func() (*sftp.Client, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return s.SFTP()
	}
	wrote, err := put(ctx, s.Run, client, p, data, mode)
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w (%w)", err, ctx.Err())
	}
	return wrote, err
}

// Cut ends the connection at once: its SFTP session. The next use dials
// anew (on the master, if it still answers: one stalled ends at its
// keepalive's limit).
func (s *OpenSSH) Cut() {
	s.markDead()
	if s.proc != nil {
		s.proc.Process.Kill()
	}
}

// readHostKey finds the login host's key placeholders pin: the one the
// user's known_hosts has for it (ed25519 first), else (a certificate
// authority vouches for it) the one it has in /etc/ssh.
func (s *OpenSSH) readHostKey(ctx context.Context) error {
	if k := knownHostKey(s.knownHosts, s.keyAddr); k != nil {
		s.mu.Lock()
		s.hostKey = k
		s.mu.Unlock()
		return nil
	}
	out, err := s.Run(ctx, hostKeyCommand)
	if err != nil {
		return fmt.Errorf("tunnel: cannot read the login host's key in /etc/ssh, which placeholders check: %w", err)
	}
	k, _, _, _, err := ssh.ParseAuthorizedKey(out)
	if err != nil {
		return fmt.Errorf("tunnel: the login host's key in /etc/ssh: %w", err)
	}
	s.mu.Lock()
	s.hostKey = k
	s.mu.Unlock()
	return nil
}

// knownHostKey is the key files (known_hosts) have for addr, ed25519
// first; nil if none does, or only a certificate authority's line. A
// file that is missing, or that another user could write, is skipped.
func knownHostKey(files []string, addr string) ssh.PublicKey {
	probe, _ := ssh.NewPublicKey(ed25519.PublicKey(make([]byte, ed25519.PublicKeySize)))
	var best ssh.PublicKey
	for _, f := range files {
		cb, cas, err := readKnownHosts(f)
		if err != nil {
			continue
		}
		var ke *knownhosts.KeyError
		if !errors.As(cb(addr, &net.TCPAddr{IP: net.IPv4zero}, probe), &ke) {
			continue
		}
		for _, k := range ke.Want {
			if !cas[string(k.Key.Marshal())] && (best == nil || k.Key.Type() == ssh.KeyAlgoED25519 && best.Type() != ssh.KeyAlgoED25519) {
				best = k.Key
			}
		}
	}
	return best
}

// HostKey is the login host's key, read by Forward.
func (s *OpenSSH) HostKey() ssh.PublicKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hostKey
}

// Close ends the connection: the forwards it asked for are cancelled
// (the master outlives it), and its SFTP session ends.
func (s *OpenSSH) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	fw, lns := s.forwards, s.listeners
	s.mu.Unlock()
	for _, spec := range fw {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.timeout())
		s.ssh(ctx, nil, s.cfg.args(false, "-O", "cancel", "-R", spec, "--", s.cfg.Dest)...)
		cancel()
	}
	for _, ln := range lns {
		ln.Close()
	}
	if s.sftp != nil {
		s.sftp.Close()
	}
	if s.proc != nil {
		s.proc.Process.Kill()
	}
	s.markDead()
	return nil
}
