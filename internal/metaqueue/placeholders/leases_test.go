package placeholders

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/runs"
	"github.com/mq-hpc/mq/protocol"
)

// attempts are job 1's row attempt at placeholder 5, job 2's at 6 with a
// copy (attempt 2) at 5, and job 3's at 5; every lease at lease.
func attempts(lease time.Time) (runs.Rows, runs.Copies) {
	rows := runs.Rows{
		1: {Attempt: 1, Placeholder: 5, Lease: lease},
		2: {Attempt: 1, Placeholder: 6, Lease: lease},
		3: {Attempt: 1, Placeholder: 5, Lease: lease},
	}
	cs := runs.Copies{2: {{Attempt: 2, Placeholder: 5, Lease: lease}}}
	return rows, cs
}

func ref(id int64, attempt int) protocol.JobRef { return protocol.JobRef{ID: id, Attempt: attempt} }

func TestRenew(t *testing.T) {
	t0 := time.Unix(1000, 0)
	until := t0.Add(30 * time.Second)
	for _, tc := range []struct {
		name      string
		hb        protocol.Heartbeat
		winErr    error
		won, kill []protocol.JobRef
		renewed   []protocol.JobRef // attempts whose lease is now until
		wantErr   bool
	}{
		{name: "own attempts renewed", hb: protocol.Heartbeat{Placeholder: 5, Running: []protocol.JobRef{ref(1, 1), ref(3, 1)}},
			renewed: []protocol.JobRef{ref(1, 1), ref(3, 1)}},
		{name: "a copy renewed", hb: protocol.Heartbeat{Placeholder: 5, Running: []protocol.JobRef{ref(2, 2)}},
			renewed: []protocol.JobRef{ref(2, 2)}},
		{name: "another's, gone and stale attempts killed", hb: protocol.Heartbeat{Placeholder: 5, Running: []protocol.JobRef{ref(2, 1), ref(9, 1), ref(1, 2), ref(1, 1)}},
			kill: []protocol.JobRef{ref(2, 1), ref(9, 1), ref(1, 2)}, renewed: []protocol.JobRef{ref(1, 1)}},
		{name: "a claim wins", hb: protocol.Heartbeat{Placeholder: 5, Claim: []protocol.JobRef{ref(2, 2)}, Running: []protocol.JobRef{ref(2, 2)}},
			won: []protocol.JobRef{ref(2, 2)}, renewed: []protocol.JobRef{ref(2, 2)}},
		{name: "a lost claim killed", hb: protocol.Heartbeat{Placeholder: 5, Claim: []protocol.JobRef{ref(2, 3)}},
			kill: []protocol.JobRef{ref(2, 3)}},
		{name: "a lost claim still running killed once", hb: protocol.Heartbeat{Placeholder: 5, Claim: []protocol.JobRef{ref(2, 3)}, Running: []protocol.JobRef{ref(2, 3)}},
			kill: []protocol.JobRef{ref(2, 3)}},
		{name: "the win's failure", hb: protocol.Heartbeat{Placeholder: 5, Claim: []protocol.JobRef{ref(2, 2)}, Running: []protocol.JobRef{ref(1, 1)}},
			winErr: errors.New("disk"), wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows, cs := attempts(t0)
			var wins []protocol.JobRef
			win := func(id int64, r *runs.Run) error {
				wins = append(wins, ref(id, r.Attempt))
				return tc.winErr
			}
			reply, err := Renew(tc.hb, until, rows, cs, win)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Renew: %v, want error %v", err, tc.wantErr)
			}
			if !slices.Equal(reply.Won, tc.won) || !slices.Equal(reply.Kill, tc.kill) {
				t.Errorf("Renew = won %v, kill %v; want %v, %v", reply.Won, reply.Kill, tc.won, tc.kill)
			}
			if !tc.wantErr && !slices.Equal(wins, tc.won) {
				t.Errorf("win called for %v, want %v", wins, tc.won)
			}
			for id, r := range runs.All(rows, cs) {
				want := t0
				if slices.Contains(tc.renewed, ref(id, r.Attempt)) {
					want = until
				}
				if !r.Lease.Equal(want) {
					t.Errorf("job %d attempt %d: lease %v, want %v", id, r.Attempt, r.Lease, want)
				}
			}
		})
	}
}

func TestLeases(t *testing.T) {
	t0 := time.Unix(1000, 0)
	rows, cs := attempts(t0)
	rows[3].Lease = t0.Add(time.Second)
	got := map[string]bool{}
	for l := range Leases(rows, cs) {
		got[fmt.Sprintf("%d/%d@%d copy=%v %v", l.Job, l.Attempt, l.Placeholder, l.Copy, l.Until.Sub(t0))] = true
	}
	want := []string{"1/1@5 copy=false 0s", "2/1@6 copy=false 0s", "3/1@5 copy=false 1s", "2/2@5 copy=true 0s"}
	if len(got) != len(want) {
		t.Errorf("Leases = %v, want %v", slices.Sorted(maps.Keys(got)), want)
	}
	for _, w := range want {
		if !got[w] {
			t.Errorf("Leases: no %s in %v", w, slices.Sorted(maps.Keys(got)))
		}
	}
	n := 0
	for range Leases(rows, cs) {
		n++
		break
	}
	if n != 1 {
		t.Errorf("Leases went on after a break")
	}
}

func TestStill(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		name string
		l    Lease
		edit func(runs.Rows, runs.Copies)
		want bool
	}{
		{name: "lapsed row", l: Lease{Job: 1, Attempt: 1, Placeholder: 5}, want: true},
		{name: "lapsed copy", l: Lease{Job: 2, Attempt: 2, Placeholder: 5, Copy: true}, want: true},
		{name: "ended", l: Lease{Job: 1, Attempt: 1, Placeholder: 5}, edit: func(rs runs.Rows, _ runs.Copies) { delete(rs, 1) }},
		{name: "took over the row with its lease", l: Lease{Job: 2, Attempt: 2, Placeholder: 5, Copy: true},
			edit: func(rs runs.Rows, cs runs.Copies) {
				rs[2] = &runs.Run{Attempt: 2, Placeholder: 5, Lease: t0.Add(time.Second)}
				delete(cs, 2)
			}},
	} {
		rows, cs := attempts(t0)
		if tc.edit != nil {
			tc.edit(rows, cs)
		}
		if got := tc.l.Still(t0, rows, cs); (got != nil) != tc.want {
			t.Errorf("%s: Still = %v, want one: %v", tc.name, got, tc.want)
		}
	}
	if w := (Lease{Copy: true}).Warning(); w != "lease of a copy expired" {
		t.Errorf("copy's Warning = %q", w)
	}
	if w := (Lease{}).Warning(); w != "lease expired; requeueing" {
		t.Errorf("row's Warning = %q", w)
	}
}

func TestNoticeStall(t *testing.T) {
	const lease, tick = 30 * time.Second, 100 * time.Millisecond
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		gap     time.Duration
		stalled bool
	}{
		{15 * time.Second, false},
		{15*time.Second + 1, true},
	} {
		var g Registry
		g.Checked(t0)
		rows, cs := attempts(t0)
		now := t0.Add(tc.gap)
		gap, stalled := g.NoticeStall(now, lease, tick, rows, cs)
		if gap != tc.gap || stalled != tc.stalled {
			t.Errorf("gap %s: NoticeStall = %s, %v; want %v", tc.gap, gap, stalled, tc.stalled)
		}
		want := t0
		if tc.stalled {
			want = now.Add(lease)
		}
		for id, r := range runs.All(rows, cs) {
			if !r.Lease.Equal(want) {
				t.Errorf("gap %s: job %d attempt %d: lease %v, want %v", tc.gap, id, r.Attempt, r.Lease, want)
			}
		}
	}
}

// TestStallCountsSuspend: a suspend of the CLS's host (its monotonic
// clock, and so the store's now, stopped meanwhile) is a stall of the CLS
// as much as the process being stopped: past StallAfter, alone or with the
// time it ran, every lease is renewed from now.
func TestStallCountsSuspend(t *testing.T) {
	const lease, tick = 30 * time.Second, 100 * time.Millisecond
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		name           string
		ran, suspended time.Duration
		stalled        bool
	}{
		{"ran a tick", tick, 0, false},
		{"suspended under half the lease", tick, 15*time.Second - tick, false},
		{"suspended past half the lease", tick, 15 * time.Second, true},
		{"suspended past the lease", tick, time.Hour, true},
		{"ran and suspended past half the lease", 10 * time.Second, 5*time.Second + 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			slept := 3 * time.Hour // suspended before too
			g := Registry{suspended: func() time.Duration { return slept }}
			g.Checked(t0)
			rows, cs := attempts(t0.Add(lease))
			slept += tc.suspended
			now := t0.Add(tc.ran)
			gap, stalled := g.NoticeStall(now, lease, tick, rows, cs)
			if want := tc.ran + tc.suspended; gap != want || stalled != tc.stalled {
				t.Fatalf("ran %v, suspended %v: NoticeStall = %v, %v; want %v, %v", tc.ran, tc.suspended, gap, stalled, want, tc.stalled)
			}
			want := t0.Add(lease)
			if tc.stalled {
				want = now.Add(lease)
			}
			for id, r := range runs.All(rows, cs) {
				if !r.Lease.Equal(want) {
					t.Errorf("job %d attempt %d: lease %v, want %v", id, r.Attempt, r.Lease, want)
				}
			}
			if _, again := g.Stalled(now.Add(tick), StallAfter(lease, tick)); again {
				t.Error("stalled again a tick later")
			}
		})
	}
}

func TestRunningOn(t *testing.T) {
	rows, cs := attempts(time.Unix(1000, 0))
	for _, tc := range []struct {
		phs  []int64
		want []protocol.JobRef
	}{
		{nil, nil},
		{[]int64{7}, nil},
		{[]int64{6}, []protocol.JobRef{ref(2, 1)}},
		{[]int64{5}, []protocol.JobRef{ref(1, 1), ref(2, 2), ref(3, 1)}},
		{[]int64{5, 6}, []protocol.JobRef{ref(1, 1), ref(2, 1), ref(2, 2), ref(3, 1)}},
	} {
		var got []protocol.JobRef
		for id, r := range RunningOn(tc.phs, rows, cs) {
			got = append(got, ref(id, r.Attempt))
		}
		slices.SortFunc(got, func(a, b protocol.JobRef) int {
			if a.ID != b.ID {
				return int(a.ID - b.ID)
			}
			return a.Attempt - b.Attempt
		})
		if !slices.Equal(got, tc.want) {
			t.Errorf("RunningOn(%v) = %v, want %v", tc.phs, got, tc.want)
		}
	}
}
func TestLapsed(t *testing.T) {
	now := time.Unix(1000, 0)
	all := []Lease{
		{Job: 1, Attempt: 1, Placeholder: 5, Until: now.Add(-time.Second)},
		{Job: 2, Attempt: 1, Placeholder: 5, Until: now},
		{Job: 3, Attempt: 2, Placeholder: 6, Until: now.Add(time.Nanosecond)},
		{Job: 3, Attempt: 3, Placeholder: 7, Until: now.Add(-time.Hour), Copy: true},
	}
	got := Lapsed(now, slices.Values(all))
	want := []Lease{all[0], all[1], all[3]}
	if !slices.Equal(got, want) {
		t.Errorf("Lapsed = %v, want %v", got, want)
	}
	if r := all[0].LostReason(30 * time.Second); r != "lost: no heartbeat from placeholder 5 for 30s" {
		t.Errorf("LostReason = %q", r)
	}
}

func TestStalled(t *testing.T) {
	const tick = 100 * time.Millisecond
	for _, tc := range []struct {
		lease, gap time.Duration
		stalled    bool
	}{
		{30 * time.Second, 15 * time.Second, false},
		{30 * time.Second, 15*time.Second + 1, true},
		{100 * time.Millisecond, 3 * tick, false}, // a short lease: three ticks at least
		{100 * time.Millisecond, 3*tick + 1, true},
	} {
		var g Registry
		t0 := time.Unix(1000, 0)
		g.Checked(t0)
		gap, stalled := g.Stalled(t0.Add(tc.gap), StallAfter(tc.lease, tick))
		if gap != tc.gap || stalled != tc.stalled {
			t.Errorf("lease %s, gap %s: Stalled = %s, %v; want %v", tc.lease, tc.gap, gap, stalled, tc.stalled)
		}
		if _, again := g.Stalled(t0.Add(tc.gap+tick), StallAfter(tc.lease, tick)); again {
			t.Errorf("lease %s: stalled again a tick later", tc.lease)
		}
	}
}

// A heartbeat's lost claims are looked up in its running list as a set:
// scanned once a claim, 60,000 of each from one placeholder key held the
// core 11 s (the bound here is far above the set's milliseconds and far
// below the scan's seconds, even under -race on a busy machine).
func TestRenewManyLostClaims(t *testing.T) {
	const n = 40_000
	hb := protocol.Heartbeat{Placeholder: 5}
	for i := range n {
		hb.Claim = append(hb.Claim, ref(int64(1_000_000+i), 1))
		hb.Running = append(hb.Running, ref(int64(2_000_000+i), 1))
	}
	rows, cs := attempts(time.Unix(1000, 0))
	start := time.Now()
	reply, err := Renew(hb, time.Unix(2000, 0), rows, cs, func(int64, *runs.Run) error { return nil })
	if took := time.Since(start); err != nil || len(reply.Kill) != 2*n || took > 3*time.Second {
		t.Fatalf("%d lost claims beside %d running: %d killed, %v, in %v", n, n, len(reply.Kill), err, took)
	}
}
