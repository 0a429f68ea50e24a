package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// TestSummaryPrefetchedColumn: --summary shows a P column only when a job
// is prefetched, between H and E.
func TestSummaryPrefetchedColumn(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	printSummary(&b, []protocol.QueueCounts{
		{Queue: "a", Policy: "fcfs", Counts: map[string]int{"Q": 1, "E": 2}},
		{Queue: "b", Policy: "sjf", Counts: map[string]int{"P": 3, "E": 1, "H": 1}},
	})
	lines := strings.Split(b.String(), "\n")
	if head := strings.Join(strings.Fields(lines[0]), " "); head != "QUEUE W Q H P E D F B X TOTAL POLICY" {
		t.Errorf("header with prefetched jobs: %q", head)
	}
	if row := strings.Join(strings.Fields(lines[2]), " "); row != "b 0 0 1 3 1 0 0 0 0 5 sjf" {
		t.Errorf("row: %q", row)
	}
	b.Reset()
	printSummary(&b, []protocol.QueueCounts{{Queue: "a", Policy: "fcfs", Counts: map[string]int{"E": 2, "P": 0}}})
	if head := strings.Join(strings.Fields(strings.SplitN(b.String(), "\n", 2)[0]), " "); head != "QUEUE W Q E D F B X TOTAL POLICY" {
		t.Errorf("header without prefetched jobs: %q", head)
	}
}

// TestJobAttemptsHandedBack: mqstat -j lists an attempt handed back
// unstarted among the others, in number order.
func TestJobAttemptsHandedBack(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	exit := 1
	printJob(&b, protocol.JobDetail{
		JobInfo: protocol.JobInfo{ID: 9, State: "D", Attempts: 3},
		History: []protocol.AttemptInfo{{Attempt: 2, Site: "s", Host: "h2", Started: "t1", Finished: "t2", Exit: &exit, Reason: "exit status 1"}},
		Unstarted: []protocol.AttemptInfo{
			{Attempt: 1, Site: "s", Host: "h1", Finished: "t0", Reason: "handed back unstarted"},
		},
	})
	out := b.String()
	one, two := strings.Index(out, "attempt 1"), strings.Index(out, "attempt 2")
	if one < 0 || two < one {
		t.Fatalf("attempts not listed in order:\n%s", out)
	}
	if !strings.Contains(out, "s on h1, t0: handed back unstarted (not counted)") {
		t.Errorf("the handed-back attempt's line:\n%s", out)
	}
}
