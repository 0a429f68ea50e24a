// Package client speaks the request protocol to a CLS, over its Unix
// socket (Dial) or an SSH channel (DialSSH, then New). One Client is one
// connection; calls may be made from many goroutines at once and are
// pipelined on it.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/mq-hpc/mq/internal/mqhome"
	"github.com/mq-hpc/mq/protocol"
)

// Home returns the mq state directory: $MQ_HOME, else ~/.mq.
func Home() (string, error) {
	if h := os.Getenv("MQ_HOME"); h != "" {
		return filepath.Abs(h)
	}
	u, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("cannot find the mq home: set MQ_HOME (%w)", err)
	}
	return filepath.Join(u, ".mq"), nil
}

// SocketPath is where a CLS with the given home listens.
func SocketPath(home string) string { return filepath.Join(home, "cls.sock") }

// ErrClosed is returned by calls on a closed or broken connection.
var ErrClosed = errors.New("connection to the CLS closed")

// Client is a connection to a CLS.
type Client struct {
	rwc  io.ReadWriteCloser
	wmu  sync.Mutex
	wbuf []byte

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]*pending
	err     error // set once the reader stops
	done    chan struct{}

	Role string // the role the server granted
	// Server is the server's build (its version string), "" when it did
	// not say; as the server sent it, unchecked.
	Server string

	slowAfter time.Duration
	slow      func(op string, waited time.Duration)
}

// An Option sets up a Client as New makes it.
type Option func(*Client)

// SlowNotice has note called once for each request (not a long poll or a
// stream) the CLS has not answered after after: a CLS that was stopped
// (SIGSTOP), is wedged or swamped would otherwise leave a command
// waiting without a word.
func SlowNotice(after time.Duration, note func(op string, waited time.Duration)) Option {
	return func(c *Client) { c.slowAfter, c.slow = after, note }
}

type pending struct {
	ch     chan *protocol.Response
	stream bool
}

// Dial connects to the CLS whose home is home, as role ("" = the most the
// socket allows).
func Dial(ctx context.Context, home, role, clientName string, opts ...Option) (*Client, error) {
	c, err := DialSocket(ctx, home)
	if err != nil {
		return nil, err
	}
	cl, err := New(ctx, c, role, clientName, opts...)
	if err != nil {
		c.Close()
		return nil, err
	}
	return cl, nil
}

// DialSocket connects to the Unix socket of the CLS whose home is home. It
// refuses a socket, or a home, that is not this user's own, and a server
// that runs as another user: whoever made it would see every command sent
// and could answer as the CLS (an agent would run the jobs it hands out).
// The home is checked before every dial, socket or none: once it passes,
// no one else can put a socket in it between the check and the dial.
func DialSocket(ctx context.Context, home string) (net.Conn, error) {
	real, _, err := mqhome.Check(home)
	if errors.Is(err, fs.ErrNotExist) {
		// No CLS has made this home: say so as for a missing socket.
		return nil, fmt.Errorf("cannot reach the CLS at %s (is `cls serve` running?): %w", SocketPath(home), syscall.ENOENT)
	}
	if err != nil {
		return nil, fmt.Errorf("refusing the CLS socket: %w", err)
	}
	path := SocketPath(real)
	if err := mqhome.CheckEntry(path, fs.ModeSocket); err != nil {
		return nil, fmt.Errorf("refusing the CLS socket: %w", err)
	}
	c, err := dialSocket(ctx, path, dialPatience)
	if err != nil {
		return nil, err
	}
	if err := checkPeer(c, os.Geteuid()); err != nil {
		c.Close()
		return nil, fmt.Errorf("refusing the CLS socket %s: %w", path, err)
	}
	return c, nil
}

// checkPeer refuses a connection whose server runs as a user other than
// uid, where the system says (SO_PEERCRED on Linux; elsewhere the home's
// checks stand alone).
func checkPeer(c net.Conn, uid int) error {
	peer, known, err := peerUID(c)
	if err != nil {
		return fmt.Errorf("cannot tell who serves it: %w", err)
	}
	if known && peer != uid {
		return fmt.Errorf("its server runs as uid %d, not as you (uid %d)", peer, uid)
	}
	return nil
}

// dialPatience is how long Dial keeps trying a socket whose backlog is
// full: a CLS that is accepting slowly (a burst of clients, or a flood it
// is shedding) gets through it in seconds.
const dialPatience = 10 * time.Second

// dialSocket connects to the CLS's socket, retrying with backoff for up to
// patience while its backlog is full (EAGAIN: the CLS is there but has not
// accepted the connections before us yet).
func dialSocket(ctx context.Context, path string, patience time.Duration) (net.Conn, error) {
	var d net.Dialer
	deadline := time.Now().Add(patience)
	delay := 5 * time.Millisecond
	for {
		c, err := d.DialContext(ctx, "unix", path)
		if err == nil {
			return c, nil
		}
		cause := unwrapOp(err)
		switch {
		case errors.Is(err, syscall.EAGAIN) && ctx.Err() == nil:
			if time.Now().Add(delay).After(deadline) {
				return nil, fmt.Errorf("the CLS at %s is not accepting connections (backlog full for %s): %w", path, patience, cause)
			}
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, fmt.Errorf("cannot reach the CLS at %s: %w", path, ctx.Err())
			case <-t.C:
			}
			delay = min(2*delay, 500*time.Millisecond)
		case errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED):
			return nil, fmt.Errorf("cannot reach the CLS at %s (is `cls serve` running?): %w", path, cause)
		default:
			return nil, fmt.Errorf("cannot reach the CLS at %s: %w", path, cause)
		}
	}
}

func unwrapOp(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		var se *os.SyscallError
		if errors.As(oe.Err, &se) {
			return se.Err
		}
		return oe.Err
	}
	return err
}

// New starts a client on an open connection and says hello.
func New(ctx context.Context, rwc io.ReadWriteCloser, role, clientName string, opts ...Option) (*Client, error) {
	c := &Client{rwc: rwc, pending: map[uint64]*pending{}, done: make(chan struct{})}
	for _, o := range opts {
		o(c)
	}
	go c.readLoop()
	hr, err := Do(ctx, c, protocol.OpHello, protocol.Hello{Proto: protocol.Version, Role: role, Client: clientName})
	if err != nil {
		c.Close()
		return nil, err
	}
	c.Role, c.Server = hr.Role, hr.Server
	return c, nil
}

// Close closes the connection; calls in flight return ErrClosed.
func (c *Client) Close() error {
	err := c.rwc.Close()
	<-c.done
	return err
}

// Done is closed when the connection is gone.
func (c *Client) Done() <-chan struct{} { return c.done }

func (c *Client) readLoop() {
	r := protocol.NewReader(c.rwc)
	var err error
	for {
		var resp *protocol.Response
		resp, err = r.ReadResponse()
		if err != nil {
			break
		}
		c.mu.Lock()
		p := c.pending[resp.ID]
		if p != nil && (!p.stream || !resp.More) {
			delete(c.pending, resp.ID)
		}
		c.mu.Unlock()
		if p == nil {
			if resp.ID == 0 && resp.Err != nil {
				err = resp.Err // the server refused the stream itself
				break
			}
			continue
		}
		p.ch <- resp
	}
	c.mu.Lock()
	c.err = broken(err)
	for id, p := range c.pending {
		close(p.ch)
		delete(c.pending, id)
	}
	c.mu.Unlock()
	close(c.done)
}

func (c *Client) send(op string, body any, stream bool) (uint64, *pending, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return 0, nil, fmt.Errorf("encode %s request: %w", op, err)
	}
	p := &pending{ch: make(chan *protocol.Response, 16), stream: stream}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return 0, nil, err
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = p
	c.mu.Unlock()

	c.wmu.Lock()
	c.wbuf, err = protocol.AppendRequest(c.wbuf[:0], id, op, raw)
	if err == nil {
		_, err = c.rwc.Write(c.wbuf)
	}
	c.wmu.Unlock()
	if err != nil {
		c.forget(id)
		return 0, nil, fmt.Errorf("send %s request: %w", op, broken(err))
	}
	return id, p, nil
}

// broken says what a failed read or write on the connection means. The
// CLS's end closing is ErrClosed however it shows: end of file, a reset
// (a CLS that stops closes connections whose requests it has not read),
// a broken pipe. Callers such as mqwait wait for a CLS that went away to
// come back, so that must not read as any other failure.
func broken(err error) error {
	switch {
	case err == nil || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed):
		return ErrClosed
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE):
		return fmt.Errorf("%w (%w)", ErrClosed, unwrapOp(err))
	}
	return err
}

func (c *Client) forget(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

func (c *Client) closedErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	return ErrClosed
}

// Do sends one request of op and waits for its reply. A refusal by the
// server is returned as a *protocol.Error.
func Do[Req, Resp any](ctx context.Context, c *Client, op protocol.Op[Req, Resp], req Req) (Resp, error) {
	k, err := Go(c, op, req)
	if err != nil {
		var zero Resp
		return zero, err
	}
	return k.Wait(ctx)
}

// Stream sends one request of a streaming op and calls each with every
// frame of its reply, in order.
func Stream[Req, Item any](ctx context.Context, c *Client, op protocol.StreamOp[Req, Item], req Req, each func(Item) error) error {
	id, p, err := c.send(op.Name, req, true)
	if err != nil {
		return err
	}
	defer c.forget(id)
	stop := c.noteSlow(op.Name, op.Waits) // until the first frame
	defer stop()
	for {
		select {
		case resp, ok := <-p.ch:
			stop()
			if !ok {
				return c.closedErr()
			}
			if resp.Err != nil {
				return resp.Err
			}
			if !resp.More {
				return nil
			}
			var item Item
			if err := json.Unmarshal(resp.Body, &item); err != nil {
				return fmt.Errorf("decode %s reply: %w", op.Name, err)
			}
			if err := each(item); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// noteSlow calls the SlowNotice's note for op unless the stop it returns
// is called first; a long poll (waits) is never noted.
func (c *Client) noteSlow(op string, waits bool) (stop func()) {
	if c.slow == nil || c.slowAfter <= 0 || waits {
		return func() {}
	}
	t := time.AfterFunc(c.slowAfter, func() { c.slow(op, c.slowAfter) })
	return func() { t.Stop() }
}

// Call is a request in flight, from Go, whose reply is a Resp.
type Call[Resp any] struct {
	c     *Client
	op    string
	waits bool // a long poll (protocol.Spec.Waits)
	id    uint64
	p     *pending
}

// Go sends a request of op without waiting for its reply, so a caller can
// keep several in flight on one connection; Wait collects the reply.
// Requests leave in the order Go is called.
func Go[Req, Resp any](c *Client, op protocol.Op[Req, Resp], req Req) (*Call[Resp], error) {
	id, p, err := c.send(op.Name, req, false)
	if err != nil {
		return nil, err
	}
	return &Call[Resp]{c: c, op: op.Name, waits: op.Waits, id: id, p: p}, nil
}

// Wait waits for the reply and decodes it (a protocol.Empty reply is not
// read at all).
func (k *Call[Resp]) Wait(ctx context.Context) (Resp, error) {
	var out Resp
	defer k.c.noteSlow(k.op, k.waits)()
	select {
	case resp, ok := <-k.p.ch:
		if !ok {
			return out, k.c.closedErr()
		}
		if resp.Err != nil {
			return out, resp.Err
		}
		if len(resp.Body) > 0 && !isEmpty[Resp]() {
			if err := json.Unmarshal(resp.Body, &out); err != nil {
				return out, fmt.Errorf("decode %s reply: %w", k.op, err)
			}
		}
		return out, nil
	case <-ctx.Done():
		k.c.forget(k.id)
		return out, ctx.Err()
	}
}

func isEmpty[T any]() bool {
	_, ok := any((*T)(nil)).(*protocol.Empty)
	return ok
}
