package login

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/mq-hpc/mq/internal/shellwords"
	"github.com/mq-hpc/mq/internal/sshkey"
)

// Runner runs commands and places files on a site's login host.
type Runner interface {
	// Run runs a shell command and returns its stdout. A non-zero exit is
	// an error carrying the first line of stderr.
	Run(ctx context.Context, cmd string) ([]byte, error)
	// Put makes the file at path hold data with mode, writing only if its
	// checksum differs, and verifies what was written. It reports whether
	// it wrote.
	Put(ctx context.Context, path string, data []byte, mode os.FileMode) (bool, error)
	Close() error
}

// Tunneler is a Runner that can carry a tunnel: SSH.
type Tunneler interface {
	// Forward listens on bind on the login host and joins each
	// connection made there to dial; it returns the port bound.
	Forward(bind string, dial func() (net.Conn, error)) (int, error)
	// HostKey is the key the login host showed (and known_hosts vouched for).
	HostKey() ssh.PublicKey
}

// SSHConfig is how to reach a login host.
type SSHConfig struct {
	User, Addr string // Addr is host:port
	// JumpUser and JumpAddr (host:port) are a jump host the login host
	// is reached through, as OpenSSH's ProxyJump; "" for none. Its key
	// is checked against the same known_hosts, and the same keys log in.
	JumpUser, JumpAddr string
	// KeyFile is a private key; "" means the user's ssh-agent
	// ($SSH_AUTH_SOCK), then ~/.ssh/id_ed25519, id_ecdsa, id_rsa. A key
	// file's OpenSSH certificate, FILE-cert.pub, is offered before it.
	KeyFile string
	// KnownHosts verifies the host key; "" means ~/.ssh/known_hosts.
	KnownHosts string
	Timeout    time.Duration // dial and handshake; default 20 s
	// Keepalive is how often the connection is probed; one probe
	// unanswered for three times as long ends it. Default 15 s.
	Keepalive time.Duration
}

// ErrHostKeyChanged means the login host offered a key other than the one
// known_hosts has for it: maybe an attack, so nothing is sent.
var ErrHostKeyChanged = errors.New("the login host's key has changed")

// ErrHostUnknown means known_hosts has no key for the login host.
var ErrHostUnknown = errors.New("the login host is not in known_hosts")

// Permanent reports whether err will not go away by retrying soon: the
// host key is wrong or unknown, or no key was accepted. (The Manager still
// retries, slowly, since the user may fix known_hosts.)
func Permanent(err error) bool {
	return errors.Is(err, ErrHostKeyChanged) || errors.Is(err, ErrHostUnknown) || errors.Is(err, errAuth) || errors.Is(err, errJumpAuth) || errors.Is(err, errOpenSSHAuth)
}

var (
	errAuth     = errors.New("the login host accepted none of our keys")
	errJumpAuth = errors.New("the jump host accepted none of our keys")
)

// SSH is a connection to a login host: one SSH connection, one session per
// command, SFTP for files. It is safe for concurrent use.
type SSH struct {
	cfg     SSHConfig
	client  *ssh.Client
	jump    *ssh.Client // the connection client goes through; nil for none
	hostKey ssh.PublicKey
	dead    chan struct{}
	sftpMu  sync.Mutex
	sftp    *sftpSession
	sftpEnd chan struct{} // closed when sftp's session is gone
	// ended counts the SFTP sessions ended alone (EndSFTP).
	ended int
}

var _ Tunneler = (*SSH)(nil)

func algorithmsFor(keyType string) []string {
	if keyType == ssh.KeyAlgoRSA {
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	}
	return []string{keyType}
}

// authMethods: the key file; else the ssh-agent's keys, then the
// default keys. A key file's certificate (sshkey.CertFile), if it has
// one, is offered before the key, as OpenSSH does; skipped says why a
// certificate found is not ("" if none was skipped, else ending "; "),
// for the error if no key is accepted. It is called at each connection,
// so a certificate renewed on disk is used from the next on.
func authMethods(keyFile, home string) (methods []ssh.AuthMethod, skipped string, closeAuth func(), err error) {
	none := func() {}
	now := time.Now()
	withCert := func(path string, key ssh.Signer) []ssh.Signer {
		cert, err := sshkey.LoadCertSigner(path, key, now)
		if err == nil {
			return []ssh.Signer{cert, key}
		}
		if !errors.Is(err, fs.ErrNotExist) {
			skipped += err.Error() + "; "
		}
		return []ssh.Signer{key}
	}
	if keyFile != "" {
		signer, err := sshkey.LoadSigner(keyFile)
		if err != nil {
			return nil, "", none, err
		}
		return []ssh.AuthMethod{ssh.PublicKeys(withCert(keyFile, signer)...)}, skipped, none, nil
	}
	var files []ssh.Signer
	for _, name := range []string{"id_ed25519", "id_ecdsa", "id_rsa"} {
		path := filepath.Join(home, ".ssh", name)
		s, err := sshkey.LoadSigner(path)
		switch {
		case err == nil:
			files = append(files, withCert(path, s)...)
		case !errors.Is(err, fs.ErrNotExist):
			// Said if no key is accepted: a key the user meant to be
			// used (encrypted, or open to others) was not offered.
			skipped += err.Error() + ", not offered; "
		}
	}
	var fromAgent func() ([]ssh.Signer, error)
	closeAuth = none
	if sock := os.Getenv("SSH_AUTH_SOCK"); sock != "" {
		if c, err := net.Dial("unix", sock); err == nil {
			fromAgent = agent.NewClient(c).Signers
			closeAuth = func() { c.Close() }
		}
	}
	if fromAgent == nil && len(files) == 0 {
		why := ""
		if skipped != "" {
			why = " (" + strings.TrimSuffix(skipped, "; ") + ")"
		}
		return nil, "", none, fmt.Errorf("no SSH key: give --key, run an ssh-agent (ssh-add loads an encrypted key into it), or have an unencrypted ~/.ssh/id_ed25519%s", why)
	}
	// One method for both: x/crypto tries each method (by its name,
	// "publickey") once, so keys in a second were never offered.
	signers := func() ([]ssh.Signer, error) {
		var all []ssh.Signer
		if fromAgent != nil {
			// An agent that fails leaves the key files.
			all, _ = fromAgent()
		}
		seen := make(map[string]bool, len(all))
		for _, s := range all {
			seen[string(s.PublicKey().Marshal())] = true
		}
		for _, s := range files {
			if !seen[string(s.PublicKey().Marshal())] {
				all = append(all, s)
			}
		}
		return all, nil
	}
	return []ssh.AuthMethod{ssh.PublicKeysCallback(signers)}, skipped, closeAuth, nil
}

// keepalive drops a connection whose peer went silent, so the next command
// fails fast and the site reconnects. It cuts it (Cut): Close would wait
// for an upload stuck on the silent peer's full window, for ever.
func (s *SSH) keepalive() {
	t := time.NewTicker(s.cfg.Keepalive)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-s.dead:
			return
		}
		switch err := s.probe(3 * s.cfg.Keepalive); {
		case errors.Is(err, errUnanswered):
			s.Cut()
			return
		case err != nil:
			s.Close()
			return
		}
	}
}

var errUnanswered = errors.New("keepalive unanswered")

// probe sends a keepalive and waits at most limit for its answer:
// errUnanswered past it, else the request's error (the connection gone).
// A peer that stopped reading leaves the request's write, not only its
// answer, waiting: the goroutine ends with the connection.
func (s *SSH) probe(limit time.Duration) error {
	done := make(chan error, 1)
	go func() {
		_, _, err := s.client.SendRequest("keepalive@openssh.com", true, nil)
		done <- err
	}()
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return errUnanswered
	}
}

// HostKey is the login host's key, as checked against known_hosts; of
// a host certificate, the key it certifies. Placeholders pin it (tunnel
// mode), and a certificate is renewed under the same key: a pinned
// certificate would be refused once the host shows its next one.
func (s *SSH) HostKey() ssh.PublicKey {
	if c, ok := s.hostKey.(*ssh.Certificate); ok {
		return c.Key
	}
	return s.hostKey
}

// Done is closed when the connection is gone.
func (s *SSH) Done() <-chan struct{} { return s.dead }

// Close closes the connection.
func (s *SSH) Close() error {
	if !s.sftpMu.TryLock() {
		// An SFTP session being opened holds sftpMu until the server
		// answers, and only the connection's end makes it return
		// (keepalive closing a dead connection waited for ever).
		err := s.client.Close()
		s.sftpMu.Lock()
		s.closeSFTPLocked()
		s.sftpMu.Unlock()
		return err
	}
	// SFTP first: transfers under way end as the SFTP client's, which
	// the stager tells from a lost connection.
	s.closeSFTPLocked()
	s.sftpMu.Unlock()
	return s.client.Close()
}

func (s *SSH) closeSFTPLocked() {
	if s.sftp != nil {
		s.sftp.end()
		s.sftp = nil
	}
}

// ConnError marks an error of the connection rather than of a command: the
// caller should reconnect.
type ConnError struct{ Err error }

func (e *ConnError) Error() string { return "connection to the login host lost: " + e.Err.Error() }
func (e *ConnError) Unwrap() error { return e.Err }

// profile makes commands see the environment of a login (batch systems'
// settings live in /etc/profile.d and ~/.profile on most clusters) without
// letting anything the profile prints mix with the command's output; and
// it runs the command under /bin/sh whatever the user's login shell is.
const profile = `{ [ -r /etc/profile ] && . /etc/profile; [ -r "$HOME/.profile" ] && . "$HOME/.profile"; } </dev/null >/dev/null 2>&1; `

// Run runs cmd with /bin/sh on the login host.
func (s *SSH) Run(ctx context.Context, cmd string) ([]byte, error) {
	sess, err := s.session(ctx)
	if err != nil {
		return nil, err
	}
	defer sess.Close()
	// Held open, never written: its end is the session's (withSession).
	if _, err := sess.StdinPipe(); err != nil {
		return nil, &ConnError{err}
	}
	stdout, stderr := &capped{max: maxRunStdout}, &capped{max: maxRunStderr}
	sess.Stdout, sess.Stderr = stdout, stderr
	done := make(chan error, 1)
	go func() { done <- sess.Run(withSession(profile + cmd)) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		sess.Signal(ssh.SIGKILL)
		sess.Close()
		return nil, ctx.Err()
	}
	if err != nil {
		var ee *ssh.ExitError
		if errors.As(err, &ee) {
			msg := firstLine(stderr.Bytes())
			if msg == "" {
				msg = firstLine(stdout.Bytes())
			}
			return stdout.Bytes(), fmt.Errorf("%s: exit status %d: %s", CommandName(cmd), ee.ExitStatus(), truncate(msg, 300))
		}
		return nil, &ConnError{err}
	}
	if stdout.over {
		return nil, fmt.Errorf("%s printed more than %d bytes", CommandName(cmd), maxRunStdout)
	}
	return stdout.Bytes(), nil
}

// session opens a session, unless ctx ends first. Opening one is a round
// trip a live sshd answers at once; NewSession alone waits for the
// connection's end, which keepalive finds only after a minute: a command
// on a connection whose peer went silent overran its step's time. At
// ctx's deadline, an opening unanswered for a keepalive interval takes
// the connection for stalled and cuts it, for the site to dial anew; one
// younger (a step's time spent by the commands before it) or a cancel (a
// site's loop stopped for its removal or a change) leaves it, since
// others use it: a tunnel's placeholders, transfers.
func (s *SSH) session(ctx context.Context) (*ssh.Session, error) {
	start := time.Now()
	type opened struct {
		sess *ssh.Session
		err  error
	}
	ch := make(chan opened, 1)
	go func() {
		sess, err := s.client.NewSession()
		ch <- opened{sess, err}
	}()
	select {
	case o := <-ch:
		if o.err != nil {
			return nil, &ConnError{o.err}
		}
		return o.sess, nil
	case <-ctx.Done():
		go func() {
			if o := <-ch; o.sess != nil {
				o.sess.Close()
			}
		}()
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) || time.Since(start) < s.cfg.Keepalive {
			return nil, ctx.Err()
		}
		s.Cut()
		return nil, &ConnError{fmt.Errorf("no session opened within the command's time: %w", ctx.Err())}
	}
}

// Cut ends the connection at once, the SFTP session on it too: every
// request waiting on it returns. It is what a peer gone silent calls
// for (keepalive, a command's opening unanswered, a stalled transfer
// whose connection no longer answers: EndSFTP).
func (s *SSH) Cut() {
	if s.jump != nil {
		// Its socket first: closing the login connection, a channel of
		// it, would wait on the silent jump host's full window.
		s.jump.Close()
	}
	s.client.Close()
	s.sftpMu.Lock()
	s.closeSFTPLocked()
	s.sftpMu.Unlock()
}

// withSession is the exec request that runs cmd with /bin/sh, so that it
// ends with its session. A command the CLS gave up on (a qstat hung on a
// batch server that does not answer, past its step's minute) ran on for
// ever: sshd does not kill a session's processes when the session
// closes, a signal request reaches only the shell, if sshd delivers it
// at all, and each step left another, until the user's process limit on
// the login host was reached. Here the command runs in the background
// and a watcher waits on the session's stdin, which the client keeps
// open and never writes: sshd closes it when the client closes the
// session or the connection drops, and the watcher then kills the
// command's process group (sshd makes the session's shell a session
// leader). The command's stdin is /dev/null, as before, and its status
// the shell's. It is passed as an argument, for eval, rather than
// pasted in: any command fits, and no newline is added, which a csh
// login shell refuses inside quotes.
func withSession(cmd string) string {
	const watch = `exec 3<&0; (eval "$1") </dev/null 3<&- & c=$!; ` +
		`{ read -r x <&3; kill -9 0; } >/dev/null 2>&1 & w=$!; exec 3<&-; ` +
		`wait $c; s=$?; kill $w 2>/dev/null; exit $s`
	return "exec /bin/sh -c " + shellwords.Quote(watch) + " sh " + shellwords.Quote(cmd)
}

// What a login host's command may print: on stdout, a listing of the
// most placeholders a site has (10,000) is a few MiB; of stderr only the
// first line is kept. A command that printed without end held the CLS's
// memory for as long as its step may take (a minute).
const (
	maxRunStdout = 64 << 20
	maxRunStderr = 64 << 10
)

// capped keeps the first max bytes written to it and drops the rest,
// noting that it did (over), so the command's output is still read to
// its end and the command can exit. (Not an embedded bytes.Buffer: its
// ReadFrom would let io.Copy go around Write.)
type capped struct {
	b    bytes.Buffer
	max  int
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.b.Len(); len(p) > room {
		c.b.Write(p[:max(room, 0)])
		c.over = true
		return len(p), nil
	}
	return c.b.Write(p)
}

func (c *capped) Bytes() []byte { return c.b.Bytes() }

// batchPrograms are the batch systems' commands the sites run, which name
// a failed command rather than the shell around them (PBS's listing
// begins with a printf).
var batchPrograms = []string{"qsub", "qstat", "qdel", "qselect", "qalter", "qrls", "sbatch", "squeue", "scancel", "sacct", "scontrol"}

// CommandName is the program cmd runs first, for its error messages: the
// first batch system command it runs, else the first word, or what a
// leading out=$(...) runs (PBS's cancel).
func CommandName(cmd string) string {
	f := strings.Fields(cmd)
	if len(f) == 0 {
		return "command"
	}
	for _, w := range f {
		if i := strings.LastIndex(w, "$("); i >= 0 {
			w = w[i+2:]
		}
		if slices.Contains(batchPrograms, w) {
			return w
		}
	}
	if _, sub, ok := strings.Cut(f[0], "=$("); ok && sub != "" {
		return sub
	}
	return f[0]
}

// writeTemp writes data to tmp, a new file, made private (0600) before
// its first byte. (Private at its creation it is not: pkg/sftp's open
// sends no mode, so the file is made with the login host's umask, and
// whoever opened it before the chmod keeps reading it: upload makes it
// in a directory of its own for that.)
func writeTemp(c *sftp.Client, tmp string, data []byte) error {
	f, err := c.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return fmt.Errorf("sftp create %s: %w", tmp, err)
	}
	err = f.Chmod(0o600)
	if err == nil {
		_, err = f.Write(data)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Put uploads data to path over SFTP unless the file already holds it
// (upload).
func (s *SSH) Put(ctx context.Context, p string, data []byte, mode os.FileMode) (bool, error) {
	// SFTP requests take no context: an sftp-server stuck (a home on a
	// network filesystem that hangs), sshd still answering, held the
	// upload and the site for ever. Once ctx ends, and Put is stuck
	// (stuck), the SFTP session it uses is ended as a stalled
	// transfer's is (EndSFTP): alone while the connection answers a
	// keepalive, so the tunnel and the site's commands on it go on;
	// with the connection otherwise.
	var u sftpUse
	returned := make(chan struct{})
	defer close(returned)
	defer context.AfterFunc(ctx, func() {
		if c := u.over(); c != nil && s.stuck(ctx, returned) {
			s.EndSFTP(c)
		}
	})()
	client := func() (*sftp.Client, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c, err := s.sftpClient(ctx)
		if err != nil {
			return nil, err
		}
		if err := u.use(ctx, c); err != nil {
			return nil, err
		}
		return c, nil
	}
	wrote, err := put(ctx, s.Run, client, p, data, mode)
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w (%w)", err, ctx.Err())
	}
	return wrote, err
}

// put makes the file at p hold data with mode over the SFTP session
// client gives, unless it holds it already: checksums by sha256sum
// through run where the login host has it, else read back over SFTP.
func put(ctx context.Context, run func(context.Context, string) ([]byte, error), client func() (*sftp.Client, error), p string, data []byte, mode os.FileMode) (bool, error) {
	sum := sha256.Sum256(data)
	want := hex.EncodeToString(sum[:])
	if got, err := remoteSum(ctx, run, p, client); err == nil && got == want {
		return false, nil
	}
	c, err := client()
	if err != nil {
		return false, err
	}
	verify := func(tmp string) error {
		got, err := remoteSum(ctx, run, tmp, client)
		if err == nil && got != want {
			err = fmt.Errorf("checksum %s, want %s", got, want)
		}
		return err
	}
	return true, upload(c, p, data, mode, verify)
}

// stuck says, once ctx has ended, whether the call it bounds is to be
// taken for stuck: at its deadline, yes; at a cancel, if it has not
// returned (returned closed) within a keepalive interval. A cancel stops
// a site's loop, for its removal, a change or the CLS's shutdown, which
// wait for the loop: an upload the cancel left on a hung sftp-server
// held them for ever. One only slow, the SFTP session shared
// (staging), is left to end.
func (s *SSH) stuck(ctx context.Context, returned <-chan struct{}) bool {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return true
	}
	t := time.NewTimer(s.cfg.Keepalive)
	defer t.Stop()
	select {
	case <-returned:
		return false
	case <-t.C:
		return true
	}
}

// sftpUse is the SFTP session an upload uses, for its context's end to
// end (Put).
type sftpUse struct {
	mu    sync.Mutex
	c     *sftp.Client
	ended bool
}

// use records c as in use, unless the upload's context ended already
// (over ran): then c is not used, and ctx's error is returned.
func (u *sftpUse) use(ctx context.Context, c *sftp.Client) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.ended {
		return ctx.Err()
	}
	u.c = c
	return nil
}

// over marks the upload's context ended and returns the session in use,
// if any.
func (u *sftpUse) over() *sftp.Client {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.ended = true
	return u.c
}

// upload writes data to a temporary file, checks it with verify, and
// renames it to p: a running agent binary is never overwritten in place,
// and a half-written file is never used. The temporary file is made in a
// new directory of its own, private (0700) before the file is made in
// it: the site's directory may have stood open to others before the site
// was added (mkdir -p keeps its mode), and another user of the login
// host who opened the file there before its chmod (inotify tells when it
// appears) would read the placeholder key through that descriptor as it
// is written. Into a private directory no one else can look up a name,
// whatever descriptor of the directory they hold.
func upload(c *sftp.Client, p string, data []byte, mode os.FileMode, verify func(tmp string) error) error {
	dir := path.Dir(p)
	if err := c.MkdirAll(dir); err != nil {
		return fmt.Errorf("sftp mkdir %s: %w", dir, err)
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	tmpDir := path.Join(dir, ".mq-upload-"+hex.EncodeToString(rnd[:]))
	if err := c.Mkdir(tmpDir); err != nil {
		return fmt.Errorf("sftp mkdir %s: %w", tmpDir, err)
	}
	tmp := path.Join(tmpDir, path.Base(p))
	defer func() {
		c.Remove(tmp) // gone once renamed
		c.RemoveDirectory(tmpDir)
	}()
	err := c.Chmod(tmpDir, 0o700)
	if err == nil {
		err = privateDir(c, tmpDir)
	}
	if err == nil {
		err = writeTemp(c, tmp, data)
	}
	if err == nil {
		err = c.Chmod(tmp, mode)
	}
	if err != nil {
		return fmt.Errorf("sftp upload %s: %w", p, err)
	}
	if err := verify(tmp); err != nil {
		return fmt.Errorf("upload of %s did not verify: %w", p, err)
	}
	if err := c.PosixRename(tmp, p); err != nil {
		if err2 := c.Rename(tmp, p); err2 != nil {
			return fmt.Errorf("sftp rename %s: %w", p, err)
		}
	}
	return nil
}

// privateDir checks that dir is a directory others cannot enter (a
// filesystem that ignores chmod would leave it open).
func privateDir(c *sftp.Client, dir string) error {
	fi, err := c.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() || fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s is %v after chmod 700: it cannot be made private", dir, fi.Mode())
	}
	return nil
}

// remoteSum is the SHA-256 of a remote file: by sha256sum where the login
// host has it, else by reading the file back over SFTP.
func remoteSum(ctx context.Context, run func(context.Context, string) ([]byte, error), p string, client func() (*sftp.Client, error)) (string, error) {
	out, err := run(ctx, "sha256sum "+shellwords.Quote(p)+" 2>/dev/null")
	if err == nil {
		if f := strings.Fields(string(out)); len(f) > 0 && len(f[0]) == 64 {
			return f[0], nil
		}
	}
	var ce *ConnError
	if errors.As(err, &ce) {
		return "", err
	}
	c, err := client()
	if err != nil {
		return "", err
	}
	f, err := c.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Forward listens on bind (host:port) on the login host and connects every
// connection made there to dial on this side: a reverse port forward,
// through which placeholders that cannot reach the CLS reach it. It returns
// the port bound; the forward ends with the connection.
func (s *SSH) Forward(bind string, dial func() (net.Conn, error)) (int, error) {
	ln, err := s.client.Listen("tcp", bind)
	if err != nil {
		return 0, fmt.Errorf("reverse forward on the login host (%s): %w", bind, err)
	}
	go func() {
		defer ln.Close()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				l, err := dial()
				if err != nil {
					return
				}
				defer l.Close()
				go func() {
					io.Copy(l, c)
					if cw, ok := l.(interface{ CloseWrite() error }); ok {
						cw.CloseWrite()
					}
				}()
				io.Copy(c, l)
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// firstLine is the first non-empty line of out, trimmed.
func firstLine(out []byte) string {
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}

// truncate shortens s to n bytes for an error message.
func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
