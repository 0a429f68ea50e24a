package copies

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/runs"
	"github.com/mq-hpc/mq/protocol"
)

// TestEvent: Event gives Apply's facts back as the core's own attempts
// (the same pointers), reads the clock only when the event needs it, and
// says Alone when the job ran alone.
func TestEvent(t *testing.T) {
	ctx := context.Background()
	t0, now := time.UnixMicro(1_000_000), time.UnixMicro(5_000_000)
	for _, tc := range []struct {
		name    string
		copies  int // copies running beside the row's attempt 1 (attempts 2, 3, ...)
		ch      Change
		alone   bool
		won     bool
		row     int   // the row's attempt after, when it moved (0: it did not)
		left    []int // copies left
		spent   []int // attempts spent, in order
		clocked bool  // the clock was read
	}{
		{"alone, ended", 0, Change{Event: Ended, Attempt: 1, Succeeded: true}, true, true, 0, nil, nil, false},
		{"copy 3 finishes first", 2, Change{Event: Ended, Attempt: 3, Succeeded: true}, false, true, 3, nil, []int{1, 2}, true},
		{"copy 2 fails", 2, Change{Event: Ended, Attempt: 2, Report: protocol.Report{Exit: 1, Finished: now}}, false, false, 0, []int{3}, []int{2}, false},
		{"the row's attempt is lost", 1, Change{Event: Ended, Attempt: 1, Report: protocol.Report{Reason: "lost"}}, false, false, 2, nil, []int{1}, true},
		{"deleted with copies", 2, Change{Event: Stopped, Reason: "deleted"}, false, false, 0, nil, []int{2, 3}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := testDB(t)
			c := New()
			row := &runs.Run{Attempt: 1, Placeholder: 10, Started: t0}
			if err := c.SetApart(ctx, db, Job{ID: 1, Row: 1, Queue: 7, Runs: 1}, true); err != nil {
				t.Fatal(err)
			}
			var cs []*runs.Run
			for i := range tc.copies {
				r := &runs.Run{Attempt: 2 + i, Placeholder: int64(11 + i), Started: t0}
				cs = append(cs, r)
				if err := c.Started(ctx, db, Run{1, r.Attempt, r.Placeholder, t0}, Job{ID: 1, Row: 1, Queue: 7, Runs: 2 + i}); err != nil {
					t.Fatal(err)
				}
			}
			all := append([]*runs.Run{row}, cs...)
			clocked := false
			r, err := c.Event(ctx, db, 1, 7, row, cs, tc.ch, func() time.Time { clocked = true; return now })
			if err != nil {
				t.Fatal(err)
			}
			if r.Alone != tc.alone || r.Won != tc.won || clocked != tc.clocked {
				t.Errorf("alone %v, won %v, clock read %v; want %v, %v, %v", r.Alone, r.Won, clocked, tc.alone, tc.won, tc.clocked)
			}
			if r.RowMoved != (tc.row != 0) || (tc.row != 0 && r.Row != all[tc.row-1]) {
				t.Errorf("row moved %v to %+v, want attempt %d", r.RowMoved, r.Row, tc.row)
			}
			var left, spent []int
			for _, c := range r.Copies {
				if c != all[c.Attempt-1] {
					t.Errorf("copy %d is not the core's", c.Attempt)
				}
				left = append(left, c.Attempt)
			}
			for i, s := range r.SpentRuns {
				if s != all[s.Attempt-1] || r.Spent[i].Run.Attempt != s.Attempt {
					t.Errorf("spent %d is not the core's", s.Attempt)
				}
				spent = append(spent, s.Attempt)
			}
			if !slices.Equal(left, tc.left) || !slices.Equal(spent, tc.spent) {
				t.Errorf("copies left %v, spent %v; want %v, %v", left, spent, tc.left, tc.spent)
			}
		})
	}
}
