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
	type event struct {
		at   time.Time
		lost bool // the listing failed
	}
	tests := []struct {
		name   string
		site   string
		events []event // of site "far"
		now    time.Time
		grace  time.Duration
		want   bool
	}{
		{"a site never told of lapses", "near", []event{{at: t0}}, lapsed, grace, false},
		{"up all along and answered after the lapse: its silence is its own", "far", []event{{at: t0.Add(-10 * time.Second)}, {at: t0.Add(15 * time.Second)}, {at: lapsed}}, lapsed, grace, false},
		{"up, not yet answered since the lapse: held", "far", []event{{at: t0.Add(-10 * time.Second)}, {at: t0.Add(15 * time.Second)}, {at: lapsed.Add(-time.Second)}}, lapsed.Add(time.Second), grace, true},
		{"not answering: held", "far", []event{{at: t0.Add(-time.Hour)}, {at: t0.Add(time.Second), lost: true}}, lapsed.Add(time.Minute), grace, true},
		{"not answering past the grace: lapses", "far", []event{{at: t0.Add(-time.Hour)}, {at: t0.Add(time.Second), lost: true}}, heard.Add(grace), grace, false},
		{"back less than a lease ago: held", "far", []event{{at: t0.Add(-time.Hour)}, {at: t0.Add(time.Second), lost: true}, {at: lapsed.Add(time.Minute)}},
			lapsed.Add(time.Minute + lease - time.Second), grace, true},
		{"back a lease ago and answered since: lapses", "far", []event{{at: t0.Add(-time.Hour)}, {at: t0.Add(time.Second), lost: true}, {at: lapsed.Add(time.Minute)}, {at: lapsed.Add(time.Minute + lease)}},
			lapsed.Add(time.Minute + lease), grace, false},
		{"an answer after a silence longer than a lease is a return: held", "far", []event{{at: t0.Add(-time.Second)}, {at: lapsed.Add(time.Second)}},
			lapsed.Add(2 * time.Second), grace, true},
		{"no grace: never held", "far", []event{{at: t0.Add(-time.Hour)}, {at: t0.Add(time.Second), lost: true}}, lapsed, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r Reach
			for _, e := range tc.events {
				if e.lost {
					r.Lost("far")
				} else {
					r.Reached("far", e.at, lease)
				}
			}
			if got, _ := r.Hold(tc.site, heard, tc.now, lease, tc.grace); got != tc.want {
				t.Errorf("Hold = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestReachFirstHoldAndForget(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const lease = time.Second
	var r Reach
	if r.Watching() {
		t.Fatal("watching before any site answered")
	}
	r.Lost("near") // a CLS restarted during a cut: its first listing fails
	if hold, _ := r.Hold("near", t0, t0.Add(2*lease), lease, time.Hour); !hold {
		t.Fatal("a site that failed its first listing does not hold")
	}
	r.Forget("near")
	r.Reached("far", t0, lease)
	r.Lost("far")
	now := t0.Add(2 * lease)
	if hold, first := r.Hold("far", t0, now, lease, time.Hour); !hold || !first {
		t.Fatalf("first hold = %v, %v", hold, first)
	}
	if hold, first := r.Hold("far", t0, now, lease, time.Hour); !hold || first {
		t.Fatalf("second hold = %v, %v: one log line per cut", hold, first)
	}
	r.Reached("far", now, lease)
	r.Lost("far")
	if _, first := r.Hold("far", t0, now, lease, time.Hour); !first {
		t.Error("a hold in a new cut is not told")
	}
	r.Forget("far")
	if r.Watching() {
		t.Error("a forgotten site is still watched")
	}
	if hold, _ := r.Hold("far", t0, now, lease, time.Hour); hold {
		t.Error("a removed site's lease is held")
	}
}
