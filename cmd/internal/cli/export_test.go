package cli

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// TestMqsubExport: -V and --export as qsub and sbatch write them reach the
// placeholder with the job, -v winning; mq's own names and the shell's
// bookkeeping and exported functions stay behind; names mq cannot carry are left out with a
// warning; with an array or a file the environment is stored once for
// the submission (each job sees it under its own -v and "env"); an
// environment over the limit (an array's or a file's too), and -V
// without the user's environment (the SSH endpoint) are refused in one
// line.
func TestMqsubExport(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	dir := t.TempDir()
	reg, err := tb.store.RegisterAs(ctx, protocol.Register{Site: "s", Host: "h", Slots: 4, OutDir: t.TempDir()}, "socket")
	if err != nil {
		t.Fatal(err)
	}
	environ := []string{"A=1", "B=two words", "PWD=/home/u", "SHLVL=2", "MQ_JOB_ID=7", "MQ_ATTEMPT_ID=x.7.1", "BASH_FUNC_f%%=() { :; }", "MQ_HOME=/h", "X.Y=1"}
	run := func(stdin string, args ...string) (int, string, string) {
		var o, e bytes.Buffer
		env := tb.env(&o, &e)
		env.Environ = func() []string { return environ }
		env.Stdin = strings.NewReader(stdin)
		code := Run(ctx, Mqsub(env), append([]string{"mqsub", "-d", dir}, args...))
		return code, o.String(), e.String()
	}
	next := func(n int) []map[string]string {
		nr, err := tb.store.Next(ctx, protocol.Next{Placeholder: reg.ID, Free: 4})
		if err != nil || len(nr.Jobs) != n {
			t.Fatalf("next: %+v, %v; want %d jobs", nr, err, n)
		}
		var out []map[string]string
		for _, j := range nr.Jobs {
			m := map[string]string{}
			for _, kv := range j.Env {
				k, v, _ := strings.Cut(kv, "=")
				m[k] = v
			}
			out = append(out, m)
		}
		return out
	}
	const warn = "mqsub: warning: not exported (mq carries names of letters, digits and _, values of UTF-8 text): X.Y\n"
	all := map[string]string{"A": "1", "B": "two words", "MQ_HOME": "/h"}
	for _, tc := range []struct {
		args  []string
		stdin string
		want  []map[string]string
		warn  string
	}{
		{[]string{"-V", "t", "true"}, "", []map[string]string{all}, warn},
		{[]string{"--export=ALL", "-v", "A=9", "t", "true"}, "", []map[string]string{{"A": "9", "B": "two words", "MQ_HOME": "/h"}}, warn},
		{[]string{"--export=ALL,C=3", "t", "true"}, "", []map[string]string{{"A": "1", "B": "two words", "MQ_HOME": "/h", "C": "3"}}, warn},
		{[]string{"--export=A,C=3,NOSUCH", "t", "true"}, "", []map[string]string{{"A": "1", "C": "3"}}, ""},
		{[]string{"--export=NONE", "t", "true"}, "", []map[string]string{{}}, ""},
		{[]string{"--export=A", "--array", "1-2", "t", "true"}, "", []map[string]string{{"A": "1", "MQ_ARRAY_INDEX": "1"}, {"A": "1", "MQ_ARRAY_INDEX": "2"}}, ""},
		{[]string{"--export=B", "-f", "-"}, `{"target":"t","command":"true"}` + "\n" + `{"target":"t","command":"true","env":{"B":"own"}}` + "\n",
			[]map[string]string{{"B": "two words"}, {"B": "own"}}, ""},
		{[]string{"-V", "-v", "A=9", "--array", "1-2", "t", "true"}, "", []map[string]string{
			{"A": "9", "B": "two words", "MQ_HOME": "/h", "MQ_ARRAY_INDEX": "1"}, {"A": "9", "B": "two words", "MQ_HOME": "/h", "MQ_ARRAY_INDEX": "2"}}, warn},
		{[]string{"--export=ALL,C=3", "-v", "A=9", "-f", "-"}, `{"target":"t","command":"true"}` + "\n" + `{"target":"t","command":"true","env":{"B":"own"}}` + "\n",
			[]map[string]string{{"A": "9", "B": "two words", "MQ_HOME": "/h", "C": "3"}, {"A": "9", "B": "own", "MQ_HOME": "/h", "C": "3"}}, warn},
	} {
		code, out, errs := run(tc.stdin, tc.args...)
		if code != 0 || errs != tc.warn {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q; want warning %q", tc.args, code, out, errs, tc.warn)
		}
		got := next(len(tc.want))
		for i := range got {
			if !maps.Equal(got[i], tc.want[i]) {
				t.Errorf("%v: job %d's env %v, want %v", tc.args, i, got[i], tc.want[i])
			}
		}
	}
	environ = append(environ, "BIG="+strings.Repeat("x", 10<<20))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-V", "--array", "1-2", "t", "true"}, "the limit is 65536: name the variables the job needs"},
		{[]string{"--export=ALL,A", "-f", "-"}, "the limit is 65536: name the variables the job needs"},
		{[]string{"--export=BIG", "t", "true"}, fmt.Sprintf("--export BIG: the job's environment is %d bytes; the limit is 65536", 10<<20+5)},
		{[]string{"-V", "t", "true"}, "the limit is 65536: name the variables the job needs"},
		{[]string{"--export=A,NONE", "t", "true"}, "NONE goes alone"},
		{[]string{"--export=MQ_JOB_ID=3", "t", "true"}, "set by mq itself"},
		{[]string{"--export=MQ_ATTEMPT_ID=3", "t", "true"}, "set by mq itself"},
		{[]string{"-V", "--export=A", "t", "true"}, "-V is --export=ALL; give one of them"},
		{[]string{"--rerun", "-V", "1"}, "-V and --export do not go with --rerun"},
	} {
		code, out, errs := run("", tc.args...)
		if code != ExitUsage || !strings.Contains(errs, tc.want) || strings.Count(errs, "\n") != 1 || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", tc.args, code, out, errs, tc.want)
		}
	}
	var o, e bytes.Buffer
	if code := Run(ctx, Mqsub(tb.env(&o, &e)), []string{"mqsub", "-V", "t", "true"}); code != ExitUsage || !strings.Contains(e.String(), "over SSH give the variables with -v") {
		t.Errorf("-V without the user's environment: exit %d, %q", code, e.String())
	}
	next(0)
}
