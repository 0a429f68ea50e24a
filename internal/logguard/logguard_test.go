package logguard

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestText(t *testing.T) {
	long := strings.Repeat("a", 200_000)
	for _, tc := range []struct{ in, want string }{
		{"root", "root"},
		{"a\nb\x1b[31m", `a\nb\x1b[31m`},
		{"\xff", `\xff`},
		{long, strings.Repeat("a", MaxText) + "...[cut, 200000 bytes]"},
		{strings.Repeat("é", 40), strings.Repeat("é", 32) + "...[cut, 80 bytes]"},
	} {
		if got := Text(tc.in); got != tc.want {
			t.Errorf("Text(%.20q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// syncBuf is a log destination safe for the limiter's timer goroutine.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Split(strings.TrimSpace(s.b.String()), "\n")
}

func TestLimiterAggregates(t *testing.T) {
	var buf syncBuf
	l := &Limiter{Log: slog.New(slog.NewTextHandler(&buf, nil)), Window: time.Hour}
	for range 10_000 {
		l.Warn("a", "refused", "addr", "a")
	}
	for range 3 {
		l.Warn("b", "refused", "addr", "b")
	}
	l.Warn("c", "refused", "addr", "c")
	if got := buf.lines(); len(got) != 3 {
		t.Fatalf("before the window ends: %d lines, want 3 (one per key):\n%s", len(got), strings.Join(got, "\n"))
	}
	l.Flush()
	got := buf.lines()
	if len(got) != 5 {
		t.Fatalf("after flush: %d lines, want 5:\n%s", len(got), strings.Join(got, "\n"))
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{"addr=a more=9999", "addr=b more=2"} {
		if !strings.Contains(all, want) {
			t.Errorf("no %q in\n%s", want, all)
		}
	}
}

func TestLimiterWindowEnds(t *testing.T) {
	var buf syncBuf
	l := &Limiter{Log: slog.New(slog.NewTextHandler(&buf, nil)), Window: 20 * time.Millisecond}
	for range 100 {
		l.Warn("a", "refused", "addr", "a")
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(strings.Join(buf.lines(), "\n"), "more=99") {
		if time.Now().After(deadline) {
			t.Fatalf("no count logged after the window:\n%s", strings.Join(buf.lines(), "\n"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestLimiterBoundsKeys(t *testing.T) {
	var buf syncBuf
	l := &Limiter{Log: slog.New(slog.NewTextHandler(&buf, nil)), Window: time.Hour}
	for i := range maxKeys + 1000 {
		l.Warn(strings.Repeat("k", i%7)+string(rune(i)), "refused")
	}
	if n := len(buf.lines()); n > maxKeys+1 {
		t.Fatalf("%d lines for %d keys; want at most %d", n, maxKeys+1000, maxKeys+1)
	}
	if len(l.keys) > maxKeys+1 {
		t.Fatalf("%d keys kept", len(l.keys))
	}
}

// TestGate: a warning passes at once, then one a minute.
func TestGate(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1e9, 0)
	var g Gate
	for _, c := range []struct {
		at   time.Duration
		want bool
	}{{0, true}, {time.Second, false}, {59 * time.Second, false}, {time.Minute, true}, {61 * time.Second, false}, {3 * time.Minute, true}} {
		if got := g.Open(t0.Add(c.at)); got != c.want {
			t.Errorf("at %v: %v, want %v", c.at, got, c.want)
		}
	}
}
