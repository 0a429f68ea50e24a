package placeholders

import (
	"log/slog"
	"testing"
	"time"
)

func TestReachHold(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const lease, grace = 30 * time.Second, 10 * time.Minute
	heard := t0
	lapsed := t0.Add(lease)
	type event struct {
		at      time.Time
		lost    bool // the listing failed
		pending bool // the first listing since the CLS started is under way
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
		{"answers far apart (a site with no placeholders left is listed seldom): lapses", "far", []event{{at: t0.Add(-time.Second)}, {at: lapsed.Add(time.Second)}},
			lapsed.Add(2 * time.Second), grace, false},
		{"not listed since the CLS started: held", "far", []event{{pending: true}}, lapsed.Add(time.Minute), grace, true},
		{"not listed since the CLS started, past the grace: lapses", "far", []event{{pending: true}}, heard.Add(grace), grace, false},
		{"first answer less than a lease ago: held", "far", []event{{pending: true}, {at: lapsed.Add(time.Minute)}}, lapsed.Add(time.Minute + lease - time.Second), grace, true},
		{"first answer a lease ago, and answered since: lapses", "far", []event{{pending: true}, {at: lapsed.Add(time.Minute)}, {at: lapsed.Add(time.Minute + lease)}},
			lapsed.Add(time.Minute + lease), grace, false},
		{"first listing failed: held as a cut", "far", []event{{pending: true}, {lost: true}}, lapsed.Add(time.Minute), grace, true},
		{"pending again changes nothing (a site set anew)", "far", []event{{at: t0.Add(-10 * time.Second)}, {pending: true}, {at: t0.Add(15 * time.Second)}, {at: lapsed}}, lapsed, grace, false},
		{"no grace: never held", "far", []event{{at: t0.Add(-time.Hour)}, {at: t0.Add(time.Second), lost: true}}, lapsed, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r Reach
			for _, e := range tc.events {
				switch {
				case e.pending:
					r.Pending("far")
				case e.lost:
					r.Lost("far")
				default:
					r.Reached("far", e.at)
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
	r.Pending("near") // a CLS restarted: its first listing is under way
	if hold, first := r.Hold("near", t0, t0.Add(2*lease), lease, time.Hour); !hold || first {
		t.Fatalf("a site not listed yet: hold = %v, first = %v; want held, with no cut to log", hold, first)
	}
	r.Lost("near") // during a cut: its first listing fails
	if hold, _ := r.Hold("near", t0, t0.Add(2*lease), lease, time.Hour); !hold {
		t.Fatal("a site that failed its first listing does not hold")
	}
	r.Forget("near")
	r.Reached("far", t0)
	r.Lost("far")
	now := t0.Add(2 * lease)
	if hold, first := r.Hold("far", t0, now, lease, time.Hour); !hold || !first {
		t.Fatalf("first hold = %v, %v", hold, first)
	}
	if hold, first := r.Hold("far", t0, now, lease, time.Hour); !hold || first {
		t.Fatalf("second hold = %v, %v: one log line per cut", hold, first)
	}
	r.Reached("far", now)
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

// TestSiteAnsweredSlowListing: a listing that took longer than a lease
// may have hung through a cut and answered once it healed: the site counts
// as back when it answered, and its placeholders get a lease from then.
func TestSiteAnsweredSlowListing(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const lease, grace = 30 * time.Second, time.Hour
	for _, tc := range []struct {
		name string
		took time.Duration
		want bool // held a lease after the answer, less a second
	}{
		{"quick: up all along", time.Second, false},
		{"longer than a lease: back when it answered", 2 * lease, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var g Registry
			g.SiteAnswered("far", t0.Add(-time.Minute), t0.Add(-time.Minute), true, lease)
			asked := t0.Add(lease) // the placeholder, last heard at t0, lapses now
			answered := asked.Add(tc.took)
			g.SiteAnswered("far", asked, answered, true, lease)
			g.SiteAnswered("far", answered.Add(lease), answered.Add(lease), true, lease)
			now := answered.Add(lease - time.Second)
			hold := g.HoldLapsed(1, func() string { return "far" }, t0, now, lease, grace, slog.New(slog.DiscardHandler))
			if hold != tc.want {
				t.Errorf("held %v, want %v", hold, tc.want)
			}
		})
	}
}

// TestCuts: Cuts names a site that does not answer, since when it last
// did, and the leases the last lease check held there (their
// placeholders, and when the last hold runs out); a site that answers is
// left out, and one back from a cut is shown while its leases are held.
func TestCuts(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const lease, grace = 30 * time.Second, 10 * time.Minute
	log := slog.New(slog.DiscardHandler)
	g := Registry{suspended: func() time.Duration { return 0 }}
	g.Checked(t0)
	cuts := func() map[string]Cut {
		m := map[string]Cut{}
		g.Cuts(m)
		return m
	}
	g.SiteAnswered("far", t0, t0, true, lease)
	g.SiteAnswered("near", t0, t0, true, lease)
	if m := cuts(); len(m) != 0 {
		t.Fatalf("sites that answer: %+v", m)
	}

	// far is cut off: its placeholders 1 (two jobs) and 2 fall silent.
	cut := t0.Add(time.Second)
	g.SiteAnswered("far", cut, cut, false, lease)
	g.SiteAnswered("near", cut, cut, true, lease)
	now := t0.Add(lease + 5*time.Second)
	g.Stalled(now, time.Hour)
	hold := func(ph int64, site string, heard time.Time) bool {
		return g.HoldLapsed(ph, func() string { return site }, heard, now, lease, grace, log)
	}
	if !hold(1, "far", t0) || !hold(1, "far", t0.Add(2*time.Second)) || !hold(2, "far", t0.Add(time.Second)) {
		t.Fatal("far's leases are not held")
	}
	want := Cut{Down: true, Answered: t0, Placeholders: 2, Leases: 3, Until: t0.Add(2*time.Second + grace)}
	if m := cuts(); len(m) != 1 || m["far"] != want {
		t.Errorf("cut off, leases held: %+v, want far: %+v", m, want)
	}

	// A check that held nothing: far is still cut off, nothing held.
	now = now.Add(time.Second)
	g.Stalled(now, time.Hour)
	if m := cuts(); len(m) != 1 || m["far"] != (Cut{Down: true, Answered: t0}) {
		t.Errorf("cut off, no lease held at the last check: %+v", m)
	}

	// far answers again: back less than a lease ago, its leases are still
	// held, and it is no longer down.
	now = now.Add(time.Second)
	g.SiteAnswered("far", now, now, true, lease)
	g.Stalled(now, time.Hour)
	if !hold(1, "far", t0) {
		t.Fatal("a lease of a site back less than a lease ago is not held")
	}
	if m := cuts(); len(m) != 1 || m["far"] != (Cut{Placeholders: 1, Leases: 1, Until: t0.Add(grace)}) {
		t.Errorf("back, a lease held: %+v", m)
	}

	// Its placeholders heartbeat: no lease lapses, nothing is shown.
	now = now.Add(time.Second)
	g.Stalled(now, time.Hour)
	if m := cuts(); len(m) != 0 {
		t.Errorf("back, nothing held: %+v", m)
	}

	g.SiteAnswered("far", now, now, false, lease)
	g.Retire("far")
	if m := cuts(); len(m) != 0 {
		t.Errorf("a removed site: %+v", m)
	}
}
