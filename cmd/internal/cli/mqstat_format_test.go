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

// formatReplies is a CLS listing three jobs: one done at the site local,
// one running at a Slurm site on a host of the same name as the CLS's,
// one queued whose command holds a tab.
func formatReplies() map[string]clitest.Reply {
	exit := 0
	jobs := []protocol.JobInfo{
		{ID: 7, Queue: "default", Target: "align", State: "D", Attempts: 1, Exit: &exit, Site: "local", Host: "vm", Submitted: "2026-11-30T10:00:00Z", Started: "2026-11-30T10:00:01Z", Finished: "2026-11-30T10:00:31Z", Command: "bwa mem ref.fa r.fq", Accounting: protocol.Accounting{Elapsed: 30}},
		{ID: 8, Queue: "big", Target: "call", State: "E", Attempts: 2, Site: "slurm", Host: "vm", Submitted: "2026-11-30T10:00:00Z", Started: "2026-11-30T10:01:00Z", Command: "gatk", Reason: "lost: placeholder ended"},
		{ID: 9, Queue: "default", Target: "merge", State: "Q", Command: "printf 'a\tb'\necho", Prereqs: []string{"align", "call"}},
	}
	return map[string]clitest.Reply{
		protocol.OpArrays.Name:   {Body: protocol.ArraysReply{}},
		protocol.OpSiteList.Name: {Body: protocol.SiteList{}},
		protocol.OpStat.Name:     {Stream: []any{protocol.StatReply{Jobs: jobs}}, Body: protocol.StatReply{}},
	}
}

func runMqstat(t *testing.T, replies map[string]clitest.Reply, args ...string) (string, string, int) {
	t.Helper()
	var o, e bytes.Buffer
	env := Env{Stdin: strings.NewReader(""), Stdout: &o, Stderr: &e, Getwd: os.Getwd, Dial: clitest.Dial(replies)}
	code := Run(context.Background(), Mqstat(env), append([]string{"mqstat"}, args...))
	return o.String(), e.String(), code
}

// mqstat --format prints the fields asked, tab-separated, "-" for none,
// in the order asked, after a header unless --noheader.
func TestMqstatFormat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--format", "id,state,exit", "-a"}, "ID\tSTATE\tEXIT\n7\tD\t0\n8\tE\t-\n9\tQ\t-\n"},
		{[]string{"--format", "target,queue,attempts", "--noheader", "-a"}, "align\tdefault\t1\ncall\tbig\t2\nmerge\tdefault\t0\n"},
		{[]string{"--format", "id,site,host,where", "-a"}, "ID\tSITE\tHOST\tWHERE\n7\tlocal\tvm\tvm\n8\tslurm\tvm\tslurm/vm\n9\t-\t-\t-\n"},
		{[]string{"--format", "submitted,started,ended", "-s", "DEQ"}, "SUBMITTED\tSTARTED\tENDED\n" +
			"2026-11-30T10:00:00Z\t2026-11-30T10:00:01Z\t2026-11-30T10:00:31Z\n2026-11-30T10:00:00Z\t2026-11-30T10:01:00Z\t-\n-\t-\t-\n"},
		{[]string{"--format", "id,command,prereqs", "--noheader", "-a"}, "7\tbwa mem ref.fa r.fq\t-\n8\tgatk\t-\n9\tprintf 'a\\tb' echo\talign,call\n"},
		{[]string{"--format", "id,reason", "--noheader", "-a"}, "7\t-\n8\tlost: placeholder ended\n9\t-\n"},
		{[]string{"--format", " ID , Finished ", "--noheader", "-a"}, "7\t2026-11-30T10:00:31Z\n8\t-\n9\t-\n"},
	} {
		o, e, code := runMqstat(t, formatReplies(), tc.args...)
		if code != 0 || o != tc.want {
			t.Errorf("mqstat %s: exit %d, stderr %q, stdout\n%q\nwant\n%q", strings.Join(tc.args, " "), code, e, o, tc.want)
		}
	}
	// elapsed: recorded for an ended attempt, counted from the start for
	// a running one, none for one not started.
	o, _, _ := runMqstat(t, formatReplies(), "--format", "id,elapsed", "--noheader", "-a")
	lines := strings.Split(o, "\n")
	if len(lines) != 4 || lines[0] != "7\t30" || !strings.HasPrefix(lines[1], "8\t") || lines[1] == "8\t-" || lines[2] != "9\t-" {
		t.Errorf("--format id,elapsed: %q", o)
	}
}

// A bad --format is one line naming the known fields, exit 2, before
// anything is asked of the CLS.
func TestMqstatFormatErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--format", "id,bogus"}, `mqstat: --format: unknown field "bogus" (known: id,state,target,queue,exit,host,site,where,submitted,started,ended,elapsed,attempts,priority,prereqs,command,cwd,reason)`},
		{[]string{"--format=JobID,State,ExitCode"}, `unknown field "exitcode"`},
		{[]string{"--format", ""}, "--format: no fields"},
		{[]string{"--format", "id,,state"}, `unknown field ""`},
		{[]string{"--format", "id", "--json"}, "--format does not go with --json"},
		{[]string{"--format", "id", "-j", "7"}, "--format does not go with -j"},
		{[]string{"--noheader"}, "--noheader goes with --format"},
	} {
		o, e, code := runMqstat(t, nil, tc.args...)
		if code != ExitUsage || o != "" || !strings.Contains(e, tc.want) || strings.Count(e, "\n") != 1 {
			t.Errorf("mqstat %q: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", tc.args, code, o, e, tc.want)
		}
	}
}

// The table's HOST is SITE/HOST at a site other than local: the host
// alone (vm) does not say the job runs through Slurm.
func TestMqstatHostSite(t *testing.T) {
	t.Parallel()
	o, e, code := runMqstat(t, formatReplies(), "-a")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, e)
	}
	lines := strings.Split(o, "\n")
	if f := strings.Fields(lines[1]); len(f) < 6 || f[5] != "vm" {
		t.Errorf("job 7 at local: %q, want HOST vm", lines[1])
	}
	if f := strings.Fields(lines[2]); len(f) < 6 || f[5] != "slurm/vm" {
		t.Errorf("job 8 at slurm: %q, want HOST slurm/vm", lines[2])
	}
}

// mqstat 2 4-5 lists those jobs (in the table, --json, --format), as
// qstat 2 and squeue -j 2 do; -q, -t, -s and --limit narrow them.
func TestMqstatPositionalIDs(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	var specs []protocol.JobSpec
	for _, target := range []string{"a", "b", "a", "b", "a", "b"} {
		specs = append(specs, protocol.JobSpec{Target: target, Command: "true", Cwd: "/tmp"})
	}
	if _, err := tb.store.Submit(ctx, specs); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, string, int) {
		var o, e bytes.Buffer
		code := Run(ctx, Mqstat(tb.env(&o, &e)), append([]string{"mqstat"}, args...))
		return o.String(), e.String(), code
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "1 2 3 4 5 6"}, // as the table: the jobs not ended, then the last ended
		{[]string{"--limit", "4"}, "1 2 3 4"},
		{[]string{"-s", "Q", "-t", "b"}, "2 4 6"},
		{[]string{"-s", "q,h", "-t", "b"}, "2 4 6"}, // squeue -t PD,R's commas
		{[]string{"2"}, "2"},
		{[]string{"2", "4-5"}, "2 4 5"},
		{[]string{"5,1", "4-5", "3-4"}, "1 3 4 5"},
		{[]string{"2-6", "-t", "a"}, "3 5"},
		{[]string{"1-6", "--limit", "2"}, "1 2"},
		{[]string{"1", "3", "5-6", "--limit", "3"}, "1 3 5"},
		{[]string{"2", "4", "--limit", "1"}, "2"}, // 4 past --limit, not unknown
		{[]string{"7-9", "-t", "a"}, ""},          // narrowed: not unknown
	} {
		o, e, code := run(append([]string{"--format", "id", "--noheader"}, tc.args...)...)
		if got := strings.Join(strings.Fields(o), " "); code != 0 || got != tc.want {
			t.Errorf("mqstat --format id %s: exit %d, stderr %q, ids %q; want %q", strings.Join(tc.args, " "), code, e, got, tc.want)
		}
	}
	o, e, code := run("2", "4-5")
	lines := strings.Split(strings.TrimRight(o, "\n"), "\n")
	if code != 0 || len(lines) != 4 || !strings.HasPrefix(lines[0], "ID ") || !strings.HasPrefix(lines[1], "2 ") || !strings.HasPrefix(lines[3], "5 ") {
		t.Errorf("mqstat 2 4-5: exit %d, stderr %q, stdout\n%s", code, e, o)
	}
	o, e, code = run("--json", "6", "1")
	var js []protocol.JobInfo
	if err := json.Unmarshal([]byte(o), &js); code != 0 || err != nil || len(js) != 2 || js[0].ID != 1 || js[1].ID != 6 {
		t.Errorf("mqstat --json 6 1: exit %d, stderr %q, stdout %s (%v)", code, e, o, err)
	}
	// A job named is listed deleted too; one no job has is said on
	// stderr after the others are listed (qstat's "Unknown Job Id").
	if _, err := tb.store.Delete(ctx, protocol.Select{IDs: []int64{3}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args       []string
		want, errs string
		code       int
	}{
		{[]string{"3"}, "3", "", 0},
		{[]string{"2-4"}, "2 3 4", "", 0},
		{[]string{"3", "-s", "Q"}, "", "", 0},
		{[]string{"2", "9", "8"}, "2", "mqstat: jobs 8, 9 do not exist\n", 1},
		{[]string{"9", "-t", "a"}, "", "", 0}, // narrowed: not unknown
		// A range no job is in is unknown ids, as an id no job has.
		{[]string{"7-9"}, "", "mqstat: jobs 7-9 do not exist\n", 1},
		{[]string{"2", "7-9", "9-10"}, "2", "mqstat: jobs 7-10 do not exist\n", 1},
		{[]string{"5-9"}, "5 6", "", 0},
	} {
		o, e, code := run(append([]string{"--format", "id", "--noheader"}, tc.args...)...)
		if got := strings.Join(strings.Fields(o), " "); code != tc.code || got != tc.want || e != tc.errs {
			t.Errorf("mqstat --format id %s: exit %d, stderr %q, ids %q; want exit %d, %q, ids %q", strings.Join(tc.args, " "), code, e, got, tc.code, tc.errs, tc.want)
		}
	}
	o, e, code = run("--json", "9", "1")
	if err := json.Unmarshal([]byte(o), &js); code != 1 || err != nil || len(js) != 1 || e != "mqstat: job 9 does not exist\n" {
		t.Errorf("mqstat --json 9 1: exit %d, stderr %q, stdout %s (%v)", code, e, o, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"x"}, `"x" is not a job id or a range FIRST-LAST`},
		{[]string{"0"}, `"0" is not a job id`},
		{[]string{"5-3"}, `"5-3" is not a range of job ids FIRST-LAST`},
		{[]string{","}, "no job id in"},
		{[]string{"2", "-j", "3"}, "job ids do not go with -j"},
		{[]string{"2", "--summary"}, "job ids do not go with --summary"},
		{[]string{"2", "--array", "3"}, "job ids do not go with --array"},
	} {
		o, e, code := run(tc.args...)
		if code != ExitUsage || o != "" || !strings.Contains(e, tc.want) || strings.Count(e, "\n") != 1 {
			t.Errorf("mqstat %q: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", tc.args, code, o, e, tc.want)
		}
	}
}

// TestMqstatBatchHabits: what squeue's and qstat's users type out of
// habit is answered with mq's spelling: -t STATE (a target there is
// none of) warns after the empty listing, -s R, -x and -f ID are refused
// in one line naming mq's flag, --me lists every job; mqdel all names
// --all.
func TestMqstatBatchHabits(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	if _, err := tb.store.Submit(ctx, []protocol.JobSpec{{Target: "t", Command: "true", Cwd: "/tmp"}}); err != nil {
		t.Fatal(err)
	}
	run := func(app func(Env) *cli.App, args ...string) (string, string, int) {
		var o, e bytes.Buffer
		code := Run(ctx, app(tb.env(&o, &e)), args)
		return o.String(), e.String(), code
	}
	o, e, code := run(Mqstat, "mqstat", "-t", "R")
	if code != 0 || strings.Count(o, "\n") != 1 || !strings.Contains(e, "warning: no job has target R: mq's -t is the target, and squeue's -t is mq's -s") {
		t.Errorf("mqstat -t R: exit %d, stdout %q, stderr %q", code, o, e)
	}
	if _, e, code := run(Mqstat, "mqstat", "-t", "t"); code != 0 || e != "" {
		t.Errorf("mqstat -t t: exit %d, stderr %q; want no warning", code, e)
	}
	if o, e, code := run(Mqstat, "mqstat", "--me", "--format", "id", "--noheader"); code != 0 || o != "1\n" || e != "" {
		t.Errorf("mqstat --me: exit %d, stdout %q, stderr %q", code, o, e)
	}
	if o, e, code := run(Mqstat, "mqstat", "-s", "pd,Q", "--format", "id", "--noheader"); code != 0 || o != "1\n" || strings.Count(e, "\n") != 1 || !strings.Contains(e, "mqstat: warning: -s PD is prefetched (P) and done (D) here; squeue's PD (pending) is Q") {
		t.Errorf("mqstat -s pd,Q: exit %d, stdout %q, stderr %q; want job 1 and one warning of squeue's PD", code, o, e)
	}
	if o, e, code := run(Mqhold, "mqhold", "-s", "w,q", "-t", "t"); code != 0 || !strings.Contains(o, "held job 1") {
		t.Errorf("mqhold -s w,q (squeue's commas): exit %d, stdout %q, stderr %q", code, o, e)
	}
	for _, c := range []struct {
		app  func(Env) *cli.App
		args []string
		want string
	}{
		{Mqstat, []string{"mqstat", "-s", "R"}, "squeue's and qstat's R is E here"},
		{Mqstat, []string{"mqstat", "-x"}, "-x is qstat's spelling; mqstat -a lists every job"},
		{Mqstat, []string{"mqstat", "--watch", "0"}, "--watch's interval must be at least 100ms (--watch 0.1"},
		{Mqstat, []string{"mqstat", "-f", "1"}, "-f 1 is qstat's full view; mq writes mqstat -j 1"},
		{Mqstat, []string{"mqstat", "-f"}, "--follow goes with --cat ID (one job); qstat -f's full view of a job is mqstat -j ID"},
		{Mqdel, []string{"mqdel", "all"}, `"all" is not a job id: --all selects every job`},
		{Mqwait, []string{"mqwait", "all"}, `"all" is not a job id: mqwait with no ids, -q or -t waits for every job`},
		{Mqhold, []string{"mqhold", "-s", "R"}, "squeue's and qstat's R is E here"},
		{Mqdel, []string{"mqdel", "-s", "PD"}, "squeue's PD (pending) is Q (-s WQH"},
		{Mqsub, []string{"mqsub", "--rerun", "--all", "-s", "PD"}, "squeue's PD (pending) is Q (-s WQH"}, // not every done job rerun
	} {
		o, e, code := run(c.app, c.args...)
		if code != ExitUsage || o != "" || !strings.Contains(e, c.want) || strings.Count(e, "\n") != 1 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", c.args, code, o, e, c.want)
		}
	}
}
