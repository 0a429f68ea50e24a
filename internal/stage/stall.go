package stage

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultStall is how long a transfer may move no byte before it is given
// up (Mover.Stall).
const DefaultStall = 2 * time.Minute

// ErrStalled means a transfer moved no byte for its Mover's Stall, or a
// call of an SFTP place outside a transfer went unanswered for the
// place's Stall: a peer that keeps its connection open but stopped
// answering (an sshd or sftp-server hung, a link gone dark) held it. The
// places it used that are Cutters were cut.
var ErrStalled = errors.New("stalled")

// A Cutter is a Place over a connection it can end at once, failing
// every request waiting on it: SFTP's requests take no context, so only
// that ends a transfer whose peer went silent. Cut reports whether it
// cut the whole connection (conn) or only the place's own session on it,
// the connection still answering for its other users. The next use of
// the place opens a session anew, on a new connection if it was cut.
type Cutter interface {
	Cut() (conn bool)
}

// stallWatch gives up a transfer that moves no byte for limit: it cancels
// the transfer's context and cuts its places. Progress is what passes
// through the hash (every byte moved does, on every copy path).
type stallWatch struct {
	limit time.Duration
	moved atomic.Int64
	fired atomic.Bool
	// cut is closed once a stall's cuts are done; ended and connCut say
	// then whether a place was cut, and whether a connection with it.
	cut            chan struct{}
	ended, connCut bool
	done           chan struct{}
}

// watchStall starts watching a transfer under ctx between places; stop
// ends the watch.
func watchStall(ctx context.Context, limit time.Duration, places ...Place) (context.Context, *stallWatch, func()) {
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	w := &stallWatch{limit: limit, cut: make(chan struct{}), done: make(chan struct{})}
	go func() {
		t := time.NewTicker(max(limit/8, time.Millisecond))
		defer t.Stop()
		last, since := int64(0), time.Now()
		for {
			select {
			case <-w.done:
				return
			case <-t.C:
			}
			if n := w.moved.Load(); n != last {
				last, since = n, time.Now()
				continue
			}
			if time.Since(since) < limit {
				continue
			}
			w.fired.Store(true)
			cancel()
			// At once: a cut may first ask whether its connection
			// still answers (SSH.EndSFTP), each of a site's own.
			var wg sync.WaitGroup
			var conn atomic.Bool
			for _, p := range places {
				if c, ok := p.(Cutter); ok {
					w.ended = true
					wg.Go(func() {
						if c.Cut() {
							conn.Store(true)
						}
					})
				}
			}
			wg.Wait()
			w.connCut = conn.Load()
			close(w.cut)
			return
		}
	}()
	return stallCtx{ctx, parent}, w, func() {
		close(w.done)
		cancel()
	}
}

// stallCtx is the watched transfer's context: Err asks the transfer's
// own first. A flight's context (flightCtx) notices its waiters gone
// only when its Err is called, so a derived context alone would see
// their cancel a goroutine's turn later, and a copy checking Err between
// chunks would run on for megabytes.
type stallCtx struct {
	context.Context // parent with the watch's cancel
	parent          context.Context
}

func (c stallCtx) Err() error {
	if err := c.parent.Err(); err != nil {
		return err
	}
	return c.Context.Err()
}

// counting is h, counting what passes through it as progress.
func (w *stallWatch) counting(h hash.Hash) hash.Hash { return countedHash{h, &w.moved} }

// err is the transfer's error once the watch gave it up, else nil.
func (w *stallWatch) err() error {
	if !w.fired.Load() {
		return nil
	}
	return fmt.Errorf("transfer %w: no byte moved for %s%s", ErrStalled, w.limit, w.said())
}

// said is what a stall did beyond giving up, once it has done it:
// nothing to say for places of the CLS host's own, whose reads take the
// context.
func (w *stallWatch) said() string {
	if !w.fired.Load() {
		return ""
	}
	<-w.cut
	switch {
	case w.connCut:
		return "; its connection was cut"
	case w.ended:
		return "; its SFTP session was ended (the connection, still answering, was kept)"
	}
	return ""
}

// watched runs call, requests to s outside a transfer (which its Mover
// watches), under a stall watch: SFTP's requests take no context, and a
// server hung on its filesystem leaves them unanswered for ever while
// sshd still answers keepalives. Past s's Stall without progress (what
// call reports through progress) the place is cut (Cut), so the requests
// waiting return, and the call fails with ErrStalled saying what it was
// doing, where and what was cut. The next use of the place opens a
// session anew.
func (s SFTP) watched(ctx context.Context, what string, call func(ctx context.Context, progress func()) error) error {
	limit := s.stall()
	ctx, w, stop := watchStall(ctx, limit, s)
	err := call(ctx, func() { w.moved.Add(1) })
	stop()
	if w.fired.Load() {
		server := "the SFTP server"
		if s.Writer != "" {
			server += " of " + s.Writer
		}
		return fmt.Errorf("%s: %w: %s left it unanswered for %s%s", what, ErrStalled, server, limit, w.said())
	}
	return err
}

func (s SFTP) stall() time.Duration {
	if s.Stall > 0 {
		return s.Stall
	}
	return DefaultStall
}

// stallOf is how long a call on p may wait: an SFTP place's Stall, else
// DefaultStall.
func stallOf(p Place) time.Duration {
	if s, ok := p.(SFTP); ok {
		return s.stall()
	}
	return DefaultStall
}

type countedHash struct {
	hash.Hash
	n *atomic.Int64
}

func (c countedHash) Write(b []byte) (int, error) {
	c.n.Add(int64(len(b)))
	return c.Hash.Write(b)
}
