package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/protocol"
	"github.com/urfave/cli/v2"
)

// mqsub --after-any and a job file's "after_any" reach the metaqueue;
// mqstat -j shows them apart from -p's; bad forms are one line each and
// add nothing.
func TestMqsubAfterAny(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	run := func(app func(Env) *cli.App, args ...string) (int, string, string) {
		t.Helper()
		var o, e bytes.Buffer
		code := Run(ctx, app(tb.env(&o, &e)), args)
		return code, o.String(), e.String()
	}
	submit := func(args ...string) int64 {
		t.Helper()
		code, out, errs := run(Mqsub, append([]string{"mqsub"}, args...)...)
		id, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
		if code != 0 || err != nil {
			t.Fatalf("mqsub %q: exit %d, %q %q", args, code, out, errs)
		}
		return id
	}
	job := func(id int64) protocol.JobDetail { return tb.job(t, id) }

	a := submit("a", "exit 1")
	clean := submit("--after-any", "a,b", "--after-any", "c", "-p", "d", "clean", "true")
	if d := job(clean); !slices.Equal(d.AfterAny, []string{"a", "b", "c"}) || !slices.Equal(d.Prereqs, []string{"d"}) || d.State != "W" {
		t.Fatalf("clean: after-any %v prereqs %v state %s", d.AfterAny, d.Prereqs, d.State)
	}
	path := filepath.Join(t.TempDir(), "jobs")
	if err := os.WriteFile(path, []byte(`{"target":"tidy","command":"true","after_any":["a"]}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tidy := submit("-f", path)
	if d := job(tidy); !slices.Equal(d.AfterAny, []string{"a"}) || len(d.Prereqs) != 0 {
		t.Fatalf("file job: after-any %v prereqs %v", d.AfterAny, d.Prereqs)
	}
	// A target nobody has submitted to is fine: the job waits for it.
	submit("--after-any", "not-yet", "late", "true")

	n := tb.jobs()
	ida, idClean := strconv.FormatInt(a, 10), strconv.FormatInt(clean, 10)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"cycle", []string{"mqsub", "--after-any", "clean", "d", "true"}, ExitFailed, "cycle"},
		{"itself", []string{"mqsub", "--after-any", "x", "x", "true"}, ExitUsage, "own after-any"},
		{"sbatch afterany", []string{"mqsub", "--dependency=afterany:12", "t", "true"}, ExitUsage, "--after-any TARGET"},
		{"sbatch afterok", []string{"mqsub", "--dependency", "afterok:12:13", "t", "true"}, ExitUsage, "-p TARGET"},
		{"sbatch aftercorr", []string{"mqsub", "--array", "1-3", "--dependency=aftercorr:12", "t", "true"}, ExitUsage, "-p 'TARGET{}' makes member i wait for target TARGET<i>"},
		{"sbatch -d", []string{"mqsub", "-d", "afterany:12", "t", "true"}, ExitUsage, "--after-any TARGET"},
		{"qsub -W afterany", []string{"mqsub", "-W", "depend=afterany:12", "t", "true"}, ExitUsage, "--after-any TARGET"},
		{"qsub -W afterok", []string{"mqsub", "-W", "depend=afterok:12:13", "t", "true"}, ExitUsage, "--after TARGET"},
		{"qsub -W other", []string{"mqsub", "-W", "group_list=g", "t", "true"}, ExitUsage, "--after-any TARGET"},
		{"qsub -W block", []string{"mqsub", "-W", "block=true", "t", "true"}, ExitUsage, "mqsub -b"},
		{"sbatch -W", []string{"mqsub", "-W", "t", "true"}, ExitUsage, "mqsub -b"},
		{"sge -hold_jid", []string{"mqsub", "-hold_jid", "12,13", "t", "true"}, ExitUsage, "--after-any TARGET"},
		// The ids of jobs the CLS has: their targets, with the flag to write.
		{"afterok of a job", []string{"mqsub", "--dependency=afterok:" + ida, "t", "true"}, ExitUsage, "; job " + ida + " is of target a: -p a ("},
		{"-hold_jid of jobs", []string{"mqsub", "-hold_jid", ida + "," + idClean, "t", "true"}, ExitUsage, "; jobs " + ida + ", " + idClean + " are of targets a, clean: --after-any a,clean ("},
		{"-W depend of a job", []string{"mqsub", "-W", "depend=afterany:" + ida, "t", "true"}, ExitUsage, "is of target a: --after-any a ("},
		{"with -f", []string{"mqsub", "--after-any", "a", "-f", path}, ExitUsage, `"after_any"`},
		{"with --rerun", []string{"mqsub", "--rerun", "--after-any", "a", strconv.FormatInt(a, 10)}, ExitUsage, "--after-any"},
	} {
		var o, e bytes.Buffer
		code := Run(ctx, Mqsub(tb.env(&o, &e)), tc.args)
		if code != tc.code || !strings.Contains(e.String(), tc.want) || strings.Count(strings.TrimSpace(e.String()), "\n") != 0 {
			t.Errorf("%s: exit %d, stderr %q; want exit %d, one line with %q", tc.name, code, e.String(), tc.code, tc.want)
		}
	}
	if tb.jobs() != n {
		t.Fatalf("refusals added jobs: %d, were %d", tb.jobs(), n)
	}

	// a fails: tidy may run, and -j says how a ended.
	r, err := tb.store.Register(ctx, protocol.Register{Site: "s", Host: "h", PID: 1, Slots: 1, OutDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	nx, err := tb.store.Next(ctx, protocol.Next{Placeholder: r.ID, Free: 1})
	if err != nil || len(nx.Jobs) != 1 || nx.Jobs[0].ID != a {
		t.Fatalf("Next: %+v, %v", nx, err)
	}
	if err := tb.store.Report(ctx, r.ID, []protocol.Report{{ID: a, Attempt: nx.Jobs[0].Attempt, Exit: 1}}); err != nil {
		t.Fatal(err)
	}
	if d := job(tidy); d.State != "Q" {
		t.Fatalf("tidy is %s after a failed, want Q", d.State)
	}
	code, out, errs := run(Mqstat, "mqstat", "-j", strconv.FormatInt(tidy, 10))
	if code != 0 || !strings.Contains(out, "after any") || !strings.Contains(out, "ended (1 job: 1 failed)") {
		t.Fatalf("mqstat -j tidy: exit %d\n%s%s", code, out, errs)
	}
	code, out, _ = run(Mqstat, "mqstat", "-j", strconv.FormatInt(clean, 10))
	if code != 0 || !strings.Contains(out, "waiting: the target has no jobs yet") || !strings.Contains(out, "prerequisites") {
		t.Fatalf("mqstat -j clean:\n%s", out)
	}
	code, out, _ = run(Mqstat, "mqstat")
	if code != 0 || !strings.Contains(out, "<- d,any:a,any:b") {
		t.Fatalf("mqstat listing: the waiting job's cell should name its after-any targets:\n%s", out)
	}
}
