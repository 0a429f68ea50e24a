package plans

import (
	"errors"
	"testing"

	"github.com/mq-hpc/mq/internal/policy"
)

// asking answers PickAt from maps: jobs absent from eligible are not, and
// so on.
type asking struct {
	ineligible, unfit, away map[int64]bool
	prio                    map[int64]int16
	fail                    int64 // InputsHere fails for this job
	fitsAsked               int
}

func (a *asking) Eligible(id int64) bool { return !a.ineligible[id] }
func (a *asking) Fits(id int64) bool     { a.fitsAsked++; return !a.unfit[id] }
func (a *asking) Priority(id int64) int16 {
	return a.prio[id]
}

func (a *asking) InputsHere(id int64) (bool, error) {
	if id == a.fail {
		return false, errors.New("no place")
	}
	return !a.away[id], nil
}

func set(ids ...int64) map[int64]bool {
	m := map[int64]bool{}
	for _, id := range ids {
		m[id] = true
	}
	return m
}

// TestPickAt: the first planned job, in plan order after priority, that is
// eligible, fits and has its inputs there; none elsewhere.
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
		{"first not eligible", "a", asking{ineligible: set(1)}, 2, false},
		{"first does not fit", "a", asking{unfit: set(1)}, 2, false},
		{"first's inputs away", "a", asking{away: set(1)}, 2, false},
		{"none fits", "a", asking{unfit: set(1, 2, 3)}, 0, false},
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

// TestPickWindow: a pick examines at most policy.Window eligible jobs;
// ineligible ones do not count.
func TestPickWindow(t *testing.T) {
	t.Parallel()
	n := int64(2*policy.Window + 2)
	plan := map[int64]entry{}
	for id := int64(1); id <= n; id++ {
		plan[id] = entry{"a", id, 0}
	}
	for _, tc := range []struct {
		name      string
		a         asking
		want      int64
		wantAsked int
	}{
		{"the window's last fits", asking{unfit: set(rangeIDs(1, policy.Window-1)...)}, policy.Window, policy.Window},
		{"past the window", asking{unfit: set(rangeIDs(1, policy.Window)...)}, 0, policy.Window},
		{"ineligible ones not counted", asking{ineligible: set(rangeIDs(1, policy.Window)...), unfit: set(rangeIDs(policy.Window+1, 2*policy.Window-1)...)}, 2 * policy.Window, policy.Window},
	} {
		got, err := planned(plan).PickAt("a", t0, &tc.a)
		if got != tc.want || err != nil || tc.a.fitsAsked != tc.wantAsked {
			t.Errorf("%s: PickAt = %d, %v after %d fits; want %d after %d", tc.name, got, err, tc.a.fitsAsked, tc.want, tc.wantAsked)
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
