package sweep

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"
)

// waitUntil polls cond until it holds, failing the test after a minute.
func waitUntil(t *testing.T, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a minute: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSweeperAmortizes: the attempts that end while a sweep runs are all
// swept by the next one, a single scan; the sweeper's goroutine ends
// when a wait leaves nothing to sweep.
func TestSweeperAmortizes(t *testing.T) {
	t.Parallel()
	s := New(slog.New(slog.DiscardHandler))
	s.every = time.Millisecond
	release := make(chan struct{})
	var mu sync.Mutex
	var scans []int // how many of the ids 1..101 each scan matched
	s.kill = func(match func(string) bool) int {
		mu.Lock()
		first := len(scans) == 0
		scans = append(scans, 0)
		for i := 1; i <= 101; i++ {
			if match(fmt.Sprint(i)) {
				scans[len(scans)-1]++
			}
		}
		mu.Unlock()
		if first {
			<-release
		}
		return 0
	}
	s.Add("1", 1)
	waitUntil(t, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(scans) == 0 {
			return fmt.Errorf("no scan yet")
		}
		return nil
	})
	for i := 2; i <= 101; i++ {
		s.Add(fmt.Sprint(i), int64(i))
	}
	close(release)
	waitUntil(t, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.running {
			return fmt.Errorf("the sweeper still runs")
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	if want := []int{1, 100}; !slices.Equal(scans, want) {
		t.Errorf("scans matched %v ids, want %v", scans, want)
	}
}

// TestSweeperSparesLive: an attempt id that ended and started again (a
// job handed out twice) is not swept while its new run lives; one that
// did not start again is.
func TestSweeperSparesLive(t *testing.T) {
	t.Parallel()
	s := New(slog.New(slog.DiscardHandler))
	var matched []string
	s.kill = func(match func(string) bool) int {
		for _, id := range []string{"a", "b", "c"} {
			if match(id) {
				matched = append(matched, id)
			}
		}
		return 0
	}
	s.mu.Lock()
	s.ended = map[string]int64{"a": 1, "b": 2}
	s.running = true // no goroutine: the test sweeps
	s.mu.Unlock()
	s.Start("b")
	s.Flush(time.Minute)
	if !slices.Equal(matched, []string{"a"}) {
		t.Errorf("swept %v, want [a]", matched)
	}
}

// TestFlushBounded: a stopping agent's last sweep does not hang it when a
// scan does not end (the environment of a process in uninterruptible
// sleep cannot be read).
func TestFlushBounded(t *testing.T) {
	t.Parallel()
	s := New(slog.New(slog.DiscardHandler))
	hung := make(chan struct{})
	defer close(hung)
	s.kill = func(func(string) bool) int { <-hung; return 0 }
	s.mu.Lock()
	s.ended = map[string]int64{"a": 1}
	s.running = true // no goroutine: the test sweeps
	s.mu.Unlock()
	flushed := make(chan bool, 1)
	go func() { flushed <- s.Flush(100 * time.Millisecond) }()
	select {
	case ok := <-flushed:
		if ok {
			t.Error("Flush says a scan that never ends ended")
		}
	case <-time.After(time.Minute):
		t.Fatal("Flush waits for a scan that never ends")
	}
}
