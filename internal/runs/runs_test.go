package runs

import (
	"slices"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// TestFind: an attempt is found by its number and its placeholder, the
// row's own or a copy; another placeholder's, or a number not running,
// is not (a late or duplicate report).
func TestFind(t *testing.T) {
	row := &Run{Attempt: 1, Placeholder: 10}
	c2, c3 := &Run{Attempt: 2, Placeholder: 11}, &Run{Attempt: 3, Placeholder: 12}
	for _, tc := range []struct {
		name    string
		row     *Run
		cs      []*Run
		attempt int
		ph      int64
		want    *Run
		on      bool // On(row, cs, ph)
	}{
		{"the row's", row, []*Run{c2, c3}, 1, 10, row, true},
		{"a copy", row, []*Run{c2, c3}, 3, 12, c3, true},
		{"another placeholder's number", row, []*Run{c2, c3}, 2, 12, nil, true},
		{"not running", row, []*Run{c2}, 3, 12, nil, false},
		{"no row", nil, []*Run{c2}, 2, 11, c2, true},
		{"nothing", nil, nil, 1, 10, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Find(tc.row, tc.cs, tc.attempt, tc.ph); got != tc.want {
				t.Errorf("Find = %+v, want %+v", got, tc.want)
			}
			if got := On(tc.row, tc.cs, tc.ph); got != tc.on {
				t.Errorf("On = %v, want %v", got, tc.on)
			}
		})
	}
}

// TestMarkStarted: only ph's own unstarted row attempts leave P, once;
// Startable names them without marking.
func TestMarkStarted(t *testing.T) {
	rs := Rows{
		1: {Attempt: 1, Placeholder: 10, Unstarted: true},
		2: {Attempt: 2, Placeholder: 10, Unstarted: true},
		3: {Attempt: 1, Placeholder: 11, Unstarted: true},
		4: {Attempt: 1, Placeholder: 10},
	}
	refs := []protocol.JobRef{{ID: 1, Attempt: 1}, {ID: 2, Attempt: 1}, {ID: 3, Attempt: 1}, {ID: 4, Attempt: 1}, {ID: 5, Attempt: 1}}
	if got := rs.Startable(10, refs); !slices.Equal(got, refs[:1]) {
		t.Errorf("Startable = %v, want %v (what MarkStarted marks, unmarked)", got, refs[:1])
	}
	if got := rs.MarkStarted(10, refs); !slices.Equal(got, []int64{1}) {
		t.Fatalf("MarkStarted = %v, want [1]", got)
	}
	if rs[1].Unstarted || !rs[2].Unstarted || !rs[3].Unstarted {
		t.Errorf("after: %+v %+v %+v", rs[1], rs[2], rs[3])
	}
	if got := rs.MarkStarted(10, refs); got != nil {
		t.Errorf("again: %v, want none", got)
	}
	if got := rs.Startable(10, refs); got != nil {
		t.Errorf("Startable after: %v, want none", got)
	}
}

// TestPrefetched: only unstarted row attempts of jobs still executing
// count, by queue; none gives nil.
func TestPrefetched(t *testing.T) {
	queues := map[int64]int32{1: 7, 2: 7, 3: 8, 4: 8}
	queueOf := func(id int64) (int32, bool) {
		q, ok := queues[id]
		return q, ok && id != 4 // 4 no longer executes
	}
	rs := Rows{
		1: {Unstarted: true}, 2: {Unstarted: true}, 3: {}, 4: {Unstarted: true}, 5: {Unstarted: true},
	}
	if got := rs.Prefetched(queueOf); len(got) != 1 || got[7] != 2 {
		t.Errorf("Prefetched = %v, want map[7:2]", got)
	}
	if got := (Rows{3: {}}).Prefetched(queueOf); got != nil {
		t.Errorf("none: %v, want nil", got)
	}
}
