package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// A -p target that is not UTF-8 is refused in one line, as --after-any's
// and the target's are, by each of -p's names: it was turned into
// U+FFFD on its way to the aliases, and the job waited for a target no
// one meant.
func TestMqsubPrereqNotUTF8(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	for _, args := range [][]string{
		{"mqsub", "-p", "\xff", "x", "true"},
		{"mqsub", "--prereq", "a\xffb", "x", "true"},
		{"mqsub", "--after", "ok,\xfe", "x", "true"},
		{"mqsub", "-p", "ok", "-p", "\xff", "x", "true"},
		{"mqsub", "--array", "1-2", "-p", "\xff{}", "x", "true"},
	} {
		var o, e bytes.Buffer
		code := Run(context.Background(), Mqsub(tb.env(&o, &e)), args)
		if code != ExitUsage || !strings.Contains(e.String(), "is not valid UTF-8") || strings.Count(strings.TrimSpace(e.String()), "\n") != 0 || o.Len() != 0 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit %d and one line saying it is not UTF-8", args, code, o.String(), e.String(), ExitUsage)
		}
	}
	if n := tb.jobs(); n != 0 {
		t.Errorf("refusals added %d jobs", n)
	}
	// Valid names still go through, by each of the names.
	for i, args := range [][]string{
		{"mqsub", "-p", "a", "-p", "b,c", "x", "true"},
		{"mqsub", "--prereq", "a", "--prereq", "b,c", "x", "true"},
		{"mqsub", "--after", "a,b", "--after", "c", "x", "true"},
	} {
		var o, e bytes.Buffer
		if code := Run(context.Background(), Mqsub(tb.env(&o, &e)), args); code != 0 {
			t.Fatalf("%q: exit %d, %q", args, code, e.String())
		}
		if d := tb.job(t, int64(i+1)); strings.Join(d.Prereqs, " ") != "a b c" {
			t.Errorf("%q: prerequisites %q, want a b c", args, d.Prereqs)
		}
	}
}
