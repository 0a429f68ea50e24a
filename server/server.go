// Package server serves the request protocol: it reads frames from a
// connection (the Unix socket, or an SSH channel of the mq subsystem),
// checks each against the connection's role, and routes it to the
// metaqueue. Requests on one connection run concurrently, so clients may
// pipeline; replies carry the request's id.
package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mq-hpc/mq/internal/logguard"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/metaqueue"
	"github.com/mq-hpc/mq/protocol"
)

// Server routes protocol requests to a Store.
type Server struct {
	Store   *metaqueue.Store
	Log     *slog.Logger
	Version string // reported in hello replies

	// OutputDir receives the output that remote placeholders stage
	// (op output), at the same paths local placeholders write.
	OutputDir string
	// OutputReserve is the free space staged output leaves on OutputDir's
	// filesystem, for the database beside it (0: none).
	OutputReserve int64

	// OnPlaceholder, if set, is told when a placeholder registers on a
	// connection and when that connection closes.
	OnPlaceholder func(id int64, reg protocol.Register, connected bool)

	// OnOutput, if set, is told when a placeholder has staged output of
	// job id (op output), so that whoever follows it reads on at once.
	OnOutput func(id int64)
	// Followed, if set, picks from a heartbeat's attempts those whose
	// output someone follows; the reply asks the placeholder to send
	// their output while they run.
	Followed func(running []protocol.JobRef) []protocol.JobRef
	// Files, if set, serves the agents' file transfers (files.* ops);
	// without it they are answered unsupported.
	Files AgentFiles

	// routed serves declared ops beyond the metaqueue's (site.add, ...):
	// see Route.
	routed map[string]*route

	// Limits bound what one connection may hold; Gate bounds the socket's
	// connections that have not said hello yet.
	Limits Limits
	Gate   Gate

	wg sync.WaitGroup

	// refusals aggregates the log lines of refused requests, per peer and
	// kind: a key that sends 100,000 refused requests gets one line and
	// then one count a minute, not 100,000 lines.
	refusalsOnce sync.Once
	refusals     *logguard.Limiter

	// committing lists, per token, the bulk commits under way, so that a
	// question about a token's outcome (from a client whose connection
	// died during the commit) waits for the answer.
	commitMu   sync.Mutex
	committing map[string][]chan struct{}
}

// startCommit notes a bulk commit with token under way; finish ends it.
func (s *Server) startCommit(token string) (finish func()) {
	done := make(chan struct{})
	s.commitMu.Lock()
	if s.committing == nil {
		s.committing = map[string][]chan struct{}{}
	}
	s.committing[token] = append(s.committing[token], done)
	s.commitMu.Unlock()
	return func() {
		s.commitMu.Lock()
		l := s.committing[token]
		for i, ch := range l {
			if ch == done {
				l = append(l[:i:i], l[i+1:]...)
				break
			}
		}
		if len(l) == 0 {
			delete(s.committing, token)
		} else {
			s.committing[token] = l
		}
		s.commitMu.Unlock()
		close(done)
	}
}

// awaitCommits waits until no bulk commit with token is under way.
func (s *Server) awaitCommits(ctx context.Context, token string) error {
	s.commitMu.Lock()
	l := append([]chan struct{}(nil), s.committing[token]...)
	s.commitMu.Unlock()
	for _, ch := range l {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// refused logs a refused request through the server's aggregating
// limiter, keyed by the peer and kind.
func (c *conn) refused(kind, msg string, args ...any) {
	c.s.refusalsOnce.Do(func() {
		log := c.s.Log
		if log == nil {
			log = slog.New(slog.DiscardHandler)
		}
		c.s.refusals = &logguard.Limiter{Log: log, Window: c.s.Limits.LogWindow}
	})
	c.s.refusals.Warn(c.identity+"\x00"+kind, msg, append([]any{"peer", c.identity}, args...)...)
}

// FlushLog logs the counts of refusals not yet logged (at shutdown).
func (s *Server) FlushLog() {
	s.refusalsOnce.Do(func() {})
	s.refusals.Flush()
}

// Limits bound what one connection may hold. Zero fields take the
// defaults (DefaultHelloTimeout, ...).
type Limits struct {
	HelloTimeout time.Duration // from connecting to hello
	// Idle closes a connection that said hello and then sent nothing
	// while none of its requests was in progress for this long.
	Idle time.Duration
	// Registrations bounds the placeholders registered on one connection
	// (an agent registers one); one more is refused with busy.
	Registrations int
	// LogWindow is how long like refusals from one peer are counted
	// before their number is logged (0: logguard.DefaultWindow).
	LogWindow time.Duration
	// InFlight and PlaceholderInFlight bound the requests served at once
	// on a user and a placeholder connection: at the bound the server
	// stops reading the connection until one ends (backpressure).
	InFlight, PlaceholderInFlight int
	// Nexts bounds the next requests in progress on a connection; one
	// more is refused with code busy.
	Nexts int
}

func orDefault[T int | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// Serve accepts connections until ctx ends or ln fails for good. Every
// peer gets maxRole (the Unix socket is only reachable by its owner:
// RoleAdmin).
func (s *Server) Serve(ctx context.Context, ln net.Listener, maxRole string) error {
	return Accept(ctx, ln, &s.Gate, s.Log, &s.wg, func(c net.Conn, t *Ticket) {
		s.ServePeer(ctx, c, Peer{MaxRole: maxRole, Identity: "socket", Admission: t})
	})
}

// Wait waits for connections' handlers to return.
func (s *Server) Wait() { s.wg.Wait() }

// Peer is what the transport knows about the other end of a connection.
type Peer struct {
	// MaxRole is the most the peer may do (protocol.RoleAdmin, RoleUser
	// or RolePlaceholder); its hello may only narrow it.
	MaxRole string
	// Identity names the credential the peer proved ("socket" for the
	// Unix socket's owner, "ssh-key:SHA256:..." over SSH). A placeholder
	// may reclaim its id after a reconnect only with the same identity.
	Identity string
	// Admission, if set, is the connection's place in its listener's
	// Gate, given up once the peer says hello.
	Admission *Ticket
	// NoPlaceholder refuses the placeholder role to the peer: the
	// placeholder ops (register, next, report, heartbeat, output, files.*)
	// and a hello asking for it. SSH user and admin keys are so: a
	// placeholder is handed files from the CLS host (files.pull), jobs
	// and their commands, which no one but site placeholders should get.
	NoPlaceholder bool
	// Site, if set, is the one site the peer may register placeholders
	// of (a site's own placeholder key, mq-site-NAME).
	Site string
}

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
	log      *slog.Logger
	closed   <-chan struct{} // the connection's end
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
	c := &conn{s: s, rwc: rwc, maxRole: p.MaxRole, identity: p.Identity, noPH: p.NoPlaceholder, site: p.Site, phs: map[int64]protocol.Register{}, log: log, closed: ctx.Done()}
	var reqs sync.WaitGroup
	defer func() {
		cancel()
		rwc.Close()
		reqs.Wait()
		if c.bulk != nil {
			c.bulk.Abort()
		}
		for id, reg := range c.phs {
			// Its row goes once it is gone for good (metaqueue/phsweep.go).
			s.Store.PlaceholderDisconnected(context.Background(), id)
			if s.OnPlaceholder != nil {
				s.OnPlaceholder(id, reg, false)
			}
		}
	}()
	lim := s.Limits
	var (
		lastActive atomic.Int64 // unix nanoseconds of the last line read or request ended
		busy       atomic.Int64 // requests in progress
		greeted    atomic.Bool
	)
	touch := func() { lastActive.Store(time.Now().UnixNano()) }
	touch()
	// The watchdog closes the connection when it ends, when no hello came
	// within HelloTimeout, and, once it said hello, when it has been idle
	// for Idle: nothing read and no request in progress. It keeps the
	// time of the last activity rather than comparing counts between two
	// ticks: those counts, taken when the goroutine first ran, closed a
	// connection at the hello deadline (15 s) when its hello had been read
	// before the watchdog's first look.
	go func() {
		idle := orDefault(lim.Idle, DefaultIdle)
		helloBy := time.Now().Add(orDefault(lim.HelloTimeout, DefaultHelloTimeout))
		t := time.NewTimer(time.Until(helloBy))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				rwc.Close()
				return
			case <-t.C:
			}
			now := time.Now()
			switch {
			case !greeted.Load():
				if left := helloBy.Sub(now); left > 0 {
					t.Reset(left)
					continue
				}
				log.Debug("closing a connection that sent no hello in time")
				cancel()
				continue
			case busy.Load() > 0:
				t.Reset(idle) // a request in progress is activity
				continue
			}
			quiet := now.Sub(time.Unix(0, lastActive.Load()))
			if quiet >= idle {
				log.Debug("closing an idle connection", "idle", idle)
				cancel()
				continue
			}
			t.Reset(idle - quiet)
		}
	}()
	var bulkQ chan *bulkItem
	var bulkDone chan struct{}
	spooled := false // a bulk.add was read since the last commit or abort
	defer func() {
		if bulkQ != nil {
			close(bulkQ)
			<-bulkDone
		}
	}()
	var (
		slots chan struct{} // requests in progress, up to the role's bound
		nexts atomic.Int32
	)
	maxNexts := int32(orDefault(lim.Nexts, DefaultNexts))
	// take waits for room for one more request in progress: while there is
	// none, the connection is not read (backpressure).
	take := func() bool {
		select {
		case slots <- struct{}{}:
			busy.Add(1)
			return true
		case <-ctx.Done():
			return false
		}
	}
	release := func() {
		touch()
		<-slots
		busy.Add(-1)
	}
	r := protocol.NewReader(rwc)
	for {
		line, err := r.ReadLine()
		if err != nil {
			if errors.Is(err, protocol.ErrFrameTooLarge) {
				c.reply(0, nil, protocol.Errorf(protocol.CodeBadRequest, "%v; closing the connection", err))
			} else if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && ctx.Err() == nil {
				log.Debug("connection read failed", "err", logguard.Clip(err.Error(), 256))
			}
			return
		}
		touch()
		var req *protocol.Request
		var add *protocol.BulkAdd // a bulk.add body already decoded
		if id, a, ok := protocol.FastBulkAdd(line); ok && c.hello {
			req, add = &protocol.Request{ID: id, Op: protocol.OpBulkAdd.Name}, &a
		} else if req, err = protocol.ParseRequest(line); err != nil {
			var id uint64
			if req != nil {
				id = req.ID
			}
			c.reply(id, nil, err)
			continue
		}
		if !c.hello {
			if req.Op != protocol.OpHello.Name {
				c.reply(req.ID, nil, protocol.Errorf(protocol.CodeBadRequest, "the first request must be hello, not %q", req.Op))
				return
			}
			body, err := c.doHello(req.Body)
			if c.hello {
				// Out of the gate before the reply: a client told it is in
				// may at once open another connection from the same source.
				greeted.Store(true)
				p.Admission.Done()
			}
			c.reply(req.ID, body, err)
			if !c.hello {
				return
			}
			n := orDefault(lim.InFlight, DefaultInFlight)
			if c.role == protocol.RolePlaceholder {
				n = orDefault(lim.PlaceholderInFlight, DefaultPlaceholderInFlight)
			}
			slots = make(chan struct{}, n)
			continue
		}
		rt := s.route(req.Op)
		if err := c.allowed(req.Op, rt); err != nil {
			c.reply(req.ID, nil, err)
			continue
		}
		switch {
		case rt != nil && rt.bulk != nil:
			// Bulk steps run in order on one goroutine; the raw lines of
			// each chunk are parsed concurrently before their turn.
			if bulkQ == nil {
				bulkQ = make(chan *bulkItem, 4)
				bulkDone = make(chan struct{})
				go func() {
					defer close(bulkDone)
					for it := range bulkQ {
						body, err := c.safe(it.req, func() (any, error) {
							<-it.parsed
							return it.rt.bulk(ctx, c, it)
						})
						c.reply(it.req.ID, body, err)
						release()
					}
				}()
			}
			if !take() {
				return
			}
			it := newBulkItem(rt, req, add)
			switch req.Op {
			case protocol.OpBulkAdd.Name:
				spooled = true
			case protocol.OpBulkCommit.Name:
				if it.err = DecodeBody(req.Body, &it.commit); it.err == nil && it.commit.Token != "" {
					if spooled {
						// Noted as soon as it is read, so that a client
						// asking on a new connection after this one died
						// cannot overtake it.
						it.finish = s.startCommit(it.commit.Token)
					} else {
						it.lookup = true
					}
				}
				spooled = false
			default:
				spooled = false
			}
			bulkQ <- it
			continue
		case rt != nil && rt.parks:
			// A placeholder parks one poll at a time; many would each hold
			// a goroutine and a place in the core's queue.
			if nexts.Load() >= maxNexts {
				c.refused("busy-next", "refused a next beyond the connection's bound", "bound", maxNexts)
				c.reply(req.ID, nil, protocol.Errorf(protocol.CodeBusy, "%d next requests are already in progress on this connection", maxNexts))
				continue
			}
			nexts.Add(1)
		}
		if !take() {
			return
		}
		reqs.Add(1)
		go func() {
			defer reqs.Done()
			body, err := c.safe(req, func() (any, error) {
				if rt == nil || rt.serve == nil {
					return nil, protocol.Errorf(protocol.CodeUnsupported, "unknown op %q", req.Op)
				}
				return rt.serve(ctx, c, req)
			})
			if rt != nil && rt.parks {
				nexts.Add(-1)
			}
			c.reply(req.ID, body, err)
			release()
		}()
	}
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

// reply writes one response frame.
func (c *conn) reply(id uint64, body any, err error) {
	resp := protocol.Response{ID: id}
	if err != nil {
		resp.Err = protocol.AsError(err)
		if resp.Err.Code == protocol.CodeInternal {
			if c.ended() || errors.Is(err, context.Canceled) {
				// The peer went away first: nothing failed.
				c.log.Debug("request ended with its connection", "id", id, "err", err)
				return
			}
			c.log.Error("request failed", "id", id, "err", logguard.Clip(err.Error(), 1024)) // may quote a peer's path
		}
	} else if body != nil {
		b, merr := json.Marshal(body)
		if merr != nil {
			resp.Err = protocol.Errorf(protocol.CodeInternal, "encode reply: %v", merr)
		} else {
			resp.Body = b
		}
	}
	c.write(&resp)
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
// frame and the client is never left waiting.
func (c *conn) write(resp *protocol.Response) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	var err error
	c.wbuf, err = protocol.AppendFrame(c.wbuf[:0], resp)
	if err != nil {
		c.log.Error("reply not sent", "id", resp.ID, "err", err)
		code := protocol.CodeInternal
		if errors.Is(err, protocol.ErrFrameTooLarge) {
			code = protocol.CodeTooLarge
		}
		e := protocol.Errorf(code, "the reply could not be sent: %v; ask for less", err)
		if c.wbuf, err = protocol.AppendFrame(c.wbuf[:0], &protocol.Response{ID: resp.ID, Err: e}); err != nil {
			return
		}
	}
	c.rwc.Write(c.wbuf)
	if cap(c.wbuf) > 1<<20 {
		c.wbuf = nil
	}
}

// bulkItem is one bulk step; an add's raw lines are parsed as soon as it is
// read, while earlier steps are still being spooled.
type bulkItem struct {
	rt     *route
	req    *protocol.Request
	parsed chan struct{} // closed when add and err are set
	add    protocol.BulkAdd
	err    error

	commit protocol.BulkCommit // the body of a bulk.commit
	lookup bool                // a commit with a token and nothing spooled: asks for the token's outcome
	finish func()              // ends the commit's entry in Server.committing
}

// newBulkItem starts parsing a bulk step; add is its body if the read loop
// decoded it already (protocol.FastBulkAdd), else nil.
func newBulkItem(rt *route, req *protocol.Request, add *protocol.BulkAdd) *bulkItem {
	it := &bulkItem{rt: rt, req: req, parsed: make(chan struct{})}
	if req.Op != protocol.OpBulkAdd.Name {
		close(it.parsed)
		return it
	}
	go func() {
		defer close(it.parsed)
		if add != nil {
			it.add = *add
		} else if it.err = DecodeBody(req.Body, &it.add); it.err != nil {
			return
		}
		b := &it.add
		if len(b.Data) == 0 {
			return
		}
		if len(b.Jobs) > 0 {
			it.err = protocol.Errorf(protocol.CodeBadRequest, "bulk.add takes jobs or data, not both")
			return
		}
		def := protocol.JobSpec{Queue: b.Queue, Cwd: b.Cwd, Env: b.Env}
		err := protocol.ReadJobLines(bytes.NewReader(b.Data), b.Line, def, func(_ int, js protocol.JobSpec) error {
			// mqsub -f sends raw lines from this host: inputs of no declared
			// size take the file's, as mqsub -i does.
			protocol.FillSizes(&js, os.Stat)
			b.Jobs = append(b.Jobs, js)
			return nil
		})
		if err != nil {
			it.err = protocol.Errorf(protocol.CodeBadRequest, "%v", err)
		}
		b.Data = nil
	}()
	return it
}

// bulkAdd spools a parsed chunk; a failed one poisons the bulk until abort.
func bulkAdd(_ context.Context, c *conn, it *bulkItem) (protocol.Empty, error) {
	if c.bulkErr != nil {
		return protocol.Empty{}, c.bulkErr
	}
	if it.err != nil {
		if c.bulk != nil {
			c.bulk.Abort()
		}
		c.bulk, c.bulkErr = nil, it.err
		return protocol.Empty{}, it.err
	}
	if c.bulk == nil {
		bulk, err := c.s.Store.NewBulk()
		if err != nil {
			return protocol.Empty{}, err
		}
		c.bulk = bulk
	}
	if err := c.bulk.Add(it.add.Line, it.add.Jobs); err != nil {
		c.bulk.Abort()
		c.bulk, c.bulkErr = nil, err
		return protocol.Empty{}, err
	}
	return protocol.Empty{}, nil
}

// bulkCommit commits the spooled jobs, or answers a question about a
// token's commit.
func bulkCommit(ctx context.Context, c *conn, it *bulkItem) (protocol.SubmitReply, error) {
	if it.finish != nil {
		defer it.finish()
	}
	if it.err != nil {
		return protocol.SubmitReply{}, it.err
	}
	if err := c.bulkErr; err != nil {
		c.bulkErr = nil
		return protocol.SubmitReply{}, err
	}
	if c.bulk == nil {
		if it.lookup {
			return c.bulkOutcome(ctx, it.commit.Token)
		}
		return protocol.SubmitReply{}, protocol.Errorf(protocol.CodeBadRequest, "no jobs to submit")
	}
	b := c.bulk
	c.bulk = nil
	if it.commit.Array != "" || it.commit.ArrayLimit != 0 {
		if err := b.Array(it.commit.Array, it.commit.ArrayLimit); err != nil {
			b.Abort()
			return protocol.SubmitReply{}, err
		}
	}
	first, n, err := b.CommitToken(ctx, it.commit.Token)
	if err != nil {
		return protocol.SubmitReply{}, err
	}
	return protocol.SubmitReply{First: first, Count: n}, nil
}

func bulkAbort(_ context.Context, c *conn, _ *bulkItem) (protocol.Empty, error) {
	c.bulkErr = nil
	if c.bulk != nil {
		c.bulk.Abort()
		c.bulk = nil
	}
	return protocol.Empty{}, nil
}

// bulkOutcome answers a commit that only names a token: the ids of the
// bulk committed with it, once no commit with it is under way, or
// not_found.
func (c *conn) bulkOutcome(ctx context.Context, token string) (protocol.SubmitReply, error) {
	if err := c.s.awaitCommits(ctx, token); err != nil {
		return protocol.SubmitReply{}, err
	}
	first, n, found, err := c.s.Store.BulkOutcome(ctx, token)
	if err != nil {
		return protocol.SubmitReply{}, err
	}
	if !found {
		return protocol.SubmitReply{}, protocol.Errorf(protocol.CodeNotFound, "no bulk submission was committed with token %q", token)
	}
	return protocol.SubmitReply{First: first, Count: n}, nil
}

// stage writes a chunk of a job's output. A placeholder may stage only
// attempts it holds, and only within MaxStaged (plus room for the note).
func (c *conn) stage(ctx context.Context, b protocol.OutputChunk) error {
	if c.s.OutputDir == "" {
		return protocol.Errorf(protocol.CodeUnsupported, "this CLS does not keep staged output")
	}
	if b.Stream != "stdout" && b.Stream != "stderr" {
		return protocol.Errorf(protocol.CodeBadRequest, "stream must be stdout or stderr, not %q", b.Stream)
	}
	if b.Offset < 0 {
		return protocol.Errorf(protocol.CodeBadRequest, "output offset %d is negative", b.Offset)
	}
	if b.Offset > protocol.MaxStaged+64<<10-int64(len(b.Data)) {
		return protocol.Errorf(protocol.CodeBadRequest, "output beyond %d bytes is not staged", protocol.MaxStaged)
	}
	ok, err := c.s.Store.Holds(ctx, b.Placeholder, b.ID, b.Attempt)
	if err != nil {
		return err
	}
	if !ok {
		c.refused("output", "refused output for an attempt the placeholder does not hold", "placeholder", b.Placeholder, "job", b.ID, "attempt", b.Attempt)
		return protocol.Errorf(protocol.CodeForbidden, "placeholder %d does not hold job %d attempt %d", b.Placeholder, b.ID, b.Attempt)
	}
	out, errPath := job.OutputPaths(c.s.OutputDir, b.ID, b.Attempt)
	path := out
	if b.Stream == "stderr" {
		path = errPath
	}
	err = c.s.roomFor(int64(len(b.Data)))
	if err == nil {
		err = writeAt(path, b.Data, b.Offset)
	}
	if err != nil {
		// The job's outcome is its own; that its output is not whole here
		// is recorded beside it, for mqstat to say.
		why := fmt.Sprintf("%s not copied to the CLS: %v", b.Stream, err)
		if rerr := c.s.Store.OutputLost(ctx, b.Placeholder, b.ID, b.Attempt, why); rerr != nil {
			c.log.Error("could not record lost output", "job", b.ID, "err", rerr)
		}
		return fmt.Errorf("staging output: %w", err)
	}
	if c.s.OnOutput != nil {
		c.s.OnOutput(b.ID)
	}
	return nil
}

// roomFor refuses n bytes of output that would leave less than
// OutputReserve free on OutputDir's filesystem (kept for the database).
func (s *Server) roomFor(n int64) error {
	if s.OutputReserve <= 0 {
		return nil
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(s.OutputDir, &st); err != nil {
		return err
	}
	if free := int64(st.Bavail) * st.Bsize; free-n < s.OutputReserve {
		return fmt.Errorf("the disk is nearly full (%d bytes free; %d are kept for the CLS, cls serve --output-reserve)", free, s.OutputReserve)
	}
	return nil
}

// writeAt writes data at off in the file path, creating it (and its
// directory); offset 0 starts the file anew.
func writeAt(path string, data []byte, off int64) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	flags := os.O_WRONLY | os.O_CREATE | syscall.O_NOFOLLOW // never write through a link
	if off == 0 {
		flags |= os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(data, off)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// checkRegister refuses a registration whose strings are too long or hold
// control characters: they are stored and shown by mqstat.
func checkRegister(r protocol.Register) error {
	if err := protocol.CheckText("site", r.Site, protocol.MaxSiteBytes); err != nil {
		return err
	}
	if err := protocol.CheckText("host", r.Host, protocol.MaxHostBytes); err != nil {
		return err
	}
	if err := protocol.CheckText("batch", r.Batch, protocol.MaxHostBytes); err != nil {
		return err // kept in the site manager's memory and logged
	}
	return protocol.CheckText("out_dir", r.OutDir, protocol.MaxPathBytes)
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
		c.log.Warn("cleaned reports a placeholder sent", "reports", n, "first_job", first, "fixed", what)
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
