package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/cmd/internal/cli/clitest"
	"github.com/mq-hpc/mq/protocol"
)

// mqstat --summary shows each costed queue's spending, its jobs that
// cannot end by the deadline and those the budget left cannot pay for;
// with -t TARGET, what the target's jobs' attempts cost (asked of the
// CLS with the counts); mqstat -j says why a job is over budget.
func TestMqstatSummarySpending(t *testing.T) {
	t.Parallel()
	summary := protocol.SummaryReply{Queues: []protocol.QueueCounts{
		{Queue: "q", Policy: "fcfs", Counts: map[string]int{"Q": 3, "W": 2}, Spent: 1.75, SpentBySite: map[string]float64{"cheap": 0.25, "dear": 1.5},
			Budget: 4, Infeasible: 2, OverBudget: 3},
		{Queue: "free", Policy: "fcfs", Counts: map[string]int{"D": 1}},
	}}
	asked := make(chan string, 4)
	replies := map[string]clitest.Reply{
		protocol.OpSummary.Name: {Body: summary},
		protocol.OpProgress.Name: {
			Stream: []any{protocol.ProgressReply{Total: 2, Counts: map[string]int{"D": 2}, Spent: 0.5, SpentBySite: map[string]float64{"cheap": 0.125, "dear": 0.375}}},
			Body:   protocol.Empty{},
			Seen:   func(b json.RawMessage) { asked <- string(b) }},
		protocol.OpJob.Name: {Body: protocol.JobDetail{JobInfo: protocol.JobInfo{ID: 7, Queue: "q", Target: "blast", State: "W"},
			Infeasible: "its prerequisites end in 15s at the earliest, 5s left to its queue's deadline",
			OverBudget: "its queue's budget left (2) pays for 2 of its 5 jobs not started, at their cheapest sites' expected cost"}},
	}
	run := func(args ...string) string {
		t.Helper()
		var o, e bytes.Buffer
		env := Env{Stdin: strings.NewReader(""), Stdout: &o, Stderr: &e, Getwd: os.Getwd, Dial: clitest.Dial(replies)}
		if code := Run(context.Background(), Mqstat(env), append([]string{"mqstat"}, args...)); code != 0 {
			t.Fatalf("mqstat %v: exit %d, %s", args, code, e.String())
		}
		return o.String()
	}
	for _, tc := range []struct {
		args      []string
		want, not []string
	}{
		{[]string{"--summary"},
			[]string{"queue q spent 1.75 of budget 4 (cheap 0.25, dear 1.5), 2 jobs cannot end by it at any site, 3 jobs not started the budget left cannot pay for"},
			[]string{"queue free spent"}},
		{[]string{"--summary", "-t", "blast"},
			[]string{"target blast spent 0.5 (cheap 0.125, dear 0.375)"}, []string{"queue q spent"}},
		{[]string{"--summary", "-q", "q", "-t", "blast"},
			[]string{"target blast of queue q spent 0.5 (cheap 0.125, dear 0.375)"}, nil},
		{[]string{"-j", "7"},
			[]string{"infeasible:", "its prerequisites end in 15s", "over budget:", "pays for 2 of its 5 jobs not started"}, nil},
	} {
		out := run(tc.args...)
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("mqstat %v lacks %q:\n%s", tc.args, w, out)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(out, n) {
				t.Errorf("mqstat %v has %q:\n%s", tc.args, n, out)
			}
		}
		if len(tc.args) > 1 && tc.args[0] == "--summary" {
			if b := <-asked; !strings.Contains(b, `"spending":true`) || !strings.Contains(b, `"target":"blast"`) {
				t.Errorf("mqstat %v asked %s, without spending", tc.args, b)
			}
		}
	}
	// --json carries the target's spending too.
	var rows []protocol.QueueCounts
	if err := json.Unmarshal([]byte(run("--summary", "-t", "blast", "--json")), &rows); err != nil || len(rows) != 1 || rows[0].Spent != 0.5 || rows[0].SpentBySite["dear"] != 0.375 {
		t.Errorf("--json: %+v, %v", rows, err)
	}
	<-asked
}

// mqstat --summary --target-prefix P counts the jobs of a workflow run
// (Snakemake's targets smk.RUN.*), asking the CLS for those jobs, not
// the whole queue's counts it would otherwise show unfiltered.
func TestMqstatSummaryTargetPrefix(t *testing.T) {
	t.Parallel()
	asked := make(chan string, 1)
	replies := map[string]clitest.Reply{
		protocol.OpSummary.Name: {Body: protocol.SummaryReply{Queues: []protocol.QueueCounts{{Queue: "default", Policy: "fcfs", Counts: map[string]int{"D": 300, "Q": 9}}}}},
		protocol.OpStat.Name: {
			Stream: []any{protocol.StatReply{Jobs: []protocol.JobInfo{
				{ID: 1, Queue: "default", Target: "smk.r1.a.1", State: "D"},
				{ID: 2, Queue: "default", Target: "smk.r1.a.2", State: "F"},
				{ID: 3, Queue: "default", Target: "smk.r1.b.3", State: "X"},
			}}},
			Body: protocol.Empty{},
			Seen: func(b json.RawMessage) { asked <- string(b) }},
	}
	var o, e bytes.Buffer
	env := Env{Stdin: strings.NewReader(""), Stdout: &o, Stderr: &e, Getwd: os.Getwd, Dial: clitest.Dial(replies)}
	if code := Run(context.Background(), Mqstat(env), []string{"mqstat", "--summary", "--target-prefix", "smk.r1.", "--json"}); code != 0 {
		t.Fatalf("exit %d, %s", code, e.String())
	}
	var rows []protocol.QueueCounts
	if err := json.Unmarshal(o.Bytes(), &rows); err != nil || len(rows) != 1 || rows[0].Target != "smk.r1.*" ||
		rows[0].Counts["D"] != 1 || rows[0].Counts["F"] != 1 || rows[0].Counts["X"] != 1 || rows[0].Counts["Q"] != 0 {
		t.Fatalf("--summary --target-prefix smk.r1.: %s (%v); want the run's 3 jobs: D 1, F 1, X 1", o.String(), err)
	}
	if b := <-asked; !strings.Contains(b, `"target_prefix":"smk.r1."`) || !strings.Contains(b, `X`) {
		t.Errorf("asked %s; want the prefix and every state, deleted too", b)
	}
}

// --summary counts every state: a flag it would drop is refused, not
// silently ignored as if it had narrowed the counts.
func TestMqstatSummaryRefusesListingFlags(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	for _, args := range [][]string{{"-s", "F"}, {"-j", "1"}, {"--limit", "5"}, {"-a"}, {"--acct"}, {"--array", "1"}} {
		var o, e bytes.Buffer
		code := Run(context.Background(), Mqstat(tb.env(&o, &e)), append([]string{"mqstat", "--summary"}, args...))
		if code != ExitUsage || !strings.Contains(e.String(), "does not go with --summary") {
			t.Errorf("mqstat --summary %s: exit %d, %q", strings.Join(args, " "), code, e.String())
		}
	}
}
