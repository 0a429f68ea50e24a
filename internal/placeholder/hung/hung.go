// Package hung bounds calls that may never return. On a filesystem whose
// server is gone (NFS, Lustre, GPFS) a stat, read, write, fsync or close
// blocks in uninterruptible sleep for ever, and nothing cancels it: the
// call runs in a goroutine of its own, and the caller gives up on it after
// a deadline, saying so (Error). The goroutine stays blocked until the
// call returns, if it ever does; a Gate keeps such calls from piling up
// where the same call is made again and again.
package hung

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Error says a call did not return in time.
type Error struct {
	What  string        // the call: "sync streams/1.0.mqs"
	After time.Duration // how long it was given
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s did not return in %v (a hung filesystem?)", e.What, e.After)
}

// Is makes errors.Is(err, ErrHung) true of every *Error.
func (e *Error) Is(target error) bool { return target == ErrHung }

// ErrHung matches every Error (errors.Is).
var ErrHung = errors.New("a call did not return in time")

// Within runs f and waits d at most for it to return: f's error, or an
// *Error if it did not return in time. f runs on regardless, and must not
// touch what the caller goes on using.
func Within(d time.Duration, what string, f func() error) error {
	_, err := Value(d, what, func() (struct{}, error) { return struct{}{}, f() })
	return err
}

// Value is Within for a call that returns a value as well.
func Value[T any](d time.Duration, what string, f func() (T, error)) (T, error) {
	return value(d, what, f, nil)
}

// Open is Value for a call that opens a file: one opened after the
// caller gave up on it is closed.
func Open(d time.Duration, what string, open func() (*os.File, error)) (*os.File, error) {
	return Releasing(d, what, open, func(f *os.File) {
		if f != nil {
			f.Close()
		}
	})
}

// Releasing is Value for a call whose result holds something (open
// files): what f returns after the caller gave up on it goes to release.
func Releasing[T any](d time.Duration, what string, f func() (T, error), release func(T)) (T, error) {
	return value(d, what, f, release)
}

// value is Value, handing what f returns too late to late, if not nil.
func value[T any](d time.Duration, what string, f func() (T, error), late func(T)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1) // f's goroutine never blocks on it
	var mu sync.Mutex
	gaveUp := false
	go func() {
		v, err := f()
		mu.Lock()
		tooLate := gaveUp
		mu.Unlock()
		if tooLate && late != nil {
			late(v)
			return
		}
		done <- result{v, err}
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case r := <-done:
		return r.v, r.err
	case <-t.C:
	}
	mu.Lock()
	gaveUp = true
	mu.Unlock()
	select {
	case r := <-done: // returned just as the caller gave up: taken
		return r.v, r.err
	default:
	}
	var zero T
	return zero, &Error{What: what, After: d}
}

// Progressing runs f, which calls step as each call of its own returns,
// and gives up on it once d passes without a step: a long run of quick
// calls (thousands of renames on a slow filesystem) is not cut, one call
// that hangs is. f runs on regardless, as with Within.
func Progressing(d time.Duration, what string, f func(step func()) error) error {
	var steps atomic.Int64
	done := make(chan error, 1)
	go func() { done <- f(func() { steps.Add(1) }) }()
	t := time.NewTicker(d)
	defer t.Stop()
	for last := int64(0); ; {
		select {
		case err := <-done:
			return err
		case <-t.C:
		}
		n := steps.Load()
		if n == last {
			select {
			case err := <-done: // returned as the caller gave up: taken
				return err
			default:
			}
			return &Error{What: what, After: d}
		}
		last = n
	}
}

// A Gate keeps calls from piling up on a filesystem known to hang: once
// one of its calls has not returned in time, the next ones fail at once,
// rather than each leave one more goroutine blocked on it, until that
// call returns. Calls on a filesystem that answers run side by side.
type Gate struct {
	mu    sync.Mutex
	stuck int // calls that did not return in time, and have not yet
}

// Within is the package's Within, unless a call of the gate's is stuck:
// then it fails at once with an *Error.
func (g *Gate) Within(d time.Duration, what string, f func() error) error {
	g.mu.Lock()
	if g.stuck > 0 {
		g.mu.Unlock()
		return &Error{What: what, After: d}
	}
	g.mu.Unlock()
	var late, returned bool // under g.mu
	err := Within(d, what, func() error {
		err := f()
		g.mu.Lock()
		if late {
			g.stuck--
		}
		returned = true
		g.mu.Unlock()
		return err
	})
	var he *Error
	if errors.As(err, &he) {
		g.mu.Lock()
		if !returned {
			late = true
			g.stuck++
		}
		g.mu.Unlock()
	}
	return err
}
