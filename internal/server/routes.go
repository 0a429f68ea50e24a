package server

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/catalog"

	"github.com/mq-hpc/mq/internal/logguard"
	"github.com/mq-hpc/mq/internal/metaqueue/arrays"
	"github.com/mq-hpc/mq/internal/metaqueue/copies"
	"github.com/mq-hpc/mq/protocol"
)

// route is how the server serves one declared op, built from a typed
// handler by handle, handleStream or handleBulk.
type route struct {
	op protocol.OpInfo
	// serve runs one request on its own goroutine.
	serve func(ctx context.Context, c *conn, req *protocol.Request) (any, error)
	// bulk, set instead of serve for bulk.add, bulk.commit and bulk.abort,
	// runs one step in order on the connection's bulk goroutine, once its
	// body is decoded (an add's by newBulkItem, a commit's by the read
	// loop, which notes the token at once).
	bulk func(ctx context.Context, c *conn, it *bulkItem) (any, error)
	// parks marks next: a connection may have only Limits.Nexts in
	// progress, each holding a goroutine and a place in the core's queue.
	parks bool
	// undelivered, if set, runs when a reply (body, to req) could not be
	// written: the peer never got it (see handBack).
	undelivered func(c *conn, req *protocol.Request, body any)
}

// builtin routes the ops the metaqueue serves. Built once, never changed.
var builtin = routeTable(
	handle(protocol.OpHello, func(context.Context, *conn, protocol.Hello) (protocol.HelloReply, error) {
		// The read loop answers the first hello itself.
		return protocol.HelloReply{}, protocol.Errorf(protocol.CodeBadRequest, "hello was already said")
	}),
	handle(protocol.OpSubmit, func(ctx context.Context, c *conn, b protocol.Submit) (protocol.SubmitReply, error) {
		ids, err := c.s.Store.SubmitRequest(ctx, b)
		if err != nil {
			return protocol.SubmitReply{}, err
		}
		var first int64
		if len(ids) > 0 {
			first = ids[0]
		}
		w := append(c.s.resourceWarnings(ctx, countAsking(b.Jobs), first, len(ids)), c.s.prereqWarnings(ctx, b.Jobs, ids)...)
		return protocol.SubmitReply{IDs: ids, Warnings: w}, nil
	}),
	handleBulk(protocol.OpBulkAdd, bulkAdd),
	handleBulk(protocol.OpBulkCommit, bulkCommit),
	handleBulk(protocol.OpBulkAbort, bulkAbort),
	handleStream(protocol.OpStat, func(ctx context.Context, c *conn, b protocol.Stat, send func(protocol.StatReply) error) error {
		return c.s.Store.Inspect().Stat(ctx, b, 0, func(jobs []protocol.JobInfo) error {
			return send(protocol.StatReply{Jobs: jobs})
		})
	}),
	handle(protocol.OpArrays, func(ctx context.Context, c *conn, b protocol.ArrayQuery) (protocol.ArraysReply, error) {
		as, err := arrays.List(ctx, c.s.Store.ReadDB(), c.s.Store, b)
		return protocol.ArraysReply{Arrays: as}, err
	}),
	handle(protocol.OpJob, func(ctx context.Context, c *conn, b protocol.JobQuery) (protocol.JobDetail, error) {
		if b.Output {
			return c.s.Store.Inspect().JobOutput(ctx, b.ID)
		}
		d, err := c.s.Store.Inspect().Job(ctx, b.ID)
		if err == nil {
			d.Streaming, err = c.s.streaming(ctx, d)
		}
		return d, err
	}),
	handle(protocol.OpSummary, func(ctx context.Context, c *conn, _ protocol.Empty) (protocol.SummaryReply, error) {
		qs, err := c.s.Store.Summary(ctx)
		if err != nil {
			return protocol.SummaryReply{}, err
		}
		moved, err := c.s.Store.Catalog().Moved(ctx)
		if err != nil {
			return protocol.SummaryReply{}, err
		}
		waste, err := copies.Waste(ctx, c.s.Store.ReadDB())
		return protocol.SummaryReply{Queues: qs, Moved: moved, Waste: waste}, err
	}),
	handle(protocol.OpDelete, func(ctx context.Context, c *conn, b protocol.Select) (protocol.ActionReply, error) {
		return c.s.Store.Delete(ctx, b)
	}),
	handle(protocol.OpPurge, func(ctx context.Context, c *conn, b protocol.Purge) (protocol.PurgeReply, error) {
		return c.s.Store.Purger().Run(ctx, b)
	}),
	handle(protocol.OpHold, func(ctx context.Context, c *conn, b protocol.Select) (protocol.ActionReply, error) {
		return c.s.Store.Hold(ctx, b)
	}),
	handle(protocol.OpRelease, func(ctx context.Context, c *conn, b protocol.Select) (protocol.ActionReply, error) {
		return c.s.Store.Release(ctx, b)
	}),
	handle(protocol.OpAlter, func(ctx context.Context, c *conn, b protocol.Alter) (protocol.ActionReply, error) {
		r, err := c.s.Store.Alter(ctx, b)
		if err == nil && (b.Resources.Asks() || b.Time > 0 || b.Est != nil) {
			r.Warnings = c.s.alterWarnings(ctx, r.IDs)
		}
		return r, err
	}),
	handle(protocol.OpRerun, func(ctx context.Context, c *conn, b protocol.Rerun) (protocol.ActionReply, error) {
		return c.s.Store.RerunWith(ctx, b)
	}),
	handle(protocol.OpWait, func(ctx context.Context, c *conn, b protocol.Wait) (protocol.WaitReply, error) {
		return c.s.Store.WaitFor(ctx, b)
	}),
	handleStream(protocol.OpProgress, func(ctx context.Context, c *conn, b protocol.Progress, send func(protocol.ProgressReply) error) error {
		return c.s.Store.Progress().Stream(ctx, b, send)
	}),
	handle(protocol.OpOutputRead, readOutput),
	handle(protocol.OpQueueList, func(ctx context.Context, c *conn, _ protocol.Empty) (protocol.QueueList, error) {
		qs, err := c.s.Store.Queues(ctx)
		return protocol.QueueList{Queues: qs}, err
	}),
	handle(protocol.OpQueueSet, func(ctx context.Context, c *conn, b protocol.QueueSet) (protocol.QueueInfo, error) {
		return c.s.Store.SetQueue(ctx, b)
	}),
	handle(protocol.OpRegister, register),
	handsBack(parks(handle(protocol.OpNext, func(ctx context.Context, c *conn, b protocol.Next) (protocol.NextReply, error) {
		if err := c.owns(b.Placeholder); err != nil {
			return protocol.NextReply{}, err
		}
		c.cleanReports(b.Reports)
		c.onClock(b.Placeholder, b.Reports, b.Clock)
		c.noteDiskFull(b.Placeholder, b.Reports)
		r, err := c.s.Store.Next(ctx, b)
		r.Clock = time.Now() // after the long poll: as the reply goes
		return r, err
	}))),
	handle(protocol.OpReport, func(ctx context.Context, c *conn, b protocol.ReportBatch) (protocol.Empty, error) {
		if err := c.owns(b.Placeholder); err != nil {
			return protocol.Empty{}, err
		}
		c.cleanReports(b.Reports)
		c.onClock(b.Placeholder, b.Reports, b.Clock)
		c.noteDiskFull(b.Placeholder, b.Reports)
		return protocol.Empty{}, c.s.Store.ReportBatch(ctx, b)
	}),
	handle(protocol.OpHeartbeat, func(ctx context.Context, c *conn, b protocol.Heartbeat) (protocol.HeartbeatReply, error) {
		if err := c.owns(b.Placeholder); err != nil {
			return protocol.HeartbeatReply{}, err
		}
		r, err := c.s.Store.Heartbeat(ctx, b)
		if err == nil && c.s.Followed != nil {
			r.Follow = c.s.Followed(b.Running)
		}
		if err == nil && c.s.OnPaused != nil {
			c.s.OnPaused(b.Placeholder, b.Paused)
		}
		if err == nil && b.Broken != "" && c.s.OnBroken != nil {
			c.s.OnBroken(b.Placeholder, b.Broken)
		}
		r.Clock = time.Now()
		return r, err
	}),
	handle(protocol.OpFilesPoll, func(ctx context.Context, c *conn, b protocol.FilePoll) (protocol.FileOrder, error) {
		if err := c.filesFor(b.Placeholder); err != nil {
			return protocol.FileOrder{}, err
		}
		if err := protocol.CheckMillis("wait_ms", b.WaitMS); err != nil {
			return protocol.FileOrder{}, protocol.Errorf(protocol.CodeBadRequest, "%v", err)
		}
		return c.s.Files.Poll(ctx, b.Placeholder, time.Duration(min(b.WaitMS, maxFilePollMS))*time.Millisecond)
	}),
	handle(protocol.OpFilesPull, func(ctx context.Context, c *conn, b protocol.FilePull) (protocol.FileData, error) {
		if err := c.filesFor(b.Placeholder); err != nil {
			return protocol.FileData{}, err
		}
		return c.s.Files.Pull(ctx, b)
	}),
	handle(protocol.OpFilesPush, func(ctx context.Context, c *conn, b protocol.FileChunk) (protocol.Empty, error) {
		if err := c.filesFor(b.Placeholder); err != nil {
			return protocol.Empty{}, err
		}
		if len(b.Data) > protocol.MaxFileChunk {
			return protocol.Empty{}, protocol.Errorf(protocol.CodeBadRequest, "a chunk of %d bytes; the limit is %d", len(b.Data), protocol.MaxFileChunk)
		}
		return protocol.Empty{}, c.s.Files.Push(ctx, b)
	}),
	handle(protocol.OpFilesDone, func(ctx context.Context, c *conn, b protocol.FileDone) (protocol.Empty, error) {
		if err := c.filesFor(b.Placeholder); err != nil {
			return protocol.Empty{}, err
		}
		return protocol.Empty{}, c.s.Files.Done(ctx, b)
	}),
	handle(protocol.OpOutputShip, shipStream),
	handle(protocol.OpOutput, func(ctx context.Context, c *conn, b protocol.OutputChunk) (protocol.Empty, error) {
		if err := c.owns(b.Placeholder); err != nil {
			return protocol.Empty{}, err
		}
		return protocol.Empty{}, c.stage(ctx, b)
	}),
)

// maxFilePollMS bounds a files.poll's wait, under the client's request
// timeouts.
const maxFilePollMS = 25_000

// AgentFiles serves the agents' side of file transfers over their own
// connections (cls/agentplace.go). Each call is for a placeholder that
// registered on the calling connection.
type AgentFiles interface {
	// Poll waits up to wait for an order for placeholder ph; a zero
	// FileOrder when none came.
	Poll(ctx context.Context, ph int64, wait time.Duration) (protocol.FileOrder, error)
	Pull(ctx context.Context, r protocol.FilePull) (protocol.FileData, error)
	Push(ctx context.Context, r protocol.FileChunk) error
	Done(ctx context.Context, r protocol.FileDone) error
}

// filesFor checks that the files ops are served and that ph is this
// connection's.
func (c *conn) filesFor(ph int64) error {
	if c.s.Files == nil {
		return protocol.Errorf(protocol.CodeUnsupported, "this CLS moves no files over agents' connections")
	}
	return c.owns(ph)
}

func routeTable(rs ...*route) map[string]*route {
	m := make(map[string]*route, len(rs))
	for _, r := range rs {
		if _, dup := m[r.op.Name]; dup {
			panic("server: two routes for " + r.op.Name)
		}
		m[r.op.Name] = r
	}
	return m
}

// handle routes op to fn, which gets the decoded body (DecodeBody; an op
// whose request is protocol.Empty ignores the body) and whose reply is
// encoded as the response's body.
func handle[Req, Resp any](op protocol.Op[Req, Resp], fn func(ctx context.Context, c *conn, req Req) (Resp, error)) *route {
	ignore := isEmpty[Req]()
	return &route{op: op.Info(), serve: func(ctx context.Context, c *conn, r *protocol.Request) (any, error) {
		var req Req
		if !ignore {
			if err := c.decodeBody(r.Body, &req); err != nil {
				return nil, err
			}
		}
		resp, err := fn(ctx, c, req)
		if err != nil {
			return nil, err
		}
		return resp, nil
	}}
}

// handleStream routes a streaming op to fn, which calls send for each
// frame; the final frame is {}.
func handleStream[Req, Item any](op protocol.StreamOp[Req, Item], fn func(ctx context.Context, c *conn, req Req, send func(Item) error) error) *route {
	return &route{op: op.Info(), serve: func(ctx context.Context, c *conn, r *protocol.Request) (any, error) {
		var req Req
		if err := c.decodeBody(r.Body, &req); err != nil {
			return nil, err
		}
		err := fn(ctx, c, req, func(item Item) error {
			raw, err := json.Marshal(item)
			if err != nil {
				return err
			}
			c.write(&protocol.Response{ID: r.ID, More: true, Body: raw})
			return nil
		})
		if err != nil {
			return nil, err
		}
		return protocol.Empty{}, nil
	}}
}

// handleBulk routes a bulk step to fn (see route.bulk).
func handleBulk[Req, Resp any](op protocol.Op[Req, Resp], fn func(ctx context.Context, c *conn, it *bulkItem) (Resp, error)) *route {
	return &route{op: op.Info(), bulk: func(ctx context.Context, c *conn, it *bulkItem) (any, error) {
		resp, err := fn(ctx, c, it)
		if err != nil {
			return nil, err
		}
		return resp, nil
	}}
}

func parks(r *route) *route {
	r.parks = true
	return r
}

// handsBack marks next: the jobs of a reply that could not be written go
// back to the queue as returned unstarted (the attempt not counted). The
// store claimed them for the placeholder, which never heard of them: a
// connection cut between the claim and the reply's write left them
// executing until their lease ran out, then counted a lost attempt.
func handsBack(r *route) *route {
	r.undelivered = handBack
	return r
}

// handBack returns the jobs of a next reply the placeholder never got.
func handBack(c *conn, req *protocol.Request, body any) {
	reply, ok := body.(protocol.NextReply)
	if !ok || len(reply.Jobs) == 0 {
		return
	}
	var b protocol.Next
	if DecodeBody(req.Body, &b) != nil {
		return
	}
	now := time.Now()
	back := make([]protocol.Report, len(reply.Jobs))
	for i, a := range reply.Jobs {
		back[i] = protocol.Report{ID: a.ID, Attempt: a.Attempt, Started: now, Finished: now, Reason: protocol.ReasonReturned}
	}
	// The connection's context has ended: the store decides alone.
	if err := c.s.Store.ReportBatch(context.Background(), protocol.ReportBatch{Placeholder: b.Placeholder, Reports: back}); err != nil {
		c.log.Warn("could not hand back the jobs of a reply the placeholder never got; they wait for their lease", "placeholder", b.Placeholder, "jobs", len(back), "err", err)
		return
	}
	c.log.Info("handed back the jobs of a reply the placeholder never got", "placeholder", b.Placeholder, "jobs", len(back))
}

func isEmpty[T any]() bool { return reflect.TypeFor[T]() == reflect.TypeFor[protocol.Empty]() }

// Route serves op on s with fn, for declared ops that the metaqueue does
// not serve itself (the site ops, served by the CLS's site manager). Call
// it before s serves. A declared op with no route is answered with
// unsupported. Routing an op twice, or one the server serves already,
// panics: it is a programming error.
func Route[Req, Resp any](s *Server, op protocol.Op[Req, Resp], fn func(ctx context.Context, req Req) (Resp, error)) {
	if info, ok := protocol.Lookup(op.Name); !ok || info != op.Info() {
		panic(fmt.Sprintf("server: op %q is not declared in package protocol as routed", op.Name))
	}
	if builtin[op.Name] != nil || s.routed[op.Name] != nil {
		panic(fmt.Sprintf("server: op %q is routed already", op.Name))
	}
	if s.routed == nil {
		s.routed = map[string]*route{}
	}
	s.routed[op.Name] = handle(op, func(ctx context.Context, _ *conn, req Req) (Resp, error) { return fn(ctx, req) })
}

// RouteStream serves the streaming op on s with fn, which calls send for
// each frame, as Route does for ops with one reply.
func RouteStream[Req, Item any](s *Server, op protocol.StreamOp[Req, Item], fn func(ctx context.Context, req Req, send func(Item) error) error) {
	if info, ok := protocol.Lookup(op.Name); !ok || info != op.Info() {
		panic(fmt.Sprintf("server: op %q is not declared in package protocol as routed", op.Name))
	}
	if builtin[op.Name] != nil || s.routed[op.Name] != nil {
		panic(fmt.Sprintf("server: op %q is routed already", op.Name))
	}
	if s.routed == nil {
		s.routed = map[string]*route{}
	}
	s.routed[op.Name] = handleStream(op, func(ctx context.Context, _ *conn, req Req, send func(Item) error) error { return fn(ctx, req, send) })
}

// route returns the route of op: nil if the op is not declared, one
// without a handler if no handler serves it here.
func (s *Server) route(op string) *route {
	if r := builtin[op]; r != nil {
		return r
	}
	if r := s.routed[op]; r != nil {
		return r
	}
	if info, ok := protocol.Lookup(op); ok {
		return &route{op: info}
	}
	return nil
}

// allowed checks that the connection's role may send op (rt nil: not
// declared), as its declaration says: a placeholder connection may send
// only the placeholder-role ops, and only admin the admin-role ones.
// Refusals are logged with the peer.
func (c *conn) allowed(op string, rt *route) error {
	if c.noPH && rt != nil && rt.op.Role == protocol.RolePlaceholder && op != protocol.OpHello.Name {
		c.refused("placeholder:"+op, "refused a placeholder request from a key that is not a placeholder's", "op", op)
		return protocol.Errorf(protocol.CodeForbidden,
			"%s is for placeholders, and only a site's placeholder key may act as one (this connection has role %s)", op, c.role)
	}
	if rt != nil && rt.op.Allows(c.role) {
		return nil
	}
	if c.role == protocol.RolePlaceholder {
		kind := "op:" + op // declared ops are few; the rest are counted together
		if rt == nil {
			kind = "op?"
		}
		c.refused(kind, "refused request outside the placeholder role", "op", logguard.Text(op))
		return protocol.Errorf(protocol.CodeForbidden, "a placeholder may not %s", protocol.ClipText(op, 256))
	}
	if rt == nil {
		return nil // unknown: the handler answers unsupported
	}
	c.refused("admin:"+op, "refused an admin request", "op", op, "role", c.role)
	return protocol.Errorf(protocol.CodeForbidden,
		"%s needs the admin role (the CLS owner's own socket, or a key added with `cls key add --role admin`); this connection has role %s", op, c.role)
}

// register introduces a placeholder on this connection.
func register(ctx context.Context, c *conn, b protocol.Register) (protocol.RegisterReply, error) {
	if err := checkRegister(b); err != nil {
		return protocol.RegisterReply{}, err
	}
	if c.site != "" && b.Site != c.site {
		c.refused("site", "refused a registration as another site than the key's", "site", logguard.Text(b.Site), "key_site", c.site)
		return protocol.RegisterReply{}, protocol.Errorf(protocol.CodeForbidden, "this key is site %s's; it may not register as site %s", protocol.Quote(c.site), protocol.Quote(b.Site))
	}
	if c.site == "" && c.identity != "socket" && b.Site == catalog.LocalSite {
		// The CLS's own placeholders come through its socket.
		c.refused("site", "refused a registration as the local site over SSH")
		return protocol.RegisterReply{}, protocol.Errorf(protocol.CodeForbidden, "site %s is the CLS's own placeholders; a key may not register as it", catalog.LocalSite)
	}
	// One connection registers one placeholder (an agent's); a few more
	// are let through for a reconnect's re-registration.
	// A registration under way holds its place (registering), so that
	// pipelined ones cannot all pass the check before any is recorded.
	bound := orDefault(c.s.Limits.Registrations, DefaultRegistrations)
	c.phMu.Lock()
	_, again := c.phs[b.ID]
	if !again && len(c.phs)+c.registering >= bound {
		c.phMu.Unlock()
		c.refused("register", "refused a registration beyond the connection's bound", "bound", bound)
		return protocol.RegisterReply{}, protocol.Errorf(protocol.CodeBusy, "%d placeholders are registered on this connection already", bound)
	}
	c.registering++
	c.phMu.Unlock()
	r, err := c.registerHere(ctx, b)
	c.phMu.Lock()
	c.registering--
	if err == nil {
		c.phs[r.ID] = b
	}
	c.phMu.Unlock()
	if err != nil {
		return protocol.RegisterReply{}, err
	}
	c.s.latest(r.ID, c)
	if c.s.OnPlaceholder != nil {
		c.s.OnPlaceholder(r.ID, b, true)
	}
	r.OutputFiles = c.s.outputFiles(b.Site)
	r.Clock = time.Now()
	return r, nil
}

// registerHere registers b's placeholder for c: an earlier connection's
// hold on its id is closed first (a reconnect).
func (c *conn) registerHere(ctx context.Context, b protocol.Register) (protocol.RegisterReply, error) {
	if b.ID != 0 {
		if err := c.s.closeEarlier(ctx, b.ID, c, b); err != nil {
			return protocol.RegisterReply{}, err
		}
	}
	return c.s.Store.RegisterAs(ctx, b, c.identity)
}

// Unrouted lists the declared ops that s has no handler for (answered
// unsupported): none on a fully wired CLS.
func (s *Server) Unrouted() []string {
	var names []string
	for _, o := range protocol.Ops() {
		if r := s.route(o.Name); r.serve == nil && r.bulk == nil {
			names = append(names, o.Name)
		}
	}
	return names
}
