package cli

import (
	"slices"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

func TestEnvList(t *testing.T) {
	t.Parallel()
	var l envList
	for _, v := range []string{"A=1", "B=x=y,z", "A=2"} {
		if err := l.Set(v); err != nil {
			t.Fatalf("Set(%q): %v", v, err)
		}
	}
	if got := protocol.EnvList(l.env); !slices.Equal(got, []string{"A=2", "B=x=y,z"}) {
		t.Fatalf("env %q", got)
	}
	for _, bad := range []string{"noequals", "1A=x", "MQ_TARGET=x", "A B=x"} {
		if err := (&envList{}).Set(bad); err == nil {
			t.Errorf("Set(%q) accepted", bad)
		}
	}
}

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
	if notDoneError(protocol.ProgressReply{Total: 2, Counts: map[string]int{"D": 2}}) != nil {
		t.Error("notDoneError with all done")
	}
	err := notDoneError(protocol.ProgressReply{Total: 30, NotDone: []protocol.JobEnd{{ID: 1, State: "B"}}, MoreNotDone: 4})
	if err == nil || !slices.Contains([]int{1}, err.(exitError).code) {
		t.Errorf("notDoneError = %v", err)
	}
}
