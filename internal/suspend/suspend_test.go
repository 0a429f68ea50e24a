package suspend

import (
	"runtime"
	"testing"
	"time"
)

// TestTotalHoldsStill: with the host running, Total does not change
// (neither does the time suspended), though the two clocks' readings
// differ by more each time the thread waits between them; where there is
// no boot clock it is 0.
func TestTotalHoldsStill(t *testing.T) {
	first := Total()
	if first < 0 || runtime.GOOS != "linux" && first != 0 {
		t.Fatalf("Total = %v on %s", first, runtime.GOOS)
	}
	for i := range 10000 {
		if i%100 == 0 {
			runtime.Gosched()
		}
		if d := Total(); d != first {
			// A suspend of this host in the test ends it.
			t.Fatalf("Total went from %v to %v while the host ran", first, d)
		}
	}
}

// TestTotalGrain: Total follows the clocks' difference once it moved by
// Grain either way (a suspend; a reading the thread was held up in), and
// holds still through smaller changes.
func TestTotalGrain(t *testing.T) {
	saved := read
	t.Cleanup(func() { read = saved; last.Store(0) })
	last.Store(0)
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	for _, tc := range []struct{ read, want time.Duration }{
		{0, 0},
		{ms(3), 0},               // the reads' jitter
		{ms(999), 0},             // still under Grain
		{ms(60_000), ms(60_000)}, // a suspend of a minute
		{ms(60_002), ms(60_000)}, // jitter again
		{ms(61_003), ms(61_003)}, // a held-up reading as long as Grain
		{ms(60_001), ms(60_001)}, // and the next one back from it
		{ms(60_000), ms(60_001)},
		{ms(600_000), ms(600_000)},
	} {
		read = func() time.Duration { return tc.read }
		if got := Total(); got != tc.want {
			t.Errorf("after reading %v: Total = %v, want %v", tc.read, got, tc.want)
		}
	}
}
