package plans

import (
	"errors"
	"testing"

	"github.com/mq-hpc/mq/internal/dispatch"
	"github.com/mq-hpc/mq/internal/policy"
)

// asking answers PickAt from sets: a job in stale is no longer Queued, in
// held its array is at its limit, and so on.
type asking struct {
	stale, held, unfit, over, away, big map[int64]bool
	prio                                map[int64]int16
	fail                                int64 // InputsHere fails for this job
	asked                               map[dispatch.Check]int
}

var _ Asking = (*asking)(nil)

func (a *asking) Current(r policy.Ready) bool { return !a.stale[r.ID] }

func (a *asking) Allows(c dispatch.Check, r policy.Ready) (bool, error) {
	if a.asked == nil {
		a.asked = map[dispatch.Check]int{}
	}
	a.asked[c]++
	switch c {
	case dispatch.HeldByArray:
		return !a.held[r.ID], nil
	case dispatch.FitsWalltime:
		return !a.unfit[r.ID], nil
	case dispatch.FitsResources:
		return !a.big[r.ID], nil
	case dispatch.WithinBudget:
		return !a.over[r.ID], nil
	case dispatch.InputsHere:
		if r.ID == a.fail {
			return false, errors.New("no place")
		}
		return !a.away[r.ID], nil
	}
	return false, errors.New("asked " + c.String())
}

func (a *asking) Priority(id int64) int16 { return a.prio[id] }

func set(ids ...int64) map[int64]bool {
	m := map[int64]bool{}
	for _, id := range ids {
		m[id] = true
	}
	return m
}

// TestPickAt: the first planned job, in plan order after priority, that
// is Queued, not held by its array, fits, is within budget and has its
// inputs there; none elsewhere.
func TestPickAt(t *testing.T) {
	t.Parallel()
	plan := map[int64]entry{1: {"a", 1, 0}, 2: {"a", 2, 0}, 3: {"a", 3, 0}, 4: {"b", 1, 0}}
	tests := []struct {
		name    string
		site    string
		a       asking
		want    int64
		wantErr bool
	}{
		{"the plan's first", "a", asking{}, 1, false},
		{"another site's plan", "b", asking{}, 4, false},
		{"no plan there", "c", asking{}, 0, false},
		{"first no longer queued", "a", asking{stale: set(1)}, 2, false},
		{"first's array at its limit", "a", asking{held: set(1)}, 2, false},
		{"first does not fit", "a", asking{unfit: set(1)}, 2, false},
		{"first over budget", "a", asking{over: set(1)}, 2, false},
		{"first needs more than is free", "a", asking{big: set(1)}, 2, false},
		{"first's inputs away", "a", asking{away: set(1)}, 2, false},
		{"none fits", "a", asking{unfit: set(1, 2), over: set(3)}, 0, false},
		{"priority before plan order", "a", asking{prio: map[int64]int16{3: 1}}, 3, false},
		{"equal priorities keep plan order", "a", asking{prio: map[int64]int16{2: 1, 3: 1}}, 2, false},
		{"a negative priority goes last", "a", asking{prio: map[int64]int16{1: -1}}, 2, false},
		{"inputs check fails", "a", asking{fail: 1}, 0, true},
		{"a failure past the pick is not asked", "a", asking{fail: 2}, 1, false},
	}
	for _, tc := range tests {
		p := planned(plan)
		got, err := p.PickAt(tc.site, t0, &tc.a)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("%s: PickAt = %d, %v; want %d (error %v)", tc.name, got, err, tc.want, tc.wantErr)
		}
		if _, ok := p.lastSeen[tc.site]; !ok {
			t.Errorf("%s: site %s not seen", tc.name, tc.site)
		}
	}
}

// TestPickAtWindow: a pick examines at most policy.Window jobs; stale
// ones and those their array holds do not count.
func TestPickAtWindow(t *testing.T) {
	t.Parallel()
	n := int64(2*policy.Window + 2)
	plan := map[int64]entry{}
	for id := int64(1); id <= n; id++ {
		plan[id] = entry{"a", id, 0}
	}
	w := int64(policy.Window)
	for _, tc := range []struct {
		name      string
		a         asking
		want      int64
		wantAsked int
	}{
		{"the window's last fits", asking{unfit: set(rangeIDs(1, w-1)...)}, w, policy.Window},
		{"past the window", asking{unfit: set(rangeIDs(1, w)...)}, 0, policy.Window},
		{"stale ones not counted", asking{stale: set(rangeIDs(1, w)...), unfit: set(rangeIDs(w+1, 2*w-1)...)}, 2 * w, policy.Window},
		{"held ones not counted", asking{held: set(rangeIDs(1, w)...), unfit: set(rangeIDs(w+1, 2*w-1)...)}, 2 * w, policy.Window},
	} {
		got, err := planned(plan).PickAt("a", t0, &tc.a)
		if got != tc.want || err != nil || tc.a.asked[dispatch.FitsWalltime] != tc.wantAsked {
			t.Errorf("%s: PickAt = %d, %v after %d walltime checks; want %d after %d", tc.name, got, err, tc.a.asked[dispatch.FitsWalltime], tc.want, tc.wantAsked)
		}
	}
}

func rangeIDs(from, to int64) []int64 {
	var out []int64
	for id := from; id <= to; id++ {
		out = append(out, id)
	}
	return out
}
