package cli

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// {} in --array's -p, --after-any and TARGET is each member's index, as
// in its command: a member waits for its own prerequisite (Slurm's
// aftercorr), and members with a target each are jobs of one submit but
// no array (an array is of one target, and %LIMIT caps one).
func TestMqsubArrayPerIndex(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	job := func(id int64) protocol.JobDetail { return tb.job(t, id) }
	tb.submitted(t, "--array", "1-3", "align{}", "bwa mem ref.fa r{}.fq") // 1-3: a target each
	for i, want := range []string{"align1", "align2", "align3"} {
		if d := job(int64(i + 1)); d.Target != want || d.Command != "bwa mem ref.fa r"+want[5:]+".fq" {
			t.Errorf("job %d: target %s, command %q; want target %s", i+1, d.Target, d.Command, want)
		}
	}
	tb.submitted(t, "--array", "1-3%2", "-p", "align{},index", "--after-any", "qc{}", "call", "gatk {}") // 4-6: one array of target call
	for i := range 3 {
		n := strconv.Itoa(i + 1)
		if d := job(int64(i + 4)); d.Target != "call" || !slices.Equal(d.Prereqs, []string{"align" + n, "index"}) || !slices.Equal(d.AfterAny, []string{"qc" + n}) {
			t.Errorf("job %d: target %s, prereqs %v, after-any %v; want call, [align%s index], [qc%s]", i+4, d.Target, d.Prereqs, d.AfterAny, n, n)
		}
	}
	r, err := tb.store.Inspect().Job(ctx, 5)
	if err != nil || r.State != "W" {
		t.Errorf("job 5 waiting on align2: %s, %v", r.State, err)
	}
	var o, e strings.Builder
	code := Run(ctx, Mqstat(tb.env(&o, &e)), []string{"mqstat", "--array", "4"})
	if code != 0 || strings.Count(o.String(), "\n") != 4 {
		t.Errorf("mqstat --array 4: exit %d, stdout %q, stderr %q; want the 3 members of the call array", code, o.String(), e.String())
	}
	o.Reset()
	if code := Run(ctx, Mqstat(tb.env(&o, &e)), []string{"mqstat", "--array", "2"}); code == 0 {
		t.Errorf("mqstat --array 2: exit 0, stdout %q; want jobs 1-3 to be no array", o.String())
	}
	_, stderr, code := tb.mqsub("", "--array", "1-3%2", "align{}", "true")
	if code != ExitUsage || !strings.Contains(stderr, "%LIMIT caps an array of one target, and align{} gives each member its own") {
		t.Errorf("--array 1-3%%2 align{}: exit %d, %q", code, stderr)
	}
}

// TestMqsubArrayLongIndex: a name {} makes too long in the later members
// (a 254-byte target with {} at 100) is a usage error naming the member,
// before anything reaches the CLS, not the CLS's "line N" of a job file.
func TestMqsubArrayLongIndex(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	long := strings.Repeat("a", 254) + "{}"
	for _, args := range [][]string{
		{"--array", "99-100", long, "true"},
		{"--array", "99-100", "-p", long, "t", "true"},
		{"--array", "99-100", "--after-any", "x," + long, "t", "true"},
	} {
		_, stderr, code := tb.mqsub("", args...)
		if code != ExitUsage || !strings.HasPrefix(stderr, "mqsub: --array: member 100: ") || !strings.Contains(stderr, "name is 257 bytes; the limit is 256") || strings.Count(stderr, "\n") != 1 {
			t.Errorf("mqsub %s: exit %d, stderr %q; want exit 2 naming member 100", args[2], code, stderr)
		}
	}
	if n := tb.jobs(); n != 0 {
		t.Errorf("%d jobs added, want none", n)
	}
}

// TestMqsubBracesWithoutArray: {} in -p (or TARGET, -o) without --array
// stays as written, and mqsub warns that it is an array member's index;
// in the command alone ({} of find -exec) it says nothing.
func TestMqsubBracesWithoutArray(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	const want = "mqsub: warning: {} in TARGET, -p, --after-any, -o, -e, --in or --out is an --array member's index; without --array it stays as written\n"
	for _, c := range []struct {
		args []string
		warn bool
	}{
		{[]string{"-H", "-p", "align{}", "call", "true"}, true},
		{[]string{"-H", "-o", "r{}.log", "t", "true"}, true},
		{[]string{"-H", "--in", "r{}.fq", "t", "true"}, true},
		{[]string{"-H", "--out", "r{}.sam", "t", "true"}, true},
		{[]string{"-H", "t", "find . -exec echo {} ;"}, false},
	} {
		_, stderr, code := tb.mqsub("", c.args...)
		if code != 0 || strings.Contains(stderr, want) != c.warn || c.warn && !strings.HasPrefix(stderr, want) {
			t.Errorf("mqsub %q: exit %d, stderr %q; want exit 0, the {} warning %v", c.args, code, stderr, c.warn)
		}
	}
	if d := tb.job(t, 1); !slices.Equal(d.Prereqs, []string{"align{}"}) {
		t.Errorf("job 1's prerequisites %v, want [align{}] as written", d.Prereqs)
	}
}

// TestMqsubArrayFiles: {} in --in and --out is each member's own file,
// sized by the CLS as its own (r1.fq 1 byte, r2.fq 2).
func TestMqsubArrayFiles(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	dir := t.TempDir()
	for i, body := range []string{"a", "bb"} {
		if err := os.WriteFile(filepath.Join(dir, "r"+strconv.Itoa(i+1)+".fq"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	first := tb.submitted(t, "--array", "1-2", "-d", dir, "--in", "r{}.fq", "--out", "r{}.sam", "align", "bwa r{}.fq")
	for i := range int64(2) {
		d := tb.job(t, first+i)
		n := strconv.FormatInt(i+1, 10)
		if len(d.Inputs) != 1 || filepath.Base(d.Inputs[0].Path) != "r"+n+".fq" || d.Inputs[0].Size == nil || *d.Inputs[0].Size != i+1 ||
			len(d.Outputs) != 1 || filepath.Base(d.Outputs[0].Path) != "r"+n+".sam" {
			t.Errorf("member %s: inputs %+v, outputs %+v; want r%s.fq of %d bytes and r%s.sam", n, d.Inputs, d.Outputs, n, i+1, n)
		}
	}
}
