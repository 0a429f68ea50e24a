package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/cmd/internal/cli/clitest"
	"github.com/mq-hpc/mq/protocol"
)

// Text from peers (host names, reasons, commands, names, error messages)
// reaches no terminal raw: every human-readable output escapes control
// characters and bytes that are not UTF-8.
func TestOutputEscapesPeerText(t *testing.T) {
	t.Parallel()
	h := clitest.Hostile
	exit := 1
	info := protocol.JobInfo{ID: 7, Queue: h, Target: h, Prereqs: []string{h}, State: "F", Attempts: 1, Exit: &exit,
		Site: h, Host: h, Submitted: h, Started: h, Finished: h, Command: h, Cwd: h, Reason: h}
	detail := protocol.JobDetail{JobInfo: info, Placeholder: 3, Stdout: h, Stderr: h, StdoutCopy: h, StderrCopy: h,
		WaitingOn: []protocol.TargetStatus{{Target: h, Counts: map[string]int{"F": 1}}},
		History:   []protocol.AttemptInfo{{Attempt: 1, Site: h, Host: h, Started: h, Finished: h, Exit: &exit, Reason: h}},
		Inputs:    []protocol.FileInfo{{Path: h, Site: h, Host: h, Job: 2, SHA256: h, Replicas: []protocol.Replica{{Site: h, Host: h}}}},
		Outputs:   []protocol.FileInfo{{Path: h, Site: h}},
		Transfers: []protocol.TransferInfo{{Path: h, From: h, To: h, Bytes: 1, Seconds: 1, Started: h, Error: h}},
	}
	arr := protocol.ArrayInfo{First: 10, Last: 12, Spec: h, Limit: 2, Queue: h, Target: h, Counts: map[string]int{"Q": 3}}
	detail.Array = &arr
	waiting := info
	waiting.State = "W"
	replies := map[string]clitest.Reply{
		protocol.OpStat.Name:    {Stream: []any{protocol.StatReply{Jobs: []protocol.JobInfo{info, waiting}}}, Body: struct{}{}},
		protocol.OpJob.Name:     {Body: detail},
		protocol.OpArrays.Name:  {Body: protocol.ArraysReply{Arrays: []protocol.ArrayInfo{arr}}},
		protocol.OpSummary.Name: {Body: protocol.SummaryReply{Queues: []protocol.QueueCounts{{Queue: h, Policy: h, Counts: map[string]int{"Q": 1}}, {Queue: "b"}}, Moved: &protocol.MovedTotals{Transfers: 1}}},
		protocol.OpDelete.Name:  {Body: protocol.ActionReply{IDs: []int64{1}, Errors: []string{h, h}}},
		protocol.OpRerun.Name:   {Err: protocol.Errorf(protocol.CodeNotFound, "%s", h)},
		protocol.OpSubmit.Name:  {Err: protocol.Errorf(protocol.CodeBadRequest, "%s", h)},
		protocol.OpWait.Name:    {Body: protocol.WaitReply{Jobs: []protocol.JobEnd{{ID: 7, State: "F", Exit: &exit, Reason: h}}}},
	}
	failing := map[string]clitest.Reply{
		protocol.OpStat.Name:    {Err: protocol.Errorf(protocol.CodeInternal, "%s", h)},
		protocol.OpJob.Name:     {Err: protocol.Errorf(protocol.CodeNotFound, "%s", h)},
		protocol.OpArrays.Name:  {Body: protocol.ArraysReply{}},
		protocol.OpSummary.Name: {Err: protocol.Errorf(protocol.CodeInternal, "%s", h)},
	}
	tests := []struct {
		name    string
		args    []string
		replies map[string]clitest.Reply
	}{
		{"mqstat", []string{"mqstat"}, replies},
		{"mqstat wide", []string{"mqstat", "-w"}, replies},
		{"mqstat -j", []string{"mqstat", "-j", "7"}, replies},
		{"mqstat --summary", []string{"mqstat", "--summary"}, replies},
		{"mqstat error", []string{"mqstat"}, failing},
		{"mqstat -j error", []string{"mqstat", "-j", "7"}, failing},
		{"mqstat --summary error", []string{"mqstat", "--summary"}, failing},
		{"mqdel", []string{"mqdel", "1", "2"}, replies},
		{"mqsub --rerun", []string{"mqsub", "--rerun", "1"}, replies},
		{"mqsub", []string{"mqsub", "t", "true"}, replies},
		{"mqsub -b", []string{"mqsub", "-b", "t", "true"}, map[string]clitest.Reply{
			protocol.OpSubmit.Name: {Body: protocol.SubmitReply{IDs: []int64{7}}},
			protocol.OpWait.Name:   replies[protocol.OpWait.Name],
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			env := Env{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr,
				Getwd: func() (string, error) { return "/tmp", nil }, Dial: clitest.Dial(tt.replies)}
			apps := map[string]func(Env) *cli.App{"mqstat": Mqstat, "mqdel": Mqdel, "mqsub": Mqsub}
			Run(context.Background(), apps[tt.args[0]](env), tt.args)
			out := stdout.String() + stderr.String()
			if bad := clitest.Raw(out); bad != "" {
				t.Errorf("%q reached the output raw:\n%s", bad, out)
			}
			if !strings.Contains(out, `\x1b]0;pwned`) && !strings.Contains(out, `evil`) {
				t.Errorf("the hostile text is not shown at all:\n%s", out)
			}
		})
	}
}
