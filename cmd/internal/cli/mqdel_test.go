package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/cmd/internal/cli/clitest"
	"github.com/mq-hpc/mq/protocol"
)

// TestMqdelManyListsSample: a delete reply naming only the first of many
// jobs prints those and says how many more there were; a refusal of many
// says how many in all.
func TestMqdelManyListsSample(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name           string
		reply          protocol.ActionReply
		code           int
		stdout, stderr string
	}{
		{"sample", protocol.ActionReply{IDs: []int64{5, 6}, Count: 1_000_000}, 0,
			"deleted job 5\ndeleted job 6\n", "mqdel: deleted 999998 more jobs, not listed (1000000 in all)\n"},
		{"whole", protocol.ActionReply{IDs: []int64{5, 6}}, 0, "deleted job 5\ndeleted job 6\n", ""},
		{"refused", protocol.ActionReply{Errors: []string{"job 5 has already ended (done)"}, ErrorCount: 1_000_000}, ExitFailed,
			"", "mqdel: nothing deleted: job 5 has already ended (done); and 999999 more\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			replies := map[string]clitest.Reply{protocol.OpDelete.Name: {Body: c.reply}}
			var o, e bytes.Buffer
			env := Env{Stdin: strings.NewReader(""), Stdout: &o, Stderr: &e, Getwd: os.Getwd, Dial: clitest.Dial(replies)}
			if code := Run(context.Background(), Mqdel(env), []string{"mqdel", "1-1000000"}); code != c.code {
				t.Fatalf("exit %d, want %d; %s", code, c.code, e.String())
			}
			if o.String() != c.stdout || e.String() != c.stderr {
				t.Errorf("stdout %q, stderr %q\nwant %q, %q", o.String(), e.String(), c.stdout, c.stderr)
			}
		})
	}
}

// TestFlagsAfterSelection: the README's forms "mqdel 720-723 -Q" and
// "mqwait 720-723 --timeout 2h" parse their flags although they follow the
// range (they were taken as job ids and refused).
func TestFlagsAfterSelection(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		app  func(Env) *cli.App
		args []string
		op   string
		body protocol.ActionReply
		want string // in the request's body
		out  string
	}{
		{"mqdel quiet", Mqdel, []string{"mqdel", "720-723", "-Q"}, protocol.OpDelete.Name,
			protocol.ActionReply{IDs: []int64{720, 721, 722, 723}}, `"first":720,"last":723`, ""},
		{"mqdel queue after ids", Mqdel, []string{"mqdel", "5", "6", "-q", "batch"}, protocol.OpDelete.Name,
			protocol.ActionReply{IDs: []int64{5, 6}}, `"ids":[5,6],"queue":"batch"`, "deleted job 5\ndeleted job 6\n"},
		{"mqsub --rerun quiet", Mqsub, []string{"mqsub", "--rerun", "720-723", "-Q"}, protocol.OpRerun.Name,
			protocol.ActionReply{IDs: []int64{720, 721, 722, 723}}, `"first":720,"last":723`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var seen string
			replies := map[string]clitest.Reply{c.op: {Body: c.body, Seen: func(b json.RawMessage) { seen = string(b) }}}
			var o, e bytes.Buffer
			env := Env{Stdin: strings.NewReader(""), Stdout: &o, Stderr: &e, Getwd: os.Getwd, Dial: clitest.Dial(replies)}
			if code := Run(context.Background(), c.app(env), c.args); code != 0 {
				t.Fatalf("exit %d; %s", code, e.String())
			}
			if !strings.Contains(seen, c.want) {
				t.Errorf("request %s, want it to hold %s", seen, c.want)
			}
			if o.String() != c.out {
				t.Errorf("stdout %q, want %q", o.String(), c.out)
			}
		})
	}
}

func TestMqwaitFlagsAfterRange(t *testing.T) {
	t.Parallel()
	var seen string
	final := protocol.ProgressReply{}
	replies := map[string]clitest.Reply{protocol.OpProgress.Name: {Body: final, Seen: func(b json.RawMessage) { seen = string(b) }}}
	var o, e bytes.Buffer
	env := Env{Stdin: strings.NewReader(""), Stdout: &o, Stderr: &e, Getwd: os.Getwd, Dial: clitest.Dial(replies)}
	code := Run(context.Background(), Mqwait(env), []string{"mqwait", "720-723", "--timeout", "2h", "-Q"})
	if code == ExitUsage || strings.Contains(e.String(), "not both") {
		t.Fatalf("exit %d: %s", code, e.String())
	}
	if !strings.Contains(seen, `"first":720,"last":723`) {
		t.Errorf("request %s, want the range 720-723", seen)
	}
}

// TestSelectionAtomic: jobs named by id are acted on all or none; a range
// or a selection, whose query takes only jobs the action applies to, is
// not asked to be atomic, so the CLS may act on it in batches.
func TestSelectionAtomic(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		app    func(Env) *cli.App
		args   []string
		op     string
		atomic bool
	}{
		{Mqdel, []string{"mqdel", "5", "6"}, protocol.OpDelete.Name, true},
		{Mqdel, []string{"mqdel", "720-723"}, protocol.OpDelete.Name, false},
		{Mqdel, []string{"mqdel", "-t", "sim"}, protocol.OpDelete.Name, false},
		{Mqhold, []string{"mqhold", "--all"}, protocol.OpHold.Name, false},
		{Mqrls, []string{"mqrls", "7"}, protocol.OpRelease.Name, true},
		{Mqsub, []string{"mqsub", "--rerun", "-t", "sim", "-s", "F"}, protocol.OpRerun.Name, false},
		{Mqsub, []string{"mqsub", "--rerun", "3"}, protocol.OpRerun.Name, true},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			t.Parallel()
			var seen string
			replies := map[string]clitest.Reply{c.op: {Body: protocol.ActionReply{}, Seen: func(b json.RawMessage) { seen = string(b) }}}
			var o, e bytes.Buffer
			env := Env{Stdin: strings.NewReader(""), Stdout: &o, Stderr: &e, Getwd: os.Getwd, Dial: clitest.Dial(replies)}
			if code := Run(context.Background(), c.app(env), c.args); code != 0 {
				t.Fatalf("exit %d; %s", code, e.String())
			}
			if got := strings.Contains(seen, `"atomic":true`); got != c.atomic {
				t.Errorf("request %s: atomic %v, want %v", seen, got, c.atomic)
			}
		})
	}
}

// TestMqwaitInterrupted: an interrupt (Ctrl-C) ends mqwait with exit 130
// and a line saying the jobs go on, not a context error: before it
// reached the CLS, and while it follows the jobs.
func TestMqwaitInterrupted(t *testing.T) {
	t.Parallel()
	for _, following := range []bool{false, true} {
		tb := setup(t)
		ids, err := tb.store.Submit(context.Background(), []protocol.JobSpec{{Target: "t", Command: "true", Cwd: "/tmp"}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		o, e := &lineWriter{lines: make(chan string, 100)}, &bytes.Buffer{}
		done := make(chan int, 1)
		go func() { done <- Run(ctx, Mqwait(tb.env(o, e)), []string{"mqwait", strconv.FormatInt(ids[0], 10)}) }()
		if following {
			select { // its first progress line: it follows (no placeholder runs the job)
			case <-o.lines:
			case <-time.After(time.Minute):
				t.Fatal("mqwait printed no progress in a minute")
			}
		}
		cancel()
		if code := <-done; code != ExitInterrupted || !strings.Contains(e.String(), "interrupted; the jobs go on") {
			t.Errorf("following %v: exit %d, stderr %q; want %d and the jobs going on", following, code, e.String(), ExitInterrupted)
		}
	}
}

// lineWriter passes what is written to it, a write at a time, on lines.
type lineWriter struct{ lines chan string }

func (w *lineWriter) Write(p []byte) (int, error) {
	select {
	case w.lines <- string(p):
	default:
	}
	return len(p), nil
}

// TestMqdelTargets: mqdel -t A,B,C deletes each target's jobs (a workflow
// system cancelling a run, Snakemake's mq-cancel), one request a target on
// one connection, going on past a target that fails and exiting 1 naming
// it; an empty name in the list is a usage error that sends nothing.
func TestMqdelTargets(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var asked []string
	replies := map[string]clitest.Reply{protocol.OpDelete.Name: {
		Bodies: []any{protocol.ActionReply{IDs: []int64{1}}, protocol.ActionReply{Errors: []string{"job 2 could not be killed"}, ErrorCount: 1}, protocol.ActionReply{IDs: []int64{3, 4}}},
		Seen: func(b json.RawMessage) {
			var s protocol.Select
			json.Unmarshal(b, &s)
			mu.Lock()
			asked = append(asked, s.Target)
			mu.Unlock()
		}}}
	var o, e bytes.Buffer
	env := Env{Stdin: strings.NewReader(""), Stdout: &o, Stderr: &e, Getwd: os.Getwd, Dial: clitest.Dial(replies)}
	if code := Run(context.Background(), Mqdel(env), []string{"mqdel", "-t", "smk.r.a.1,smk.r.b.2,smk.r.c.3"}); code != ExitFailed {
		t.Errorf("exit %d, want 1 (one target failed)", code)
	}
	if got := strings.Join(asked, " "); got != "smk.r.a.1 smk.r.b.2 smk.r.c.3" {
		t.Errorf("asked to delete targets %q, want each in turn", got)
	}
	if o.String() != "deleted job 1\ndeleted job 3\ndeleted job 4\n" || !strings.Contains(e.String(), "job 2 could not be killed") || !strings.Contains(e.String(), "1 of 3 targets") {
		t.Errorf("stdout %q, stderr %q", o.String(), e.String())
	}
	o.Reset()
	e.Reset()
	asked = nil
	if code := Run(context.Background(), Mqdel(env), []string{"mqdel", "-t", "a,,b"}); code != ExitUsage || len(asked) != 0 || strings.Count(e.String(), "\n") != 1 {
		t.Errorf("-t a,,b: exit %d, asked %q, stderr %q; want a usage error sending nothing", code, asked, e.String())
	}
}

// TestSelectionEmptyStates: -s given empty (-s "$S" with S unset, -s ,)
// is a usage error that reaches no CLS; taken as no -s, mqdel --all -s ""
// deleted every job.
func TestSelectionEmptyStates(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		app  func(Env) *cli.App
		args []string
	}{
		{Mqdel, []string{"mqdel", "--all", "-s", ""}},
		{Mqdel, []string{"mqdel", "--all", "-s", ","}},
		{Mqdel, []string{"mqdel", "-t", "sim", "-s", ",,"}},
		{Mqhold, []string{"mqhold", "--all", "-s", ""}},
		{Mqsub, []string{"mqsub", "--rerun", "--all", "-s", ","}},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			t.Parallel()
			sent := false
			replies := map[string]clitest.Reply{}
			for _, op := range []string{protocol.OpDelete.Name, protocol.OpHold.Name, protocol.OpRerun.Name} {
				replies[op] = clitest.Reply{Body: protocol.ActionReply{}, Seen: func(json.RawMessage) { sent = true }}
			}
			var o, e bytes.Buffer
			env := Env{Stdin: strings.NewReader(""), Stdout: &o, Stderr: &e, Getwd: os.Getwd, Dial: clitest.Dial(replies)}
			if code := Run(context.Background(), c.app(env), c.args); code != ExitUsage || sent {
				t.Fatalf("exit %d, request sent %v, want exit %d and none; %s", code, sent, ExitUsage, e.String())
			}
			if !strings.Contains(e.String(), "empty state list") || strings.Count(e.String(), "\n") != 1 {
				t.Errorf("stderr %q, want one line saying the state list is empty", e.String())
			}
		})
	}
}

// TestSelectionEmptyNames: -t or -q given empty is a usage error that
// reaches no CLS; taken as no -t, mqdel -t "" -s H deleted the held jobs
// of every target, and mqwait -t "" waited for every job.
func TestSelectionEmptyNames(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		app  func(Env) *cli.App
		args []string
		want string
	}{
		{Mqdel, []string{"mqdel", "-t", "", "-s", "H"}, "mqdel: -t: empty target name (see mqdel --help)\n"},
		{Mqdel, []string{"mqdel", "-q", "", "-s", "Q"}, "mqdel: -q: empty queue name (see mqdel --help)\n"},
		{Mqhold, []string{"mqhold", "--all", "-t", ""}, "mqhold: -t: empty target name (see mqhold --help)\n"},
		{Mqsub, []string{"mqsub", "--rerun", "-q", "", "-s", "F"}, "mqsub: -q: empty queue name (see mqsub --help)\n"},
		{Mqwait, []string{"mqwait", "-t", ""}, "mqwait: -t: empty target name (see mqwait --help)\n"},
		{Mqwait, []string{"mqwait", "--target-prefix", ""}, "mqwait: --target-prefix: empty prefix (mqwait with no -t waits for every target) (see mqwait --help)\n"},
		{Mqstat, []string{"mqstat", "-t", ""}, "mqstat: -t: empty target name (see mqstat --help)\n"},
		{Mqstat, []string{"mqstat", "--cat", "all", "-q", ""}, "mqstat: -q: empty queue name (see mqstat --help)\n"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			t.Parallel()
			sent := false
			replies := map[string]clitest.Reply{}
			for _, op := range []string{protocol.OpDelete.Name, protocol.OpHold.Name, protocol.OpRerun.Name} {
				replies[op] = clitest.Reply{Body: protocol.ActionReply{}, Seen: func(json.RawMessage) { sent = true }}
			}
			var o, e bytes.Buffer
			env := Env{Stdin: strings.NewReader(""), Stdout: &o, Stderr: &e, Getwd: os.Getwd, Dial: clitest.Dial(replies)}
			if code := Run(context.Background(), c.app(env), c.args); code != ExitUsage || sent || e.String() != c.want {
				t.Errorf("exit %d, request sent %v, stderr %q; want exit %d, none sent, %q", code, sent, e.String(), ExitUsage, c.want)
			}
		})
	}
}
