package progress

import (
	"context"
	"database/sql"
	"time"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// Core runs a function on the core goroutine with the core's state and
// its watches: a watch is counted, read and dropped there.
type Core interface {
	Do(ctx context.Context, fn func(st State, set Set) error) error
}

// MinInterval is the shortest interval between a stream's frames.
const MinInterval = 100 * time.Millisecond

// Streams are the progress streams of a core, read through its read pool
// (Store.Progress).
type Streams struct {
	core Core
	db   Querier
}

// NewStreams is core's progress streams, read through db.
func NewStreams(core Core, db Querier) Streams { return Streams{core: core, db: db} }

// Stream is Stream on s's core and read pool.
func (s Streams) Stream(ctx context.Context, req protocol.Progress, send func(protocol.ProgressReply) error) error {
	return Stream(ctx, req, s.core, s.db, send)
}

// Stream sends the counts by state of the jobs req selects every interval
// (and at once when the last one ends) until none is waiting, queued or
// executing; the last frame has Ended set and names jobs that did not end
// done, read through the read pool db. With req.Once it sends the counts
// now and returns.
func Stream(ctx context.Context, req protocol.Progress, core Core, db Querier, send func(protocol.ProgressReply) error) error {
	w, err := New(req)
	if err != nil {
		return err
	}
	every := time.Duration(req.IntervalMS) * time.Millisecond
	if every == 0 {
		every = time.Second
	}
	every = max(every, MinInterval)
	if w.readsRows() {
		// A target's in a queue, a range's or listed jobs' counts read
		// rows, which on the core would hold dispatch for most of a
		// second at a million jobs: they are read through the read pool
		// (a target's alone, or one array's range, are counted from the
		// core's kept counts there instead: lookup).
		if req.Once {
			return onceOffCore(ctx, w, core, db, send)
		}
		if pool, ok := db.(beginner); ok {
			defer core.Do(context.WithoutCancel(ctx), func(_ State, set Set) error {
				delete(set, w)
				return nil
			})
			snap, pending, err := openOffCore(ctx, w, core, pool)
			if err != nil {
				return err
			}
			return follow(ctx, w, core, db, snap, pending, every, send)
		}
	}
	var snap protocol.ProgressReply
	pending := 0
	err = core.Do(ctx, func(st State, set Set) error {
		if err := w.lookupQueue(st); err != nil {
			return err
		}
		if err := w.count(st); err != nil {
			return err
		}
		snap, pending = w.reply(st), w.pending()
		if req.Once && req.Spending {
			w.spending(st, &snap)
		}
		if !req.Once && pending > 0 {
			set[w] = struct{}{}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if req.Once {
		return send(snap)
	}
	defer core.Do(context.WithoutCancel(ctx), func(_ State, set Set) error {
		delete(set, w)
		return nil
	})
	return follow(ctx, w, core, db, snap, pending, every, send)
}

// follow sends the watch's counts every interval, from snap, until no job
// of it is pending, then its last frame.
func follow(ctx context.Context, w *Watch, core Core, db Querier, snap protocol.ProgressReply, pending int, every time.Duration, send func(protocol.ProgressReply) error) error {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for pending > 0 {
		if err := send(snap); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		case <-w.ended:
		}
		if err := core.Do(ctx, func(st State, set Set) error {
			snap, pending = w.reply(st), w.pending()
			if pending == 0 {
				delete(set, w) // the counts are final
			}
			return nil
		}); err != nil {
			return err
		}
	}
	snap.Ended = true
	nd, more, err := w.notDone(ctx, db)
	if err != nil {
		return err
	}
	snap.NotDone, snap.MoreNotDone = nd, more
	return send(snap)
}

// onceOffCore sends the counts of a target's, a range's or listed jobs
// once (mqstat --summary -t; the progress op with once). Their rows are
// counted, and their charges summed, through the read pool; the core only
// names the queue and target (or counts a target, or one array's range,
// from its kept counts), then splits P out.
func onceOffCore(ctx context.Context, w *Watch, core Core, db Querier, send func(protocol.ProgressReply) error) error {
	counted := false
	err := core.Do(ctx, func(st State, _ Set) error {
		var err error
		counted, err = w.lookup(st)
		return err
	})
	if err != nil {
		return err
	}
	read := func(q string, args ...any) (*sql.Rows, error) { return db.QueryContext(ctx, q, args...) }
	if !counted {
		if err := w.countRowsOf(read); err != nil {
			return err
		}
	}
	var snap protocol.ProgressReply
	if err := core.Do(ctx, func(st State, _ Set) error {
		snap = w.reply(st)
		return nil
	}); err != nil {
		return err
	}
	if w.req.Spending && w.ids == nil { // listed ids get none
		if err := w.spentRows(read, &snap); err != nil {
			return err
		}
	}
	return send(snap)
}

// beginner is a read pool that holds a snapshot (a *sql.DB).
type beginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// openOffCore opens a stream of a target's jobs in a queue (mqwait -q -t),
// of a range that is not one array's (mqwait FIRST-LAST) or of listed
// jobs (mqwait ID...) counted off the core,
// where a million rows would hold dispatch for most of a second. The
// watch joins the set first, keeping each of its jobs' latest state as
// changes come (since) rather than applying them; Do returns once the
// batch that ran it committed, so a snapshot of the read pool taken then
// holds every change made before. Its rows are counted there; back on the
// core, each job changed since takes its state in the snapshot off the
// count and its latest one on (settle).
func openOffCore(ctx context.Context, w *Watch, core Core, pool beginner) (protocol.ProgressReply, int, error) {
	var snap protocol.ProgressReply
	var counted *Watch // counted off the core: the watch's counts are the core's
	pending, known := 0, false
	err := core.Do(ctx, func(st State, set Set) error {
		var err error
		if known, err = w.lookup(st); err != nil {
			return err
		}
		set[w] = struct{}{}
		if known {
			snap, pending = w.reply(st), w.pending()
		} else {
			w.since = map[int64]job.State{}
			counted = &Watch{req: w.req, ids: w.ids, queue: w.queue, hasQ: w.hasQ, target: w.target, hasT: w.hasT}
		}
		return nil
	})
	if err != nil || known {
		return snap, pending, err
	}
	tx, err := pool.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return snap, 0, err
	}
	defer tx.Rollback()
	read := func(q string, args ...any) (*sql.Rows, error) { return tx.QueryContext(ctx, q, args...) }
	if err := counted.countRowsOf(read); err != nil {
		return snap, 0, err
	}
	err = core.Do(ctx, func(st State, _ Set) error {
		if w.since != nil { // else the core recounted it meanwhile
			if err := counted.settle(read, w.since); err != nil {
				return err
			}
			w.counts, w.since = counted.counts, nil
		}
		snap, pending = w.reply(st), w.pending()
		return nil
	})
	return snap, pending, err
}
