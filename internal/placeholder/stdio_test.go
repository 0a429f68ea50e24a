package placeholder

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// TestRunUserStdio: mqsub -o and -e write the job's streams also to the
// files they name, in its working directory, with sbatch's escapes
// expanded; mq keeps its own copy per attempt; a file in a directory
// that does not exist fails the attempt with that reason.
func TestRunUserStdio(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := runner(t, "")
	const cmd = "echo out; echo err >&2"
	tests := []struct {
		name    string
		id      int64
		env     []string
		files   map[string]string // relative to dir: want contents
		exit    int
		reason  string
		mqFiles bool
	}{
		{"stdout only takes stderr too", 11, []string{"MQ_STDOUT=o-%j.log"},
			map[string]string{"o-11.log": "out\nerr\n"}, 0, "", true},
		{"both apart", 12, []string{"MQ_STDOUT=%x.out", "MQ_STDERR=%x.err"},
			map[string]string{"t.out": "out\n", "t.err": "err\n"}, 0, "", true},
		{"array escapes", 20, []string{"MQ_STDOUT=a-%A_%a.log", "MQ_ARRAY_INDEX=7", "MQ_ARRAY_SEQ=3", "MQ_STDERR=%%.err"},
			map[string]string{"a-17_7.log": "out\n", "%.err": "err\n"}, 0, "", true},
		{"absolute", 13, []string{"MQ_STDOUT=" + filepath.Join(dir, "abs.log")},
			map[string]string{"abs.log": "out\nerr\n"}, 0, "", true},
		{"no directory", 14, []string{"MQ_STDOUT=nodir/o.log"},
			nil, 127, "could not start: -o " + filepath.Join(dir, "nodir/o.log") + ": no such file or directory", false},
	}
	for _, tc := range tests {
		rep := a.run(context.Background(), protocol.Assignment{ID: tc.id, Attempt: 1, Command: cmd, Cwd: dir, Target: "t", Queue: "q", Env: tc.env})
		if rep.Exit != tc.exit || rep.Reason != tc.reason || rep.OutputLost != "" {
			t.Errorf("%s: exit %d reason %q lost %q, want %d %q", tc.name, rep.Exit, rep.Reason, rep.OutputLost, tc.exit, tc.reason)
		}
		for name, want := range tc.files {
			b, err := os.ReadFile(filepath.Join(dir, name))
			// The two streams drain apart: one file holding both may
			// have them in either order.
			if err != nil || sortedLines(string(b)) != sortedLines(want) {
				t.Errorf("%s: %s = %q, %v; want %q", tc.name, name, b, err, want)
			}
		}
		out, errp := job.OutputPaths(a.cfg.OutDir, tc.id, 1)
		bo, _ := os.ReadFile(out)
		be, _ := os.ReadFile(errp)
		if tc.mqFiles && (string(bo) != "out\n" || string(be) != "err\n") {
			t.Errorf("%s: mq's own copies %q, %q", tc.name, bo, be)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "nodir")); err == nil {
		t.Error("the missing directory was made")
	}
}

// TestExpandStdio covers the escapes outside and inside an array.
func TestExpandStdio(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		p    string
		env  []string
		want string
	}{
		{"slurm-%j.out", nil, "slurm-5.out"},
		{"%A_%a", nil, "5_0"},
		{"%A_%a", []string{"MQ_ARRAY_INDEX=9", "MQ_ARRAY_SEQ=2"}, "3_9"},
		{"%x/%%j", nil, "tg/%j"},
		{"plain", nil, "plain"},
	} {
		if got := protocol.ExpandStdio(tc.p, 5, "tg", tc.env); got != tc.want {
			t.Errorf("ExpandStdio(%q, %v) = %q, want %q", tc.p, tc.env, got, tc.want)
		}
	}
	for _, bad := range []string{"", "o-%u.log", "dir/", "o-%"} {
		if err := protocol.CheckStdioPattern(bad); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("CheckStdioPattern(%q) = %v, want one line", bad, err)
		}
	}
}

func sortedLines(s string) string {
	l := strings.Split(s, "\n")
	slices.Sort(l)
	return strings.Join(l, "\n")
}

// TestRunTimeLimit: a job is killed at its --time and fails with that
// reason; a queue ceiling shorter than the limit still stops it first,
// as a ceiling; a job within its limit is untouched.
func TestRunTimeLimit(t *testing.T) {
	t.Parallel()
	a := runner(t, "")
	for _, tc := range []struct {
		name    string
		ceiling float64
		env     []string
		cmd     string
		reason  string
	}{
		{"limit", 0, []string{"MQ_TIME_LIMIT=0.3"}, "sleep 60", "time limit: killed after 300ms (mqsub --time)"},
		{"ceiling sooner", 0.3, []string{"MQ_TIME_LIMIT=60"}, "sleep 60", protocol.ReasonCeiling},
		{"limit sooner", 60, []string{"MQ_TIME_LIMIT=0.3"}, "sleep 60", "time limit: killed after 300ms (mqsub --time)"},
		{"within", 0, []string{"MQ_TIME_LIMIT=60"}, "true", ""},
	} {
		rep := a.run(context.Background(), protocol.Assignment{ID: 30, Attempt: 1, Command: tc.cmd, Target: "t", Queue: "q", Ceiling: tc.ceiling, Env: tc.env})
		if rep.Reason != tc.reason || (tc.reason != "" && rep.Exit == 0) {
			t.Errorf("%s: exit %d reason %q, want reason %q", tc.name, rep.Exit, rep.Reason, tc.reason)
		}
		if d := rep.Finished.Sub(rep.Started); tc.reason != "" && d > 30*time.Second {
			t.Errorf("%s: ran %v", tc.name, d)
		}
	}
}
