package fence

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// clock is a monotonic clock a test moves.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// passing runs Pass in a goroutine and returns where its answer comes.
func passing(w *Watch, ref protocol.JobRef) <-chan bool {
	ch := make(chan bool, 1)
	go func() { ch <- w.Pass(ref) }()
	return ch
}

func TestNoFreezeNoWait(t *testing.T) {
	c := &clock{t: time.Unix(0, 0)}
	w := New(c.now)
	w.SetLease(10 * time.Second)
	for i := 0; i < 10; i++ {
		c.step(time.Second)
		w.Look()
		if !w.Pass(protocol.JobRef{ID: 1, Attempt: 1}) {
			t.Fatal("a write was dropped with no freeze")
		}
	}
	// A kill of a deleted job with no freeze before it drops nothing:
	// the job's output goes on to its files until it ends.
	w.Settle(w.Look(), []protocol.JobRef{{ID: 1, Attempt: 1}})
	if !w.Pass(protocol.JobRef{ID: 1, Attempt: 1}) {
		t.Fatal("a kill with no freeze dropped the writes")
	}
}

// TestFrozenAttemptDropped: after a gap longer than half the lease, a
// write waits for the answer to a heartbeat sent after it, and is
// dropped if that answer kills its attempt; another attempt's write
// goes on. An answer to a heartbeat sent before the freeze is no
// verdict.
func TestFrozenAttemptDropped(t *testing.T) {
	c := &clock{t: time.Unix(0, 0)}
	w := New(c.now)
	w.SetLease(time.Hour) // no write gives up waiting in this test
	stale, kept := protocol.JobRef{ID: 1, Attempt: 1}, protocol.JobRef{ID: 2, Attempt: 1}
	before := w.Look() // a heartbeat sent before the freeze
	c.step(31 * time.Minute)
	a, b := passing(w, stale), passing(w, kept)
	w.Settle(before, []protocol.JobRef{stale})
	select {
	case <-a:
		t.Fatal("a write went on at the answer to a heartbeat sent before the freeze")
	case <-b:
		t.Fatal("a write went on at the answer to a heartbeat sent before the freeze")
	case <-time.After(100 * time.Millisecond):
	}
	w.Settle(w.Look(), []protocol.JobRef{stale})
	if <-a {
		t.Error("the killed attempt's write went on")
	}
	if !<-b {
		t.Error("the attempt the CLS kept had its write dropped")
	}
	if w.Pass(stale) {
		t.Error("a later write of the killed attempt went on")
	}
	w.Forget(stale)
	if !w.Pass(stale) {
		t.Error("after Forget, the ref is still dropped")
	}
}

// TestNoVerdictBound: with no answer (the CLS down), a write waits at
// most the lease, then goes on.
func TestNoVerdictBound(t *testing.T) {
	c := &clock{t: time.Unix(0, 0)}
	w := New(c.now)
	w.SetLease(200 * time.Millisecond)
	c.step(time.Second)
	start := time.Now()
	if !w.Pass(protocol.JobRef{ID: 1, Attempt: 1}) {
		t.Fatal("a write with no verdict was dropped")
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("a write after a freeze went on after %v, before any verdict or the bound", d)
	}
	// The next writes do not wait the bound again for the same freeze.
	start = time.Now()
	for i := 0; i < 5; i++ {
		if !w.Pass(protocol.JobRef{ID: 2, Attempt: 1}) {
			t.Fatal("a write with no verdict was dropped")
		}
	}
	if d := time.Since(start); d >= 200*time.Millisecond {
		t.Errorf("five writes after the bound took %v: each waited again", d)
	}
}

// TestNoLeaseNoFence: before the agent learns the lease, nothing waits.
func TestNoLeaseNoFence(t *testing.T) {
	c := &clock{t: time.Unix(0, 0)}
	w := New(c.now)
	c.step(time.Hour)
	if !w.Pass(protocol.JobRef{ID: 1, Attempt: 1}) {
		t.Fatal("dropped")
	}
}

// TestGotAfterFreeze: jobs handed out in the reply to a request sent
// before a freeze wait for a heartbeat sent after the reply was read,
// though one sent after the freeze was answered already (it could not
// name them); a reply with nothing in it, or one to a request sent after
// the freeze, changes nothing.
func TestGotAfterFreeze(t *testing.T) {
	c := &clock{t: time.Unix(0, 0)}
	w := New(c.now)
	w.SetLease(time.Hour)
	late := protocol.JobRef{ID: 1, Attempt: 1}
	sent := w.Look() // a poll parked at the CLS
	c.step(31 * time.Minute)
	w.Settle(w.Look(), nil) // the heartbeat after the freeze, not naming job 1
	w.Got(sent, nil)
	if !w.Pass(protocol.JobRef{ID: 9, Attempt: 1}) {
		t.Fatal("an empty reply held writes")
	}
	w.Got(w.Look(), []protocol.Assignment{{ID: 2, Attempt: 1}})
	if !w.Pass(protocol.JobRef{ID: 2, Attempt: 1}) {
		t.Fatal("a reply to a request sent after the freeze held writes")
	}
	w.Got(sent, []protocol.Assignment{{ID: late.ID, Attempt: late.Attempt}})
	a := passing(w, late)
	select {
	case <-a:
		t.Fatal("a job handed out before the freeze started before a heartbeat named it")
	case <-time.After(100 * time.Millisecond):
	}
	w.Settle(w.Look(), []protocol.JobRef{late})
	if <-a {
		t.Error("the job the heartbeat killed went on")
	}
}

// TestRunKeepsLooking: while Run looks, a heartbeat held up longer than
// the gap (a slow CLS) finds no freeze when it looks again.
func TestRunKeepsLooking(t *testing.T) {
	w := New(nil)
	w.SetLease(2 * time.Second) // a gap of 1 s
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.Run(ctx)
	seen := w.Look() // the heartbeat, before its call
	time.Sleep(3 * time.Second)
	if got := w.Look(); got != seen {
		t.Errorf("after a heartbeat held up 3 s with Run looking: %d freezes told, want %d", got-seen, 0)
	}
}

// TestHeldKeepsWhileWaiting: after a freeze, writes are kept without
// waiting, written in order once the answer keeps the attempt, dropped
// once it kills it; Flush waits for the answer.
func TestHeldKeepsWhileWaiting(t *testing.T) {
	c := &clock{t: time.Unix(0, 0)}
	w := New(c.now)
	w.SetLease(time.Hour)
	var kept, lost bytes.Buffer
	a := w.Held(protocol.JobRef{ID: 1, Attempt: 2}, func(p []byte) { kept.Write(p) })
	b := w.Held(protocol.JobRef{ID: 2, Attempt: 1}, func(p []byte) { lost.Write(p) })
	a.Write([]byte("one "))
	c.step(31 * time.Minute)
	start := time.Now()
	a.Write([]byte("two "))
	b.Write([]byte("stale "))
	if d := time.Since(start); d > time.Second {
		t.Fatalf("writes after a freeze took %v: they waited for the answer", d)
	}
	if kept.String() != "one " || lost.Len() != 0 {
		t.Fatalf("before the answer: %q and %q written", kept.String(), lost.String())
	}
	flushed := make(chan struct{})
	go func() { b.Flush(); close(flushed) }()
	select {
	case <-flushed:
		t.Fatal("Flush did not wait for the answer")
	case <-time.After(100 * time.Millisecond):
	}
	w.Settle(w.Look(), []protocol.JobRef{{ID: 2, Attempt: 1}})
	<-flushed
	a.Write([]byte("three"))
	b.Write([]byte("later"))
	a.Flush()
	if kept.String() != "one two three" || lost.Len() != 0 {
		t.Errorf("after the answer: %q (want %q) and %q (want nothing)", kept.String(), "one two three", lost.String())
	}
}

// TestHeldBound: past maxHeld kept, a write waits for the answer.
func TestHeldBound(t *testing.T) {
	c := &clock{t: time.Unix(0, 0)}
	w := New(c.now)
	w.SetLease(time.Hour)
	var out bytes.Buffer
	h := w.Held(protocol.JobRef{ID: 1, Attempt: 1}, func(p []byte) { out.Write(p) })
	c.step(31 * time.Minute)
	h.Write(make([]byte, maxHeld))
	done := make(chan struct{})
	go func() { h.Write([]byte("x")); close(done) }()
	select {
	case <-done:
		t.Fatal("a write past maxHeld did not wait")
	case <-time.After(100 * time.Millisecond):
	}
	w.Settle(w.Look(), nil)
	<-done
	if out.Len() != maxHeld+1 {
		t.Errorf("%d bytes written, want %d", out.Len(), maxHeld+1)
	}
}

// TestNilWatch: with no Watch, writes go straight through.
func TestNilWatch(t *testing.T) {
	var w *Watch
	var out bytes.Buffer
	h := w.Held(protocol.JobRef{ID: 1, Attempt: 1}, func(p []byte) { out.Write(p) })
	h.Write([]byte("a"))
	h.Flush()
	if out.String() != "a" || !w.Pass(protocol.JobRef{ID: 1, Attempt: 1}) {
		t.Errorf("nil Watch: %q written", out.String())
	}
}

// TestHeldSharedVerdict: an attempt's -o and -e files share its verdict;
// flushing the first does not let the second's kept writes through.
func TestHeldSharedVerdict(t *testing.T) {
	c := &clock{t: time.Unix(0, 0)}
	w := New(c.now)
	w.SetLease(time.Hour)
	ref := protocol.JobRef{ID: 1, Attempt: 1}
	var out bytes.Buffer
	o := w.Held(ref, func(p []byte) { out.Write(p) })
	e := w.Held(ref, func(p []byte) { out.Write(p) })
	c.step(31 * time.Minute)
	o.Write([]byte("out"))
	e.Write([]byte("err"))
	w.Settle(w.Look(), []protocol.JobRef{ref})
	o.Flush()
	e.Flush()
	o.Forget()
	e.Forget()
	if out.Len() != 0 {
		t.Errorf("the killed attempt wrote %q", out.String())
	}
}

// host is a fake host's clocks: its monotonic clock runs while it runs;
// its boot clock runs while it runs or is suspended.
type host struct {
	mu        sync.Mutex
	mono      time.Time
	suspended time.Duration
}

func (h *host) boot() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.mono.Add(h.suspended)
}

func (h *host) pass(ran, suspended time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mono = h.mono.Add(ran)
	h.suspended += suspended
}

// TestSuspendIsFreeze: a Watch with the host's own clock (New(nil)) tells
// a freeze by the boot clock, so a suspend of the host (its monotonic
// clock stopped) longer than half the lease is one, alone or with the
// time it ran.
func TestSuspendIsFreeze(t *testing.T) {
	const lease = time.Hour
	saved := bootNow
	t.Cleanup(func() { bootNow = saved })
	for _, tc := range []struct {
		name           string
		ran, suspended time.Duration
		freeze         bool
	}{
		{"ran under half the lease", 29 * time.Minute, 0, false},
		{"ran past half the lease", 31 * time.Minute, 0, true},
		{"suspended under half the lease", 0, 29 * time.Minute, false},
		{"suspended past half the lease", 0, 31 * time.Minute, true},
		{"suspended past the lease", 0, 2 * lease, true},
		{"ran and suspended past half the lease", 16 * time.Minute, 15 * time.Minute, true},
		{"ran and suspended under half the lease", 14 * time.Minute, 15 * time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &host{mono: time.Unix(0, 0), suspended: 3 * time.Hour} // suspended before too
			bootNow = h.boot
			w := New(nil)
			w.SetLease(lease)
			ref := protocol.JobRef{ID: 1, Attempt: 1}
			before := w.Look()
			h.pass(tc.ran, tc.suspended)
			seen := w.Look()
			if got := seen > before; got != tc.freeze {
				t.Fatalf("ran %v, suspended %v: freeze told %v, want %v", tc.ran, tc.suspended, got, tc.freeze)
			}
			if !tc.freeze {
				if !w.Pass(ref) {
					t.Error("a write was dropped with no freeze")
				}
				return
			}
			// As after any freeze: writes wait for the answer to a
			// heartbeat sent after it, and the attempt it kills is
			// dropped.
			a := passing(w, ref)
			select {
			case <-a:
				t.Fatal("a write after the suspend went on before the answer")
			case <-time.After(100 * time.Millisecond):
			}
			w.Settle(seen, []protocol.JobRef{ref})
			if <-a {
				t.Error("the attempt the answer killed wrote on")
			}
		})
	}
}

// TestBootNow: the host's boot clock runs with time.Now (no freeze is
// told of a placeholder that runs).
func TestBootNow(t *testing.T) {
	a, b := bootNow(), bootNow()
	if d := b.Sub(a); d < 0 || d > time.Minute {
		t.Errorf("two readings of the boot clock %v apart", d)
	}
}
