package cli

import (
	"slices"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

func TestParseArray(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want arraySpec
		n    int64
		bad  bool
	}{
		{in: "1-1000", want: arraySpec{1, 1000, 1, 0}, n: 1000},
		{in: "0-99:10", want: arraySpec{0, 99, 10, 0}, n: 10},
		{in: "7", want: arraySpec{7, 7, 1, 0}, n: 1},
		{in: "1-10%2", want: arraySpec{1, 10, 1, 2}, n: 10},
		{in: "0-99:10%3", want: arraySpec{0, 99, 10, 3}, n: 10},
		{in: "5-1", bad: true},
		{in: "1-10%0", bad: true},
		{in: "1-10%", bad: true},
		{in: "1-10%x", bad: true},
		{in: "1-10%2%3", bad: true},
		{in: "1-3:0", bad: true},
		{in: "-1-3", bad: true},
		{in: "a-b", bad: true},
		{in: "0-99999999999", bad: true},
		// Spans of all of int64 once overflowed len() past the limit.
		{in: "0-9223372036854775807", bad: true},
		{in: "1-9223372036854775807:2", bad: true},
		{in: "0-9223372036854775808", bad: true},
		{in: "9223372036854775800-9223372036854775807:5", want: arraySpec{9223372036854775800, 9223372036854775807, 5, 0}, n: 2},
		{in: "0-9999999", want: arraySpec{0, 9999999, 1, 0}, n: 10_000_000},
		{in: "0-10000000", bad: true},
	} {
		got, err := parseArray(c.in)
		if (err != nil) != c.bad {
			t.Errorf("parseArray(%q) error %v, want bad %v", c.in, err, c.bad)
			continue
		}
		if !c.bad && (got != c.want || got.len() != c.n) {
			t.Errorf("parseArray(%q) = %+v (%d), want %+v (%d)", c.in, got, got.len(), c.want, c.n)
		}
	}
}

// FuzzParseArray checks that an accepted --array has between 1 and maxArray
// members, all within FIRST-LAST, and that the last member is computed
// without overflow.
func FuzzParseArray(f *testing.F) {
	for _, s := range []string{"1-1000", "0-99:10%3", "7", "0-9223372036854775807", "9223372036854775800-9223372036854775807:5", "1-9223372036854775807:2", "-1-3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := parseArray(s)
		if err != nil {
			return
		}
		n := a.len()
		if n < 1 || n > maxArray {
			t.Fatalf("parseArray(%q) has %d members", s, n)
		}
		if first, last := a.index(0), a.index(n-1); first != a.first || last < first || last > a.last || a.last-last >= a.step {
			t.Fatalf("parseArray(%q) = %+v: members %d..%d", s, a, first, last)
		}
	})
}

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
