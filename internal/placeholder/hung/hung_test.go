package hung

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestWithin(t *testing.T) {
	want := errors.New("eio")
	if err := Within(time.Minute, "stat", func() error { return want }); err != want {
		t.Fatalf("a call that returns: %v, want %v", err, want)
	}
	block := make(chan struct{})
	defer close(block)
	err := Within(10*time.Millisecond, "fsync x", func() error { <-block; return nil })
	var he *Error
	if !errors.As(err, &he) || !errors.Is(err, ErrHung) || he.What != "fsync x" {
		t.Fatalf("a call that does not return: %v, want a hung.Error", err)
	}
}

func TestGate(t *testing.T) {
	var g Gate
	// Calls that return run side by side.
	in, out := make(chan struct{}), make(chan struct{})
	go g.Within(time.Minute, "statfs", func() error { close(in); <-out; return nil })
	<-in
	if err := g.Within(time.Minute, "statfs", func() error { return nil }); err != nil {
		t.Fatalf("a call beside one that has not timed out: %v", err)
	}
	close(out)
	block := make(chan struct{})
	if err := g.Within(10*time.Millisecond, "statfs", func() error { <-block; return nil }); !errors.Is(err, ErrHung) {
		t.Fatalf("first call: %v", err)
	}
	called := false
	start := time.Now()
	err := g.Within(time.Minute, "statfs", func() error { called = true; return nil })
	if !errors.Is(err, ErrHung) || called || time.Since(start) > 30*time.Second {
		t.Fatalf("a call while one is still blocked: err %v, called %v: want it refused at once", err, called)
	}
	close(block)
	deadline := time.Now().Add(time.Minute)
	for g.Within(time.Minute, "statfs", func() error { return nil }) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the gate stayed shut after the blocked call returned")
		}
		time.Sleep(time.Millisecond)
	}
}

// A file opened after the caller gave up is closed, not leaked.
func TestOpenLate(t *testing.T) {
	block := make(chan struct{})
	opened := make(chan *os.File, 1)
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(10*time.Millisecond, "open", func() (*os.File, error) {
		<-block
		f, err := os.Open(path)
		opened <- f
		return f, err
	})
	if !errors.Is(err, ErrHung) {
		t.Fatalf("open: %v, want hung", err)
	}
	close(block)
	f := <-opened
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := f.Stat(); errors.Is(err, os.ErrClosed) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("a file opened too late was left open")
		}
		time.Sleep(time.Millisecond)
	}
}

// Progressing cuts a call that stops stepping, not a long run of quick
// steps that lasts longer than its deadline in all.
func TestProgressing(t *testing.T) {
	want := errors.New("exdev")
	if err := Progressing(time.Minute, "move", func(func()) error { return want }); err != want {
		t.Fatalf("a call that returns: %v, want %v", err, want)
	}
	// Two deadlines' worth of steps a few milliseconds apart: a gap of
	// two seconds between two would take a stall of the test itself.
	const d = 2 * time.Second
	err := Progressing(d, "move", func(step func()) error {
		for end := time.Now().Add(2 * d); time.Now().Before(end); {
			time.Sleep(5 * time.Millisecond)
			step()
		}
		return nil
	})
	if err != nil {
		t.Fatalf("a run of quick steps, longer than the deadline in all: %v, want nil", err)
	}
	block := make(chan struct{})
	defer close(block)
	err = Progressing(10*time.Millisecond, "move", func(step func()) error { step(); step(); <-block; return nil })
	var he *Error
	if !errors.As(err, &he) || he.What != "move" {
		t.Fatalf("a call that stops stepping: %v, want a hung.Error", err)
	}
}
