package web

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of the dashboard's limits.
const (
	// DefaultMaxConns bounds the dashboard's connections open at once:
	// each is a descriptor of the CLS, which its database, job output and
	// peers need more.
	DefaultMaxConns = 256
	// DefaultConnGrace is how long a new connection may go without an
	// authorized request before it can be closed to make room for another
	// when all DefaultMaxConns are taken.
	DefaultConnGrace = 2 * time.Second
	// DefaultMaxStreams and DefaultMaxClientStreams bound the event
	// streams (overview updates and followed output) open at once, in
	// all and per client (a browser session, or a bearer-token address).
	DefaultMaxStreams       = 64
	DefaultMaxClientStreams = 16
	// Timeouts of the HTTP server: a request's header must arrive within
	// readHeaderTimeout, and a kept-alive connection with no request is
	// closed after idleTimeout.
	readHeaderTimeout = 10 * time.Second
	idleTimeout       = time.Minute
)

// streamGate counts the open event streams, in all and per client.
type streamGate struct {
	max, perClient int

	mu    sync.Mutex
	total int
	by    map[string]int
}

func (g *streamGate) acquire(client string) (release func(), err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.total >= g.max {
		return nil, fmt.Errorf("%d event streams are open already (the most at once); close a page", g.total)
	}
	if g.by[client] >= g.perClient {
		return nil, fmt.Errorf("this client has %d event streams open already (the most one may); close a page", g.by[client])
	}
	if g.by == nil {
		g.by = map[string]int{}
	}
	g.total++
	g.by[client]++
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.total--
			if g.by[client]--; g.by[client] <= 0 {
				delete(g.by, client)
			}
		})
	}, nil
}

// HTTPServer returns an http.Server of the dashboard, with timeouts, for
// a listener from LimitListener (whose connections then count as
// trusted once they made an authorized request).
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    16 << 10,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if lc, ok := c.(*limitedConn); ok {
				return context.WithValue(ctx, connKey{}, lc)
			}
			return ctx
		},
	}
}

type connKey struct{}

// trust marks the request's connection as one that made an authorized
// request: it is never closed to make room for another.
func trust(ctx context.Context) {
	if lc, ok := ctx.Value(connKey{}).(*limitedConn); ok {
		lc.trusted.Store(true)
	}
}

// LimitListener bounds the connections ln's server holds at once to max
// (DefaultMaxConns when 0). At the bound Accept waits (newcomers wait in
// the kernel's backlog, holding no descriptor of ours) until one closes,
// or until a connection that has made no authorized request is past its
// grace, which is then closed to make room: a flood of connections
// without the token cannot lock the owner out for longer than it keeps
// opening new ones. A silent connection (it has sent nothing) has
// DefaultConnGrace; one that has sent bytes has readHeaderTimeout, the
// time its request has to arrive anyway, so the owner's request that
// waited behind a flood in the backlog is not closed before a busy
// server has read it.
func LimitListener(ln net.Listener, max int) net.Listener {
	if max <= 0 {
		max = DefaultMaxConns
	}
	return &limitListener{Listener: ln, max: max, grace: DefaultConnGrace, talkGrace: readHeaderTimeout}
}

type limitListener struct {
	net.Listener
	max              int
	grace, talkGrace time.Duration

	mu    sync.Mutex
	conns []*limitedConn // open, oldest first
	freed chan struct{}  // closed when one closes; nil if nobody waits
	done  chan struct{}  // closed by Close
	once  sync.Once
}

type limitedConn struct {
	net.Conn
	l       *limitListener
	since   time.Time
	trusted atomic.Bool
	spoke   atomic.Bool // the server has read a byte of it
	once    sync.Once
}

func (c *limitedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.spoke.Store(true)
	}
	return n, err
}

// deadline is when c may be closed to make room for another connection.
func (c *limitedConn) deadline() time.Time {
	if c.spoke.Load() || unread(c.Conn) {
		return c.since.Add(c.l.talkGrace)
	}
	return c.since.Add(c.l.grace)
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.remove(c) })
	return err
}

func (l *limitListener) remove(c *limitedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, o := range l.conns {
		if o == c {
			l.conns = append(l.conns[:i], l.conns[i+1:]...)
			break
		}
	}
	if l.freed != nil {
		close(l.freed)
		l.freed = nil
	}
}

func (l *limitListener) closed() chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done == nil {
		l.done = make(chan struct{})
	}
	return l.done
}

func (l *limitListener) Close() error {
	done := l.closed()
	l.once.Do(func() { close(done) })
	return l.Listener.Close()
}

// wait returns when there is room for one more connection.
func (l *limitListener) wait() error {
	done := l.closed()
	for {
		l.mu.Lock()
		if len(l.conns) < l.max {
			l.mu.Unlock()
			return nil
		}
		var old *limitedConn
		left := time.Hour // all trusted: wait for one to close
		for _, c := range l.conns {
			if c.trusted.Load() {
				continue
			}
			if d := time.Until(c.deadline()); d < left {
				old, left = c, d
			}
		}
		if old != nil && left <= 0 {
			l.mu.Unlock()
			old.Close() // its server goroutine fails and ends
			continue
		}
		if l.freed == nil {
			l.freed = make(chan struct{})
		}
		freed := l.freed
		l.mu.Unlock()
		t := time.NewTimer(left)
		select {
		case <-freed:
		case <-t.C:
		case <-done:
			t.Stop()
			return net.ErrClosed
		}
		t.Stop()
	}
}

func (l *limitListener) Accept() (net.Conn, error) {
	if err := l.wait(); err != nil {
		return nil, err
	}
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	lc := &limitedConn{Conn: c, l: l, since: time.Now()}
	l.mu.Lock()
	l.conns = append(l.conns, lc)
	l.mu.Unlock()
	return lc, nil
}
