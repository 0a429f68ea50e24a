package placeholders

import (
	"testing"
	"time"
)

func TestReachHold(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const lease, grace = 30 * time.Second, 10 * time.Minute
	heard := t0
	lapsed := t0.Add(lease)
	tests := []struct {
		name    string
		reached map[string]time.Time // site -> when reached
		site    string
		now     time.Time
		grace   time.Duration
		want    bool
	}{
		{"a site never reached lapses", nil, "far", lapsed, grace, false},
		{"another site's reach does not hold", map[string]time.Time{"near": t0}, "far", lapsed, grace, false},
		{"not reached since the lapse: held", map[string]time.Time{"far": lapsed.Add(-time.Second)}, "far", lapsed.Add(time.Minute), grace, true},
		{"reached after the lapse: its silence is its own", map[string]time.Time{"far": lapsed}, "far", lapsed.Add(time.Minute), grace, false},
		{"held no longer than grace since last heard", map[string]time.Time{"far": t0}, "far", heard.Add(grace), grace, false},
		{"held just within grace", map[string]time.Time{"far": t0}, "far", heard.Add(grace - time.Second), grace, true},
		{"no grace: never held", map[string]time.Time{"far": t0}, "far", lapsed, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r Reach
			for site, at := range tc.reached {
				r.Reached(site, at)
			}
			if got, _ := r.Hold(tc.site, heard, lapsed, tc.now, tc.grace); got != tc.want {
				t.Errorf("Hold = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestReachFirstHoldAndForget(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var r Reach
	if r.Watching() {
		t.Fatal("watching before any site was reached")
	}
	r.Reached("far", t0)
	r.Reached("far", t0.Add(-time.Hour)) // an older word does not move it back
	lapsed := t0.Add(time.Second)
	if hold, first := r.Hold("far", t0, lapsed, lapsed, time.Hour); !hold || !first {
		t.Fatalf("first hold = %v, %v", hold, first)
	}
	if hold, first := r.Hold("far", t0, lapsed, lapsed, time.Hour); !hold || first {
		t.Fatalf("second hold = %v, %v: one log line per cut", hold, first)
	}
	r.Reached("far", lapsed.Add(-time.Millisecond)) // reached again, before the lapse
	if _, first := r.Hold("far", t0, lapsed, lapsed, time.Hour); !first {
		t.Error("a hold after the site was reached again is not told as a new cut")
	}
	r.Forget("far")
	if r.Watching() {
		t.Error("a forgotten site is still watched")
	}
	if hold, _ := r.Hold("far", t0, lapsed, lapsed, time.Hour); hold {
		t.Error("a removed site's lease is held")
	}
}
