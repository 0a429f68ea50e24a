package protocol

import (
	"testing"
	"time"
)

func TestInterruptedReasons(t *testing.T) {
	for _, c := range []struct {
		reason      string
		interrupted bool
		walltime    time.Duration // 0: not a walltime stop
	}{
		{ReasonInterrupted, true, 0},
		{WalltimeReason(90 * time.Second), true, 90 * time.Second},
		{WalltimeReason(3*time.Hour + 55*time.Minute), true, 3*time.Hour + 55*time.Minute},
		{ReasonInterrupted + ": its placeholder reached the end of its walltime", true, 0},
		{ReasonInterrupted + ": its placeholder reached the end of its walltime (-5s for jobs", true, 0},
		{ReasonInterrupted + ": its placeholder reached the end of its walltime (soon)", true, 0},
		{"interrupted by the user", false, 0},
		{"exit status 1", false, 0},
		{"", false, 0},
	} {
		if got := IsInterrupted(c.reason); got != c.interrupted {
			t.Errorf("IsInterrupted(%q) = %v, want %v", c.reason, got, c.interrupted)
		}
		if w, ok := WalltimeStopped(c.reason); w != c.walltime || ok != (c.walltime > 0) {
			t.Errorf("WalltimeStopped(%q) = %v, %v; want %v", c.reason, w, ok, c.walltime)
		}
	}
}
