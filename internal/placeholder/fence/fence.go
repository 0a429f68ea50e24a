// Package fence holds back what a placeholder writes to files a later
// attempt of the same job also writes (mqsub -o, -e) after the
// placeholder was frozen: stopped (SIGSTOP, Ctrl-Z), its VM paused, its
// node swapping. Frozen past its lease, it wakes to find the CLS has
// requeued its jobs and another attempt may have run them, even to the
// end: what it still copies from their pipes into those files would be
// appended to the newer attempt's output.
//
// A Watch tells such a freeze by the gap between its looks (Run looks
// often, a heartbeat before it is sent, each write before it writes),
// measured on the host's boot clock: a suspend of the host (a laptop's
// lid, a VM saved to disk) is a freeze too, though Go's monotonic clock
// does not count it.
// After one, writes are kept (Held) until a heartbeat sent after the
// freeze is answered: the answer says which attempts are no longer the
// placeholder's (Settle), and their writes are dropped; the others' are
// written. Kept, not waited for: the job's output goes on to mq's own
// copy meanwhile, and its report is not held up. Jobs handed out in a
// reply to a request sent before the freeze (a parked poll) and read
// after it wait for a heartbeat that names them (Got) before their files
// are opened: opening truncates. When no answer comes within the wait
// bound (a CLS away as long: it cannot have requeued them meanwhile),
// every write goes on.
package fence

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/mq-hpc/mq/internal/suspend"
	"github.com/mq-hpc/mq/protocol"
)

// ErrLost fails an attempt whose placeholder was frozen past its lease
// before it started it: the CLS requeued the job meanwhile.
var ErrLost = errors.New("its placeholder was stopped past its lease and the job was requeued")

// Watch tells a freeze and waits for the CLS's verdict on it.
type Watch struct {
	now func() time.Time // boot clock readings (bootNow)

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
// bootNow unless a test's.
func New(now func() time.Time) *Watch {
	if now == nil {
		now = bootNow
	}
	return &Watch{now: now, last: now(), answered: make(chan struct{}), dropped: map[protocol.JobRef]bool{}}
}

// bootNow reads the host's boot clock: time.Now moved on by the time the
// host spent suspended, which its monotonic reading does not count. A
// test's fake host replaces it.
var bootNow = func() time.Time { return time.Now().Add(suspend.Total()) }

// SetLease sets the CLS's lease: a gap between looks of half of it is a
// freeze (the CLS requeues after a whole one without renewal, and the
// last renewal may have been a heartbeat before the freeze), and a
// verdict is waited for that long at most, and at most maxWait.
func (w *Watch) SetLease(lease time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.gap, w.bound = lease/2, min(lease, maxWait)
}

// maxWait bounds a wait for a verdict: heartbeats go every second at
// most, and a close of the files waits for it within the 30 s a close
// has on a hung filesystem.
const maxWait = 10 * time.Second

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
// answer killed ref. A nil Watch passes every write.
func (w *Watch) Pass(ref protocol.JobRef) bool {
	if w == nil {
		return true
	}
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

// maxHeld bounds what a Held keeps while a verdict is pending; past it a
// write waits for the verdict (the job's pipe fills, and the job waits).
const maxHeld = 1 << 20

// Held passes an attempt's writes to out through a Watch without holding
// them up: while a freeze waits for its answer they are kept, and written
// or dropped when it comes, at the next write or at Flush. Its caller
// calls it from one goroutine at a time.
type Held struct {
	w    *Watch
	ref  protocol.JobRef
	out  func([]byte)
	kept []byte
	lost bool // the answer killed ref: nothing more is written
}

// Held returns the Held of attempt ref's writes to out; a nil Watch's
// passes every write.
func (w *Watch) Held(ref protocol.JobRef, out func([]byte)) *Held {
	return &Held{w: w, ref: ref, out: out}
}

// Write passes p on, keeps it, or drops it.
func (h *Held) Write(p []byte) {
	if h.lost {
		return
	}
	switch h.w.state(h.ref) {
	case dropped:
		h.kept, h.lost = nil, true
		return
	case waiting:
		if len(h.kept)+len(p) <= maxHeld {
			h.kept = append(h.kept, p...)
			return
		}
		if !h.w.Pass(h.ref) {
			h.kept, h.lost = nil, true
			return
		}
	}
	h.flush()
	h.out(p)
}

// Flush waits for the verdict on what is kept and writes or drops it:
// its file is being closed.
func (h *Held) Flush() {
	if len(h.kept) > 0 && !h.lost {
		if h.lost = !h.w.Pass(h.ref); !h.lost {
			h.flush()
		}
	}
	h.kept = nil
}

// Forget drops what the Watch keeps of the attempt once every file of it
// is flushed (its -o and -e files share the verdict).
func (h *Held) Forget() {
	if h.w != nil {
		h.w.Forget(h.ref)
	}
}

func (h *Held) flush() {
	if len(h.kept) > 0 {
		h.out(h.kept)
		h.kept = nil
	}
}

const (
	passes = iota
	waiting
	dropped
)

// state is what becomes of ref's write now, without waiting.
func (w *Watch) state(ref protocol.JobRef) int {
	if w == nil {
		return passes
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch seen := w.look(); {
	case w.dropped[ref]:
		return dropped
	case w.settled < seen:
		return waiting
	}
	return passes
}
