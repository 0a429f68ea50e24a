// Package suspend reads how long the host has spent suspended (a laptop's
// lid shut, a VM saved to disk, a node hibernated). Go's monotonic clock
// (Linux's CLOCK_MONOTONIC) stops while the host is suspended, so a gap
// measured with time.Now does not count that time; adding what Total grew
// by over the gap does.
package suspend

import (
	"sync/atomic"
	"time"
)

// Grain is the least change of Total: the two clocks are read one after
// the other, so their difference varies by the time between the reads
// (nanoseconds, more if the thread is descheduled), and a gap would vary
// with it. No suspend and resume is over in less.
const Grain = time.Second

var (
	last atomic.Int64 // what Total returned last
	read = total      // a test's fake clocks
)

// Total returns the time the host has spent suspended since it booted: on
// Linux, CLOCK_BOOTTIME less CLOCK_MONOTONIC, held still until it has
// grown (or shrunk) by Grain. Elsewhere, and if the clocks cannot be read,
// it is 0: gaps are the monotonic clock's alone.
func Total() time.Duration {
	d, held := read(), time.Duration(last.Load())
	if d > held-Grain && d < held+Grain {
		return held
	}
	last.Store(int64(d))
	return d
}
