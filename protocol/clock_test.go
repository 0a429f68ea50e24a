package protocol

import (
	"testing"
	"time"
)

// OnClock moves reports' times by how far the placeholder's clock is from
// the CLS's, only past MaxClockSkew, and leaves times not set unset.
func TestOnClock(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		clock time.Time
		want  time.Duration
	}{
		{"not said", time.Time{}, 0},
		{"in step", now, 0},
		{"a request's way", now.Add(-MaxClockSkew), 0},
		{"three hours ahead", now.Add(3 * time.Hour), -3 * time.Hour},
		{"a day behind", now.Add(-24 * time.Hour), 24 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			started := now.Add(-time.Minute)
			if !tc.clock.IsZero() {
				started = tc.clock.Add(-time.Minute)
			}
			reps := []Report{{ID: 1, Started: started, Finished: started.Add(time.Second)}, {ID: 2}}
			if got := OnClock(reps, tc.clock, now); got != tc.want {
				t.Fatalf("moved by %v, want %v", got, tc.want)
			}
			if want := started.Add(tc.want); !reps[0].Started.Equal(want) || reps[0].Finished.Sub(reps[0].Started) != time.Second {
				t.Errorf("report %+v: want started %v, a second long", reps[0], want)
			}
			if !reps[1].Started.IsZero() || !reps[1].Finished.IsZero() {
				t.Errorf("times not set were set: %+v", reps[1])
			}
		})
	}
}
