// Package sshserver is the CLS's SSH endpoint. Peers authenticate with a
// public key listed in $MQ_HOME/authorized_keys, which gives each key a
// role: a user key may run mqsub, mqstat, mqdel and `cls queue` as
// commands (`ssh -p 2222 cls-host mqstat`) and open the request protocol;
// an admin key may also administer sites (`cls site`), which the CLS owner
// does on the socket; a placeholder key may only open the request
// protocol, where it can only register, pull work, report, heartbeat and
// stage its own jobs' output.
// Passwords and keyboard-interactive logins are not offered at all.
package sshserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/mq-hpc/mq/internal/logguard"
	"github.com/mq-hpc/mq/internal/server"
	"github.com/mq-hpc/mq/internal/shellwords"
	"github.com/mq-hpc/mq/protocol"
)

// Subsystem is the SSH subsystem that carries the request protocol
// (`ssh -s cls-host mq`).
const Subsystem = "mq"

// DefaultHandshakeTimeout bounds how long an unauthenticated peer may hold
// a connection, and how long a session channel may wait before saying what
// it is for.
const DefaultHandshakeTimeout = 15 * time.Second

// Bounds of unauthenticated connections (server.Gate): from one address at
// most DefaultPerSource, so one host cannot hold them all. Placeholders
// that come through a site's tunnel all come from the CLS's own address,
// and a batch system may start many at once: they are in the handshake
// only for a few milliseconds each, and one refused retries.
const DefaultPerSource = 32

// Bounds of authenticated connections. A key may hold at most
// DefaultPerKey at once (a site's placeholders share its key, one
// connection each); all keys together at most DefaultConns, and never
// more than a quarter of the process's descriptor limit, so a key that
// floods cannot take the descriptors the owner's socket, the database and
// job output need. A connection over a bound is closed right after its
// handshake: the key is not refused, so an agent retries with backoff.
const (
	DefaultPerKey = 1024
	DefaultConns  = 4096
)

// DefaultSessions bounds the session channels open at once on one
// connection (OpenSSH's MaxSessions); of them, one at a time may be the
// mq subsystem, a whole protocol connection with its own bounds (an
// agent opens one), so the bounds per key above hold for the protocol's
// connections too. A channel over the bound is refused.
const DefaultSessions = 10

// SiteKeyPrefix starts the name (comment) of a site's placeholder key
// (cls site add makes it): such a key may register only as that site.
const SiteKeyPrefix = "mq-site-"

// ExecFunc runs a user's command (already split into words) with the
// channel's streams and returns its exit status. who is the key's role
// and identity: what the command may do through the CLS.
type ExecFunc func(ctx context.Context, who server.Peer, args []string, stdin io.Reader, stdout, stderr io.Writer) int

// Server accepts SSH connections for a CLS.
type Server struct {
	HostKey ssh.Signer
	Keys    *KeyFile
	// Proto serves the request protocol on "mq" subsystem channels.
	Proto *server.Server
	// Exec runs user-role commands; nil refuses them.
	Exec ExecFunc
	Log  *slog.Logger

	// Gate bounds connections that have not completed the handshake (the
	// zero Gate: server.DefaultUnauthenticated in total, DefaultPerSource
	// from one address). Idle closes a connection with no channel open for
	// that long (0: server.DefaultIdle); a channel of the mq subsystem
	// follows Proto's limits.
	Gate server.Gate
	Idle time.Duration
	// HandshakeTimeout bounds the handshake, a session's wait before its
	// exec or subsystem request, and a new connection's wait before its
	// first such session (`ssh -N` holds one with none): 0 is
	// DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// PerKey and Conns bound authenticated connections per key and in
	// total (0: DefaultPerKey; DefaultConns or a quarter of RLIMIT_NOFILE);
	// Sessions the session channels open at once on one (0:
	// DefaultSessions).
	PerKey, Conns, Sessions int
	// LogWindow is how long like refusals are counted before their
	// number is logged (0: logguard.DefaultWindow).
	LogWindow time.Duration

	wg sync.WaitGroup

	logOnce  sync.Once
	refusals *logguard.Limiter

	connMu sync.Mutex
	conns  int
	perKey map[string]int
}

// refused logs through the aggregating limiter: one line for the first
// of a kind from a source in a window, one with the count at its end.
func (s *Server) refused(key, msg string, args ...any) {
	s.logOnce.Do(func() { s.refusals = &logguard.Limiter{Log: s.log(), Window: s.LogWindow} })
	s.refusals.Warn(key, msg, args...)
}

// FlushLog logs the counts of refusals not yet logged (at shutdown).
func (s *Server) FlushLog() {
	s.logOnce.Do(func() { s.refusals = &logguard.Limiter{Log: s.log(), Window: s.LogWindow} })
	s.refusals.Flush()
}

func (s *Server) maxConns() int {
	n := s.Conns
	if n <= 0 {
		n = DefaultConns
		var rl syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err == nil {
			n = max(1, min(n, int(min(rl.Cur, 1<<20)/4)))
		}
	}
	return n
}

func (s *Server) maxSessions() int {
	if s.Sessions > 0 {
		return s.Sessions
	}
	return DefaultSessions
}

// admitKey counts a connection of key, or refuses it (false) over a bound.
func (s *Server) admitKey(key string) (ok bool, why string) {
	perKey := s.PerKey
	if perKey <= 0 {
		perKey = DefaultPerKey
	}
	s.connMu.Lock()
	defer s.connMu.Unlock()
	if s.conns >= s.maxConns() {
		return false, "the CLS's bound of SSH connections"
	}
	if s.perKey[key] >= perKey {
		return false, "the key's bound of connections"
	}
	if s.perKey == nil {
		s.perKey = map[string]int{}
	}
	s.conns++
	s.perKey[key]++
	return true, ""
}

func (s *Server) releaseKey(key string) {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	s.conns--
	if s.perKey[key]--; s.perKey[key] <= 0 {
		delete(s.perKey, key)
	}
}

// Permissions extensions set at authentication.
const (
	extRole    = "mq-role"
	extKey     = "mq-key"
	extComment = "mq-comment"
)

func (s *Server) log() *slog.Logger {
	if s.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Log
}

func (s *Server) handshakeTimeout() time.Duration {
	if s.HandshakeTimeout > 0 {
		return s.HandshakeTimeout
	}
	return DefaultHandshakeTimeout
}

func (s *Server) config() *ssh.ServerConfig {
	cfg := &ssh.ServerConfig{
		ServerVersion: "SSH-2.0-mq-cls",
		MaxAuthTries:  6,
		// Only public keys: no PasswordCallback and no
		// KeyboardInteractiveCallback, so those methods are never offered.
		PublicKeyCallback: func(meta ssh.ConnMetadata, pk ssh.PublicKey) (*ssh.Permissions, error) {
			k, ok, err := s.Keys.Lookup(pk)
			if err != nil {
				s.refused("keyfile", "cannot read the key file; refusing every key", "err", err)
				return nil, errors.New("key file unreadable")
			}
			if !ok {
				// Anyone who reaches the port may try, as often and with as
				// long a user name as they like: one line per source a
				// minute, with the count, and the name cut short.
				src := sourceOf(meta.RemoteAddr())
				s.refused("unknown-key\x00"+src, "ssh: unknown key refused", "addr", src, "key", ssh.FingerprintSHA256(pk),
					"user", logguard.Text(meta.User()), "client", logguard.Text(string(meta.ClientVersion())))
				return nil, errors.New("unknown key")
			}
			return &ssh.Permissions{Extensions: map[string]string{
				extRole: k.Role, extKey: k.Fingerprint, extComment: k.Comment,
			}}, nil
		},
	}
	cfg.AddHostKey(s.HostKey)
	return cfg
}

// Serve accepts connections until ctx ends or ln fails.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	cfg := s.config()
	if s.Gate.PerSource == 0 {
		s.Gate.PerSource = DefaultPerSource
	}
	return server.Accept(ctx, ln, &s.Gate, s.Log, &s.wg, func(nc net.Conn, t *server.Ticket) { s.serveConn(ctx, nc, t, cfg) })
}

// Wait waits for every connection's handler to return.
func (s *Server) Wait() { s.wg.Wait() }

func (s *Server) serveConn(ctx context.Context, nc net.Conn, admission *server.Ticket, cfg *ssh.ServerConfig) {
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(s.handshakeTimeout()))
	sc, chans, reqs, err := ssh.NewServerConn(nc, cfg)
	if err != nil {
		s.log().Debug("ssh handshake failed", "addr", nc.RemoteAddr().String(), "err", logguard.Clip(err.Error(), 256))
		return
	}
	admission.Done()
	key := sc.Permissions.Extensions[extKey]
	if ok, why := s.admitKey(key); !ok {
		// Its first channel is refused saying why, then the connection
		// closes (closing at once raced the client's channel open: an
		// x/crypto client could wait forever for its answer).
		s.refused("conns\x00"+key, "ssh: refused a connection over "+why, "key", key, "addr", sourceOf(sc.RemoteAddr()))
		limit := time.AfterFunc(s.handshakeTimeout(), func() { sc.Close() })
		defer limit.Stop()
		go ssh.DiscardRequests(reqs)
		for nch := range chans {
			nch.Reject(ssh.ResourceShortage, why+" is reached; try again later")
			sc.Close()
		}
		return
	}
	defer s.releaseKey(key)
	nc.SetDeadline(time.Time{})
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-ctx.Done()
		sc.Close()
	}()
	// A new connection must open a session and say what it is for within
	// the handshake timeout (`ssh -N` opens none and would hold its
	// connection for Idle); after that, a connection with no channel open
	// for Idle is closed: it serves nothing (keepalives do not count).
	idle := s.Idle
	if idle <= 0 {
		idle = server.DefaultIdle
	}
	var (
		tmu     sync.Mutex
		open    int  // channels open
		decided bool // a session said what it is for
	)
	fire := func() {
		tmu.Lock()
		defer tmu.Unlock()
		switch {
		case !decided:
			s.log().Debug("closing an ssh connection that started no session in time", "addr", sc.RemoteAddr().String())
			cancel()
		case open == 0:
			s.log().Debug("closing an ssh connection with no channel open", "addr", sc.RemoteAddr().String(), "idle", idle)
			cancel()
		}
	}
	idleClose := time.AfterFunc(s.handshakeTimeout(), fire)
	defer idleClose.Stop()
	decide := func() {
		tmu.Lock()
		decided = true
		idleClose.Stop()
		tmu.Unlock()
	}
	go ssh.DiscardRequests(reqs) // keepalives get their "no" reply
	p := peer{
		serving: new(atomic.Bool),
		role:    sc.Permissions.Extensions[extRole],
		key:     key,
		comment: sc.Permissions.Extensions[extComment],
		log: s.log().With("key", key, "name", logguard.Text(sc.Permissions.Extensions[extComment]),
			"addr", sc.RemoteAddr().String()),
	}
	p.log.Debug("ssh connection", "role", p.role, "user", logguard.Text(sc.User()))
	var chWG sync.WaitGroup
	for nch := range chans {
		if nch.ChannelType() != "session" {
			nch.Reject(ssh.Prohibited, "only session channels are served")
			continue
		}
		tmu.Lock()
		full := open >= s.maxSessions()
		tmu.Unlock()
		if full {
			nch.Reject(ssh.ResourceShortage, fmt.Sprintf("at most %d sessions at once on one connection", s.maxSessions()))
			continue
		}
		ch, creqs, err := nch.Accept()
		if err != nil {
			continue
		}
		tmu.Lock()
		open++
		if decided {
			idleClose.Stop()
		}
		tmu.Unlock()
		chWG.Add(1)
		go func() {
			defer chWG.Done()
			s.session(ctx, p, ch, creqs, decide)
			tmu.Lock()
			if open--; open == 0 && decided {
				idleClose.Reset(idle)
			}
			tmu.Unlock()
		}()
	}
	cancel()
	chWG.Wait()
}

type peer struct {
	role    string
	key     string
	comment string
	log     *slog.Logger
	// serving is set while one of the connection's sessions is the mq
	// subsystem: one at a time (DefaultSessions).
	serving *atomic.Bool
}

// server is the peer as the protocol server knows it. Only placeholder
// keys act as placeholders: a user or admin key that did could be handed
// any file the CLS owner may read (files.pull). A site's own key (named
// mq-site-NAME by cls site add) registers only as that site.
func (p peer) server() server.Peer {
	sp := server.Peer{MaxRole: p.role, Identity: "ssh-key:" + p.key, NoPlaceholder: p.role != protocol.RolePlaceholder}
	if p.role == protocol.RolePlaceholder {
		sp.Site, _ = strings.CutPrefix(p.comment, SiteKeyPrefix)
		if sp.Site == p.comment {
			sp.Site = ""
		}
	}
	return sp
}

// sourceOf is the address refusals are counted under: the peer's IP.
func sourceOf(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	if a == nil {
		return ""
	}
	return logguard.Text(a.String())
}

// session serves one session channel: the first exec, subsystem or shell
// request decides what it is.
func (s *Server) session(ctx context.Context, p peer, ch ssh.Channel, reqs <-chan *ssh.Request, decided func()) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer ch.Close()
	// A session that never says what it is for would hold its connection
	// open forever.
	undecided := time.AfterFunc(s.handshakeTimeout(), func() { ch.Close() })
	defer undecided.Stop()
	for req := range reqs {
		switch req.Type {
		case "env":
			req.Reply(true, nil) // accepted and ignored: the CLS's environment rules
			continue
		case "subsystem", "exec":
		case "shell":
			req.Reply(true, nil)
			fmt.Fprintln(ch.Stderr(), "mq: no shell here; run mqsub, mqstat, mqdel or cls queue as the ssh command")
			exit(ch, 2)
			return
		default: // pty-req, x11-req, agent forwarding...: not here
			req.Reply(false, nil)
			continue
		}
		var arg struct{ Value string }
		if err := ssh.Unmarshal(req.Payload, &arg); err != nil {
			req.Reply(false, nil)
			return
		}
		// From here the channel is dedicated; later requests get "no", and
		// the client closing it cancels what runs.
		if !undecided.Stop() {
			return // closed as undecided meanwhile
		}
		decided()
		go func() {
			for r := range reqs {
				r.Reply(false, nil)
			}
			cancel()
		}()
		if req.Type == "subsystem" {
			if arg.Value != Subsystem || !p.serving.CompareAndSwap(false, true) {
				req.Reply(false, nil) // not ours, or one is open on this connection already
				return
			}
			defer p.serving.Store(false)
			req.Reply(true, nil)
			s.Proto.ServePeer(ctx, &exitOnClose{Channel: ch}, p.server())
			return
		}
		req.Reply(true, nil)
		exit(ch, s.exec(ctx, p, ch, arg.Value))
		return
	}
}

// exec runs a user's command line.
func (s *Server) exec(ctx context.Context, p peer, ch ssh.Channel, line string) int {
	stderr := ch.Stderr()
	if p.role == protocol.RolePlaceholder {
		s.refused("exec\x00"+p.key, "ssh: refused a command from a placeholder key", "key", p.key, "command", logguard.Text(line))
		fmt.Fprintln(stderr, "mq: placeholder keys may not run commands")
		return 1
	}
	if s.Exec == nil {
		fmt.Fprintln(stderr, "mq: this CLS runs no commands over SSH")
		return 1
	}
	words, err := shellwords.Split(line)
	if err != nil {
		fmt.Fprintf(stderr, "mq: %v\n", err)
		return 2
	}
	if len(words) == 0 {
		fmt.Fprintln(stderr, "mq: empty command; run mqsub, mqstat, mqdel or cls queue")
		return 2
	}
	p.log.Debug("ssh exec", "command", logguard.Text(words[0]))
	return s.Exec(ctx, p.server(), words, ch, ch, stderr)
}

// exitOnClose sends exit status 0 when the protocol session closes the
// channel: ServePeer closes its stream itself when the session ends, and
// OpenSSH reports a channel closed without a status as a failure (`ssh -s
// cls-host mq` exited 255 after every session).
//
// It sends no EOF first: x/crypto's CloseWrite sets a flag that Write reads
// unlocked, and replies may still be being written when the session's
// context closes the stream. A request and the close are safe beside a
// Write, and a lock around Write would let a peer that stops reading hold
// Close up forever.
type exitOnClose struct {
	ssh.Channel
	once sync.Once
}

func (c *exitOnClose) Close() error {
	c.once.Do(func() {
		c.Channel.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{0}))
	})
	return c.Channel.Close()
}

// exit sends the exit status and closes the channel for writing.
func exit(ch ssh.Channel, code int) {
	ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(code)}))
	ch.CloseWrite()
}
