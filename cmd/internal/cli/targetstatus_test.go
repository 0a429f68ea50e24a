package cli

import (
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// TestTargetStatus: mqstat -j's line for a prerequisite target, -p or
// --after-any, counts its purged jobs, so a target whose jobs were all
// purged does not read as one with no jobs yet.
func TestTargetStatus(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		ts   protocol.TargetStatus
		want string
	}{
		{"no jobs", protocol.TargetStatus{}, "waiting: the target has no jobs yet"},
		{"complete", protocol.TargetStatus{Complete: true, Counts: map[string]int{"D": 2}}, "complete (2 done)"},
		{"running", protocol.TargetStatus{Counts: map[string]int{"D": 1, "E": 1}}, "1 of 2 done; 1 executing"},
		{"purged done", protocol.TargetStatus{Complete: true, PurgedDone: 3}, "complete (3 done, 3 of them purged)"},
		{"purged done and live", protocol.TargetStatus{Complete: true, Counts: map[string]int{"D": 1}, PurgedDone: 1}, "complete (2 done, 1 of them purged)"},
		{"purged failed", protocol.TargetStatus{PurgedBad: 1}, "0 of 1 done; 1 purged (0 done, 1 failed or deleted)"},
		{"purged and queued", protocol.TargetStatus{Counts: map[string]int{"Q": 1}, PurgedDone: 2}, "2 of 3 done; 1 queued; 2 purged (2 done, 0 failed or deleted)"},
	} {
		if got := targetStatus(tc.ts); got != tc.want {
			t.Errorf("%s: targetStatus(%+v) = %q, want %q", tc.name, tc.ts, got, tc.want)
		}
	}
	for _, tc := range []struct {
		name string
		ts   protocol.TargetStatus
		want string
	}{
		{"no jobs", protocol.TargetStatus{AfterAny: true}, "waiting: the target has no jobs yet"},
		{"ended", protocol.TargetStatus{AfterAny: true, Ended: true, Counts: map[string]int{"F": 1}}, "ended (1 job: 1 failed)"},
		{"purged", protocol.TargetStatus{AfterAny: true, Ended: true, PurgedBad: 1}, "ended (1 job: 1 purged)"},
		{"purged and running", protocol.TargetStatus{AfterAny: true, Counts: map[string]int{"E": 1}, PurgedDone: 2}, "2 of 3 ended; 1 executing"},
	} {
		if got := afterAnyStatus(tc.ts); got != tc.want {
			t.Errorf("%s: afterAnyStatus(%+v) = %q, want %q", tc.name, tc.ts, got, tc.want)
		}
	}
}
