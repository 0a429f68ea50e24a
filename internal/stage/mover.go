package stage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// A Transfer asks for the file at Path in place From to be copied to place
// To.
type Transfer struct {
	Path     string
	From, To string // place names, as Mover.Places knows them
	Size     int64  // expected size; -1 when unknown
	SHA256   string // expected hex SHA-256; "" when unknown
}

// Result is what a Transfer did.
type Result struct {
	Bytes    int64
	Duration time.Duration
	SHA256   string // of the bytes moved
	Err      error
}

// A Mover moves files between places. Its zero value is not usable: set
// Places. It is safe for concurrent use.
type Mover struct {
	// Places returns the Place a name stands for.
	Places func(name string) (Place, error)
	// Log, if set, gets one line per transfer.
	Log *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Rates, if set, is fed each successful transfer's bytes and
	// duration, for each end that is not Local.
	Rates *Rates
	// Local is the name of the CLS host's place, whose link is not
	// measured; "local" when empty.
	Local string
	// Stall gives up a transfer that moves no byte for this long
	// (ErrStalled), cutting its places that are Cutters; DefaultStall
	// when 0. A slow transfer that moves is never cut.
	Stall time.Duration

	mu      sync.Mutex
	flights map[flightKey]*flight
}

type flightKey struct{ path, to string }

// flight is one transfer shared by every Move of the same path to the same
// place while it runs.
type flight struct {
	ctx  *flightCtx
	done chan struct{}
	res  Result
}

// flightCtx is the context a shared transfer runs under: it carries the
// values of the Move that started it, and is cancelled when the contexts
// of all the Moves waiting for it are. Its Err checks them when called,
// so a copy that checks Err between chunks stops at the next chunk after
// the last caller gave up, not some time later.
type flightCtx struct {
	context.Context // the first caller's, without its cancellation
	done            chan struct{}

	mu    sync.Mutex
	ctxs  []context.Context
	stops []func() bool
	err   error
}

func newFlightCtx(ctx context.Context) *flightCtx {
	c := &flightCtx{Context: context.WithoutCancel(ctx), done: make(chan struct{})}
	c.join(ctx)
	return c
}

func (c *flightCtx) Done() <-chan struct{} { return c.done }

func (c *flightCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	for _, x := range c.ctxs {
		if x.Err() == nil {
			return nil
		}
	}
	c.err = context.Canceled
	close(c.done)
	return c.err
}

// join adds a waiter's ctx, unless the flight is already cancelled.
func (c *flightCtx) join(ctx context.Context) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return false
	}
	c.ctxs = append(c.ctxs, ctx)
	c.stops = append(c.stops, context.AfterFunc(ctx, func() { c.Err() }))
	return true
}

// release stops watching the waiters' contexts once the flight is over.
func (c *flightCtx) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, stop := range c.stops {
		stop()
	}
	c.stops = nil
}

func (m *Mover) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// Move copies t.Path from t.From to t.To. The target appears only complete
// and verified: the bytes are streamed to a temporary name beside it,
// their count checked against the source's size (and t.Size when known),
// their SHA-256 against t.SHA256 when known, and only then renamed into
// place; on any error, or cancellation of ctx, the temporary file is
// removed. A Move of a path to a place while another is moving it there
// waits for that one and shares its Result (checked against its own
// expected size and SHA-256).
func (m *Mover) Move(ctx context.Context, t Transfer) Result {
	key := flightKey{t.Path, t.To}
	m.mu.Lock()
	if m.flights == nil {
		m.flights = make(map[flightKey]*flight)
	}
	f, joined := m.flights[key]
	if joined && !f.ctx.join(ctx) {
		joined = false // cancelled, ending: start afresh
	}
	if !joined {
		f = &flight{ctx: newFlightCtx(ctx), done: make(chan struct{})}
		m.flights[key] = f
		go func() {
			f.res = m.move(f.ctx, t)
			f.ctx.release()
			m.mu.Lock()
			if m.flights[key] == f {
				delete(m.flights, key)
			}
			m.mu.Unlock()
			close(f.done)
		}()
	}
	m.mu.Unlock()

	select {
	case <-f.done:
	case <-ctx.Done():
		if f.ctx.Err() == nil {
			// Others still wait for the transfer.
			return Result{Err: m.errorf(t, ctx.Err())}
		}
		// The last to give up waits for the transfer to clean up, and
		// gets its result: cancelled, or done if it was too late.
		<-f.done
	}
	res := f.res
	if joined && res.Err == nil {
		if err := verify(t, res.Bytes, res.SHA256); err != nil {
			res.Err = m.errorf(t, fmt.Errorf("the file moved by a concurrent transfer: %w", err))
		}
	}
	return res
}

// MoveAll moves ts with up to parallel transfers at a time (1 when
// parallel < 1) and returns their Results in order. Transfers to one SFTP
// place share its connection, whose requests are pipelined: many small
// files move in far fewer round trips than one at a time.
func (m *Mover) MoveAll(ctx context.Context, ts []Transfer, parallel int) []Result {
	if parallel < 1 {
		parallel = 1
	}
	res := make([]Result, len(ts))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(parallel, len(ts)) {
		wg.Go(func() {
			for i := range next {
				res[i] = m.Move(ctx, ts[i])
			}
		})
	}
	for i := range ts {
		next <- i
	}
	close(next)
	wg.Wait()
	return res
}

func (m *Mover) errorf(t Transfer, err error) error {
	return fmt.Errorf("moving %s from %s to %s: %w", t.Path, t.From, t.To, err)
}

// verify checks n bytes with hex digest sum against what t expects.
func verify(t Transfer, n int64, sum string) error {
	if t.Size >= 0 && n != t.Size {
		return fmt.Errorf("%w: %d bytes, expected %d", ErrMismatch, n, t.Size)
	}
	if t.SHA256 != "" && !strings.EqualFold(sum, t.SHA256) {
		return fmt.Errorf("%w: SHA-256 %s, expected %s", ErrMismatch, sum, strings.ToLower(t.SHA256))
	}
	return nil
}

// ErrMismatch means the bytes moved are not the ones expected: their size
// or SHA-256 differs from the Transfer's, or the source changed while it
// was read.
var ErrMismatch = errors.New("content mismatch")

func (m *Mover) move(ctx context.Context, t Transfer) (res Result) {
	start := m.now()
	defer func() {
		res.Duration = m.now().Sub(start)
		if res.Err != nil {
			res.Err = m.errorf(t, res.Err)
		}
		m.record(t, res)
	}()
	if m.Places == nil {
		return Result{Err: errors.New("stage: Mover has no Places")}
	}
	if t.From == t.To {
		return Result{Err: errors.New("the source and the target are the same place")}
	}
	from, err := m.Places(t.From)
	if err != nil {
		return Result{Err: err}
	}
	to, err := m.Places(t.To)
	if err != nil {
		return Result{Err: err}
	}
	limit := m.Stall
	if limit <= 0 {
		limit = DefaultStall
	}
	ctx, watch, stop := watchStall(ctx, limit, from, to)
	defer stop()
	defer func() {
		if err := watch.err(); err != nil && res.Err != nil {
			res.Err = err
		}
	}()
	src, info, err := from.Open(ctx, t.Path)
	if err != nil {
		return Result{Err: fmt.Errorf("open at %s: %w", t.From, err)}
	}
	defer src.Close()
	if info.Size >= 0 {
		if err := verify(Transfer{Size: t.Size}, info.Size, ""); err != nil {
			return Result{Err: fmt.Errorf("source at %s: %w", t.From, err)}
		}
	}
	// Every byte past what is expected is refused as it arrives: a source
	// that sends more than its size (or the catalog's) fills no disk.
	want := t.Size
	if want < 0 {
		want = info.Size
	}
	if err := checkRoom(ctx, to, t.Path, want); err != nil {
		return Result{Err: fmt.Errorf("at %s: %w", t.To, err)}
	}
	dst, err := to.Create(ctx, t.Path)
	if err != nil {
		return Result{Err: fmt.Errorf("create at %s: %w", t.To, err)}
	}
	h := sha256.New()
	n, err := copyHashed(ctx, dst, src, want, watch.counting(h))
	res = Result{Bytes: n, SHA256: hex.EncodeToString(h.Sum(nil))}
	if err == nil && info.Size >= 0 && n != info.Size {
		err = fmt.Errorf("%w: read %d bytes of a file of %d (changed while read?)", ErrMismatch, n, info.Size)
	}
	if err == nil {
		err = verify(t, n, res.SHA256)
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		dst.Abort()
		res.Err = err
		return res
	}
	if err := dst.Commit(ctx); err != nil {
		res.Err = err
	}
	return res
}

func (m *Mover) record(t Transfer, res Result) {
	if m.Log != nil {
		if res.Err != nil {
			m.Log.Warn("transfer failed", "path", t.Path, "from", t.From, "to", t.To, "bytes", res.Bytes, "seconds", res.Duration.Seconds(), "err", res.Err)
		} else {
			m.Log.Info("transfer", "path", t.Path, "from", t.From, "to", t.To, "bytes", res.Bytes, "seconds", res.Duration.Seconds(), "sha256", res.SHA256)
		}
	}
	if m.Rates == nil || res.Err != nil {
		return
	}
	local := m.Local
	if local == "" {
		local = "local"
	}
	for _, p := range []string{t.From, t.To} {
		if p != local {
			m.Rates.Observe(p, res.Bytes, res.Duration)
		}
	}
}

// copyBuf is the buffer of copies between two places that do not pipeline
// themselves: large enough for few system calls, small enough to be no
// burden times the transfers running.
const copyBuf = 256 << 10

// copyHashed copies src, of size bytes (-1: unknown), to dst through h and
// returns the bytes copied. A source that has more than size bytes fails
// the copy with ErrMismatch before any byte past size reaches dst. SFTP
// files pipeline their requests only through WriteTo (reading) and
// ReadFrom (writing), so the copy uses them when present, with a pipe
// between the two when both ends are remote. A file known to be small is
// copied with one buffer (a read of it is one request, and WriteTo would
// first ask for its size). Every step checks ctx.
func copyHashed(ctx context.Context, dst io.Writer, src io.Reader, size int64, h hash.Hash) (int64, error) {
	wt, srcPipelines := src.(io.WriterTo)
	rf, dstPipelines := dst.(io.ReaderFrom)
	if size >= 0 && size < copyBuf {
		srcPipelines = false
	}
	switch {
	case dstPipelines && srcPipelines:
		pr, pw := io.Pipe()
		errc := make(chan error, 1)
		go func() {
			_, err := wt.WriteTo(ctxWriter{ctx, pw})
			pw.CloseWithError(err)
			errc <- err
		}()
		n, err := rf.ReadFrom(limit(io.TeeReader(ctxReader{ctx, pr}, h), size))
		pr.CloseWithError(errors.New("stage: copy ended"))
		if werr := <-errc; err == nil {
			err = werr
		}
		return n, err
	case dstPipelines:
		return rf.ReadFrom(limit(io.TeeReader(ctxReader{ctx, src}, h), size))
	case srcPipelines:
		return wt.WriteTo(ctxWriter{ctx, capped(io.MultiWriter(dst, h), size)})
	default:
		return io.CopyBuffer(ctxWriter{ctx, capped(io.MultiWriter(dst, h), size)}, ctxReader{ctx, src}, make([]byte, copyBuf))
	}
}

// limit tells a ReaderFrom r's size when known, so it keeps as many
// requests in flight as the size needs (an *io.LimitedReader is what
// pkg/sftp looks for); a byte past the size fails the read (capReader).
func limit(r io.Reader, size int64) io.Reader {
	if size < 0 {
		return r
	}
	return &io.LimitedReader{R: &capReader{r: r, left: size, size: size}, N: size + 1}
}

// tooLong is the error of a source with more bytes than expected.
func tooLong(size int64) error {
	return fmt.Errorf("%w: the source sent more than the %d bytes expected", ErrMismatch, size)
}

// capReader reads at most left bytes from r; a byte more is an error,
// never returned.
type capReader struct {
	r    io.Reader
	left int64
	size int64
}

func (c *capReader) Read(b []byte) (int, error) {
	if c.left <= 0 {
		var one [1]byte
		n, err := c.r.Read(one[:])
		if n > 0 {
			return 0, tooLong(c.size)
		}
		return 0, err
	}
	if int64(len(b)) > c.left {
		b = b[:c.left]
	}
	n, err := c.r.Read(b)
	c.left -= int64(n)
	return n, err
}

// capped is w refusing (writing nothing of) a write that would take it
// past size bytes; size < 0 is no bound.
func capped(w io.Writer, size int64) io.Writer {
	if size < 0 {
		return w
	}
	return &capWriter{w: w, size: size}
}

type capWriter struct {
	w       io.Writer
	n, size int64
}

func (c *capWriter) Write(b []byte) (int, error) {
	if c.n+int64(len(b)) > c.size {
		return 0, tooLong(c.size)
	}
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r ctxReader) Read(b []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(b)
}

type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (w ctxWriter) Write(b []byte) (int, error) {
	if err := w.ctx.Err(); err != nil {
		return 0, err
	}
	return w.w.Write(b)
}

// HashFile streams the file at p in place and returns its hex SHA-256 and
// size. It is watched as a transfer is: a read left unanswered for the
// place's stall limit (stallOf) cuts the place and fails with ErrStalled.
func HashFile(ctx context.Context, place Place, p string) (string, int64, error) {
	return hashWithin(ctx, place, p, stallOf(place))
}

// hashWithin is HashFile with stall limit limit. It fails once the
// stall's cuts are done, without waiting for the read: a local file's
// read on a hung filesystem (NFS, Lustre) returns neither for the cut nor
// for ctx, and is left in a goroutine of its own.
func hashWithin(ctx context.Context, place Place, p string, limit time.Duration) (string, int64, error) {
	ctx, watch, stop := watchStall(ctx, limit, place)
	defer stop()
	type result struct {
		sum string
		n   int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		sum, n, err := hashFile(ctx, place, p, watch)
		done <- result{sum, n, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-watch.cut:
		select {
		case r = <-done:
		default:
			r.err = ErrStalled
		}
	}
	if r.err != nil && watch.fired.Load() {
		return "", 0, fmt.Errorf("hashing %s: %w: no byte read for %s%s", p, ErrStalled, limit, watch.said())
	}
	return r.sum, r.n, r.err
}

func hashFile(ctx context.Context, place Place, p string, watch *stallWatch) (string, int64, error) {
	r, info, err := place.Open(ctx, p)
	if err != nil {
		return "", 0, err
	}
	defer r.Close()
	h := sha256.New()
	counted := watch.counting(h)
	var n int64
	// A file that grows while it is read is refused past its size.
	if wt, ok := r.(io.WriterTo); ok {
		n, err = wt.WriteTo(ctxWriter{ctx, capped(counted, info.Size)})
	} else {
		n, err = io.CopyBuffer(capped(counted, info.Size), ctxReader{ctx, r}, make([]byte, copyBuf))
	}
	if err != nil {
		return "", 0, fmt.Errorf("hashing %s: %w", p, err)
	}
	if info.Size >= 0 && n != info.Size {
		return "", 0, fmt.Errorf("hashing %s: %w: read %d bytes of a file of %d (changed while read?)", p, ErrMismatch, n, info.Size)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}
