// Package waits keeps the waits callers have parked on the metaqueue
// (mqwait, mqsub -b, the driver's Wait): which jobs each still waits on,
// its deadline, and what to answer as those jobs end.
//
// The core owns the calls. It starts a wait with Start, tells the module
// the jobs that ended (or became Blocked) in each batch it commits, its
// tick, a failed batch and its stop, and gets back the waits finished,
// whose calls it answers. A wait is finished once: when all its jobs have
// ended, when one has and it asked for any, at its deadline, or when its
// caller goes away. The module keeps no clock and reads no table: how a
// job ended comes from the core as an EndFunc.
package waits

import (
	"context"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// EndFunc reads how job id ended, from what the core committed.
type EndFunc func(id int64) (protocol.JobEnd, error)

// Request is a wait as its caller asked it.
type Request struct {
	IDs      []int64
	Any      bool      // answer as soon as one job has ended
	Deadline time.Time // zero: none
}

// Wait is one caller's wait; C is the core's handle on the call it
// answers.
type Wait[C any] struct {
	Call     C
	ctx      context.Context
	reply    *protocol.WaitReply
	pending  map[int64]bool
	deadline time.Time
	any      bool
	finished bool
	err      error
}

// Err is the error the wait's caller is answered with (nil: its reply).
func (w *Wait[C]) Err() error { return w.err }

// finish marks w answered and adds it to done, once.
func (w *Wait[C]) finish(err error, done []*Wait[C]) []*Wait[C] {
	if w.finished {
		return done
	}
	w.finished, w.err = true, err
	return append(done, w)
}

func (w *Wait[C]) listPending() {
	for id := range w.pending {
		w.reply.Pending = append(w.reply.Pending, id)
	}
}

// Waits are the parked waits, each listed under every job it waits on.
// The zero value is ready to use. Only the core goroutine touches it.
type Waits[C any] struct {
	byJob map[int64][]*Wait[C]
}

// Start answers into reply what it can of req at once: each job that
// waiting says has ended (or is Blocked) is read through end. It parks
// the wait on the others, and reports whether it did; a wait not parked
// is answered.
func (ws *Waits[C]) Start(ctx context.Context, call C, req Request, reply *protocol.WaitReply,
	waiting func(id int64) bool, end EndFunc) (parked bool, err error) {
	w := &Wait[C]{Call: call, ctx: ctx, reply: reply, pending: map[int64]bool{}, deadline: req.Deadline, any: req.Any}
	for _, id := range req.IDs {
		if waiting(id) {
			w.pending[id] = true
			continue
		}
		e, err := end(id)
		if err != nil {
			return false, err
		}
		reply.Jobs = append(reply.Jobs, e)
	}
	if len(w.pending) == 0 {
		return false, nil
	}
	if w.any && len(reply.Jobs) > 0 {
		w.listPending()
		return false, nil
	}
	if ws.byJob == nil {
		ws.byJob = map[int64][]*Wait[C]{}
	}
	for id := range w.pending {
		ws.byJob[id] = append(ws.byJob[id], w)
	}
	return true, nil
}

// Ended answers the waits on ids, the jobs that ended or became Blocked
// in the batch just committed, and returns the waits it finished. A wait
// with Any is answered after all of ids are in, so one reply carries
// every job that ended together.
func (ws *Waits[C]) Ended(ids []int64, end EndFunc) (done []*Wait[C]) {
	var anyDone []*Wait[C]
	for _, id := range ids {
		waits := ws.byJob[id]
		if waits == nil {
			continue
		}
		delete(ws.byJob, id)
		e, err := end(id)
		for _, w := range waits {
			if w.finished || !w.pending[id] {
				continue
			}
			delete(w.pending, id)
			if err != nil {
				done = w.finish(err, done)
				continue
			}
			w.reply.Jobs = append(w.reply.Jobs, e)
			if len(w.pending) == 0 {
				done = w.finish(nil, done)
			} else if w.any && len(w.reply.Jobs) == 1 {
				anyDone = append(anyDone, w)
			}
		}
	}
	for _, w := range anyDone {
		if !w.finished {
			w.listPending()
			done = w.finish(nil, done)
		}
	}
	return done
}

// Expire answers the waits past their deadline at now, listing the jobs
// still pending, and returns them. They stay listed until Sweep.
func (ws *Waits[C]) Expire(now time.Time) (done []*Wait[C]) {
	for _, waits := range ws.byJob {
		for _, w := range waits {
			// A wait is listed under each of its pending jobs: answer it
			// once, and never write to a reply already handed back.
			if w.finished || w.deadline.IsZero() || !now.After(w.deadline) {
				continue
			}
			w.listPending()
			done = w.finish(nil, done)
		}
	}
	return done
}

// Sweep answers the waits whose callers left with their context's error,
// returns them, and forgets every wait answered. The core sweeps on its
// tick, not after every batch: a driver waiting on a million jobs would
// make each batch walk them all.
func (ws *Waits[C]) Sweep() (done []*Wait[C]) {
	for id, waits := range ws.byJob {
		kept := waits[:0]
		for _, w := range waits {
			if !w.finished && w.ctx.Err() != nil {
				done = w.finish(w.ctx.Err(), done)
			}
			if !w.finished {
				kept = append(kept, w)
			}
		}
		ws.set(id, waits, kept)
	}
	return done
}

// Drop forgets, without answering, the waits whose calls failed reports:
// their batch failed, and the core answers those calls with its error.
func (ws *Waits[C]) Drop(failed func(C) bool) {
	for id, waits := range ws.byJob {
		kept := waits[:0]
		for _, w := range waits {
			if !failed(w.Call) {
				kept = append(kept, w)
			}
		}
		ws.set(id, waits, kept)
	}
}

// set lists kept, a prefix of waits, under id; the rest of waits is
// cleared so the dropped waits can be collected.
func (ws *Waits[C]) set(id int64, waits, kept []*Wait[C]) {
	clear(waits[len(kept):])
	if len(kept) == 0 {
		delete(ws.byJob, id)
	} else {
		ws.byJob[id] = kept
	}
}

// Close answers every wait not yet answered with err, as the core stops,
// returns them, and forgets all.
func (ws *Waits[C]) Close(err error) (done []*Wait[C]) {
	for _, waits := range ws.byJob {
		for _, w := range waits {
			done = w.finish(err, done)
		}
	}
	clear(ws.byJob)
	return done
}

// Len is the number of waits listed (answered ones until the next Sweep).
func (ws *Waits[C]) Len() int {
	seen := map[*Wait[C]]bool{}
	for _, waits := range ws.byJob {
		for _, w := range waits {
			seen[w] = true
		}
	}
	return len(seen)
}

// Check refuses a wait on no jobs or with a timeout out of range.
func Check(req protocol.Wait) error {
	if len(req.IDs) == 0 {
		return protocol.Errorf(protocol.CodeBadRequest, "no jobs to wait for")
	}
	if err := protocol.CheckMillis("timeout_ms", int64(req.TimeoutMS)); err != nil {
		return protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	return nil
}
