package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/mq-hpc/mq/internal/sshkey"
)

// SSH is how to reach a CLS over SSH.
type SSH struct {
	Addr    string // host:port of `cls serve --ssh`
	User    string // any name; the CLS authenticates the key, not the user
	Signer  ssh.Signer
	HostKey ssh.HostKeyCallback // see sshkey.Pin
	// Keepalive is how often an idle connection is probed; a peer silent
	// for three probes is dropped so the caller reconnects (default 15 s).
	Keepalive time.Duration
	// Via, if set, is an SSH server the connection goes through: Addr is
	// dialled from there (a direct-tcpip channel), so it may be that
	// server's own loopback. Tunnel mode: the login host, where the CLS
	// holds a reverse forward that a stock sshd binds to loopback only.
	Via *Hop
}

// Hop is an SSH server a connection to the CLS goes through. It is
// authenticated with the same key (SSH.Signer), which the login host
// accepts only for a forward to the CLS's port.
type Hop struct {
	Addr, User string
	HostKey    ssh.PublicKey // the only host key accepted
}

// ErrAuthRefused means the CLS did not accept the key.
var ErrAuthRefused = errors.New("the CLS refused this key (add it with `cls key add`)")

// Permanent reports whether a dial error will not go away by retrying: a
// host key mismatch or a refused key.
func Permanent(err error) bool {
	return errors.Is(err, sshkey.ErrHostKeyMismatch) || errors.Is(err, ErrAuthRefused) || errors.Is(err, ErrHopKeyMismatch)
}

// Mismatch reports whether err is a host key other than the pinned one
// (the CLS's, or the login host's on the way to it): something else
// answers at the address. It is one of Permanent's errors.
func Mismatch(err error) bool {
	return errors.Is(err, sshkey.ErrHostKeyMismatch) || errors.Is(err, ErrHopKeyMismatch)
}

// DialSSH opens one SSH connection to the CLS and one session on it
// running the request protocol. Closing the result closes the connection.
func DialSSH(ctx context.Context, cfg SSH) (io.ReadWriteCloser, error) {
	if cfg.Signer == nil || cfg.HostKey == nil {
		return nil, errors.New("ssh: a key and a pinned host key are required")
	}
	user := cfg.User
	if user == "" {
		user = "mq"
	}
	var hop *ssh.Client
	var nc net.Conn
	var err error
	if cfg.Via != nil {
		hop, err = dialHop(ctx, *cfg.Via, cfg.Signer)
		if err != nil {
			return nil, err
		}
		nc, err = hop.DialContext(ctx, "tcp", cfg.Addr)
		if err != nil {
			hop.Close()
			return nil, fmt.Errorf("cannot reach the CLS at %s through %s: %w", cfg.Addr, cfg.Via.Addr, err)
		}
	} else {
		var d net.Dialer
		nc, err = d.DialContext(ctx, "tcp", cfg.Addr)
		if err != nil {
			return nil, fmt.Errorf("cannot reach the CLS at %s: %w", cfg.Addr, unwrapOp(err))
		}
	}
	closeHop := func() {
		if hop != nil {
			hop.Close()
		}
	}
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	sc, chans, reqs, err := ssh.NewClientConn(nc, cfg.Addr, &ssh.ClientConfig{
		User:            user,
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(cfg.Signer)},
		HostKeyCallback: cfg.HostKey,
		Timeout:         30 * time.Second,
	})
	if !stop() {
		if sc != nil {
			sc.Close()
		}
		nc.Close()
		closeHop()
		return nil, ctx.Err()
	}
	if err != nil {
		nc.Close()
		closeHop()
		if strings.Contains(err.Error(), "unable to authenticate") {
			return nil, fmt.Errorf("%w: %v", ErrAuthRefused, err)
		}
		return nil, fmt.Errorf("ssh to the CLS at %s: %w", cfg.Addr, err)
	}
	c := ssh.NewClient(sc, chans, reqs)
	ch, creqs, err := c.OpenChannel("session", nil)
	if err != nil {
		c.Close()
		closeHop()
		return nil, fmt.Errorf("ssh session: %w", err)
	}
	go ssh.DiscardRequests(creqs)
	ok, err := ch.SendRequest("subsystem", true, ssh.Marshal(struct{ Name string }{"mq"}))
	if err != nil || !ok {
		ch.Close()
		c.Close()
		closeHop()
		if err == nil {
			err = errors.New("the server does not offer the mq subsystem")
		}
		return nil, fmt.Errorf("ssh session: %w", err)
	}
	nc.SetDeadline(time.Time{}) // the session is up; from here keepalives watch it
	s := &sshStream{Channel: ch, conn: c, hop: hop, done: make(chan struct{})}
	go s.keepalive(orDefault(cfg.Keepalive, 15*time.Second))
	return s, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// sshStream is the protocol session; closing it closes the connection.
type sshStream struct {
	ssh.Channel
	conn *ssh.Client
	hop  *ssh.Client // nil unless through a Hop
	once sync.Once
	done chan struct{}
}

func (s *sshStream) Close() error {
	s.once.Do(func() {
		close(s.done)
		s.Channel.Close()
		s.conn.Close()
		if s.hop != nil {
			s.hop.Close()
		}
	})
	return nil
}

// keepalive probes the connection: a CLS host that vanished (power, a
// partition) never closes the TCP connection, and a placeholder must notice
// to reconnect elsewhere in time.
func (s *sshStream) keepalive(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		replied := make(chan struct{})
		go func() {
			s.conn.SendRequest("keepalive@openssh.com", true, nil)
			close(replied)
		}()
		select {
		case <-replied:
		case <-time.After(3 * every):
			s.Close()
			return
		case <-s.done:
			return
		}
	}
}

// dialHop connects to a Hop, accepting only its pinned host key (and
// asking for that key's type, so a host with several keys shows it).
func dialHop(ctx context.Context, h Hop, signer ssh.Signer) (*ssh.Client, error) {
	if h.HostKey == nil {
		return nil, errors.New("ssh: no host key pinned for " + h.Addr)
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", h.Addr)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the login host %s: %w", h.Addr, unwrapOp(err))
	}
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	algs := []string{h.HostKey.Type()}
	if algs[0] == ssh.KeyAlgoRSA {
		algs = []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	}
	sc, chans, reqs, err := ssh.NewClientConn(nc, h.Addr, &ssh.ClientConfig{
		User:              h.User,
		Auth:              []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback:   pinHop(h.HostKey),
		HostKeyAlgorithms: algs,
		Timeout:           30 * time.Second,
	})
	if !stop() {
		if sc != nil {
			sc.Close()
		}
		nc.Close()
		return nil, ctx.Err()
	}
	if err != nil {
		nc.Close()
		if strings.Contains(err.Error(), "unable to authenticate") {
			return nil, fmt.Errorf("%w: %v", ErrHopAuthRefused, err)
		}
		return nil, fmt.Errorf("ssh to the login host %s: %w", h.Addr, err)
	}
	nc.SetDeadline(time.Time{})
	return ssh.NewClient(sc, chans, reqs), nil
}

// ErrHopAuthRefused means the login host did not take the placeholder key
// (its authorized_keys line is gone: the site was removed, or the CLS has
// not yet put it back).
var ErrHopAuthRefused = errors.New("the login host refused the placeholder key (the CLS installs it in ~/.ssh/authorized_keys there while the site exists)")

// ErrHopKeyMismatch means the login host offered another host key than
// the one the CLS saw: never talk to an impostor.
var ErrHopKeyMismatch = errors.New("the login host's key is not the one the CLS pinned")

func pinHop(want ssh.PublicKey) ssh.HostKeyCallback {
	return func(hostname string, _ net.Addr, key ssh.PublicKey) error {
		if !bytes.Equal(key.Marshal(), want.Marshal()) {
			return fmt.Errorf("%w: %s offered %s, pinned %s", ErrHopKeyMismatch, hostname, ssh.FingerprintSHA256(key), ssh.FingerprintSHA256(want))
		}
		return nil
	}
}

// ParseHop reads a hop as agents take it on their command line: via is
// user@host:port, hostKey the host's public key as in authorized_keys
// ("ssh-ed25519 AAAA...").
func ParseHop(via, hostKey string) (*Hop, error) {
	user, addr, ok := strings.Cut(via, "@")
	if !ok || user == "" || addr == "" {
		return nil, fmt.Errorf("--via %q: want user@host:port", via)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("--via %q: want user@host:port", via)
	}
	pk, _, _, _, err := ssh.ParseAuthorizedKey([]byte(hostKey))
	if err != nil {
		return nil, fmt.Errorf("--via-host-key: want a public key (\"ssh-ed25519 AAAA...\"): %v", err)
	}
	return &Hop{Addr: addr, User: user, HostKey: pk}, nil
}
