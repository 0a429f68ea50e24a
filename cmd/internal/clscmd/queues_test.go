package clscmd

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	mqcli "github.com/mq-hpc/mq/cmd/internal/cli"
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

// TestQueueSetPolicyNotAQueues: a --policy that is no queue's, unknown or
// a site's provisioning policy, is a one-line usage error (exit 2) before
// the CLS is asked, naming only the policies a queue may have.
func TestQueueSetPolicyNotAQueues(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ policy, want string }{
		{"lifo", `unknown policy "lifo"`},
		{"dbc-cost", "cls site set NAME --provision dbc-cost"},
		{"lp", "cls site set NAME --provision lp"},
	} {
		var stderr bytes.Buffer
		env := mqcli.Env{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: &stderr,
			Getwd: func() (string, error) { return "/tmp", nil },
			Dial: func(context.Context) (io.ReadWriteCloser, error) {
				return nil, errors.New("dialled the CLS")
			}}
		code := mqcli.Run(context.Background(), Cls(env), []string{"cls", "queue", "set", "q", "--policy", c.policy})
		msg := stderr.String()
		if code != mqcli.ExitUsage || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, c.want) {
			t.Errorf("--policy %s: exit %d, %q; want exit %d, one line with %q", c.policy, code, msg, mqcli.ExitUsage, c.want)
		}
		if !strings.Contains(msg, "fcfs, sjf, cp, dc, sa, wqr, xsufferage") || strings.Contains(msg, "dbc-time") {
			t.Errorf("--policy %s: %q does not name just the queues' policies", c.policy, msg)
		}
	}
}
