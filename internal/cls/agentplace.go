package cls

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"slices"
	"sync"
	"time"

	"github.com/mq-hpc/mq/internal/stage"
	"github.com/mq-hpc/mq/protocol"
)

// The agent's own connection as a transfer path (DESIGN.md, "Data
// staging"). The hub keeps, per placeholder whose agent asks for file
// orders (files.poll), the orders waiting for it, and per transfer the
// one chunk in flight. An agentPlace is a stage.Place over it: a Mover
// writes to a placeholder's host (the agent pulls the bytes) or reads from
// it (the agent pushes them) as it does over SFTP, hashing as it goes;
// the agent hashes what it wrote and the file takes its name there only
// when both digests agree.

// agentWait bounds how long an order waits to be taken by an agent, and a
// chunk to be asked for or sent: an agent gone silent fails the transfer
// (retried from another replica, or at another place) instead of holding
// a stage worker.
const agentWait = 30 * time.Second

type agentHub struct {
	mu    sync.Mutex
	boxes map[int64]*agentBox // placeholders connected now, by id
	xfers map[int64]*agentXfer
	next  int64
}

// agentBox is a connected placeholder's mailbox of orders.
type agentBox struct {
	id         int64
	site, host string
	polled     bool // has asked for orders on this connection
	orders     []*agentXfer
	wake       chan struct{}
	gone       chan struct{} // closed when the connection closes
}

// agentXfer is one order and its bytes in flight.
type agentXfer struct {
	id    int64
	box   *agentBox
	order protocol.FileOrder
	taken chan struct{} // closed when the agent took the order
	ended chan struct{} // closed when the CLS's side gave up or finished
	once  sync.Once

	// get: chunks the Temp writes, pulled by the agent.
	chunks chan protocol.FileData
	// put: chunks the agent pushes, read by the Open reader.
	pushed chan protocol.FileChunk
	done   chan protocol.FileDone // the agent's end, 1 buffered

	mu      sync.Mutex
	off     int64 // next offset expected
	size    int64 // put: the file's size, as its first chunk said (-1 before)
	last    *protocol.FileData
	lastOff int64
}

func newAgentHub() *agentHub {
	return &agentHub{boxes: map[int64]*agentBox{}, xfers: map[int64]*agentXfer{}}
}

// placeholder is told when a placeholder registers on a connection and
// when that connection closes: its transfers end with it.
func (h *agentHub) placeholder(id int64, site, host string, connected bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if old := h.boxes[id]; old != nil {
		close(old.gone)
		delete(h.boxes, id)
	}
	if connected {
		h.boxes[id] = &agentBox{id: id, site: site, host: host, wake: make(chan struct{}, 1), gone: make(chan struct{})}
	}
}

// reachable says whether an agent at site and host ("" = any host) asks
// for orders now.
func (h *agentHub) reachable(site, host string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pick(site, host, true) != nil
}

// pick chooses a box at site and host whose agent polls (with polled
// false, also one that has not polled yet): the one with the fewest orders
// waiting, then the lowest id. Called with mu held.
func (h *agentHub) pick(site, host string, polled bool) *agentBox {
	var best *agentBox
	for _, b := range h.boxes {
		if polled && !b.polled || b.site != site || host != "" && b.host != host {
			continue
		}
		if best == nil || len(b.orders) < len(best.orders) || len(b.orders) == len(best.orders) && b.id < best.id {
			best = b
		}
	}
	return best
}

// noAgentError says no agent at a place asks for orders: the place cannot
// be reached over agents' connections now.
type noAgentError struct{ site, host string }

func (e *noAgentError) Error() string {
	if e.host == "" {
		return fmt.Sprintf("no placeholder of site %s takes files over its connection now", e.site)
	}
	return fmt.Sprintf("no placeholder on host %s of site %s takes files over its connection now", e.host, e.site)
}

// order queues an order for an agent at site and host and waits until the
// agent takes it.
func (h *agentHub) order(ctx context.Context, site, host string, o protocol.FileOrder) (*agentXfer, error) {
	h.mu.Lock()
	b := h.pick(site, host, true)
	if b == nil {
		// A placeholder that has just registered asks for orders a moment
		// later: its order waits for it (up to agentWait), rather than the
		// host being taken for down.
		b = h.pick(site, host, false)
	}
	if b == nil {
		h.mu.Unlock()
		return nil, &unreachableError{placeLabel(site, host), &noAgentError{site, host}}
	}
	h.next++
	o.Xfer = h.next
	x := &agentXfer{id: o.Xfer, box: b, order: o, size: -1, taken: make(chan struct{}), ended: make(chan struct{}),
		chunks: make(chan protocol.FileData, 1), pushed: make(chan protocol.FileChunk, 1), done: make(chan protocol.FileDone, 1)}
	h.xfers[x.id] = x
	b.orders = append(b.orders, x)
	h.mu.Unlock()
	signal(b.wake)

	t := time.NewTimer(agentWait)
	defer t.Stop()
	select {
	case <-x.taken:
		return x, nil
	case <-ctx.Done():
		h.end(x)
		return nil, ctx.Err()
	case <-b.gone:
		h.end(x)
		return nil, &unreachableError{placeLabel(site, host), errors.New("the placeholder's connection closed")}
	case <-t.C:
		h.end(x)
		return nil, &unreachableError{placeLabel(site, host), errors.New("no placeholder took the file within " + agentWait.String())}
	}
}

// end forgets x: a pull or push for it now fails, and the agent drops its
// side.
func (h *agentHub) end(x *agentXfer) {
	x.once.Do(func() { close(x.ended) })
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.xfers, x.id)
	x.box.orders = slices.DeleteFunc(x.box.orders, func(o *agentXfer) bool { return o == x })
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Poll serves files.poll: the placeholder's next order, or none after
// wait.
func (h *agentHub) Poll(ctx context.Context, ph int64, wait time.Duration) (protocol.FileOrder, error) {
	h.mu.Lock()
	b := h.boxes[ph]
	if b == nil {
		h.mu.Unlock()
		return protocol.FileOrder{}, protocol.Errorf(protocol.CodeBadState, "placeholder %d is not connected", ph)
	}
	b.polled = true
	h.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		h.mu.Lock()
		if len(b.orders) > 0 {
			x := b.orders[0]
			b.orders = b.orders[1:]
			h.mu.Unlock()
			close(x.taken)
			return x.order, nil
		}
		h.mu.Unlock()
		select {
		case <-b.wake:
		case <-t.C:
			return protocol.FileOrder{}, nil
		case <-b.gone:
			return protocol.FileOrder{}, nil
		case <-ctx.Done():
			return protocol.FileOrder{}, ctx.Err()
		}
	}
}

// xfer finds placeholder ph's transfer id.
func (h *agentHub) xfer(ph, id int64) (*agentXfer, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	x := h.xfers[id]
	if x == nil || x.box.id != ph {
		return nil, protocol.Errorf(protocol.CodeBadState, "no transfer %d for placeholder %d (ended or never ordered)", id, ph)
	}
	return x, nil
}

// Pull serves files.pull: the next chunk of a get order, or the last one
// again if the agent asks for its offset again (the reply was lost).
func (h *agentHub) Pull(ctx context.Context, r protocol.FilePull) (protocol.FileData, error) {
	x, err := h.xfer(r.Placeholder, r.Xfer)
	if err != nil {
		return protocol.FileData{}, err
	}
	if x.order.Kind != protocol.FileGet {
		return protocol.FileData{}, protocol.Errorf(protocol.CodeBadRequest, "transfer %d is not a get", r.Xfer)
	}
	x.mu.Lock()
	defer x.mu.Unlock() // one pull at a time per transfer
	if x.last != nil && r.Offset == x.lastOff {
		return *x.last, nil
	}
	if r.Offset != x.off {
		return protocol.FileData{}, protocol.Errorf(protocol.CodeBadRequest, "transfer %d: offset %d, expected %d", r.Xfer, r.Offset, x.off)
	}
	t := time.NewTimer(agentWait)
	defer t.Stop()
	select {
	case d := <-x.chunks:
		x.last, x.lastOff = &d, x.off
		x.off += int64(len(d.Data))
		return d, nil
	case <-x.ended:
		return protocol.FileData{}, protocol.Errorf(protocol.CodeBadState, "transfer %d was cancelled", r.Xfer)
	case <-t.C:
		return protocol.FileData{}, protocol.Errorf(protocol.CodeBusy, "transfer %d: no bytes within %s", r.Xfer, agentWait)
	case <-ctx.Done():
		return protocol.FileData{}, ctx.Err()
	}
}

// Push serves files.push: a chunk of a put order. A chunk sent again (its
// acknowledgement lost) is acknowledged without being passed on twice.
func (h *agentHub) Push(ctx context.Context, r protocol.FileChunk) error {
	x, err := h.xfer(r.Placeholder, r.Xfer)
	if err != nil {
		return err
	}
	if x.order.Kind != protocol.FilePut {
		return protocol.Errorf(protocol.CodeBadRequest, "transfer %d is not a put", r.Xfer)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.last != nil && r.Offset == x.lastOff && r.Offset+int64(len(r.Data)) == x.off {
		return nil
	}
	if r.Offset != x.off {
		return protocol.Errorf(protocol.CodeBadRequest, "transfer %d: offset %d, expected %d", r.Xfer, r.Offset, x.off)
	}
	if err := checkChunk(r, x.size); err != nil {
		return err
	}
	x.size = r.Size
	t := time.NewTimer(agentWait)
	defer t.Stop()
	select {
	case x.pushed <- r:
		x.last, x.lastOff = &protocol.FileData{}, x.off
		x.off += int64(len(r.Data))
		return nil
	case <-x.ended:
		return protocol.Errorf(protocol.CodeBadState, "transfer %d was cancelled", r.Xfer)
	case <-t.C:
		return protocol.Errorf(protocol.CodeBusy, "transfer %d: the CLS read nothing within %s", r.Xfer, agentWait)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// checkChunk refuses a pushed chunk that does not fit the file it is of:
// every chunk says the file's size (size, -1 before the first), at least
// 0 and the same each time, and no chunk reaches past it, so the reader
// on the CLS's side knows at once how many bytes may come and a Mover
// stops at the catalog's size (stage.Mover).
func checkChunk(r protocol.FileChunk, size int64) error {
	end := r.Offset + int64(len(r.Data))
	switch {
	case r.Size < 0:
		return protocol.Errorf(protocol.CodeBadRequest, "transfer %d: size %d is negative", r.Xfer, r.Size)
	case r.Size > protocol.MaxFileBytes:
		return protocol.Errorf(protocol.CodeBadRequest, "transfer %d: size %d, at most %d", r.Xfer, r.Size, int64(protocol.MaxFileBytes))
	case size >= 0 && r.Size != size:
		return protocol.Errorf(protocol.CodeBadRequest, "transfer %d: size %d, earlier chunks said %d", r.Xfer, r.Size, size)
	case len(r.Data) > protocol.MaxFileChunk:
		return protocol.Errorf(protocol.CodeBadRequest, "transfer %d: a chunk of %d bytes, at most %d", r.Xfer, len(r.Data), protocol.MaxFileChunk)
	case end > r.Size:
		return protocol.Errorf(protocol.CodeBadRequest, "transfer %d: bytes up to %d of a file of %d", r.Xfer, end, r.Size)
	case r.EOF && end != r.Size:
		return protocol.Errorf(protocol.CodeBadRequest, "transfer %d: the end at %d of a file of %d", r.Xfer, end, r.Size)
	}
	return nil
}

// Done serves files.done.
func (h *agentHub) Done(_ context.Context, r protocol.FileDone) error {
	x, err := h.xfer(r.Placeholder, r.Xfer)
	if err != nil {
		return err
	}
	select {
	case x.done <- r:
	default: // said twice: the first stands
	}
	return nil
}

// agentPlace is a placeholder's host seen through its agent's connection:
// its data root, at a site (and host, for sites whose nodes share no
// filesystem).
type agentPlace struct {
	hub        *agentHub
	site, host string
}

var _ stage.Place = agentPlace{}

func (p agentPlace) Create(ctx context.Context, path string) (stage.Temp, error) {
	x, err := p.hub.order(ctx, p.site, p.host, protocol.FileOrder{Kind: protocol.FileGet, Path: path, Size: -1})
	if err != nil {
		return nil, err
	}
	return &agentTemp{hub: p.hub, x: x, h: sha256.New(), buf: make([]byte, 0, protocol.MaxFileChunk)}, nil
}

func (p agentPlace) Open(ctx context.Context, path string) (io.ReadCloser, stage.Info, error) {
	x, err := p.hub.order(ctx, p.site, p.host, protocol.FileOrder{Kind: protocol.FilePut, Path: path})
	if err != nil {
		return nil, stage.Info{}, err
	}
	r := &agentReader{hub: p.hub, x: x, ctx: ctx}
	c, err := r.chunk()
	if err != nil {
		p.hub.end(x)
		return nil, stage.Info{}, err
	}
	r.cur, r.eof = c.Data, c.EOF
	return r, stage.Info{Size: c.Size, Regular: true}, nil
}

func (p agentPlace) Stat(ctx context.Context, path string) (stage.Info, error) {
	r, info, err := p.Open(ctx, path)
	if err != nil {
		return info, err
	}
	r.Close()
	return info, nil
}

func (p agentPlace) Remove(ctx context.Context, path string) error {
	x, err := p.hub.order(ctx, p.site, p.host, protocol.FileOrder{Kind: protocol.FileRemove, Path: path})
	if err != nil {
		return err
	}
	defer p.hub.end(x)
	d, err := x.wait(ctx)
	if err != nil {
		return err
	}
	return d
}

// wait waits for the agent's end of x: its error (nil when it succeeded)
// as the value, or an error of waiting.
func (x *agentXfer) wait(ctx context.Context) (error, error) {
	t := time.NewTimer(agentWait)
	defer t.Stop()
	select {
	case d := <-x.done:
		return doneErr(d), nil
	case <-x.box.gone:
		return nil, errors.New("the placeholder's connection closed")
	case <-t.C:
		return nil, errors.New("the placeholder did not answer within " + agentWait.String())
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// doneErr is an error an agent reported: missing files are
// fs.ErrNotExist, so the stager knows another try cannot find them.
func doneErr(d protocol.FileDone) error {
	if d.Error == "" {
		return nil
	}
	msg := "the agent: " + protocol.ClipText(d.Error, protocol.MaxReasonBytes)
	switch {
	case d.Missing:
		return fmt.Errorf("%s: %w", msg, fs.ErrNotExist)
	case d.NoSpace:
		return &stage.NoSpaceError{Dir: "the placeholder's data root", Free: -1, Need: -1, Err: errors.New(msg)}
	}
	return errors.New(msg)
}

// agentTemp is a file being written at a placeholder's host: the bytes
// go in chunks of MaxFileChunk as the agent pulls them.
type agentTemp struct {
	hub  *agentHub
	x    *agentXfer
	h    hash.Hash
	buf  []byte
	n    int64
	over bool
}

func (t *agentTemp) Write(b []byte) (int, error) {
	written := 0
	for len(b) > 0 {
		k := min(len(b), cap(t.buf)-len(t.buf))
		t.buf = append(t.buf, b[:k]...)
		b, written = b[k:], written+k
		if len(t.buf) == cap(t.buf) {
			if err := t.send(context.Background(), protocol.FileData{Data: t.buf}); err != nil {
				return written, err
			}
			t.buf = make([]byte, 0, protocol.MaxFileChunk)
		}
	}
	return written, nil
}

// send hashes and counts a chunk, then sends it.
func (t *agentTemp) send(ctx context.Context, d protocol.FileData) error {
	t.h.Write(d.Data)
	t.n += int64(len(d.Data))
	return t.sendRaw(ctx, d)
}

// Commit sends the last chunk with the digest of every byte and waits for
// the agent to have checked it and renamed the file into place.
func (t *agentTemp) Commit(ctx context.Context) error {
	if t.over {
		return nil
	}
	t.over = true
	defer t.hub.end(t.x)
	last := protocol.FileData{Data: t.buf, EOF: true}
	t.h.Write(last.Data)
	t.n += int64(len(last.Data))
	last.SHA256 = hex.EncodeToString(t.h.Sum(nil))
	if err := t.sendRaw(ctx, last); err != nil {
		return err
	}
	aerr, err := t.x.wait(ctx)
	if err != nil {
		return err
	}
	if aerr != nil {
		return aerr
	}
	return nil
}

func (t *agentTemp) sendRaw(ctx context.Context, d protocol.FileData) error {
	timer := time.NewTimer(agentWait)
	defer timer.Stop()
	select {
	case t.x.chunks <- d:
		return nil
	case <-t.x.ended:
		return errors.New("the transfer ended")
	case d := <-t.x.done:
		// The agent gave up writing (its disk full, say): its reason,
		// at once rather than after agentWait.
		if err := doneErr(d); err != nil {
			return err
		}
		return errors.New("the agent ended the transfer before its end")
	case <-t.x.box.gone:
		return errors.New("the placeholder's connection closed")
	case <-timer.C:
		return errors.New("the placeholder asked for no bytes within " + agentWait.String())
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (t *agentTemp) Abort() error {
	if !t.over {
		t.over = true
		t.hub.end(t.x)
	}
	return nil
}

// agentReader reads a file a placeholder's agent pushes.
type agentReader struct {
	hub    *agentHub
	x      *agentXfer
	ctx    context.Context
	cur    []byte
	eof    bool
	closed bool
}

func (r *agentReader) chunk() (protocol.FileChunk, error) {
	t := time.NewTimer(agentWait)
	defer t.Stop()
	select {
	case c := <-r.x.pushed:
		return c, nil
	case d := <-r.x.done:
		if err := doneErr(d); err != nil {
			return protocol.FileChunk{}, err
		}
		select { // the last chunk is sent before the end is said
		case c := <-r.x.pushed:
			return c, nil
		default:
		}
		return protocol.FileChunk{}, errors.New("the agent ended the transfer before its end")
	case <-r.x.box.gone:
		return protocol.FileChunk{}, errors.New("the placeholder's connection closed")
	case <-t.C:
		return protocol.FileChunk{}, errors.New("the placeholder sent no bytes within " + agentWait.String())
	case <-r.ctx.Done():
		return protocol.FileChunk{}, r.ctx.Err()
	}
}

func (r *agentReader) Read(b []byte) (int, error) {
	for len(r.cur) == 0 {
		if r.eof {
			return 0, io.EOF
		}
		c, err := r.chunk()
		if err != nil {
			return 0, err
		}
		r.cur, r.eof = c.Data, c.EOF
	}
	n := copy(b, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

func (r *agentReader) Close() error {
	if !r.closed {
		r.closed = true
		r.hub.end(r.x)
	}
	return nil
}

// placeLabel names a site, or a host within it, in messages.
func placeLabel(site, host string) string {
	if host == "" {
		return site
	}
	return site + ":" + host
}
