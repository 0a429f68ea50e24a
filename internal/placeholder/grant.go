package placeholder

import (
	"fmt"
	"time"

	"github.com/mq-hpc/mq/internal/placeholder/memlimit"
	"github.com/mq-hpc/mq/internal/resource"
	"github.com/mq-hpc/mq/internal/wire"
	"github.com/mq-hpc/mq/protocol"
)

// Grants: the agent keeps a resource.Pool of its capacity. A job takes
// what its assignment grants (no grant: one core, as before resources),
// with the core and GPU ids the CLS chose when it names them, else the
// lowest free; it gives them back when it ends. A job whose grant does
// not fit what is free waits, held, until one that runs ends; one whose
// grant this placeholder could never hold fails at once (the CLS and the
// agent disagree: running it would oversubscribe).

// wireCapacity is c as the protocol carries it.
func wireCapacity(c resource.Capacity) *protocol.Capacity { return wire.Capacity(c) }

// wireAsked is what the site asked for, nil when nothing was.
func wireAsked(c resource.Capacity) *protocol.Capacity {
	if c.CPUs == 0 && c.Mem == 0 && len(c.GPUIDs) == 0 && len(c.Named) == 0 {
		return nil
	}
	return wireCapacity(c)
}

// requestOf is what a unit (a job, or a bundle's jobs, which share the
// first one's grant) asks of the pool.
func requestOf(u []protocol.Assignment) resource.Request { return wire.RequestOfGrant(u[0].Grant) }

// never says why a unit's grant can never run here ("" if it can).
func (w *workLoop) never(u []protocol.Assignment) string {
	g := u[0].Grant
	if g == nil {
		return ""
	}
	if err := protocol.CheckCapacity("grant", *g); err != nil {
		return err.Error()
	}
	c := w.pool.Capacity()
	if !c.Holds(requestOf(u)) {
		return fmt.Sprintf("the grant (%s) is more than this placeholder holds (%s)", g, c)
	}
	return ""
}

// refuse fails a unit that can never run here.
func (w *workLoop) refuse(u []protocol.Assignment, why string) {
	now := time.Now()
	for _, asg := range u {
		w.reports = append(w.reports, protocol.Report{ID: asg.ID, Attempt: asg.Attempt, Exit: 127, Started: now, Finished: now,
			Reason: protocol.ClipText("could not start: "+why, protocol.MaxReasonBytes)})
	}
	w.a.log.Warn("a job's grant cannot run on this placeholder", "job", u[0].ID, "why", why)
}

// admit takes what a unit needs from the pool, if it fits what is free.
func (w *workLoop) admit(u []protocol.Assignment) (resource.Grant, bool) {
	r := requestOf(u)
	if !w.pool.Fits(r) {
		return resource.Grant{}, false
	}
	if g := u[0].Grant; g != nil && (g.CoreIDs != nil || g.GPUIDs != nil) {
		got, err := w.pool.TakeExact(r, g.CoreIDs, g.GPUIDs)
		if err == nil {
			return got, true
		}
		// The CLS's view of what is free differs from ours: ours is
		// what the jobs running here really hold.
		w.a.log.Info("the ids a grant names are not free here; choosing others", "job", u[0].ID, "err", err)
	}
	got, _ := w.pool.Take(r)
	return got, true
}

// available is what the placeholder has free, for a next request; nil
// when it holds only cores (Free says it all, and polls stay small).
func (w *workLoop) available() *protocol.Capacity {
	c := w.pool.Capacity()
	if c.Mem == 0 && len(c.GPUIDs) == 0 && len(c.Named) == 0 {
		return nil
	}
	f := wireCapacity(w.pool.Free())
	f.CoreIDs = nil // the CLS chooses cores by count; the ids it names are checked here
	return f
}

// memLimiter is the agent's MemLimiter, made when first needed.
func (a *Agent) memLimiter() memlimit.Limiter {
	a.memOnce.Do(func() {
		a.memLim = a.cfg.MemLimiter
		if a.memLim == nil {
			var how string
			a.memLim, how = memlimit.New()
			a.log.Info("jobs' memory is enforced", "by", how)
		}
	})
	return a.memLim
}
