package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mq-hpc/mq/internal/logguard"
	"github.com/mq-hpc/mq/internal/metaqueue"
	"github.com/mq-hpc/mq/protocol"
)

// conn is one connection being served: its frames are read on one
// goroutine (readLoop), and each request runs on its own (run), except the
// bulk steps, which run in order on one more (runBulk).
type conn struct {
	s        *Server
	rwc      io.ReadWriteCloser
	role     string
	maxRole  string
	identity string
	noPH     bool   // Peer.NoPlaceholder
	site     string // Peer.Site
	hello    bool
	wmu      sync.Mutex
	wbuf     []byte
	bulk     *metaqueue.Bulk
	bulkErr  error // a failed chunk poisons the bulk until abort
	phMu     sync.Mutex
	phs      map[int64]protocol.Register
	// registering counts this connection's registrations under way.
	registering int
	log         *slog.Logger
	closed      <-chan struct{} // the connection's end
	cancel      context.CancelFunc
	done        chan struct{} // closed once close has returned

	lastActive atomic.Int64 // unix nanoseconds of the last line read or request ended
	busy       atomic.Int64 // requests in progress
	greeted    atomic.Bool
	skewSaid   atomic.Bool   // onClock
	slots      chan struct{} // requests in progress, up to the role's bound
	nexts      atomic.Int32  // next requests in progress
	reqs       sync.WaitGroup

	bulkQ    chan *bulkItem // bulk steps waiting for runBulk
	bulkDone chan struct{}  // closed when runBulk returns
	spooled  bool           // a bulk.add was read since the last commit or abort

	// bulkAsking counts the spooled jobs that ask for resources.
	bulkAsking int
}

// ServeConn serves one connection from the Unix socket (or a test pipe)
// until it closes or ctx ends.
func (s *Server) ServeConn(ctx context.Context, rwc io.ReadWriteCloser, maxRole string) {
	s.ServePeer(ctx, rwc, Peer{MaxRole: maxRole, Identity: "socket"})
}

// ServePeer serves one connection until it closes or ctx ends.
func (s *Server) ServePeer(ctx context.Context, rwc io.ReadWriteCloser, p Peer) {
	log := s.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// Every line about this connection names who it is, so a refusal in
	// the log says which key asked.
	log = log.With("peer", p.Identity)
	ctx, cancel := context.WithCancel(ctx)
	c := &conn{s: s, rwc: rwc, maxRole: p.MaxRole, identity: p.Identity, noPH: p.NoPlaceholder, site: p.Site, phs: map[int64]protocol.Register{}, log: log, closed: ctx.Done(), cancel: cancel, done: make(chan struct{})}
	defer c.close()
	c.touch()
	go c.watch(ctx)
	c.readLoop(ctx, p)
}

// close ends the connection once its reader has returned: the bulk steps
// already read run to their end, then the requests in progress see the
// connection end and return, and the placeholders registered on it are
// disconnected.
func (c *conn) close() {
	if c.bulkQ != nil {
		close(c.bulkQ)
		<-c.bulkDone
	}
	c.cancel()
	c.rwc.Close()
	c.reqs.Wait()
	if c.bulk != nil {
		c.bulk.Abort()
	}
	for id, reg := range c.phs {
		// Its row goes once it is gone for good (metaqueue/placeholders).
		c.s.Store.PlaceholderDisconnected(context.Background(), id)
		if c.s.OnPlaceholder != nil {
			c.s.OnPlaceholder(id, reg, false)
		}
	}
	c.s.forgetConn(c)
	close(c.done)
}

// touch notes activity: a line read or a request ended.
func (c *conn) touch() { c.lastActive.Store(time.Now().UnixNano()) }

// watch closes the connection when ctx ends, when no hello came within
// HelloTimeout, and, once it said hello, when it has been idle for Idle:
// nothing read and no request in progress. It keeps the time of the last
// activity rather than comparing counts between two ticks: those counts,
// taken when the goroutine first ran, closed a connection at the hello
// deadline (15 s) when its hello had been read before the watchdog's
// first look.
func (c *conn) watch(ctx context.Context) {
	lim := c.s.Limits
	idle := orDefault(lim.Idle, DefaultIdle)
	helloBy := time.Now().Add(orDefault(lim.HelloTimeout, DefaultHelloTimeout))
	t := time.NewTimer(time.Until(helloBy))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			c.rwc.Close()
			return
		case <-t.C:
		}
		now := time.Now()
		switch {
		case !c.greeted.Load():
			if left := helloBy.Sub(now); left > 0 {
				t.Reset(left)
				continue
			}
			c.log.Debug("closing a connection that sent no hello in time")
			c.cancel()
			continue
		case c.busy.Load() > 0:
			t.Reset(idle) // a request in progress is activity
			continue
		}
		quiet := now.Sub(time.Unix(0, c.lastActive.Load()))
		if quiet >= idle {
			c.log.Debug("closing an idle connection", "idle", idle)
			c.cancel()
			continue
		}
		t.Reset(idle - quiet)
	}
}

// readLoop reads requests until the connection ends or one of them ends
// it (a frame too large, anything but hello first).
func (c *conn) readLoop(ctx context.Context, p Peer) {
	r := protocol.NewReader(c.rwc)
	for {
		line, err := r.ReadLine()
		if err != nil {
			if errors.Is(err, protocol.ErrFrameTooLarge) {
				c.reply(0, nil, protocol.Errorf(protocol.CodeBadRequest, "%v; closing the connection", err))
			} else if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && ctx.Err() == nil {
				c.log.Debug("connection read failed", "err", logguard.Clip(err.Error(), 256))
			}
			return
		}
		c.touch()
		req, add, ok := c.parse(line)
		switch {
		case !ok:
			continue
		case !c.hello:
			if !c.greet(req, p) {
				return
			}
		case !c.dispatch(ctx, req, add):
			return
		}
	}
}

// parse reads one request; add is a bulk.add's body, decoded on a fast
// path. A malformed request is answered here (ok false).
func (c *conn) parse(line []byte) (req *protocol.Request, add *protocol.BulkAdd, ok bool) {
	if id, a, ok := protocol.FastBulkAdd(line); ok && c.hello {
		return &protocol.Request{ID: id, Op: protocol.OpBulkAdd.Name}, &a, true
	}
	req, err := protocol.ParseRequest(line)
	if err != nil {
		var id uint64
		if req != nil {
			id = req.ID
		}
		c.reply(id, nil, err)
		return nil, nil, false
	}
	return req, nil, true
}

// greet answers the connection's first request, which must be a hello,
// and reports whether the connection goes on.
func (c *conn) greet(req *protocol.Request, p Peer) bool {
	if req.Op != protocol.OpHello.Name {
		c.reply(req.ID, nil, protocol.Errorf(protocol.CodeBadRequest, "the first request must be hello, not %q", req.Op))
		return false
	}
	body, err := c.doHello(req.Body)
	if c.hello {
		// Out of the gate before the reply: a client told it is in
		// may at once open another connection from the same source.
		c.greeted.Store(true)
		p.Admission.Done()
	}
	c.reply(req.ID, body, err)
	if !c.hello {
		return false
	}
	n := orDefault(c.s.Limits.InFlight, DefaultInFlight)
	if c.role == protocol.RolePlaceholder {
		n = orDefault(c.s.Limits.PlaceholderInFlight, DefaultPlaceholderInFlight)
	}
	c.slots = make(chan struct{}, n)
	return true
}

// dispatch starts one request after hello, or answers it at once if it is
// refused, and reports whether the connection goes on.
func (c *conn) dispatch(ctx context.Context, req *protocol.Request, add *protocol.BulkAdd) bool {
	rt := c.s.route(req.Op)
	if err := c.allowed(req.Op, rt); err != nil {
		c.reply(req.ID, nil, err)
		return true
	}
	switch {
	case rt != nil && rt.bulk != nil:
		return c.queueBulk(ctx, rt, req, add)
	case rt != nil && rt.parks:
		// A placeholder parks one poll at a time; many would each hold
		// a goroutine and a place in the core's queue.
		maxNexts := int32(orDefault(c.s.Limits.Nexts, DefaultNexts))
		if c.nexts.Load() >= maxNexts {
			c.refused("busy-next", "refused a next beyond the connection's bound", "bound", maxNexts)
			c.reply(req.ID, nil, protocol.Errorf(protocol.CodeBusy, "%d next requests are already in progress on this connection", maxNexts))
			return true
		}
		c.nexts.Add(1)
	}
	if !c.take(ctx) {
		return false
	}
	c.reqs.Add(1)
	go c.run(ctx, rt, req)
	return true
}

// run serves one request on its own goroutine and replies.
func (c *conn) run(ctx context.Context, rt *route, req *protocol.Request) {
	defer c.reqs.Done()
	body, err := c.safe(req, func() (any, error) {
		if rt == nil || rt.serve == nil {
			return nil, protocol.Errorf(protocol.CodeUnsupported, "unknown op %q", req.Op)
		}
		return rt.serve(ctx, c, req)
	})
	if rt != nil && rt.parks {
		c.nexts.Add(-1)
	}
	if werr := c.reply(req.ID, body, err); werr != nil && err == nil && rt != nil && rt.undelivered != nil {
		rt.undelivered(c, req, body)
	}
	c.release()
}

// queueBulk hands a bulk step to runBulk, which runs the steps in order;
// the raw lines of each chunk are parsed concurrently before their turn.
func (c *conn) queueBulk(ctx context.Context, rt *route, req *protocol.Request, add *protocol.BulkAdd) bool {
	if c.bulkQ == nil {
		c.bulkQ = make(chan *bulkItem, 4)
		c.bulkDone = make(chan struct{})
		go c.runBulk(ctx)
	}
	if !c.take(ctx) {
		return false
	}
	it := newBulkItem(rt, req, add)
	switch req.Op {
	case protocol.OpBulkAdd.Name:
		c.spooled = true
	case protocol.OpBulkCommit.Name:
		if it.err = DecodeBody(req.Body, &it.commit); it.err == nil && it.commit.Token != "" {
			if c.spooled {
				// Noted as soon as it is read, so that a client
				// asking on a new connection after this one died
				// cannot overtake it.
				it.finish = c.s.startCommit(it.commit.Token)
			} else {
				it.lookup = true
			}
		}
		c.spooled = false
	default:
		c.spooled = false
	}
	c.bulkQ <- it
	return true
}

// runBulk runs the bulk steps queued, in order, until the queue closes.
func (c *conn) runBulk(ctx context.Context) {
	defer close(c.bulkDone)
	for it := range c.bulkQ {
		body, err := c.safe(it.req, func() (any, error) {
			<-it.parsed
			return it.rt.bulk(ctx, c, it)
		})
		c.reply(it.req.ID, body, err)
		c.release()
	}
}

// take waits for room for one more request in progress: while there is
// none, the connection is not read (backpressure).
func (c *conn) take(ctx context.Context) bool {
	select {
	case c.slots <- struct{}{}:
		c.busy.Add(1)
		return true
	case <-ctx.Done():
		return false
	}
}

// release frees the room a request took.
func (c *conn) release() {
	c.touch()
	<-c.slots
	c.busy.Add(-1)
}

// safe runs one request, turning a panic into an error reply.
func (c *conn) safe(req *protocol.Request, f func() (any, error)) (body any, err error) {
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("request panicked", "op", req.Op, "panic", logguard.Clip(fmt.Sprint(p), 1024), "stack", string(debug.Stack()))
			body, err = nil, protocol.Errorf(protocol.CodeInternal, "internal error handling %s", req.Op)
		}
	}()
	return f()
}

func (c *conn) doHello(raw json.RawMessage) (any, error) {
	var h protocol.Hello
	if err := DecodeBody(raw, &h); err != nil {
		return nil, err
	}
	if err := protocol.CheckText("client", h.Client, protocol.MaxClientBytes); err != nil {
		return nil, err
	}
	if h.Proto != protocol.Version {
		return nil, protocol.Errorf(protocol.CodeUnsupported, "protocol version %d is not supported (this CLS speaks %d)", h.Proto, protocol.Version)
	}
	role := c.maxRole
	if h.Role != "" {
		if !protocol.RoleAllows(c.maxRole, h.Role) || (c.noPH && h.Role == protocol.RolePlaceholder) { // narrowing is allowed but to placeholder
			c.refused("role", "refused a role the connection does not allow", "role", logguard.Text(h.Role), "allowed", c.maxRole)
			return nil, protocol.Errorf(protocol.CodeForbidden, "role %s is not allowed on this connection", protocol.Quote(h.Role))
		}
		role = h.Role
	}
	c.role, c.hello = role, true
	return protocol.HelloReply{Proto: protocol.Version, Server: c.s.Version, Role: role}, nil
}

// DecodeBody decodes a request body into v (an absent body is {}); a
// malformed one is a bad-request error naming the problem.
func DecodeBody(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return protocol.Errorf(protocol.CodeBadRequest, "malformed request body: %v", err)
	}
	return nil
}

// decodeBody is DecodeBody, first refusing a placeholder's body of more
// objects than any agent sends (protocol.MaxPeerObjects): decoded, a frame
// of empty objects would hold two hundred times its size.
func (c *conn) decodeBody(raw json.RawMessage, v any) error {
	if c.role == protocol.RolePlaceholder {
		if err := protocol.CheckObjects(raw, protocol.MaxPeerObjects); err != nil {
			c.refused("objects", "refused a request body of too many objects", "bytes", len(raw))
			return err
		}
	}
	return DecodeBody(raw, v)
}

// reply writes one response frame; an error if it could not be written
// (the connection ended: the peer never got it).
func (c *conn) reply(id uint64, body any, err error) error {
	resp := protocol.Response{ID: id}
	if err != nil {
		resp.Err = protocol.AsError(err)
		if resp.Err.Code == protocol.CodeInternal {
			if c.ended() || errors.Is(err, context.Canceled) {
				// The peer went away first: nothing failed.
				c.log.Debug("request ended with its connection", "id", id, "err", err)
				return nil
			}
			// Through the limiter, by message, whoever asked: while the
			// disk has no room every request of every peer is answered
			// so, and a line each (or a line a minute per placeholder)
			// would fill the room freed for deletes. The text may quote
			// a peer's path.
			msg := logguard.Clip(err.Error(), 1024)
			c.limiter().Error("\x00internal\x00"+logguard.Clip(msg, 120), "request failed", "peer", c.identity, "id", id, "err", msg)
		}
	} else if body != nil {
		b, merr := json.Marshal(body)
		if merr != nil {
			resp.Err = protocol.Errorf(protocol.CodeInternal, "encode reply: %v", merr)
		} else {
			resp.Body = b
		}
	}
	return c.write(&resp)
}

// ended reports whether the connection has closed.
func (c *conn) ended() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// write sends resp. One that does not fit in a frame (or cannot be
// encoded) is answered with an error instead, so that no reply exceeds the
// frame and the client is never left waiting. It returns an error when
// resp did not go out whole: replaced so, or the transport failed (the
// connection ended; the peer has not read it).
func (c *conn) write(resp *protocol.Response) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	var err, notSent error
	c.wbuf, err = protocol.AppendResponse(c.wbuf[:0], resp)
	if err != nil {
		c.log.Error("reply not sent", "id", resp.ID, "err", err)
		notSent = err
		code := protocol.CodeInternal
		if errors.Is(err, protocol.ErrFrameTooLarge) {
			code = protocol.CodeTooLarge
		}
		e := protocol.Errorf(code, "the reply could not be sent: %v; ask for less", err)
		if c.wbuf, err = protocol.AppendFrame(c.wbuf[:0], &protocol.Response{ID: resp.ID, Err: e}); err != nil {
			return notSent
		}
	}
	if _, err := c.rwc.Write(c.wbuf); err != nil {
		notSent = err
	}
	if cap(c.wbuf) > 1<<20 {
		c.wbuf = nil
	}
	return notSent
}

// refused logs a refused request through the server's aggregating
// limiter, keyed by the peer and kind.
func (c *conn) refused(kind, msg string, args ...any) {
	c.limiter().Warn(c.identity+"\x00"+kind, msg, append([]any{"peer", c.identity}, args...)...)
}

// limiter is the server's log of events peers can repeat at will: the
// first of a kind in a window, then their count.
func (c *conn) limiter() *logguard.Limiter {
	c.s.refusalsOnce.Do(func() {
		log := c.s.Log
		if log == nil {
			log = slog.New(slog.DiscardHandler)
		}
		c.s.refusals = &logguard.Limiter{Log: log, Window: c.s.Limits.LogWindow}
	})
	return c.s.refusals
}

// cleanReports makes every report of a batch acceptable (CleanReport):
// an item with bad text is escaped or loses what cannot be kept, never
// refused with the batch, whose other jobs would be lost, and the agent
// with them. One line says so, per batch.
func (c *conn) cleanReports(reps []protocol.Report) {
	n, first, what := 0, int64(0), ""
	for i := range reps {
		if fixed := protocol.CleanReport(&reps[i]); fixed != "" {
			if n == 0 {
				first, what = reps[i].ID, fixed
			}
			n++
		}
	}
	if n > 0 {
		// Through the limiter: a placeholder sending such a report in
		// every batch must not fill the log.
		c.refused("report", "cleaned reports a placeholder sent", "reports", n, "first_job", first, "fixed", what)
	}
}

// onClock moves the times of reports a placeholder sent at its clock onto
// the CLS's (protocol.OnClock), saying so in the log once a connection:
// the node's clock wants fixing.
func (c *conn) onClock(ph int64, reps []protocol.Report, clock time.Time) {
	if off := protocol.OnClock(reps, clock, time.Now()); off != 0 && c.skewSaid.CompareAndSwap(false, true) {
		c.log.Warn("a placeholder's clock is off from the CLS's; the times it reports are moved onto the CLS's clock", "placeholder", ph, "behind", off.Round(time.Second))
	}
}

// owns checks that a placeholder speaks only for itself: it must have
// registered on this connection.
func (c *conn) owns(id int64) error {
	c.phMu.Lock()
	defer c.phMu.Unlock()
	if _, ok := c.phs[id]; !ok {
		return protocol.Errorf(protocol.CodeForbidden, "placeholder %d did not register on this connection", id)
	}
	return nil
}
