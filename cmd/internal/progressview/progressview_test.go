package progressview

import (
	"strings"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

func TestCountsAndEndText(t *testing.T) {
	t.Parallel()
	r := protocol.ProgressReply{Total: 5, Counts: map[string]int{"D": 2, "F": 1, "E": 2}}
	if got := countsText(r); got != "2 done, 1 failed, 2 executing" {
		t.Errorf("countsText = %q", got)
	}
	if ended(r) != 3 {
		t.Errorf("ended = %d", ended(r))
	}
	// Handed out ahead, not started: P, not ended.
	r = protocol.ProgressReply{Total: 6, Counts: map[string]int{"D": 2, "E": 1, "P": 2, "Q": 1}}
	if got := countsText(r); got != "2 done, 1 executing, 2 prefetched, 1 queued" {
		t.Errorf("countsText = %q", got)
	}
	if ended(r) != 2 {
		t.Errorf("ended = %d, want 2: P is not ended", ended(r))
	}
	three := 3
	if got := endText(protocol.JobEnd{ID: 4, State: "F", Exit: &three, Reason: "exit status 3"}); got != "job 4 failed (exit 3): exit status 3" {
		t.Errorf("endText = %q", got)
	}
	if NotDone(protocol.ProgressReply{Total: 2, Counts: map[string]int{"D": 2}}) != "" {
		t.Error("NotDone with all done")
	}
	if got := NotDone(protocol.ProgressReply{Total: 30, NotDone: []protocol.JobEnd{{ID: 1, State: "B"}}, MoreNotDone: 4}); got != "5 of 30 jobs did not end done:\n  job 1 blocked\n  and 4 more (mqstat -s FBX)" {
		t.Errorf("NotDone = %q", got)
	}
	// The hint names the states the jobs are in: deleted ones are not
	// among mqstat -s FB's.
	r = protocol.ProgressReply{Total: 200, Counts: map[string]int{"D": 97, "X": 102, "F": 1}, NotDone: []protocol.JobEnd{{ID: 1, State: "X"}}, MoreNotDone: 102}
	if got := NotDone(r); !strings.HasSuffix(got, "and 102 more (mqstat -s FX)") {
		t.Errorf("NotDone = %q, want it to end with the hint mqstat -s FX", got)
	}
}

// TestProgressCountsHeld: mqwait counts a held job as not ended and names
// it among the counts.
func TestProgressCountsHeld(t *testing.T) {
	t.Parallel()
	r := protocol.ProgressReply{Total: 4, Counts: map[string]int{"D": 2, "H": 1, "Q": 1}}
	if n := ended(r); n != 2 {
		t.Errorf("ended = %d, want 2 (a held job has not ended)", n)
	}
	if got := countsText(r); got != "2 done, 1 queued, 1 held" {
		t.Errorf("countsText = %q", got)
	}
}
