package client

import (
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
}

// ErrAuthRefused means the CLS did not accept the key.
var ErrAuthRefused = errors.New("the CLS refused this key (add it with `cls key add`)")

// Permanent reports whether a dial error will not go away by retrying: a
// host key mismatch or a refused key.
func Permanent(err error) bool {
	return errors.Is(err, sshkey.ErrHostKeyMismatch) || errors.Is(err, ErrAuthRefused)
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
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the CLS at %s: %w", cfg.Addr, unwrapOp(err))
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
		return nil, ctx.Err()
	}
	if err != nil {
		nc.Close()
		if strings.Contains(err.Error(), "unable to authenticate") {
			return nil, fmt.Errorf("%w: %v", ErrAuthRefused, err)
		}
		return nil, fmt.Errorf("ssh to the CLS at %s: %w", cfg.Addr, err)
	}
	c := ssh.NewClient(sc, chans, reqs)
	ch, creqs, err := c.OpenChannel("session", nil)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("ssh session: %w", err)
	}
	go ssh.DiscardRequests(creqs)
	ok, err := ch.SendRequest("subsystem", true, ssh.Marshal(struct{ Name string }{"mq"}))
	if err != nil || !ok {
		ch.Close()
		c.Close()
		if err == nil {
			err = errors.New("the server does not offer the mq subsystem")
		}
		return nil, fmt.Errorf("ssh session: %w", err)
	}
	nc.SetDeadline(time.Time{}) // the session is up; from here keepalives watch it
	s := &sshStream{Channel: ch, conn: c, done: make(chan struct{})}
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
	once sync.Once
	done chan struct{}
}

func (s *sshStream) Close() error {
	s.once.Do(func() {
		close(s.done)
		s.Channel.Close()
		s.conn.Close()
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
