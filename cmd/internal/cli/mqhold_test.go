package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/cmd/internal/cli/clitest"
	"github.com/mq-hpc/mq/protocol"
)

// TestHoldCommands runs mqhold, mqrls, mqalter and mqsub's -H and
// --priority against the fake CLS: what each sends, prints and exits with, and that
// bad input is one line, exit 2, and sends nothing.
func TestHoldCommands(t *testing.T) {
	t.Parallel()
	acted := protocol.ActionReply{IDs: []int64{5, 6}}
	for _, c := range []struct {
		name   string
		app    func(Env) *cli.App
		args   []string
		op     string
		reply  clitest.Reply
		code   int
		want   string // in the request's body ("" : no request is sent)
		stdout string
		stderr string // its start
	}{
		{"hold ids", Mqhold, []string{"mqhold", "5", "6"}, protocol.OpHold.Name, clitest.Reply{Body: acted}, 0,
			`"ids":[5,6]`, "held job 5\nheld job 6\n", ""},
		{"hold a range, quiet after it", Mqhold, []string{"mqhold", "720-723", "-Q"}, protocol.OpHold.Name, clitest.Reply{Body: acted}, 0,
			`"first":720,"last":723`, "", ""},
		{"hold by target and states", Mqhold, []string{"mqhold", "-t", "sim", "-s", "W"}, protocol.OpHold.Name, clitest.Reply{Body: acted}, 0,
			`"target":"sim","states":"W"`, "held job 5\nheld job 6\n", ""},
		{"hold refused names every culprit", Mqhold, []string{"mqhold", "5", "6"}, protocol.OpHold.Name,
			clitest.Reply{Body: protocol.ActionReply{Errors: []string{"job 5 is executing; only waiting or queued jobs can be held", "job 6 has already ended (done)"}}}, ExitFailed,
			`"atomic":true`, "", "mqhold: nothing held: job 5 is executing; only waiting or queued jobs can be held; job 6 has already ended (done)\n"},
		{"hold -s E is a usage error", Mqhold, []string{"mqhold", "-s", "E"}, protocol.OpHold.Name, clitest.Reply{Body: acted}, ExitUsage,
			"", "", "mqhold: -s E: only jobs in states WQ can be acted on here"},
		{"hold with nothing named", Mqhold, []string{"mqhold"}, protocol.OpHold.Name, clitest.Reply{Body: acted}, ExitUsage,
			"", "", "mqhold: missing job ids"},
		{"release all in a queue", Mqrls, []string{"mqrls", "-q", "batch"}, protocol.OpRelease.Name, clitest.Reply{Body: acted}, 0,
			`"queue":"batch"`, "released job 5\nreleased job 6\n", ""},
		{"release refused", Mqrls, []string{"mqrls", "7"}, protocol.OpRelease.Name,
			clitest.Reply{Body: protocol.ActionReply{Errors: []string{"job 7 is queued; only held jobs can be released"}}}, ExitFailed,
			`"ids":[7]`, "", "mqrls: nothing released: job 7 is queued; only held jobs can be released\n"},
		{"alter ids", Mqalter, []string{"mqalter", "--priority", "0", "--time", "2h", "5", "6"}, protocol.OpAlter.Name, clitest.Reply{Body: acted}, 0,
			`"ids":[5,6],"atomic":true,"priority":0,"time":7200}`, "changed job 5\nchanged job 6\n", ""},
		{"alter a range, flags after it", Mqalter, []string{"mqalter", "720-723", "--mem", "8G", "-c", "auto", "--gpus", "2", "--est", "1:30", "-Q"}, protocol.OpAlter.Name, clitest.Reply{Body: acted}, 0,
			`"first":720,"last":723,"est":90,"cpus_auto":true,"mem_bytes":8589934592,"gpus":2}`, "", ""},
		{"alter by target and held state", Mqalter, []string{"mqalter", "-t", "sim", "-s", "H", "--cpus", "4"}, protocol.OpAlter.Name, clitest.Reply{Body: acted}, 0,
			`"target":"sim","states":"H","cpus":4}`, "changed job 5\nchanged job 6\n", ""},
		{"alter refused names every culprit", Mqalter, []string{"mqalter", "--priority", "3", "5"}, protocol.OpAlter.Name,
			clitest.Reply{Body: protocol.ActionReply{Errors: []string{"job 5 is executing; only jobs not started (waiting, queued or held) can be changed"}}}, ExitFailed,
			`"ids":[5]`, "", "mqalter: nothing changed: job 5 is executing; only jobs not started (waiting, queued or held) can be changed\n"},
		{"alter with nothing to change", Mqalter, []string{"mqalter", "5"}, protocol.OpAlter.Name, clitest.Reply{Body: acted}, ExitUsage,
			"", "", "mqalter: nothing to change: give --priority, --time, --est, -c/--cpus, --mem, --gpus or --resource"},
		{"alter named amounts, set and dropped", Mqalter, []string{"mqalter", "--resource", "lic=2,scratch=0", "--resource", "fpga=1", "5"}, protocol.OpAlter.Name, clitest.Reply{Body: acted}, 0,
			`"resources":{"fpga":1,"lic":2},"drop":["scratch"]`, "changed job 5\nchanged job 6\n", ""},
		{"alter a selection: some changed, some refused", Mqalter, []string{"mqalter", "--resource", "lic=1", "-t", "sim"}, protocol.OpAlter.Name,
			clitest.Reply{Body: protocol.ActionReply{IDs: []int64{6}, Errors: []string{"job 5 would ask for 33 named resources; at most 32"}}}, ExitFailed,
			`"target":"sim"`, "changed job 6\n", "mqalter: not changed: job 5 would ask for 33 named resources; at most 32\n"},
		{"alter warns of a request no site holds", Mqalter, []string{"mqalter", "--gpus", "4", "5", "-Q"}, protocol.OpAlter.Name,
			clitest.Reply{Body: protocol.ActionReply{IDs: []int64{5}, Warnings: []string{"job 5 waits: needs 4 GPUs"}}}, 0,
			`"gpus":4`, "", "mqalter: warning: job 5 waits: needs 4 GPUs\n"},
		{"alter --gpus 0 drops the GPUs", Mqalter, []string{"mqalter", "--gpus", "0", "5"}, protocol.OpAlter.Name, clitest.Reply{Body: acted}, 0,
			`"drop":["gpus"]`, "changed job 5\nchanged job 6\n", ""},
		{"alter --resource with a bad name", Mqalter, []string{"mqalter", "--resource", "9lives=1", "5"}, protocol.OpAlter.Name, clitest.Reply{Body: acted}, ExitUsage,
			"", "", "mqalter: --resource: resource \"9lives=1\": \"9lives\" is not a name"},
		{"alter --resource dropping a bad name", Mqalter, []string{"mqalter", "--resource", "9lives=0", "5"}, protocol.OpAlter.Name, clitest.Reply{Body: acted}, ExitUsage,
			"", "", "mqalter: --resource 9lives=0: \"9lives\" is not a name"},
		{"alter --resource with a bad amount", Mqalter, []string{"mqalter", "--resource", "lic=-1", "5"}, protocol.OpAlter.Name, clitest.Reply{Body: acted}, ExitUsage,
			"", "", "mqalter: --resource: resource \"lic=-1\": want a positive integer after ="},
		{"alter --resource set and dropped", Mqalter, []string{"mqalter", "--resource", "lic=1,lic=0", "5"}, protocol.OpAlter.Name, clitest.Reply{Body: acted}, ExitUsage,
			"", "", "mqalter: resource lic: give an amount or 0, not both"},
		{"alter --resource dropping gpus", Mqalter, []string{"mqalter", "--resource", "gpus=0", "5"}, protocol.OpAlter.Name, clitest.Reply{Body: acted}, ExitUsage,
			"", "", "mqalter: --resource gpus=0: gpus has its own flag, --gpus"},
		{"mqsub still refuses --gpus 0", Mqsub, []string{"mqsub", "--gpus", "0", "t", "true"}, protocol.OpSubmit.Name,
			clitest.Reply{Body: protocol.SubmitReply{IDs: []int64{9}}}, ExitUsage, "", "", "mqsub: --gpus: gpus \"0\": must be at least 1"},
		{"mqsub still refuses --resource lic=0", Mqsub, []string{"mqsub", "--resource", "lic=0", "t", "true"}, protocol.OpSubmit.Name,
			clitest.Reply{Body: protocol.SubmitReply{IDs: []int64{9}}}, ExitUsage, "", "", "mqsub: --resource: resource \"lic=0\": want a positive integer"},
		{"alter priority 1024", Mqalter, []string{"mqalter", "--priority", "1024", "5"}, protocol.OpAlter.Name, clitest.Reply{Body: acted}, ExitUsage,
			"", "", "mqalter: --priority: want a whole number in -1024..1023"},
		{"alter --time 0", Mqalter, []string{"mqalter", "--time", "0", "5"}, protocol.OpAlter.Name, clitest.Reply{Body: acted}, ExitUsage,
			"", "", "mqalter: --time 0: a time limit is more than 0"},
		{"alter --est nonsense", Mqalter, []string{"mqalter", "--est", "soon", "5"}, protocol.OpAlter.Name, clitest.Reply{Body: acted}, ExitUsage,
			"", "", "mqalter: --est:"},
		{"alter --mem 0", Mqalter, []string{"mqalter", "--mem", "0", "5"}, protocol.OpAlter.Name, clitest.Reply{Body: acted}, ExitUsage,
			"", "", "mqalter: --mem 0 is Slurm's"},
		{"alter -s E", Mqalter, []string{"mqalter", "--gpus", "1", "-s", "E"}, protocol.OpAlter.Name, clitest.Reply{Body: acted}, ExitUsage,
			"", "", "mqalter: -s E: only jobs in states WQH can be acted on here"},
		{"alter with no jobs", Mqalter, []string{"mqalter", "--gpus", "1"}, protocol.OpAlter.Name, clitest.Reply{Body: acted}, ExitUsage,
			"", "", "mqalter: missing job ids"},
		{"submit held with a priority", Mqsub, []string{"mqsub", "-H", "--priority", "-5", "t", "true"}, protocol.OpSubmit.Name,
			clitest.Reply{Body: protocol.SubmitReply{IDs: []int64{9}}}, 0, `"hold":true,"priority":-5`, "9\n", ""},
		{"submit --hold", Mqsub, []string{"mqsub", "--hold", "t", "true"}, protocol.OpSubmit.Name,
			clitest.Reply{Body: protocol.SubmitReply{IDs: []int64{9}}}, 0, `"hold":true`, "9\n", ""},
		{"priority 1e9", Mqsub, []string{"mqsub", "--priority", "1e9", "t", "true"}, protocol.OpSubmit.Name,
			clitest.Reply{Body: protocol.SubmitReply{IDs: []int64{9}}}, ExitUsage, "", "",
			"mqsub: --priority: want a whole number in -1024..1023 (higher runs first), not \"1e9\""},
		{"priority 1024", Mqsub, []string{"mqsub", "--priority", "1024", "t", "true"}, protocol.OpSubmit.Name,
			clitest.Reply{Body: protocol.SubmitReply{IDs: []int64{9}}}, ExitUsage, "", "", "mqsub: --priority: want a whole number"},
		{"-H with -f", Mqsub, []string{"mqsub", "-H", "-f", "jobs.jsonl"}, protocol.OpSubmit.Name,
			clitest.Reply{Body: protocol.SubmitReply{IDs: []int64{9}}}, ExitUsage, "", "", "mqsub: -H and --priority go with one job or an array"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			sent := ""
			r := c.reply
			r.Seen = func(b json.RawMessage) { sent = string(b) }
			var o, e bytes.Buffer
			env := Env{Stdin: strings.NewReader(""), Stdout: &o, Stderr: &e, Getwd: os.Getwd,
				Dial: clitest.Dial(map[string]clitest.Reply{c.op: r})}
			if code := Run(context.Background(), c.app(env), c.args); code != c.code {
				t.Fatalf("exit %d, want %d; stderr %s", code, c.code, e.String())
			}
			if c.want == "" && sent != "" {
				t.Errorf("sent %s, want nothing sent", sent)
			}
			if !strings.Contains(sent, c.want) {
				t.Errorf("request %s, want it to hold %s", sent, c.want)
			}
			if o.String() != c.stdout {
				t.Errorf("stdout %q, want %q", o.String(), c.stdout)
			}
			if !strings.HasPrefix(e.String(), c.stderr) || strings.Count(e.String(), "\n") > 1 {
				t.Errorf("stderr %q, want one line starting %q", e.String(), c.stderr)
			}
		})
	}
}

// TestSummaryHeldColumn: --summary shows an H column only when a job is
// held, and -j shows a held job's way out and its priority.
func TestSummaryHeldColumn(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	printSummary(&b, []protocol.QueueCounts{{Queue: "default", Policy: "fcfs", Counts: map[string]int{"Q": 2}}})
	if head := strings.Fields(strings.SplitN(b.String(), "\n", 2)[0]); strings.Join(head, " ") != "QUEUE W Q E D F B X TOTAL POLICY" {
		t.Errorf("header without held jobs: %q", head)
	}
	b.Reset()
	printSummary(&b, []protocol.QueueCounts{{Queue: "default", Policy: "fcfs", Counts: map[string]int{"Q": 2, "H": 3}}})
	lines := strings.Split(b.String(), "\n")
	if head := strings.Join(strings.Fields(lines[0]), " "); head != "QUEUE W Q H E D F B X TOTAL POLICY" {
		t.Errorf("header with held jobs: %q", head)
	}
	if row := strings.Join(strings.Fields(lines[1]), " "); row != "default 0 2 3 0 0 0 0 0 5 fcfs" {
		t.Errorf("row: %q", row)
	}
	b.Reset()
	printJob(&b, protocol.JobDetail{JobInfo: protocol.JobInfo{ID: 4, State: "H", Priority: 7}})
	for _, want := range []string{"state:  H (held)", "held:   not run until released: mqrls 4", "priority: 7"} {
		if !strings.Contains(strings.Join(strings.Fields(b.String()), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("mqstat -j lacks %q:\n%s", want, b.String())
		}
	}
}
