package clscmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	mqcli "github.com/mq-hpc/mq/cmd/internal/cli"
	"github.com/mq-hpc/mq/cmd/internal/cli/clitest"
	"github.com/mq-hpc/mq/protocol"
)

// cls site add checks its settings before it reaches the CLS: a bad one is
// a usage error (exit 2) naming the flag, and no connection is made.
func TestSiteAddRefusals(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"a", "--type", "sge", "--ssh", "u@h", "--slots", "4", "--pe", "a b"}, `--pe "a b"`},
		{[]string{"a", "--type", "slurm", "--ssh", "u@h", "--slots", "4", "--pe", "smp"}, "--pe is only for sge"},
		{[]string{"a", "--type", "sge", "--ssh", "u@h", "--pe", "smp"}, "--pe needs --slots > 1"},
		{[]string{"local", "--type", "local"}, "reserved for the CLS's own placeholders (cls serve --local N)"},
		{[]string{"a", "--type", "local", "--data-root", "/d"}, "--data-root is only for remote sites"},
		{[]string{"a", "--type", "slurm", "--ssh", "u@h", "--data-root", "/d", "--shared-fs"}, "--data-root and --shared-fs exclude each other"},
		{[]string{"a", "--type", "slurm", "--ssh", "u@h", "--data-root", "d/../../etc"}, "--data-root"},
		{[]string{"a", "--type", "slurm", "--ssh", "u@h", "--node-local", "--shared-fs"}, "--node-local is for remote sites with a data root"},
		{[]string{"a", "--type", "local", "--node-local"}, "--node-local is for remote sites with a data root"},
		{[]string{"a", "--type", "local", "--output", "file"}, `--output "file": want files or streams`},
	} {
		var out, errOut bytes.Buffer
		dialled := false
		env := mqcli.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getwd: os.Getwd,
			Dial: func(context.Context) (io.ReadWriteCloser, error) {
				dialled = true
				return nil, errors.New("no CLS in this test")
			}}
		code := mqcli.Main(context.Background(), Cls(env), append([]string{"cls", "site", "add"}, tc.args...))
		if code != 2 || !strings.Contains(errOut.String(), tc.want) || strings.Count(errOut.String(), "\n") != 1 || dialled {
			t.Errorf("cls site add %s: exit %d, stderr %q, dialled %v; want exit 2 and one line with %q",
				strings.Join(tc.args, " "), code, errOut.String(), dialled, tc.want)
		}
	}
}

// cls site list says where the CLS's own site comes from, and where a
// remote site keeps staged files: one place, or one per node.
func TestPrintSitesEmbedded(t *testing.T) {
	var b bytes.Buffer
	printSites(&b, []protocol.SiteInfo{
		{SiteSpec: protocol.SiteSpec{Name: "local", Type: "local", Min: 4, Max: 4, Slots: 1, Embedded: true}, Running: 4, Connected: 4, State: "ok"},
		{SiteSpec: protocol.SiteSpec{Name: "here", Type: "local", Max: 2, Slots: 1, SharedFS: true}, State: "ok"},
		{SiteSpec: protocol.SiteSpec{Name: "c", Type: "sge", SSH: "u@h", Max: 2, Slots: 1, SharedFS: true}, State: "ok"},
		{SiteSpec: protocol.SiteSpec{Name: "d", Type: "sge", SSH: "u@h", Max: 2, Slots: 1, DataRoot: "/scratch/mq"}, State: "ok"},
		{SiteSpec: protocol.SiteSpec{Name: "n", Type: "slurm", SSH: "u@h", Max: 2, Slots: 1, DataRoot: "/tmp/mq", NodeLocal: true}, State: "ok"},
		{SiteSpec: protocol.SiteSpec{Name: "e", Type: "pbs", SSH: "u@h", Max: 2, Slots: 1}, State: "ok"},
	})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 7 || !strings.HasSuffix(lines[6], "u@h (data .mq-data/CLSID)") || !strings.HasSuffix(lines[3], "u@h (shared fs)") || !strings.HasSuffix(lines[4], "u@h (data /scratch/mq)") ||
		!strings.HasSuffix(lines[5], "u@h (data /tmp/mq on each node)") || !strings.Contains(lines[1], "4-4") || !strings.HasSuffix(lines[1], "this host (cls serve --local 4)") ||
		!strings.HasSuffix(lines[2], "this host") {
		t.Errorf("cls site list:\n%s", b.String())
	}
}

// cls site list says on a site's line that it does not answer, since
// when, and whose jobs the CLS holds until when; a site that answers gets
// nothing extra.
func TestPrintSitesCut(t *testing.T) {
	y, m, d := time.Now().Date()
	at := time.Date(y, m, d, 12, 2, 11, 0, time.Local) // today: the clock alone
	until := at.Add(30 * time.Minute)
	clock := func(t time.Time) string { return t.Format("15:04:05") }
	var b bytes.Buffer
	printSites(&b, []protocol.SiteInfo{
		{SiteSpec: protocol.SiteSpec{Name: "ok", Type: "slurm", SSH: "u@ok", Max: 4}, State: "ok", Running: 2},
		{SiteSpec: protocol.SiteSpec{Name: "cut", Type: "slurm", SSH: "u@cut", Max: 4}, State: "ok", Running: 3,
			Unreachable: true, AnsweredAt: at, HeldPlaceholders: 3, HeldLeases: 7, HeldUntil: until},
		{SiteSpec: protocol.SiteSpec{Name: "fresh", Type: "sge", SSH: "u@fresh", Max: 4}, State: "degraded", Error: "ssh: no route to host", Unreachable: true},
		{SiteSpec: protocol.SiteSpec{Name: "back", Type: "pbs", SSH: "u@back", Max: 4}, State: "ok", Running: 1,
			HeldPlaceholders: 1, HeldLeases: 1, HeldUntil: until},
	})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 5 {
		t.Fatalf("cls site list:\n%s", b.String())
	}
	for i, want := range []string{
		"u@ok (data .mq-data/CLSID)",
		"u@cut (data .mq-data/CLSID) (unreachable since " + clock(at) + ", 3 placeholders' 7 jobs held until " + clock(until) + ")",
		"u@fresh (data .mq-data/CLSID) (unreachable, no answer since the CLS started): ssh: no route to host",
		"u@back (data .mq-data/CLSID) (1 placeholder's 1 job held until " + clock(until) + ")",
	} {
		if !strings.HasSuffix(lines[i+1], want) {
			t.Errorf("line %d: %q\nwant it to end %q", i+1, lines[i+1], want)
		}
	}
	if strings.Contains(lines[1], "unreachable") || strings.Contains(lines[1], "held") {
		t.Errorf("a site that answers: %q", lines[1])
	}
	t.Logf("cls site list:\n%s", b.String())
}

// cls site list, site remove and queue list escape what the CLS sends.
func TestListsEscapePeerText(t *testing.T) {
	h := clitest.Hostile
	replies := map[string]clitest.Reply{
		protocol.OpSiteList.Name:   {Body: protocol.SiteList{Sites: []protocol.SiteInfo{{SiteSpec: protocol.SiteSpec{Name: h, Type: h, SSH: h}, State: h, Error: h}}}},
		protocol.OpSiteRemove.Name: {Body: protocol.SiteInfo{SiteSpec: protocol.SiteSpec{Name: h}, Error: h}},
		protocol.OpQueueList.Name:  {Body: protocol.QueueList{Queues: []protocol.QueueInfo{{Name: h, Policy: h}}}},
	}
	for _, args := range [][]string{{"cls", "site", "list"}, {"cls", "site", "remove", "x"}, {"cls", "queue", "list"}} {
		var out, errOut bytes.Buffer
		env := mqcli.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getwd: os.Getwd, Dial: clitest.Dial(replies)}
		mqcli.Run(context.Background(), Cls(env), args)
		all := out.String() + errOut.String()
		if bad := clitest.Raw(all); bad != "" || !strings.Contains(all, "evil") {
			t.Errorf("%s: %q reached the output raw (or nothing shown):\n%s", strings.Join(args, " "), bad, all)
		}
	}
}

// Flags of cls site add and cls queue set are declared once and parsed
// wherever they stand: before or after the name, aliases included, and
// only the flags given reach a queue change.
func TestInterspersedFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		op   string
		want string
	}{
		{[]string{"cls", "site", "add", "c", "--type", "slurm", "--ssh", "u@h", "--partition", "short", "--max", "3", "--walltime", "2h"},
			protocol.OpSiteAdd.Name, `{"name":"c","type":"slurm","ssh":"u@h","queue":"short","min":0,"max":3,"walltime_s":7200,"slots":1,"connect":"direct","idle_s":60}`},
		{[]string{"cls", "site", "add", "--type", "slurm", "--ssh", "u@h", "c", "--connect", "tunnel"},
			protocol.OpSiteAdd.Name, `"connect":"tunnel"`},
		{[]string{"cls", "site", "add", "c", "--type", "sge", "--ssh", "u@h", "--data-root", "scratch/mq"},
			protocol.OpSiteAdd.Name, `"data_root":"scratch/mq"`},
		{[]string{"cls", "site", "add", "--shared-fs", "c", "--type", "sge", "--ssh", "u@h"},
			protocol.OpSiteAdd.Name, `"shared_fs":true`},
		{[]string{"cls", "site", "add", "c", "--type", "local"},
			protocol.OpSiteAdd.Name, `"shared_fs":true`},
		{[]string{"cls", "site", "add", "c", "--type", "local", "--price", "0.5"},
			protocol.OpSiteAdd.Name, `"price":0.5`},
		{[]string{"cls", "site", "add", "c", "--type", "slurm", "--ssh", "u@h", "--cpus", "16", "--mem", "64G", "--gpus", "2", "--resource", "lic=3", "--resource", "scratch=100"},
			protocol.OpSiteAdd.Name, `"slots":16,"mem":68719476736,"gpus":2,"resources":"lic=3,scratch=100"`},
		{[]string{"cls", "site", "set", "c", "--mem", "500M", "--cpus", "4"}, protocol.OpSiteSet.Name, `{"name":"c","slots":4,"mem":524288000}`},
		{[]string{"cls", "site", "set", "c", "--gpus", "0", "--resource", "none"}, protocol.OpSiteSet.Name, `{"name":"c","gpus":0,"resources":""}`},
		{[]string{"cls", "site", "set", "c", "--resource", "lic=2"}, protocol.OpSiteSet.Name, `{"name":"c","resources":"lic=2"}`},
		{[]string{"cls", "site", "add", "c", "--type", "slurm", "--ssh", "u@h", "--output", "files"}, protocol.OpSiteAdd.Name, `"output":"files"`},
		{[]string{"cls", "site", "set", "c", "--output", "streams"}, protocol.OpSiteSet.Name, `{"name":"c","output":"streams"}`},
		{[]string{"cls", "site", "set", "--output", "default", "c"}, protocol.OpSiteSet.Name, `{"name":"c","output":""}`},
		{[]string{"cls", "queue", "set", "q", "--ceiling", "90"}, protocol.OpQueueSet.Name, `{"name":"q","ceiling_s":90}`},
		{[]string{"cls", "queue", "set", "q", "--output", "files"}, protocol.OpQueueSet.Name, `{"name":"q","output":"files"}`},
		{[]string{"cls", "queue", "set", "--output", "default", "q"}, protocol.OpQueueSet.Name, `{"name":"q","output":""}`},
		{[]string{"cls", "queue", "set", "--policy", "sjf", "q", "--retry-failed"}, protocol.OpQueueSet.Name, `{"name":"q","retry_failed":true,"policy":"sjf"}`},
		{[]string{"cls", "queue", "set", "q", "--budget", "5000", "--deadline", "2026-01-02T03:04:05Z"}, protocol.OpQueueSet.Name, `{"name":"q","deadline":1767323045,"budget":5000}`},
		{[]string{"cls", "queue", "set", "q", "--deadline", "none", "--budget", "0"}, protocol.OpQueueSet.Name, `{"name":"q","deadline":0,"budget":0}`},
	} {
		var got string
		replies := map[string]clitest.Reply{tc.op: {Body: struct{}{}, Seen: func(b json.RawMessage) { got = string(b) }}}
		var out, errOut bytes.Buffer
		env := mqcli.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getwd: os.Getwd, Dial: clitest.Dial(replies)}
		mqcli.Run(context.Background(), Cls(env), tc.args)
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s: sent %s\nwant it to hold %s (stderr %q)", strings.Join(tc.args, " "), got, tc.want, errOut.String())
		}
	}
}

// Bad sizes of cls site add and set are one line each, exit 2, and
// nothing reaches the CLS.
func TestSiteSizeBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cpus", "0"}, "--cpus must be 1..4096, not 0"},
		{[]string{"--cpus", "-3"}, "--cpus must be 1..4096"},
		{[]string{"--cpus", "1.5"}, "1.5"},
		{[]string{"--cpus", "4", "--slots", "2"}, "--cpus 4 and --slots 2 say the same thing"},
		{[]string{"--mem", "8X"}, `--mem: memory "8X": unknown unit`},
		{[]string{"--mem", "1e30"}, `--mem: memory "1e30"`},
		{[]string{"--gpus", "-1"}, "--gpus must be 0..64"},
		{[]string{"--resource", "9lives=1"}, `"9lives" is not a name`},
		{[]string{"--resource", "lic=x"}, "want a positive integer"},
		{[]string{"--resource", "lic=1", "--resource", "lic=2"}, `resource "lic" given twice`},
		{[]string{"--output", "stream"}, `--output "stream": want files`},
	} {
		for _, cmd := range [][]string{{"cls", "site", "add", "c", "--type", "slurm", "--ssh", "u@h"}, {"cls", "site", "set", "c"}} {
			args := append(append([]string{}, cmd...), tc.args...)
			sent := false
			replies := map[string]clitest.Reply{
				protocol.OpSiteAdd.Name: {Body: struct{}{}, Seen: func(json.RawMessage) { sent = true }},
				protocol.OpSiteSet.Name: {Body: struct{}{}, Seen: func(json.RawMessage) { sent = true }},
			}
			var out, errOut bytes.Buffer
			env := mqcli.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getwd: os.Getwd, Dial: clitest.Dial(replies)}
			code := mqcli.Run(context.Background(), Cls(env), args)
			lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
			if code != mqcli.ExitUsage || sent || len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
				t.Errorf("%s: exit %d, sent %v, stderr %q; want exit 2, nothing sent, one line with %q", strings.Join(args, " "), code, sent, errOut.String(), tc.want)
			}
		}
	}
}

// A value wrong in itself is the same usage error (exit 2, nothing sent)
// to cls site set as to cls site add: set once sent it, and the CLS's
// refusal exited 1.
func TestSiteSetBadValuesAsAdd(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--max", "-1"}, "--max -1: want 0 <= min <= max"},
		{[]string{"--max", "0"}, "--max 0: want 1 <= max <= 10000"},
		{[]string{"--max", "20000"}, "1 <= max <= 10000"},
		{[]string{"--min", "-1"}, "--min -1"},
		{[]string{"--min", "5", "--max", "2"}, "--min 5 --max 2"},
		{[]string{"--slots", "-1"}, "--slots must be 1..4096, not -1"},
		{[]string{"--slots", "5000"}, "--slots must be 1..4096"},
		{[]string{"--price", "-1"}, "--price must be 0.."},
		{[]string{"--walltime", "10s"}, "--walltime must be between 1m and 366 days"},
		{[]string{"--walltime", "1h", "--idle", "2h"}, "--idle must be between 1s and the walltime"},
		{[]string{"--provision", "nope"}, `--provision "nope"`},
		{[]string{"--queue", "a b"}, `--queue "a b": not a queue name`},
		{[]string{"--partition", "a;b"}, `--queue "a;b": not a queue name`},
		{[]string{"--submit-args", "-A 'unclosed"}, "--submit-args"},
	} {
		for _, cmd := range [][]string{{"cls", "site", "add", "c", "--type", "slurm", "--ssh", "u@h"}, {"cls", "site", "set", "c"}} {
			args := append(append([]string{}, cmd...), tc.args...)
			sent := false
			replies := map[string]clitest.Reply{
				protocol.OpSiteAdd.Name: {Body: struct{}{}, Seen: func(json.RawMessage) { sent = true }},
				protocol.OpSiteSet.Name: {Body: struct{}{}, Seen: func(json.RawMessage) { sent = true }},
			}
			var out, errOut bytes.Buffer
			env := mqcli.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getwd: os.Getwd, Dial: clitest.Dial(replies)}
			code := mqcli.Run(context.Background(), Cls(env), args)
			lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
			if code != mqcli.ExitUsage || sent || len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
				t.Errorf("%s: exit %d, sent %v, stderr %q; want exit 2, nothing sent, one line with %q", strings.Join(args, " "), code, sent, errOut.String(), tc.want)
			}
		}
	}
}

// cls site set sends the queue and submit arguments it is given, and only
// those: "" clears them.
func TestSiteSetQueueSent(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want protocol.SiteSet
	}{
		{[]string{"--partition", "short"}, protocol.SiteSet{Name: "c", Queue: ptr("short")}},
		{[]string{"--queue", "", "--submit-args", "-A proj"}, protocol.SiteSet{Name: "c", Queue: ptr(""), SubmitArgs: ptr("-A proj")}},
		{[]string{"--submit-args", ""}, protocol.SiteSet{Name: "c", SubmitArgs: ptr("")}},
	} {
		var got protocol.SiteSet
		replies := map[string]clitest.Reply{
			protocol.OpSiteSet.Name: {Body: protocol.SiteInfo{SiteSpec: protocol.SiteSpec{Name: "c"}}, Seen: func(m json.RawMessage) { json.Unmarshal(m, &got) }},
		}
		var out, errOut bytes.Buffer
		env := mqcli.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getwd: os.Getwd, Dial: clitest.Dial(replies)}
		args := append([]string{"cls", "site", "set", "c"}, tc.args...)
		if code := mqcli.Run(context.Background(), Cls(env), args); code != 0 {
			t.Fatalf("%s: exit %d, %s", strings.Join(args, " "), code, errOut.String())
		}
		if g, w := fmt.Sprintf("%+v %v %v", got.Name, deref(got.Queue), deref(got.SubmitArgs)), fmt.Sprintf("%+v %v %v", tc.want.Name, deref(tc.want.Queue), deref(tc.want.SubmitArgs)); g != w {
			t.Errorf("%s sent %s, want %s", strings.Join(args, " "), g, w)
		}
	}
}

func ptr(s string) *string { return &s }

// deref shows a *string: <nil> or the string quoted.
func deref(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%q", *p)
}

// cls site list says what each placeholder of a site holds besides its
// slots, and where the placeholders connected were given other than
// asked; a site of slots alone reads as before.
func TestPrintSitesSize(t *testing.T) {
	var b bytes.Buffer
	printSites(&b, []protocol.SiteInfo{
		{SiteSpec: protocol.SiteSpec{Name: "big", Type: "slurm", SSH: "u@h", Max: 2, Slots: 16, Mem: 64 << 30, GPUs: 2, Resources: "lic=3", SharedFS: true},
			State: "ok", Given: "asked 16 cpus, given 8 (SLURM_CPUS_ON_NODE) (2 placeholders)"},
		{SiteSpec: protocol.SiteSpec{Name: "plain", Type: "slurm", SSH: "u@h", Max: 1, Slots: 4, SharedFS: true}, State: "ok"},
	})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 || !strings.HasSuffix(lines[1], "u@h (shared fs) (each 16 cpus, 64 GiB, 2 GPUs, lic=3) (asked 16 cpus, given 8 (SLURM_CPUS_ON_NODE) (2 placeholders))") ||
		!strings.HasSuffix(lines[2], "u@h (shared fs)") {
		t.Errorf("cls site list:\n%s", b.String())
	}
}

// cls site list says how many placeholders of a site take no new jobs
// for their full output disk.
func TestPrintSitesPaused(t *testing.T) {
	var b bytes.Buffer
	printSites(&b, []protocol.SiteInfo{{SiteSpec: protocol.SiteSpec{Name: "local", Type: "local", Max: 2}, State: "ok", Connected: 2, Paused: 2}})
	if !strings.Contains(b.String(), "(2 paused: output disk nearly full or refusing writes)") {
		t.Errorf("cls site list:\n%s", b.String())
	}
}

// cls site list says how many placeholders of a site said their node
// cannot run jobs, and the latest's host and why, escaped.
func TestPrintSitesBroken(t *testing.T) {
	var b bytes.Buffer
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	printSites(&b, []protocol.SiteInfo{{SiteSpec: protocol.SiteSpec{Name: "local", Type: "local", Max: 2}, State: "ok", Connected: 1, Broken: []protocol.BrokenPlaceholder{
		{ID: 8, Host: "n8", Why: "job 9 (attempt 1): its processes did not end 60s after SIGKILL\x1b[2J", At: at},
		{ID: 7, Host: "n7", Why: "older", At: at.Add(-time.Hour)},
	}}})
	want := "(2 broken in the last day, their node cannot run jobs: drain it; latest placeholder 8 on n8: job 9 (attempt 1): its processes did not end 60s after SIGKILL"
	if !strings.Contains(b.String(), want) || strings.Contains(b.String(), "\x1b") {
		t.Errorf("cls site list:\n%s", b.String())
	}
}

// cls site list names a site's own output mode; a site following the
// CLS's says nothing.
func TestPrintSitesOutput(t *testing.T) {
	var b bytes.Buffer
	printSites(&b, []protocol.SiteInfo{
		{SiteSpec: protocol.SiteSpec{Name: "files", Type: "slurm", SSH: "u@h", Max: 1, Slots: 1, SharedFS: true, Output: protocol.OutputModeFiles}, State: "ok"},
		{SiteSpec: protocol.SiteSpec{Name: "plain", Type: "slurm", SSH: "u@h", Max: 1, Slots: 1, SharedFS: true}, State: "ok"},
	})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 || !strings.HasSuffix(lines[1], "u@h (shared fs) (output files)") || !strings.HasSuffix(lines[2], "u@h (shared fs)") {
		t.Errorf("cls site list:\n%s", b.String())
	}
}

// cls site list says why the oldest queued placeholder waits, as the
// batch system said it, escaped: the text comes from the cluster.
func TestPrintSitesOldestWhy(t *testing.T) {
	var b bytes.Buffer
	printSites(&b, []protocol.SiteInfo{
		{SiteSpec: protocol.SiteSpec{Name: "held", Type: "slurm", SSH: "u@h", Max: 1, Slots: 1, SharedFS: true}, State: "throttled", Queued: 1, OldestQueuedS: 400, OldestWhy: "JobHeldAdmin"},
		{SiteSpec: protocol.SiteSpec{Name: "odd", Type: "pbs", SSH: "u@h", Max: 1, Slots: 1, SharedFS: true}, State: "ok", Queued: 1, OldestQueuedS: 5, OldestWhy: "Not Running:\x1b[2J"},
	})
	out := b.String()
	if !strings.Contains(out, "(oldest 6m40s: JobHeldAdmin)") || strings.Contains(out, "\x1b") {
		t.Errorf("cls site list:\n%q", out)
	}
}

// cls site remove says how many placeholders it cancelled, or, when the
// cancel failed, that it removed the site and why the placeholders stay
// (no count of placeholders that were not cancelled).
func TestSiteRemoveSays(t *testing.T) {
	for _, tc := range []struct {
		name     string
		info     protocol.SiteInfo
		out, err string
	}{
		{"cancelled", protocol.SiteInfo{SiteSpec: protocol.SiteSpec{Name: "g"}, Queued: 2, Running: 1},
			"removed site g (2 queued and 1 running placeholders cancelled)\n", ""},
		{"cancel failed", protocol.SiteInfo{SiteSpec: protocol.SiteSpec{Name: "g"}, Error: "could not cancel its placeholders (cancel them by hand): qdel: no"},
			"removed site g\n", "cls: site g: could not cancel its placeholders (cancel them by hand): qdel: no\n"},
	} {
		var out, errOut bytes.Buffer
		env := mqcli.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getwd: os.Getwd,
			Dial: clitest.Dial(map[string]clitest.Reply{protocol.OpSiteRemove.Name: {Body: tc.info}})}
		if code := mqcli.Run(context.Background(), Cls(env), []string{"cls", "site", "remove", "g"}); code != 0 || out.String() != tc.out || errOut.String() != tc.err {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want %q, %q", tc.name, code, out.String(), errOut.String(), tc.out, tc.err)
		}
	}
}

// cls site list says why staging leaves a site alone: its data root full.
func TestPrintSitesStagingPaused(t *testing.T) {
	var b bytes.Buffer
	printSites(&b, []protocol.SiteInfo{
		{SiteSpec: protocol.SiteSpec{Name: "grid", Type: "sge", SSH: "u@h", Max: 1, Slots: 1, DataRoot: "/d"}, State: "ok",
			Staging: "data root full since 10:00:00, next transfer there after 10:00:05: no space left in /d (0 bytes free)"},
	})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 || !strings.HasSuffix(lines[1], "u@h (data /d); staging paused: data root full since 10:00:00, next transfer there after 10:00:05: no space left in /d (0 bytes free)") {
		t.Errorf("cls site list:\n%s", b.String())
	}
}

// TestUnknownSubcommand: a subcommand cls does not have is a usage error
// naming the ones it has (cls site rm said "No help topic for 'rm'",
// exit 1), and so is none.
func TestUnknownSubcommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cls", "site", "rm", "x"}, `cls: unknown command "rm" of cls site (one of: add, set, login, logout, list, remove)`},
		{[]string{"cls", "queue", "nosuch"}, `cls: unknown command "nosuch" of cls queue (one of: list, set)`},
		{[]string{"cls", "key"}, "cls: missing command of cls key (one of: "},
	} {
		var out, errOut bytes.Buffer
		env := mqcli.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getwd: os.Getwd}
		code := mqcli.Run(context.Background(), Cls(env), tc.args)
		if code != mqcli.ExitUsage || !strings.HasPrefix(errOut.String(), tc.want) || strings.Count(errOut.String(), "\n") != 1 || out.Len() != 0 {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 and %q", strings.Join(tc.args, " "), code, out.String(), errOut.String(), tc.want)
		}
	}
}
