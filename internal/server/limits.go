package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/mq-hpc/mq/internal/backoff"
	"github.com/mq-hpc/mq/protocol"
)

// Defaults of the limits against faulty or hostile peers (DESIGN.md,
// "Limits against faulty or hostile peers").
const (
	// DefaultUnauthenticated is how many connections of one listener may be
	// waiting to prove who they are (SSH: before the handshake completes;
	// the socket: before hello) at once, and at most an eighth of the
	// process's descriptor limit: so a flood of silent connections on both
	// listeners cannot starve the database, job output and real peers of
	// descriptors.
	DefaultUnauthenticated = 256
	// DefaultGrace is how long an unauthenticated connection is safe from
	// being closed to make room for a newer one: several round trips of an
	// SSH handshake over a slow link.
	DefaultGrace = 2 * time.Second
	// DefaultHelloTimeout bounds how long a connection may wait before its
	// hello.
	DefaultHelloTimeout = 15 * time.Second
	// DefaultIdle is how long a connection may send nothing while none of
	// its requests is in progress. Placeholders are never idle that long
	// (an idle one always has a long poll out; a busy one heartbeats every
	// second or so), nor is a client waiting (its wait is in progress).
	DefaultIdle = 10 * time.Minute
	// DefaultInFlight bounds the requests served at once on a user
	// connection: above the driver's largest buffer (10,000 jobs, at most
	// one wait each), so a driver is never held up by it.
	DefaultInFlight = 16384
	// DefaultPlaceholderInFlight bounds them on a placeholder connection;
	// an agent has a poll, a heartbeat and a few reports or output chunks
	// out at a time.
	DefaultPlaceholderInFlight = 64
	// DefaultRegistrations bounds the placeholders registered on one
	// connection: an agent registers one (again after a reconnect, with
	// the same id). 20,000 registrations on one connection added 20,000
	// rows before.
	DefaultRegistrations = 4
	// DefaultNexts bounds the next requests in progress on one connection:
	// an agent's long poll and the reports that ask for work, which it
	// keeps within protocol.NextsPerConn.
	DefaultNexts = protocol.NextsPerConn
)

// Gate bounds a listener's unauthenticated connections, in total and per
// source address. At the total bound the accept loop stops accepting (the
// kernel's backlog holds the newcomers) until one authenticates, ends, or
// has waited longer than Grace, in which case the oldest is closed to make
// room; a source at its own bound has its oldest closed the same way, or
// else the newcomer is refused. So silent connections cannot lock others
// out: a flood must keep opening connections to keep its place. The zero
// Gate takes the defaults and no per-source bound.
type Gate struct {
	Max       int           // in total; 0 = DefaultUnauthenticated or 1/8 of RLIMIT_NOFILE
	PerSource int           // from one source address (IP); 0 = no bound but Max
	Grace     time.Duration // 0 = DefaultGrace

	mu      sync.Mutex
	pending []*Ticket // oldest first
	sources map[string]int
	freed   chan struct{} // closed when a ticket leaves; nil if nobody waits
}

// Ticket is an admitted connection that has not authenticated yet.
type Ticket struct {
	g     *Gate
	c     net.Conn
	src   string
	since time.Time
	gone  bool
}

func (g *Gate) max() int {
	if g.Max > 0 {
		return g.Max
	}
	// Read every time: the limit may be changed from outside (prlimit).
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err == nil {
		return max(1, min(DefaultUnauthenticated, int(min(rl.Cur, 1<<20)/8)))
	}
	return DefaultUnauthenticated
}

func (g *Gate) grace() time.Duration {
	if g.Grace > 0 {
		return g.Grace
	}
	return DefaultGrace
}

// Pending reports how many connections are waiting to authenticate.
func (g *Gate) Pending() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.pending)
}

// wait returns when there is room for one more connection, closing the
// oldest if it is past its grace.
func (g *Gate) wait(ctx context.Context) error {
	for {
		g.mu.Lock()
		if len(g.pending) < g.max() {
			g.mu.Unlock()
			return nil
		}
		old := g.pending[0]
		left := g.grace() - time.Since(old.since)
		if left <= 0 {
			g.evictLocked(old)
			g.mu.Unlock()
			return nil
		}
		if g.freed == nil {
			g.freed = make(chan struct{})
		}
		freed := g.freed
		g.mu.Unlock()
		t := time.NewTimer(left)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-freed:
		case <-t.C:
		}
		t.Stop()
	}
}

// admit records a new connection, or refuses it (nil) when its source is
// at its bound with none past the grace.
func (g *Gate) admit(c net.Conn) *Ticket {
	src := sourceOf(c.RemoteAddr())
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.PerSource > 0 && g.sources[src] >= g.PerSource {
		var old *Ticket
		for _, t := range g.pending {
			if t.src == src {
				old = t
				break
			}
		}
		if old == nil || time.Since(old.since) < g.grace() {
			return nil
		}
		g.evictLocked(old)
	}
	if g.sources == nil {
		g.sources = map[string]int{}
	}
	t := &Ticket{g: g, c: c, src: src, since: time.Now()}
	g.pending = append(g.pending, t)
	g.sources[src]++
	return t
}

// evictLocked closes a pending connection; its handler fails and ends.
func (g *Gate) evictLocked(t *Ticket) {
	g.removeLocked(t)
	t.c.Close()
}

func (g *Gate) removeLocked(t *Ticket) {
	if t.gone {
		return
	}
	t.gone = true
	for i, p := range g.pending {
		if p == t {
			g.pending = append(g.pending[:i], g.pending[i+1:]...)
			break
		}
	}
	if g.sources[t.src]--; g.sources[t.src] <= 0 {
		delete(g.sources, t.src)
	}
	if g.freed != nil {
		close(g.freed)
		g.freed = nil
	}
}

// Done takes the connection out of the gate: it authenticated, or it
// ended. Calling it again does nothing; a nil Ticket is allowed.
func (t *Ticket) Done() {
	if t == nil {
		return
	}
	t.g.mu.Lock()
	t.g.removeLocked(t)
	t.g.mu.Unlock()
}

// sourceOf is the address a connection's bound is kept under: the IP of
// a TCP peer, "" for a Unix socket's.
func sourceOf(a net.Addr) string {
	if a == nil {
		return ""
	}
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	if host, _, err := net.SplitHostPort(a.String()); err == nil {
		return host
	}
	return ""
}

// Accept runs handle in its own goroutine (counted in wg) for every
// connection ln accepts, until ctx ends (nil) or ln fails for good (its
// error). Connections pass g first; handle calls the ticket's Done once the
// peer has authenticated (it is called again when handle returns). Running
// out of descriptors (EMFILE, ENFILE) and the like are waited out with
// backoff, as net/http does, rather than ending the CLS. Transports share
// it: the Unix socket here, the SSH endpoint in sshserver.
func Accept(ctx context.Context, ln net.Listener, g *Gate, log *slog.Logger, wg *sync.WaitGroup, handle func(net.Conn, *Ticket)) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	retry := backoff.Backoff{Min: 5 * time.Millisecond, Max: time.Second}
	failing := false
	for {
		if err := g.wait(ctx); err != nil {
			return nil
		}
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if !retryable(err) {
				return err
			}
			if !failing {
				failing = true
				log.Warn("accept failed; retrying with backoff", "addr", ln.Addr().String(), "err", err)
			}
			if retry.Wait(ctx) != nil {
				return nil
			}
			continue
		}
		if failing {
			failing = false
			retry.Reset()
		}
		t := g.admit(c)
		if t == nil {
			log.Debug("refused a connection: its source has too many unauthenticated", "addr", c.RemoteAddr().String())
			c.Close()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer t.Done()
			handle(c, t)
		}()
	}
}

// retryable reports whether an accept error passes: the process or system
// is out of descriptors or buffers, or a peer gave up before being
// accepted.
func retryable(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM,
		syscall.ECONNABORTED, syscall.ECONNRESET, syscall.EPROTO, syscall.EAGAIN, syscall.EINTR} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
