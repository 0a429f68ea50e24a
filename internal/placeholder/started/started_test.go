package started

import (
	"maps"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// TestSet: only jobs handed out ahead enter the set; a message
// carries those that have run AnnounceAfter; a report or an answered
// message takes them out, for their own attempt only.
func TestSet(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	var s Set
	s.Add([]protocol.Assignment{{ID: 1, Attempt: 1, Ahead: true}, {ID: 2, Attempt: 1}}, t0)
	s.Add([]protocol.Assignment{{ID: 3, Attempt: 2, Ahead: true}}, t0.Add(AnnounceAfter))
	refs := func(now time.Time) map[int64]int {
		m := map[int64]int{}
		for _, r := range s.List(now) {
			m[r.ID] = r.Attempt
		}
		return m
	}
	for _, tc := range []struct {
		name string
		step func()
		now  time.Time
		want map[int64]int
	}{
		{"too soon", func() {}, t0.Add(AnnounceAfter - time.Millisecond), map[int64]int{}},
		{"the first has run long enough", func() {}, t0.Add(AnnounceAfter), map[int64]int{1: 1}},
		{"both", func() {}, t0.Add(2 * AnnounceAfter), map[int64]int{1: 1, 3: 2}},
		{"sent for another attempt: kept", func() { s.Sent([]protocol.JobRef{{ID: 1, Attempt: 2}}) }, t0.Add(2 * AnnounceAfter), map[int64]int{1: 1, 3: 2}},
		{"sent", func() { s.Sent([]protocol.JobRef{{ID: 1, Attempt: 1}}) }, t0.Add(2 * AnnounceAfter), map[int64]int{3: 2}},
		{"ended (its report says it)", func() { s.Ended(3, 2) }, t0.Add(2 * AnnounceAfter), map[int64]int{}},
	} {
		tc.step()
		if got := refs(tc.now); !maps.Equal(got, tc.want) {
			t.Fatalf("%s: list %v, want %v", tc.name, got, tc.want)
		}
	}
	var many []protocol.Assignment
	for i := range protocol.MaxStarted + 10 {
		many = append(many, protocol.Assignment{ID: int64(i + 1), Attempt: 1, Ahead: true})
	}
	s.Add(many, t0)
	if n := len(s.List(t0.Add(AnnounceAfter))); n != protocol.MaxStarted {
		t.Fatalf("a message carries %d, want at most %d", n, protocol.MaxStarted)
	}
}
