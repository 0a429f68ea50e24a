package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/cmd/internal/cli/clitest"
	"github.com/mq-hpc/mq/cmd/internal/joboutput"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// Output lost to a full disk is not silent: mqstat -j says so, and
// mqstat --output prints what was kept, then says so on stderr and exits 1.
func TestMqstatOutputLost(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	ids, err := tb.store.Submit(ctx, []protocol.JobSpec{{Target: "t", Command: "yes", Cwd: "/tmp"}})
	if err != nil {
		t.Fatal(err)
	}
	outDir := t.TempDir()
	reg, err := tb.store.RegisterAs(ctx, protocol.Register{Site: "s", Host: "h", Slots: 1, OutDir: outDir}, "socket")
	if err != nil {
		t.Fatal(err)
	}
	nr, err := tb.store.Next(ctx, protocol.Next{Placeholder: reg.ID, Free: 1})
	if err != nil || len(nr.Jobs) != 1 {
		t.Fatalf("next: %+v, %v", nr, err)
	}
	stdout, _ := job.OutputPaths(outDir, ids[0], 1)
	os.MkdirAll(filepath.Dir(stdout), 0o700)
	if err := os.WriteFile(stdout, []byte("partial\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const why = "stdout: write /o/0/1.1.out: no space left on device"
	now := time.Now()
	if err := tb.store.Report(ctx, reg.ID, []protocol.Report{{ID: ids[0], Attempt: 1, Started: now, Finished: now, OutputLost: why}}); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, string, int) {
		var o, e bytes.Buffer
		code := Run(ctx, Mqstat(tb.env(&o, &e)), append([]string{"mqstat"}, args...))
		return o.String(), e.String(), code
	}
	if o, e, code := run("-j", "1"); code != 0 || !strings.Contains(o, "output lost: "+why) {
		t.Errorf("mqstat -j 1: exit %d, stdout %q, stderr %q; want a line \"output lost: %s\"", code, o, e, why)
	}
	if o, e, code := run("--output", "1"); code != ExitFailed || o != "partial\n" || !strings.Contains(e, "job 1's stdout was lost: "+why) {
		t.Errorf("mqstat --output 1: exit %d, stdout %q, stderr %q; want the partial output, then the loss on stderr, exit 1", code, o, e)
	}
	if o, e, code := run("--output", "1", "--stderr"); code != 0 || o != "" || e != "" {
		t.Errorf("mqstat --output 1 --stderr: exit %d, stdout %q, stderr %q; want nothing (only stdout was lost)", code, o, e)
	}
	// -O keeps what was kept, and says the rest was lost; so does an
	// export of a selection, job by job.
	file := filepath.Join(t.TempDir(), "out.txt")
	if o, e, code := run("--cat", "1", "-O", file); code != ExitFailed || o != "" || !strings.Contains(e, "job 1's stdout was lost: "+why) {
		t.Errorf("mqstat --cat 1 -O: exit %d, stdout %q, stderr %q", code, o, e)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "partial\n" {
		t.Errorf("-O's file: %q, %v; want the partial output", b, err)
	}
	// A relative FILE is where the command runs (env.Getwd: over SSH,
	// the user's home), not the CLS's directory.
	wd := t.TempDir()
	var o, e bytes.Buffer
	env := tb.env(&o, &e)
	env.Getwd = func() (string, error) { return wd, nil }
	if code := Run(ctx, Mqstat(env), []string{"mqstat", "--cat", "1", "-O", "rel.txt"}); code != ExitFailed {
		t.Errorf("mqstat --cat 1 -O rel.txt: exit %d, stderr %q", code, e.String())
	}
	if b, err := os.ReadFile(filepath.Join(wd, "rel.txt")); err != nil || string(b) != "partial\n" {
		t.Errorf("-O rel.txt in %s: %q, %v; want the partial output there", wd, b, err)
	}
	want := "==> job 1 attempt 1 target t state D stdout <==\npartial\n"
	if o, e, code := run("--cat", "1-5"); code != ExitFailed || o != want || !strings.Contains(e, "mqstat: job 1: stdout was lost: "+why) {
		t.Errorf("mqstat --cat 1-5: exit %d, stdout %q, stderr %q; want %q and the loss", code, o, e, want)
	}
}

// mqstat -j shows each declared file's size, checksum (short) and
// replicas, and the job's transfers; --json has them whole; --summary
// adds the moved totals when the CLS sends them.
func TestMqstatData(t *testing.T) {
	t.Parallel()
	size := int64(3 << 20)
	sum := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	detail := protocol.JobDetail{
		JobInfo: protocol.JobInfo{ID: 7, Queue: "default", Target: "t", State: "D", Cwd: "/w"},
		Inputs: []protocol.FileInfo{{Path: "/w/in.fa", Size: &size, SHA256: sum,
			Replicas: []protocol.Replica{{Site: "local", Host: "cls"}, {Site: "sge"}}},
			{Path: "/w/db.fa", Site: "local", Replicas: []protocol.Replica{{Site: "local"}}}}, // a user's file: placed, no producer
		Outputs: []protocol.FileInfo{{Path: "/w/out.tsv", Site: "sge", Job: 7, SHA256: sum, Replicas: []protocol.Replica{{Site: "sge"}}}},
		Transfers: []protocol.TransferInfo{
			{Job: 7, Path: "/w/in.fa", From: "local", To: "sge", Bytes: size, Seconds: 2, Started: "2026-01-01T00:00:00Z"},
			{Job: 7, Path: "/w/in.fa", From: "slurm", To: "sge", Bytes: 10, Seconds: 0.5, Started: "2026-01-01T00:00:00Z", Error: "connection lost"},
		},
	}
	replies := map[string]clitest.Reply{
		protocol.OpJob.Name: {Body: detail},
		protocol.OpSummary.Name: {Body: protocol.SummaryReply{Queues: []protocol.QueueCounts{{Queue: "default", Counts: map[string]int{"D": 1}}},
			Moved: &protocol.MovedTotals{Transfers: 4, Failed: 1, Bytes: 5 << 20, Seconds: 2.5}}},
	}
	run := func(replies map[string]clitest.Reply, args ...string) string {
		t.Helper()
		var o, e bytes.Buffer
		env := Env{Stdin: strings.NewReader(""), Stdout: &o, Stderr: &e, Getwd: os.Getwd, Dial: clitest.Dial(replies)}
		if code := Run(context.Background(), Mqstat(env), append([]string{"mqstat"}, args...)); code != 0 {
			t.Fatalf("mqstat %v: exit %d, %s", args, code, e.String())
		}
		return o.String()
	}
	out := run(replies, "-j", "7")
	for _, want := range []string{
		"inputs:    /w/in.fa (3 MiB), sha256 0123456789ab, not produced by a job, replicas: local:cls, sge",
		"           /w/db.fa, not produced by a job, replicas: local",
		"outputs:   /w/out.tsv, sha256 0123456789ab, produced by job 7 at site sge, replicas: sge",
		"transfers: /w/in.fa: local -> sge, 3 MiB in 2 s (1.5 MiB/s)",
		"           /w/in.fa: slurm -> sge, 10 B in 0.5 s (20 B/s), failed: connection lost",
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("mqstat -j lacks the line %q:\n%s", want, out)
		}
	}
	var d protocol.JobDetail
	if err := json.Unmarshal([]byte(run(replies, "-j", "7", "--json")), &d); err != nil || len(d.Transfers) != 2 || d.Inputs[0].SHA256 != sum || len(d.Inputs[0].Replicas) != 2 {
		t.Errorf("mqstat -j --json: %+v, %v", d, err)
	}
	if out := run(replies, "--summary"); !strings.HasSuffix(out, "moved: 4 transfers, 5 MiB in 2.5 s (2 MiB/s), 1 failed\n") {
		t.Errorf("mqstat --summary:\n%s", out)
	}
	replies[protocol.OpSummary.Name] = clitest.Reply{Body: protocol.SummaryReply{Queues: []protocol.QueueCounts{{Queue: "default"}}}}
	if out := run(replies, "--summary"); strings.Contains(out, "moved") {
		t.Errorf("mqstat --summary with nothing moved:\n%s", out)
	}
}

// mqstat --output ID --follow prints the job's bytes as they are (as
// --output does), says on stderr when a new attempt starts, and exits as
// the job ended: 0 done, its exit status failed, 1 deleted or lost.
func TestMqstatFollow(t *testing.T) {
	t.Parallel()
	three, zero := 3, 0
	raw := "b\x1b[31m\xff\n" // the job's own bytes, not mq's text
	frames := func(end *protocol.OutputFrame) []any {
		fs := []any{
			protocol.OutputFrame{Attempt: 1, Offset: 0, Data: []byte("a\n")},
			protocol.OutputFrame{Attempt: 2, Offset: 0, Data: []byte(raw)},
		}
		if end != nil {
			fs = append(fs, *end)
		}
		return fs
	}
	for _, tc := range []struct {
		name   string
		args   []string
		end    *protocol.OutputFrame
		code   int
		stderr []string // substrings
	}{
		{"done", nil, &protocol.OutputFrame{Attempt: 2, End: &protocol.JobEnd{ID: 5, State: "D", Exit: &zero}}, 0, []string{"job 5: attempt 2 started; its stdout follows"}},
		{"failed", []string{"--stderr"}, &protocol.OutputFrame{Attempt: 2, End: &protocol.JobEnd{ID: 5, State: "F", Exit: &three, Reason: "exit 3\x1b]0;x\a"}}, 3,
			[]string{"its stderr follows", `mqstat: job 5 failed: exit 3\x1b]0;x\a`}},
		{"deleted", nil, &protocol.OutputFrame{Attempt: 2, End: &protocol.JobEnd{ID: 5, State: "X"}}, 1, []string{"job 5 was deleted"}},
		{"lost", nil, &protocol.OutputFrame{Attempt: 2, End: &protocol.JobEnd{ID: 5, State: "D", Exit: &zero}, Lost: "stdout: disk full\x1b"}, 1, []string{`job 5's stdout was lost: stdout: disk full\x1b`}},
		{"cut short", nil, nil, 1, []string{"its output ended before the job did"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var asked protocol.OutputQuery
			replies := map[string]clitest.Reply{protocol.OpOutputStream.Name: {Stream: frames(tc.end), Body: protocol.Empty{},
				Seen: func(b json.RawMessage) { json.Unmarshal(b, &asked) }}}
			var o, e bytes.Buffer
			env := Env{Stdin: strings.NewReader(""), Stdout: &o, Stderr: &e, Getwd: os.Getwd, Dial: clitest.Dial(replies)}
			code := Run(context.Background(), Mqstat(env), append([]string{"mqstat", "--output", "5", "--follow"}, tc.args...))
			if code != tc.code || o.String() != "a\n"+raw {
				t.Errorf("exit %d, stdout %q; want exit %d and the job's bytes as they are", code, o.String(), tc.code)
			}
			for _, want := range tc.stderr {
				if !strings.Contains(e.String(), want) {
					t.Errorf("stderr %q lacks %q", e.String(), want)
				}
			}
			if bad := clitest.Raw(e.String()); bad != "" {
				t.Errorf("%q reached stderr raw: %q", bad, e.String())
			}
			stream := "stdout"
			if len(tc.args) > 0 {
				stream = "stderr"
			}
			if asked != (protocol.OutputQuery{ID: 5, Stream: stream, Follow: true}) {
				t.Errorf("asked %+v", asked)
			}
		})
	}
	var o, e bytes.Buffer
	env := Env{Stdin: strings.NewReader(""), Stdout: &o, Stderr: &e, Getwd: os.Getwd, Dial: clitest.Dial(nil)}
	if code := Run(context.Background(), Mqstat(env), []string{"mqstat", "--follow"}); code != ExitUsage || !strings.Contains(e.String(), "--follow goes with --cat ID") {
		t.Errorf("--follow alone: exit %d, %q", code, e.String())
	}
}

// Job replication in mqstat: -j lists a copy running beside the job's
// attempt, then, once the copy won, the original among the attempts as
// killed for it with its times (the attempts ran side by side); --summary
// has the waste line.
func TestMqstatReplicas(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	pol := "wqr"
	if _, err := tb.store.SetQueue(ctx, protocol.QueueSet{Name: "bot", Policy: &pol}); err != nil {
		t.Fatal(err)
	}
	ids, err := tb.store.Submit(ctx, []protocol.JobSpec{{Queue: "bot", Target: "t", Command: "true", Cwd: "/tmp"}})
	if err != nil {
		t.Fatal(err)
	}
	var phs []int64
	for _, site := range []string{"grid", "slurmy"} {
		reg, err := tb.store.RegisterAs(ctx, protocol.Register{Site: site, Host: "h-" + site, Slots: 1, OutDir: t.TempDir()}, "socket")
		if err != nil {
			t.Fatal(err)
		}
		nr, err := tb.store.Next(ctx, protocol.Next{Placeholder: reg.ID, Free: 1})
		if err != nil || len(nr.Jobs) != 1 || nr.Jobs[0].Attempt != len(phs)+1 {
			t.Fatalf("next at %s: %+v, %v", site, nr, err)
		}
		phs = append(phs, reg.ID)
	}
	run := func(args ...string) string {
		var o, e bytes.Buffer
		if code := Run(ctx, Mqstat(tb.env(&o, &e)), append([]string{"mqstat"}, args...)); code != 0 {
			t.Fatalf("mqstat %v: exit %d, %s", args, code, e.String())
		}
		return o.String()
	}
	if o := run("-j", "1"); !strings.Contains(o, "attempt 2") || !strings.Contains(o, "slurmy on h-slurmy, since") || !strings.Contains(o, "a copy running beside the job's attempt") {
		t.Fatalf("mqstat -j 1 while the copy runs:\n%s", o)
	}
	now := time.Now()
	if err := tb.store.Report(ctx, phs[1], []protocol.Report{{ID: ids[0], Attempt: 2, Started: now, Finished: now}}); err != nil {
		t.Fatal(err)
	}
	o := run("-j", "1")
	for _, want := range []string{"placeholder", "site slurmy", "attempt 1", "grid on h-grid", "killed: attempt 2 of the job finished first"} {
		if !strings.Contains(o, want) {
			t.Fatalf("mqstat -j 1 after the race: no %q in\n%s", want, o)
		}
	}
	if strings.Contains(o, "a copy running beside") {
		t.Fatalf("mqstat -j 1 still lists a running copy:\n%s", o)
	}
	if s := run("--summary"); !strings.Contains(s, "replication waste: 1 killed copies") {
		t.Fatalf("mqstat --summary:\n%s", s)
	}
}

// TestMqstatListingShape: a blocked job's HOST cell names a few of its
// prerequisites and counts the rest (it held all 40, 200 columns), and an
// all-arrays listing's header is aligned with its rows.
func TestMqstatListingShape(t *testing.T) {
	t.Parallel()
	var prereqs []string
	for i := range 40 {
		prereqs = append(prereqs, fmt.Sprintf("stage%02d", i))
	}
	run := func(t *testing.T, replies map[string]clitest.Reply, args ...string) string {
		t.Helper()
		var o, e bytes.Buffer
		env := Env{Stdin: strings.NewReader(""), Stdout: &o, Stderr: &e, Getwd: os.Getwd, Dial: clitest.Dial(replies)}
		if code := Run(context.Background(), Mqstat(env), append([]string{"mqstat"}, args...)); code != 0 {
			t.Fatalf("exit %d: %s", code, e.String())
		}
		return o.String()
	}
	t.Run("prerequisites", func(t *testing.T) {
		replies := map[string]clitest.Reply{
			protocol.OpArrays.Name: {Body: protocol.ArraysReply{}},
			protocol.OpStat.Name:   {Stream: []any{protocol.StatReply{Jobs: []protocol.JobInfo{{ID: 9, Queue: "default", Target: "merge", State: "B", Prereqs: prereqs, Command: "true"}}}}, Body: protocol.StatReply{}},
		}
		out := run(t, replies)
		row := strings.Split(strings.TrimSpace(out), "\n")[1]
		if !strings.Contains(row, "<- stage00,stage01,stage02 +37") {
			t.Errorf("row %q, want the HOST cell to name three prerequisites and count 37 more", row)
		}
		if wide := run(t, replies, "-w"); !strings.Contains(wide, "stage39") {
			t.Errorf("-w: %q, want every prerequisite", wide)
		}
	})
	t.Run("arrays only", func(t *testing.T) {
		replies := map[string]clitest.Reply{
			protocol.OpArrays.Name: {Body: protocol.ArraysReply{Arrays: []protocol.ArrayInfo{
				{First: 1, Last: 1000, Queue: "default", Target: "blast", Spec: "1-1000", Counts: map[string]int{"Q": 1000}},
				{First: 1001, Last: 1010, Queue: "default", Target: "merge", Spec: "1-10", Counts: map[string]int{"D": 10}},
			}}},
			protocol.OpStat.Name: {Stream: []any{protocol.StatReply{}}, Body: protocol.StatReply{}},
		}
		lines := strings.Split(strings.TrimRight(run(t, replies), "\n"), "\n")
		if len(lines) != 3 {
			t.Fatalf("%d lines: %q", len(lines), lines)
		}
		col := func(line, word string) int { return strings.Index(line, word) }
		if h, r := col(lines[0], "QUEUE"), col(lines[1], "default"); h != r {
			t.Errorf("QUEUE at column %d, the rows' queue at %d:\n%s", h, r, strings.Join(lines, "\n"))
		}
	})
}

// mqstat -j names the file or stream extent of an output, or says an
// ended attempt wrote nothing or a running one's output is in no file
// yet, never a path to a file that is not there.
func TestOutputLine(t *testing.T) {
	dir := t.TempDir()
	made := filepath.Join(dir, "1.1.out")
	if err := os.WriteFile(made, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "1.1.err")
	ext := &protocol.StreamExtent{Path: "/o/streams/1-0.mqs", Last: 8, Bytes: 3}
	ended := protocol.JobInfo{ID: 1, State: "D", Host: "h", Finished: "2026-11-29T10:00:00Z"}
	running := protocol.JobInfo{ID: 1, State: "E", Host: "h"}
	for _, tc := range []struct {
		name   string
		d      protocol.JobDetail
		stderr bool
		here   bool
		want   string
	}{
		{"in a stream", protocol.JobDetail{JobInfo: ended, Stdout: missing, StdoutStream: ext}, false, true, "3 bytes in stream /o/streams/1-0.mqs (last chunk at 8) (on h)"},
		{"the other stream written", protocol.JobDetail{JobInfo: ended, Stderr: missing, StdoutStream: ext}, true, false, "nothing written"},
		{"no file here", protocol.JobDetail{JobInfo: ended, Stdout: missing}, false, true, "nothing written"},
		{"a file here", protocol.JobDetail{JobInfo: ended, Stdout: made}, false, true, made + " (on h)"},
		{"on another host", protocol.JobDetail{JobInfo: ended, Stdout: missing}, false, false, missing + " (on h)"},
		{"lost", protocol.JobDetail{JobInfo: ended, Stdout: missing, OutputLost: "disk full"}, false, true, missing + " (on h)"},
		{"running, no file yet", protocol.JobDetail{JobInfo: running, Stderr: missing}, true, true, "in no file yet (mqstat --cat 1 --stderr --follow shows it as it is written)"},
		{"running, a file", protocol.JobDetail{JobInfo: running, Stdout: made}, false, true, made + " (on h)"},
		{"running elsewhere", protocol.JobDetail{JobInfo: running, Stdout: missing}, false, false, missing + " (on h)"},
		{"running elsewhere, streaming", protocol.JobDetail{JobInfo: running, Stdout: missing, Streaming: true}, false, false, "in a stream file (on h) until it ends (mqstat --cat 1 --follow shows it as it is written)"},
	} {
		if got := joboutput.Line(tc.d, tc.stderr, tc.here); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// An ended job of a placeholder on this host that wrote nothing to a
// stream shows "nothing written" for it in mqstat -j.
func TestMqstatNothingWritten(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	ids, err := tb.store.Submit(ctx, []protocol.JobSpec{{Target: "t", Command: "echo hi", Cwd: "/tmp"}})
	if err != nil {
		t.Fatal(err)
	}
	outDir := t.TempDir()
	reg, err := tb.store.RegisterAs(ctx, protocol.Register{Site: "s", Host: joboutput.ThisHost(), Slots: 1, OutDir: outDir}, "socket")
	if err != nil {
		t.Fatal(err)
	}
	if nr, err := tb.store.Next(ctx, protocol.Next{Placeholder: reg.ID, Free: 1}); err != nil || len(nr.Jobs) != 1 {
		t.Fatalf("next: %+v, %v", nr, err)
	}
	stdout, stderr := job.OutputPaths(outDir, ids[0], 1)
	os.MkdirAll(filepath.Dir(stdout), 0o700)
	if err := os.WriteFile(stdout, []byte("hi\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := tb.store.Report(ctx, reg.ID, []protocol.Report{{ID: ids[0], Attempt: 1, Started: now, Finished: now}}); err != nil {
		t.Fatal(err)
	}
	var o, e bytes.Buffer
	if code := Run(ctx, Mqstat(tb.env(&o, &e)), []string{"mqstat", "-j", "1"}); code != 0 {
		t.Fatalf("mqstat -j 1: exit %d: %s", code, e.String())
	}
	if !strings.Contains(o.String(), "stdout:      "+stdout) || !strings.Contains(o.String(), "stderr:      nothing written\n") || strings.Contains(o.String(), stderr) {
		t.Errorf("mqstat -j 1 says\n%s\nwant its stdout file and \"stderr: nothing written\"", o.String())
	}
}

// TestMqstatRunningElsewhere: mqstat -j of a job running on another host
// names its output file there only when its placeholder writes one (the
// CLS, its site or its queue asked for files); in stream files, it says
// how to follow the output instead of naming a file that is not there.
func TestMqstatRunningElsewhere(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		files      bool   // cls serve --output files
		queueFiles bool   // the job's queue: --output files
		want       string // in the stdout line
	}{
		{name: "streams", want: "in a stream file (on elsewhere) until it ends (mqstat --cat 1 --follow shows it as it is written)"},
		{name: "files", files: true, want: "/out/0/1.1.out (on elsewhere)"},
		{name: "queue files", queueFiles: true, want: "/out/0/1.1.out (on elsewhere)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tb := setup(t)
			tb.srv.OutputFiles = tc.files
			ctx := context.Background()
			if tc.queueFiles {
				files := protocol.OutputModeFiles
				if _, err := tb.store.SetQueue(ctx, protocol.QueueSet{Name: "default", Output: &files}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := tb.store.Submit(ctx, []protocol.JobSpec{{Target: "t", Command: "sleep 1", Cwd: "/tmp"}}); err != nil {
				t.Fatal(err)
			}
			reg, err := tb.store.RegisterAs(ctx, protocol.Register{Site: "s", Host: "elsewhere", Slots: 1, OutDir: "/out"}, "socket")
			if err != nil {
				t.Fatal(err)
			}
			if nr, err := tb.store.Next(ctx, protocol.Next{Placeholder: reg.ID, Free: 1}); err != nil || len(nr.Jobs) != 1 {
				t.Fatalf("next: %+v, %v", nr, err)
			}
			var o, e bytes.Buffer
			if code := Run(ctx, Mqstat(tb.env(&o, &e)), []string{"mqstat", "-j", "1"}); code != 0 {
				t.Fatalf("mqstat -j 1: exit %d: %s", code, e.String())
			}
			if !strings.Contains(o.String(), "stdout:      "+tc.want+"\n") {
				t.Errorf("mqstat -j 1 says\n%s\nwant stdout: %s", o.String(), tc.want)
			}
		})
	}
}

// TestMqstatFollowInterrupted: Ctrl-C on mqstat --cat ID --follow, as on
// tail -f, stops the following with exit 130 and a line saying the job
// goes on, not a context error.
func TestMqstatFollowInterrupted(t *testing.T) {
	t.Parallel()
	replies := map[string]clitest.Reply{protocol.OpOutputStream.Name: {Stream: []any{protocol.OutputFrame{Attempt: 1, Data: []byte("first line\n")}}, Hold: true}}
	o, e := &lineWriter{lines: make(chan string, 100)}, &bytes.Buffer{}
	env := Env{Stdin: strings.NewReader(""), Stdout: o, Stderr: e, Getwd: os.Getwd, Dial: clitest.Dial(replies)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- Run(ctx, Mqstat(env), []string{"mqstat", "--cat", "5", "--follow"}) }()
	select {
	case <-o.lines: // it follows
	case <-time.After(time.Minute):
		t.Fatal("mqstat --follow printed nothing in a minute")
	}
	cancel()
	if code := <-done; code != ExitInterrupted || !strings.Contains(e.String(), "interrupted; job 5 goes on") {
		t.Errorf("exit %d, stderr %q; want %d and the job going on", code, e.String(), ExitInterrupted)
	}
}

// TestInterruptedRequest: Ctrl-C while a request is under way exits 130
// with a line, not 1 with a context error: one that says what goes on
// where the command has something to say (cls purge), else
// "NAME: interrupted".
func TestInterruptedRequest(t *testing.T) {
	t.Parallel()
	purge := func(env Env) *cli.App {
		app := NewApp("cls", "test", env)
		app.Commands = []*cli.Command{Purge(env)}
		return app
	}
	for _, tc := range []struct {
		op   string
		app  func(Env) *cli.App
		args []string
		want string
	}{
		{protocol.OpPurge.Name, purge, []string{"cls", "purge", "--ended-before", "7d"}, "cls: interrupted; the batches purged so far stay purged (cls purge again for the rest)\n"},
		{protocol.OpJob.Name, Mqstat, []string{"mqstat", "-j", "5"}, "mqstat: interrupted\n"},
	} {
		asked := make(chan struct{})
		replies := map[string]clitest.Reply{tc.op: {Hold: true, Seen: func(json.RawMessage) { close(asked) }}}
		var o, e bytes.Buffer
		env := Env{Stdin: strings.NewReader(""), Stdout: &o, Stderr: &e, Getwd: os.Getwd, Dial: clitest.Dial(replies)}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan int, 1)
		go func() { done <- Run(ctx, tc.app(env), tc.args) }()
		select {
		case <-asked: // the request is under way
		case <-time.After(time.Minute):
			t.Fatalf("%s sent no request in a minute", tc.args[0])
		}
		cancel()
		if code := <-done; code != ExitInterrupted || e.String() != tc.want {
			t.Errorf("%s: exit %d, stderr %q; want %d and %q", strings.Join(tc.args, " "), code, e.String(), ExitInterrupted, tc.want)
		}
	}
}

// An export asks for the details of the jobs ahead before it needs them,
// on one connection, rather than one round trip after another (over SSH
// each costs milliseconds): a CLS that answers only once several are
// asked for gets them all, and the export is whole, in id order.
func TestMqstatCatPipelined(t *testing.T) {
	t.Parallel()
	var jobs []protocol.JobInfo
	for id := int64(1); id <= 6; id++ {
		jobs = append(jobs, protocol.JobInfo{ID: id, Target: "t", State: "D", Attempts: 1})
	}
	dir := t.TempDir()
	var bodies []any
	var want strings.Builder
	for _, j := range jobs {
		path := filepath.Join(dir, fmt.Sprint(j.ID))
		if err := os.WriteFile(path, []byte(fmt.Sprintf("out %d\n", j.ID)), 0o600); err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, protocol.JobDetail{JobInfo: protocol.JobInfo{ID: j.ID, State: "D"}, Stdout: path, Stderr: path + ".err"})
		fmt.Fprintf(&want, "==> job %d attempt 1 target t state D stdout <==\nout %d\n", j.ID, j.ID)
	}
	replies := map[string]clitest.Reply{
		protocol.OpStat.Name: {Stream: []any{protocol.StatReply{Jobs: jobs}}, Body: protocol.StatReply{Jobs: []protocol.JobInfo{}}},
		protocol.OpJob.Name:  {Bodies: bodies, Together: len(jobs)},
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var o, e bytes.Buffer
	env := Env{Stdin: strings.NewReader(""), Stdout: &o, Stderr: &e, Getwd: os.Getwd, Dial: clitest.Dial(replies)}
	if code := Run(ctx, Mqstat(env), []string{"mqstat", "--cat", "1-6"}); code != 0 || o.String() != want.String() {
		t.Errorf("mqstat --cat 1-6: exit %d, stdout %q, stderr %q; want %q", code, o.String(), e.String(), want.String())
	}
}

// mqstat --help names what -j, --array and --limit take and shows no
// "(default: 0)", which read as job 0 or a limit of none.
func TestMqstatHelpDefaults(t *testing.T) {
	t.Parallel()
	var o, e bytes.Buffer
	env := Env{Stdin: strings.NewReader(""), Stdout: &o, Stderr: &e, Getwd: os.Getwd}
	if code := Run(context.Background(), Mqstat(env), []string{"mqstat", "--help"}); code != 0 {
		t.Fatalf("mqstat --help: exit %d, %s", code, e.String())
	}
	help := o.String()
	for _, want := range []string{"-j ID, --job ID", "--array ID", "--limit N", "(default: all)"} {
		if !strings.Contains(help, want) {
			t.Errorf("mqstat --help lacks %q:\n%s", want, help)
		}
	}
	if strings.Contains(help, "(default: 0)") {
		t.Errorf("mqstat --help shows a default of 0:\n%s", help)
	}
}
