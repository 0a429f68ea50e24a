package login

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/mq-hpc/mq/internal/shellwords"
	"github.com/mq-hpc/mq/internal/sshkey"
)

// DialSSH connects to a login host, checking its key as OpenSSH does;
// through cfg's jump host when it names one.
func DialSSH(ctx context.Context, cfg SSHConfig) (*SSH, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 20 * time.Second
	}
	if cfg.Keepalive <= 0 {
		cfg.Keepalive = 15 * time.Second
	}
	home, _ := os.UserHomeDir()
	khPath := cfg.KnownHosts
	if khPath == "" {
		khPath = filepath.Join(home, ".ssh", "known_hosts")
	}
	auth, skipped, closeAuth, err := authMethods(cfg.KeyFile, home)
	if err != nil {
		return nil, err
	}
	defer closeAuth()
	d := net.Dialer{Timeout: cfg.Timeout, KeepAlive: 15 * time.Second}
	login := hop{role: "login host", user: cfg.User, addr: cfg.Addr, dial: d.DialContext, skipped: skipped}
	var jump *ssh.Client
	if cfg.JumpAddr != "" {
		j := hop{role: "jump host", user: cfg.JumpUser, addr: cfg.JumpAddr, dial: d.DialContext, skipped: skipped}
		if jump, _, err = j.handshake(ctx, khPath, auth, cfg.Timeout); err != nil {
			return nil, err
		}
		login.via, login.dial = cfg.JumpAddr, jump.DialContext
	}
	client, shown, err := login.handshake(ctx, khPath, auth, cfg.Timeout)
	if err != nil {
		if jump != nil {
			jump.Close()
		}
		return nil, err
	}
	s := &SSH{cfg: cfg, client: client, jump: jump, hostKey: shown, dead: make(chan struct{})}
	go func() {
		s.client.Wait()
		if s.jump != nil {
			s.jump.Close() // it carried nothing else
		}
		close(s.dead)
	}()
	go s.keepalive()
	return s, nil
}

// hop is one SSH connection of a dial: to the login host, or to the
// jump host the login host is reached through.
type hop struct {
	role       string // "login host" or "jump host", for errors
	user, addr string
	via        string // the jump host's address when dial goes through it
	skipped    string // why certificates found were not offered (authMethods)
	dial       func(ctx context.Context, network, addr string) (net.Conn, error)
}

// handshake connects to h and logs in with auth, checking h's key against
// the known_hosts file khPath, all within timeout. It returns the client
// and the host key h showed.
func (h hop) handshake(ctx context.Context, khPath string, auth []ssh.AuthMethod, timeout time.Duration) (*ssh.Client, ssh.PublicKey, error) {
	hostKeys, algs, err := hostKeyCheck(khPath, h.addr, h.role)
	if err != nil {
		return nil, nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	nc, err := h.dial(dctx, "tcp", h.addr)
	if err != nil {
		if h.via != "" {
			return nil, nil, fmt.Errorf("the jump host %s cannot reach the login host %s: %w", h.via, h.addr, err)
		}
		return nil, nil, fmt.Errorf("cannot reach the %s %s: %w", h.role, h.addr, err)
	}
	nc.SetDeadline(time.Now().Add(timeout)) // a channel through a jump host has none: the AfterFunc bounds it
	stop := context.AfterFunc(dctx, func() { nc.Close() })
	var shown ssh.PublicKey
	check := func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		shown = key
		return hostKeys(hostname, remote, key)
	}
	sc, chans, reqs, err := ssh.NewClientConn(nc, h.addr, &ssh.ClientConfig{
		User: h.user, Auth: auth, HostKeyCallback: check, HostKeyAlgorithms: algs, Timeout: timeout,
	})
	stop()
	if err != nil {
		nc.Close()
		switch {
		case errors.Is(err, ErrHostKeyChanged), errors.Is(err, ErrHostUnknown):
			return nil, nil, err
		case ctx.Err() == nil && (dctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded)):
			// The timeout closed the connection under the handshake:
			// "use of closed network connection" said nothing of why.
			return nil, nil, fmt.Errorf("ssh %s@%s: no SSH handshake within %s: the %s accepts connections but does not answer (sshd hung or overloaded, or a firewall in the way)", h.user, h.addr, timeout, h.role)
		case strings.Contains(err.Error(), "unable to authenticate"):
			if h.role != "login host" {
				return nil, nil, fmt.Errorf("ssh %s@%s: %w (%s%v)", h.user, h.addr, errJumpAuth, h.skipped, err)
			}
			return nil, nil, fmt.Errorf("ssh %s@%s: %w (%s%v)", h.user, h.addr, errAuth, h.skipped, err)
		}
		return nil, nil, fmt.Errorf("ssh %s@%s: %w", h.user, h.addr, err)
	}
	nc.SetDeadline(time.Time{})
	return ssh.NewClient(sc, chans, reqs), shown, nil
}

// hostKeyCheck returns the known_hosts check for addr and the host key
// algorithms known_hosts has for it: offering only those makes the server
// show a key we can check, instead of one of another type that would look
// like a changed key. Where a certificate authority vouches for addr
// (an "@cert-authority" line), every host certificate algorithm is
// offered first, as the CA may sign keys of any type.
func hostKeyCheck(path, addr, role string) (ssh.HostKeyCallback, []string, error) {
	cb, cas, err := readKnownHosts(path)
	if err != nil {
		return nil, nil, err
	}
	check := func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		err := cb(hostname, remote, key)
		var ke *knownhosts.KeyError
		if errors.As(err, &ke) {
			if len(ke.Want) == 0 {
				return hostKeyError(role, ErrHostUnknown, fmt.Sprintf("%s is not in %s (add its key, e.g. %s >> %s, after checking its fingerprint)", hostname, path, keyscan(hostname), path))
			}
			w := ke.Want[0]
			return hostKeyError(role, ErrHostKeyChanged, fmt.Sprintf("%s offered %s %s but %s line %d has %s %s; if the change is expected, remove that line (ssh-keygen -R) and add the new key",
				hostname, key.Type(), ssh.FingerprintSHA256(key), path, w.Line, w.Key.Type(), ssh.FingerprintSHA256(w.Key)))
		}
		if c, ok := key.(*ssh.Certificate); ok && err != nil {
			// As ssh does: a certificate no authority vouches for is
			// checked again as the plain key it certifies.
			if cb(hostname, remote, c.Key) == nil {
				return nil
			}
			return hostKeyError(role, ErrHostUnknown, fmt.Sprintf("%s showed a host certificate signed by %s %s, which no @cert-authority line of %s vouches for (%v)",
				hostname, c.SignatureKey.Type(), ssh.FingerprintSHA256(c.SignatureKey), path, err))
		}
		return err
	}
	// Ask with a throwaway key: the error lists the keys known for addr,
	// authorities' too.
	var algs []string
	seen := map[string]bool{}
	add := func(a ...string) {
		for _, a := range a {
			if !seen[a] {
				seen[a] = true
				algs = append(algs, a)
			}
		}
	}
	probe, _ := ssh.NewPublicKey(ed25519.PublicKey(make([]byte, ed25519.PublicKeySize)))
	var ke *knownhosts.KeyError
	if err := cb(addr, &net.TCPAddr{IP: net.IPv4(0, 0, 0, 0)}, probe); errors.As(err, &ke) {
		for _, k := range ke.Want {
			if cas[string(k.Key.Marshal())] {
				add(hostCertAlgorithms...)
			}
		}
		for _, k := range ke.Want {
			if !cas[string(k.Key.Marshal())] {
				add(algorithmsFor(k.Key.Type())...)
			}
		}
	}
	return check, algs, nil
}

// hostKeyError is a refusal of the host key of role's host: sentinel
// (ErrHostUnknown, ErrHostKeyChanged) to errors.Is, said as that host's.
// keyscan is the ssh-keyscan command that shows the key of hostname, as
// a known_hosts check names it (host:port).
func keyscan(hostname string) string {
	host, port, err := net.SplitHostPort(hostname)
	switch {
	case err != nil:
		return "ssh-keyscan " + shellwords.Quote(hostname)
	case port == "22":
		return "ssh-keyscan " + shellwords.Quote(host)
	}
	return "ssh-keyscan -p " + shellwords.Quote(port) + " " + shellwords.Quote(host)
}

func hostKeyError(role string, sentinel error, detail string) error {
	if role == "login host" {
		return fmt.Errorf("%w: %s", sentinel, detail)
	}
	return &roleError{msg: strings.Replace(sentinel.Error(), "login host", role, 1) + ": " + detail, err: sentinel}
}

// roleError says err of another host than the login host.
type roleError struct {
	msg string
	err error
}

func (e *roleError) Error() string { return e.msg }
func (e *roleError) Unwrap() error { return e.err }

// hostCertAlgorithms are the host certificate algorithms offered where
// a certificate authority vouches for the login host.
var hostCertAlgorithms = []string{
	ssh.CertAlgoED25519v01, ssh.CertAlgoECDSA256v01, ssh.CertAlgoECDSA384v01, ssh.CertAlgoECDSA521v01,
	ssh.CertAlgoRSASHA512v01, ssh.CertAlgoRSASHA256v01,
}

// readKnownHosts reads the known_hosts file path, a key to trust: one
// that another user could write or replace would let them vouch for a
// login host of theirs, which would then be sent the site's placeholder
// key, the agent and its jobs. So it is opened and checked as a host key
// pin is (sshkey.OpenTrusted: the user's or root's, not writable by
// others, through no link another user could aim), and knownhosts reads
// that same open file by its descriptor, not the name again.
func readKnownHosts(path string) (cb ssh.HostKeyCallback, cas map[string]bool, err error) {
	f, err := sshkey.OpenTrusted(path, sshkey.KnownHosts)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fdPath := fmt.Sprintf("/proc/self/fd/%d", f.Fd())
	cb, err = knownhosts.New(fdPath)
	if err != nil {
		return nil, nil, fmt.Errorf("known hosts file %s: %s", path, strings.ReplaceAll(err.Error(), fdPath, path))
	}
	// knownhosts read it by its own descriptor: this one is at its start.
	data, err := io.ReadAll(io.LimitReader(f, maxKnownHosts+1))
	if err != nil {
		return nil, nil, fmt.Errorf("known hosts file %s: %w", path, err)
	}
	if len(data) > maxKnownHosts {
		return nil, nil, fmt.Errorf("known hosts file %s is over %d MiB", path, maxKnownHosts>>20)
	}
	return cb, authorities(data), nil
}

// maxKnownHosts bounds a known_hosts file read (hundreds of thousands
// of hosts' lines).
const maxKnownHosts = 64 << 20

// authorities returns the keys of data's "@cert-authority" lines, as
// marshalled: knownhosts lists them beside host keys, alike.
func authorities(data []byte) map[string]bool {
	cas := map[string]bool{}
	for _, line := range bytes.Split(data, []byte("\n")) {
		// One line at a time: a line ParseKnownHosts cannot read is
		// skipped, not the lines after it.
		if marker, _, key, _, _, err := ssh.ParseKnownHosts(line); err == nil && marker == "cert-authority" {
			cas[string(key.Marshal())] = true
		}
	}
	return cas
}
