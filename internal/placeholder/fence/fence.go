// Package fence holds back what a placeholder writes to files a later
// attempt of the same job also writes (mqsub -o, -e) after the
// placeholder was frozen: stopped (SIGSTOP, Ctrl-Z), its VM paused, its
// node swapping. Frozen past its lease, it wakes to find the CLS has
// requeued its jobs and another attempt may have run them, even to the
// end: what it still copies from their pipes into those files would be
// appended to the newer attempt's output.
//
// A Watch tells such a freeze by the gap between its looks (Run looks
// often, a heartbeat before it is sent, each write before it writes).
// After one, a write waits until a heartbeat sent after the freeze is
// answered: the answer says which attempts are no longer the
// placeholder's (Settle), and their writes are dropped. Jobs handed out
// in a reply to a request sent before the freeze (a parked poll) and
// read after it wait for a heartbeat that names them (Got), before their
// files are opened: opening truncates. The others go on; so does every write when no answer comes within the wait bound (a
// CLS down as long: it cannot have requeued them since).
package fence

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// ErrLost fails an attempt whose placeholder was frozen past its lease
// before it started it: the CLS requeued the job meanwhile.
var ErrLost = errors.New("its placeholder was stopped past its lease and the job was requeued")

// Watch tells a freeze and waits for the CLS's verdict on it.
type Watch struct {
	now func() time.Time // monotonic readings

	mu sync.Mutex
	// gap: a longer one between looks is a freeze (0: never); bound: how
	// long a write waits for a verdict.
	gap, bound time.Duration
	last       time.Time
	// seen counts the freezes told; settled, those answered for.
	seen, settled uint64
	answered      chan struct{} // closed and replaced at each Settle
	dropped       map[protocol.JobRef]bool
}

// New returns a Watch that tells no freeze until SetLease; now is
// time.Now unless a test's.
func New(now func() time.Time) *Watch {
	if now == nil {
		now = time.Now
	}
	return &Watch{now: now, last: now(), answered: make(chan struct{}), dropped: map[protocol.JobRef]bool{}}
}

// SetLease sets the CLS's lease: a gap between looks of half of it is a
// freeze (the CLS requeues after a whole one without renewal, and the
// last renewal may have been a heartbeat before the freeze), and a
// write waits for a verdict at most that long.
func (w *Watch) SetLease(lease time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.gap, w.bound = lease/2, lease
}

// Look notes that the placeholder runs, and returns the freezes told so
// far, counting one if the last look is longer ago than the gap. A
// heartbeat looks before it is sent, and settles with what it got.
func (w *Watch) Look() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.look()
}

func (w *Watch) look() uint64 {
	now := w.now()
	if w.gap > 0 && now.Sub(w.last) > w.gap {
		w.seen++
	}
	w.last = now
	return w.seen
}

// Got takes the jobs handed out in the reply to a request sent when
// Look returned sent. If a freeze was told since, the CLS may have
// requeued them meanwhile, and no heartbeat has named them yet: writes
// (and the opening of their files) wait for the answer to a heartbeat
// sent from now on, which names them.
func (w *Watch) Got(sent uint64, jobs []protocol.Assignment) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(jobs) > 0 && w.look() > sent {
		w.seen++
	}
}

// Run looks every eighth of the gap until ctx ends, so that a gap is the
// whole placeholder not running, not a heartbeat held up by a slow CLS
// (which would hold writes up for nothing).
func (w *Watch) Run(ctx context.Context) {
	for {
		w.mu.Lock()
		every := w.gap / 8
		w.mu.Unlock()
		if every <= 0 {
			every = time.Second
		}
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		w.Look()
	}
}

// Settle takes the answer to a heartbeat sent when Look returned seen:
// killed lists the attempts the CLS no longer counts as the
// placeholder's. If the heartbeat went after a freeze not yet answered
// for, their writes are dropped from now on; the writes waiting go on.
func (w *Watch) Settle(seen uint64, killed []protocol.JobRef) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if seen <= w.settled {
		return
	}
	for _, k := range killed {
		w.dropped[k] = true
	}
	w.settle(seen)
}

func (w *Watch) settle(seen uint64) {
	if seen > w.settled {
		w.settled = seen
		close(w.answered)
		w.answered = make(chan struct{})
	}
}

// Pass says whether attempt ref may write: after a freeze, once a
// heartbeat answered for it (or after the wait bound), unless that
// answer killed ref.
func (w *Watch) Pass(ref protocol.JobRef) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := w.look()
	var timeout <-chan time.Time
	for w.settled < seen && !w.dropped[ref] {
		if timeout == nil {
			t := time.NewTimer(w.bound)
			defer t.Stop()
			timeout = t.C
		}
		ch := w.answered
		w.mu.Unlock()
		select {
		case <-ch:
			w.mu.Lock()
		case <-timeout:
			// No answer in time: writes go on as before, this one's and
			// every later one's, not each after a wait of its own.
			w.mu.Lock()
			w.settle(seen)
		}
	}
	return !w.dropped[ref]
}

// Forget drops what the Watch keeps of ref, once its files are closed.
func (w *Watch) Forget(ref protocol.JobRef) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.dropped, ref)
}
