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

func TestNotDoneError(t *testing.T) {
	t.Parallel()
	if notDoneError(protocol.ProgressReply{Total: 2, Counts: map[string]int{"D": 2}}) != nil {
		t.Error("notDoneError with all done")
	}
	err := notDoneError(protocol.ProgressReply{Total: 30, NotDone: []protocol.JobEnd{{ID: 1, State: "B"}}, MoreNotDone: 4})
	if err == nil || !slices.Contains([]int{1}, err.(exitError).code) {
		t.Errorf("notDoneError = %v", err)
	}
}
