package clscmd

import (
	"bytes"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// cls queue list counts, beside the planner's unfinishable jobs, the jobs
// reported early: infeasible by the deadline and over the budget left.
func TestPrintQueuesEconomics(t *testing.T) {
	var b bytes.Buffer
	printQueues(&b, []protocol.QueueInfo{
		{Name: "q", MaxAttempts: 1, Policy: "fcfs", Deadline: 1.8e9, Budget: 4, Spent: 1.5, SpentBySite: map[string]float64{"dear": 1.5},
			Unfinishable: 1, Infeasible: 2, OverBudget: 3},
		{Name: "plain", MaxAttempts: 1, Policy: "fcfs"},
	})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("cls queue list:\n%s", b.String())
	}
	want := [][]string{
		{"QUEUE", "CEILING", "MAX", "ATTEMPTS", "RETRY", "FAILED", "POLICY", "DEADLINE", "BUDGET", "SPENT", "UNFINISHABLE", "INFEASIBLE", "OVER", "BUDGET", "MAX", "COPIES"},
		{"q", "none", "1", "false", "fcfs", "2027-01-15T08:00:00Z", "4", "1.5", "(dear", "1.5)", "1", "2", "3", "default"},
		{"plain", "none", "1", "false", "fcfs", "none", "none", "-", "0", "0", "0", "default"},
	}
	for i, w := range want {
		if got := strings.Fields(lines[i]); strings.Join(got, " ") != strings.Join(w, " ") {
			t.Errorf("line %d: %q, want %q", i, got, w)
		}
	}
}

// cls queue list says which queues keep a file per output.
func TestPrintQueuesOutput(t *testing.T) {
	var b bytes.Buffer
	printQueues(&b, []protocol.QueueInfo{
		{Name: "tool", MaxAttempts: 1, Policy: "fcfs", Output: protocol.OutputModeFiles},
		{Name: "plain", MaxAttempts: 1, Policy: "fcfs"},
	})
	if got := b.String(); !strings.Contains(got, "tool: a job keeps a file per stdout and stderr (--output files)\n") || strings.Contains(got, "plain: a job keeps") {
		t.Errorf("cls queue list:\n%s", got)
	}
}
