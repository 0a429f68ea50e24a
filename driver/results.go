package driver

import (
	"context"
	"iter"
	"slices"
	"sync"
)

// subscription feeds a Results iterator the records that end while it
// runs. Its queue is unbounded: finish never blocks on a slow consumer.
type subscription struct {
	prod *Producer // nil: every producer's jobs
	mu   sync.Mutex
	q    []*record
	wake chan struct{} // capacity 1: a push since the last look
}

// push queues an ended record; d.mu is held.
func (s *subscription) push(r *record) {
	if s.prod != nil && r.prod != s.prod {
		return
	}
	s.mu.Lock()
	s.q = append(s.q, r)
	s.mu.Unlock()
	s.poke()
}

// poke wakes the iterator to look at what is left.
func (s *subscription) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *subscription) pop() *record {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.q) == 0 {
		return nil
	}
	r := s.q[0]
	s.q[0] = nil
	s.q = s.q[1:]
	return r
}

// Results returns an iterator over the results of every job issued (by any
// producer) and not yet collected, in the order the jobs end: a future for
// each job, consumed as they complete. Each result is collected as it is
// yielded; the error beside it is its Err. Jobs issued while the loop runs
// are included; jobs a wait gave up on (its context ended) are not, and
// are not waited for. The loop ends when no uncollected job remains (so a
// program that issues from another goroutine while it reads counts the
// results it expects rather than waiting for the end), or, if ctx
// ends, with one (Result{Exit: -1}, ctx.Err()) after deleting the jobs it
// still waited for, as a WaitForAll whose context ends does.
func (d *Driver) Results(ctx context.Context) iter.Seq2[Result, error] {
	return d.results(ctx, nil)
}

// Results is Driver.Results over this producer's jobs only.
func (p *Producer) Results(ctx context.Context) iter.Seq2[Result, error] {
	return p.d.results(ctx, p)
}

func (d *Driver) results(ctx context.Context, p *Producer) iter.Seq2[Result, error] {
	return func(yield func(Result, error) bool) {
		s := &subscription{prod: p, wake: make(chan struct{}, 1)}
		d.mu.Lock()
		var ended []*record
		for _, r := range d.records {
			if p != nil && r.prod != p {
				continue
			}
			select {
			case <-r.done:
				ended = append(ended, r)
			default:
			}
		}
		d.subs[s] = true
		d.mu.Unlock()
		defer func() {
			d.mu.Lock()
			delete(d.subs, s)
			d.mu.Unlock()
		}()
		// take collects r if nobody else did, and yields it.
		take := func(r *record) bool {
			d.mu.Lock()
			mine := d.forget(r)
			d.mu.Unlock()
			return !mine || yield(r.res, r.res.Err)
		}
		for _, r := range ended {
			if !take(r) {
				return
			}
		}
		for {
			if r := s.pop(); r != nil {
				if !take(r) {
					return
				}
				continue
			}
			d.mu.Lock()
			// Jobs a wait gave up on are being deleted and their results
			// dropped: nothing to wait for.
			left := len(d.records) - d.dropped
			if p != nil {
				left = p.live - p.dropped
			}
			if left > 0 && d.state == 1 {
				// When all that is left waits in incomplete group bundles,
				// send them: nothing else would end first. (Sooner would
				// cut the bundles of a program issuing while it reads.)
				held, mine := 0, func(e *entry) bool { return (p == nil || e.rec.prod == p) && !e.rec.abandoned }
				for _, g := range d.groups {
					for _, e := range g.pending {
						if mine(e) {
							held++
						}
					}
				}
				if held == left {
					for _, g := range d.groups {
						if slices.ContainsFunc(g.pending, mine) {
							d.sendGroup(g)
						}
					}
				}
			}
			d.mu.Unlock()
			if left == 0 {
				if s.pop() == nil {
					return
				}
				continue // raced with an end: loop round
			}
			select {
			case <-s.wake:
			case <-ctx.Done():
				d.mu.Lock()
				var waiting []*record
				for _, r := range d.records {
					if p == nil || r.prod == p {
						waiting = append(waiting, r)
					}
				}
				d.mu.Unlock()
				d.abandon(waiting, context.Cause(ctx))
				yield(Result{Exit: -1}, ctx.Err())
				return
			}
		}
	}
}
