package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/cmd/internal/cli/clitest"
	"github.com/mq-hpc/mq/protocol"
)

// mqstat --acct: a line per attempt (earlier ones as ID.N), then a
// per-target summary; mqstat -j shows each attempt's figures.
func TestMqstatAcct(t *testing.T) {
	t.Parallel()
	zero, one := 0, 1
	cost1, cost2 := 0.25, 1.5
	old := time.Date(2020, 3, 4, 5, 6, 7, 0, time.Local).Format(time.RFC3339Nano)
	later := time.Date(2020, 3, 4, 5, 8, 7, 0, time.Local).Format(time.RFC3339Nano)
	jobs := []protocol.JobInfo{
		{ID: 1, Queue: "q", Target: "blast", State: "D", Host: "n1", Started: old, Finished: later, Exit: &zero,
			Accounting: protocol.Accounting{Elapsed: 120, Cost: &cost2, Usage: protocol.Usage{CPUUser: 100, CPUSys: 10, MaxRSS: 3 << 20}},
			Earlier: []protocol.AttemptInfo{{Attempt: 1, Host: "n2", Started: old, Finished: old, Exit: &one,
				Accounting: protocol.Accounting{Elapsed: 0.5, Cost: &cost1, Usage: protocol.Usage{CPUUser: 0.25, CPUSys: 0.25, MaxRSS: 1 << 20}}}}},
		{ID: 2, Queue: "q", Target: "blast", State: "D", Host: "n1", Started: old, Finished: later, Exit: &zero,
			Accounting: protocol.Accounting{Elapsed: 60, Usage: protocol.Usage{CPUUser: 50, CPUSys: 0.5, MaxRSS: 2 << 20}}},
		{ID: 3, Queue: "q", Target: "parse", State: "Q"},
	}
	replies := map[string]clitest.Reply{
		protocol.OpStat.Name: {Stream: []any{protocol.StatReply{Jobs: jobs}}, Body: protocol.StatReply{Jobs: []protocol.JobInfo{}},
			Seen: func(b json.RawMessage) {
				if !strings.Contains(string(b), `"earlier":true`) {
					t.Errorf("mqstat --acct asks for %s, without earlier attempts", b)
				}
			}},
		protocol.OpJob.Name: {Body: protocol.JobDetail{JobInfo: jobs[0], History: jobs[0].Earlier}},
	}
	var o, e bytes.Buffer
	env := Env{Stdin: strings.NewReader(""), Stdout: &o, Stderr: &e, Getwd: os.Getwd, Dial: clitest.Dial(replies)}
	if code := Run(context.Background(), Mqstat(env), []string{"mqstat", "--acct"}); code != 0 {
		t.Fatalf("mqstat --acct: exit %d, %s", code, e.String())
	}
	fields := func(out string) [][]string {
		var rows [][]string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			rows = append(rows, strings.Fields(l))
		}
		return rows
	}
	want := [][]string{
		{"JOBID", "TARGET", "QUEUE", "S", "HOST", "START", "ELAPSED", "USER", "SYS", "MAXRSS", "EXIT", "COST"},
		{"1", "blast", "q", "D", "n1", "2020-03-04", "05:06", "00:02:00", "00:01:40", "10.000s", "3", "MiB", "0", "1.5"},
		{"1.1", "blast", "q", "F", "n2", "2020-03-04", "05:06", "0.500s", "0.250s", "0.250s", "1", "MiB", "1", "0.25"}, // its own state, as sacct's steps
		{"2", "blast", "q", "D", "n1", "2020-03-04", "05:06", "00:01:00", "50.000s", "0.500s", "2", "MiB", "0", "-"},
		{"3", "parse", "q", "Q", "-", "-", "-", "-", "-", "-", "-", "-"},
		{},
		{"TARGET", "JOBS", "ENDED", "CPU", "MEAN", "ELAPSED", "MAX", "ELAPSED", "COST"},
		{"blast", "2", "2", "00:02:41", "00:01:30", "00:02:00", "1.75"},
		{"parse", "1", "0", "0.000s", "-", "-", "-"},
	}
	got := fields(o.String())
	if len(got) != len(want) {
		t.Fatalf("mqstat --acct:\n%s", o.String())
	}
	for i := range want {
		if strings.Join(got[i], " ") != strings.Join(want[i], " ") {
			t.Errorf("line %d: %q, want %q", i, got[i], want[i])
		}
	}
	o.Reset()
	if code := Run(context.Background(), Mqstat(env), []string{"mqstat", "-j", "1"}); code != 0 {
		t.Fatalf("mqstat -j: exit %d, %s", code, e.String())
	}
	for _, w := range []string{
		"usage:       elapsed 00:02:00, user 00:01:40, system 10.000s, max RSS 3 MiB",
		"exit 1: ; elapsed 0.500s, user 0.250s, system 0.250s, max RSS 1 MiB",
	} {
		if !strings.Contains(o.String(), w) {
			t.Errorf("mqstat -j lacks %q:\n%s", w, o.String())
		}
	}
}
