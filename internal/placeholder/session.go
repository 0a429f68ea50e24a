package placeholder

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"time"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/internal/backoff"
	"github.com/mq-hpc/mq/internal/logguard"
	"github.com/mq-hpc/mq/protocol"
)

// session returns the current connection, (re)connecting and registering
// with backoff while the CLS is unreachable.
func (a *Agent) session(ctx context.Context) (*client.Client, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cl != nil {
		select {
		case <-a.cl.Done():
			a.cl = nil
		default:
			return a.cl, nil
		}
	}
	// A connection that dies soon after it was made (a middlebox that
	// resets each one, say) is not made again at once: each costs the
	// CLS a handshake and a registration's commit. One that lived a
	// minute starts the spacing over.
	if !a.connected.IsZero() {
		if a.now().Sub(a.connected) >= time.Minute {
			a.churn.Reset()
		} else if err := a.unlockedSleep(ctx, a.churn.Next()); err != nil {
			return nil, err
		} else if a.cl != nil {
			return a.cl, nil
		}
	}
	deadline := a.now().Add(a.cfg.Reconnect)
	retry := backoff.Backoff{Min: 50 * time.Millisecond, Max: 5 * time.Second, Jitter: 0.5}
	var warn logguard.Gate // for refusals, which may go on for hours
	for {
		cl, err := a.connect(ctx)
		if err == nil {
			a.cl, a.connected = cl, a.now()
			return cl, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var pe *protocol.Error
		if errors.As(err, &pe) && (pe.Code == protocol.CodeBadRequest || pe.Code == protocol.CodeForbidden || pe.Code == protocol.CodeUnsupported) {
			return nil, fmt.Errorf("the CLS refused this placeholder: %w", err)
		}
		// A key the CLS refused is its answer. A host key other than the
		// pinned one is, at the first connection, a wrong pin or address,
		// said at once; once the agent has reached the CLS it is something
		// else answering at its address (another user's server on the
		// port while the CLS restarts), waited out as an unreachable CLS
		// is, never talked to: stopping would hand whoever can take the
		// port a way to stop every agent, and their jobs' reports.
		if client.Permanent(err) && (a.connected.IsZero() || !client.Mismatch(err)) {
			return nil, err
		}
		d := retry.Next()
		if errors.As(err, &pe) && pe.Code == protocol.CodeInternal {
			// The CLS answered but could not commit the registration (a
			// full disk, say): it is reachable, and the jobs run on until
			// it can, however long that takes.
			deadline = a.now().Add(a.cfg.Reconnect)
			if warn.Open(a.now()) {
				a.log.Warn("the CLS cannot record this placeholder now; retrying", "err", err, "in", d)
			}
		} else if a.now().After(deadline) {
			return nil, unreachable{fmt.Errorf("the CLS has been unreachable for %s: %w", a.cfg.Reconnect, err)}
		} else {
			a.log.Warn("cannot reach the CLS; retrying", "err", err, "in", d)
		}
		// An ended ctx is seen by the next connect.
		a.unlockedSleep(ctx, d)
		if a.cl != nil {
			return a.cl, nil
		}
	}
}

// unreachable is session's error when the CLS stayed unreachable for
// Config.Reconnect.
type unreachable struct{ error }

func (e unreachable) Unwrap() error { return e.error }

// unlockedSleep sleeps d with a.mu unlocked, so ID() and friends do not
// block meanwhile, or until ctx ends.
func (a *Agent) unlockedSleep(ctx context.Context, d time.Duration) error {
	a.mu.Unlock()
	defer a.mu.Lock()
	return backoff.Sleep(ctx, d)
}

func (a *Agent) connect(ctx context.Context) (*client.Client, error) {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rwc, err := a.cfg.Dial(dctx)
	if err != nil {
		return nil, err
	}
	cl, err := client.New(dctx, rwc, protocol.RolePlaceholder, "mq-placeholder")
	if err != nil {
		rwc.Close()
		return nil, err
	}
	reg, err := client.Do(dctx, cl, protocol.OpRegister, protocol.Register{
		ID: a.ID(), Site: a.cfg.Site, Host: a.cfg.Host, PID: os.Getpid(), Slots: a.cfg.Slots,
		OutDir: a.cfg.OutDir, Walltime: a.cfg.Walltime.Seconds(), Batch: a.cfg.BatchID,
		Capacity: wireCapacity(a.cfg.Capacity), Asked: wireAsked(a.cfg.Asked), CapacityNote: a.cfg.CapacityNote,
		Holding: a.holdingToRegister(),
	})
	if err != nil {
		cl.Close()
		return nil, err
	}
	if old := a.ID(); old != 0 && reg.ID != old {
		a.log.Warn("the CLS did not know this placeholder; registered anew", "old", old, "new", reg.ID)
	}
	if a.ID() != 0 {
		a.announceRunning()
	}
	a.id.Store(reg.ID)
	a.noteCLSClock(reg.Clock)
	a.filesAsked.Store(reg.OutputFiles)
	if reg.HeartbeatS > 0 {
		a.hbEvery = protocol.Duration(reg.HeartbeatS)
	}
	if reg.LeaseS > 0 {
		a.fence.SetLease(protocol.Duration(reg.LeaseS))
	}
	a.log.Info("connected to the CLS", "placeholder", reg.ID)
	return cl, nil
}

// noteCLSClock keeps how far clock, the CLS's as it replied, is ahead of
// the agent's wall clock now (zero: the reply did not say, an older CLS).
// The reply's way counts in it, well under protocol.MaxClockSkew.
func (a *Agent) noteCLSClock(clock time.Time) {
	if !clock.IsZero() {
		a.clsAhead.Store(int64(clock.Sub(a.wall())))
	}
}

// replyClock is the CLS's clock a reply says, if it says one.
func replyClock(resp any) time.Time {
	switch r := resp.(type) {
	case *protocol.NextReply:
		return r.Clock
	case *protocol.HeartbeatReply:
		return r.Clock
	}
	return time.Time{}
}

// holdingToRegister is what a registration lists as holding: nothing on
// the first (no id yet), then every attempt held. Every reply read on an
// earlier connection is in it: that connection has ended, and a reply's
// jobs enter holding before recvMu is unlocked.
func (a *Agent) holdingToRegister() []protocol.JobRef {
	if a.ID() == 0 {
		return nil
	}
	a.recvMu.Lock()
	defer a.recvMu.Unlock()
	return a.holding.List()
}

// dropped marks a connection broken so the next session() reconnects.
func (a *Agent) dropped(cl *client.Client) {
	a.mu.Lock()
	if a.cl == cl {
		a.cl = nil
	}
	a.mu.Unlock()
	cl.Close()
}

// call runs one typed request, reconnecting until it goes through. Requests are
// idempotent on the CLS (reports carry attempt numbers), so resending one
// whose reply was lost is harmless.
func call[Req, Resp any](ctx context.Context, a *Agent, op protocol.Op[Req, Resp], body func(id int64) Req, out *Resp) error {
	busy := backoff.Backoff{Min: 5 * time.Millisecond, Max: 500 * time.Millisecond, Jitter: 0.5}
	for {
		cl, err := a.session(ctx)
		if err != nil {
			return err
		}
		var resp Resp
		r, next := any(&resp).(*protocol.NextReply)
		if next && ctx.Err() != nil {
			return ctx.Err() // session returns a live connection even then: ask for no jobs
		}
		a.counted(op.Name)
		req := body(a.ID())
		a.recvMu.RLock()
		sent := a.fence.Look()
		dctx, stop := ctx, func() bool { return false }
		if next {
			// A next given up when ctx ends must not be answered on a
			// connection still read: the client would drop the reply, and
			// its jobs would wait out their leases, each an attempt
			// counted. ctx's end closes cl instead: a reply read before is
			// returned, its jobs for the caller to run or hand back; the
			// CLS hands back those of one it cannot write (server handsBack).
			dctx, stop = context.WithoutCancel(ctx), context.AfterFunc(ctx, func() { cl.Close() })
		}
		resp, err = client.Do(dctx, cl, op, req)
		stop()
		if next && err == nil {
			a.holding.Got(r.Jobs)
			a.fence.Got(sent, r.Jobs) // after holding: the next heartbeat names them
		}
		a.recvMu.RUnlock()
		if err == nil {
			a.noteCLSClock(replyClock(&resp))
			if out != nil {
				*out = resp
			}
			return nil
		}
		var pe *protocol.Error
		if errors.As(err, &pe) {
			if pe.Code == protocol.CodeNotFound {
				// The CLS lost track of us (new database): register again.
				a.dropped(cl)
				continue
			}
			if pe.Code == protocol.CodeBusy {
				// Too many such requests in progress on the connection (the
				// agent stays within the bound, with a margin; a CLS with a
				// lower one is met here): the request is fine, later.
				if err := busy.Wait(ctx); err != nil {
					return err
				}
				continue
			}
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		a.log.Warn("lost the CLS connection", "op", op.Name, "err", err)
		a.dropped(cl)
	}
}

// counted counts a request of op sent, for the line the agent logs when
// it stops (how many output requests a placeholder's jobs cost, say).
func (a *Agent) counted(op string) {
	a.reqMu.Lock()
	if a.reqs == nil {
		a.reqs = map[string]int64{}
	}
	a.reqs[op]++
	a.reqMu.Unlock()
}

// requests is how many requests of each op the agent sent.
func (a *Agent) requests() map[string]int64 {
	a.reqMu.Lock()
	defer a.reqMu.Unlock()
	return maps.Clone(a.reqs)
}
