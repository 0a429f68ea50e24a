// Package backoff is the one retry delay rule of mq: reconnecting agents
// and drivers, the CLS's accept loop and the site manager all wait with it.
//
// The rule: the first delay is Min; each one after doubles the last, up to
// Max (a Min above Max is Max); Reset starts again from Min. Jitter adds a
// random part of up to Jitter times the delay on top (0.5: up to +50%), so
// that many clients losing one server do not come back in step; the cap
// applies before it, so a delay never exceeds Max·(1+Jitter).
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff hands out successive retry delays. The zero value waits 0; set
// Min and Max. It is not safe for concurrent use: each retry loop has its
// own.
type Backoff struct {
	Min, Max time.Duration
	// Jitter is the most a delay grows at random, as a fraction of it
	// (0 = none, 0.5 = up to +50%).
	Jitter float64
	// Rand draws the jitter; nil is math/rand/v2's global source. Tests
	// pass a seeded one to get the same delays every run.
	Rand *rand.Rand

	next time.Duration // the next delay before jitter; 0 = Min
}

// Next returns the delay to wait before the next retry and doubles the one
// after, up to Max.
func (b *Backoff) Next() time.Duration {
	d := b.next
	if d <= 0 {
		d = b.Min
	}
	d = min(d, b.Max)
	b.next = min(2*d, b.Max)
	if b.Jitter <= 0 || d <= 0 {
		return d
	}
	span := int64(float64(d)*b.Jitter) + 1 // inclusive: Int64N(n) is < n
	if b.Rand != nil {
		return d + time.Duration(b.Rand.Int64N(span))
	}
	return d + time.Duration(rand.Int64N(span))
}

// Reset makes the next delay Min again (after a success).
func (b *Backoff) Reset() { b.next = 0 }

// Wait sleeps for the next delay, or until ctx ends (its error).
func (b *Backoff) Wait(ctx context.Context) error { return Sleep(ctx, b.Next()) }

// Sleep sleeps for d, or until ctx ends (its error): Wait for a delay
// taken with Next beforehand (to log it, say).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
