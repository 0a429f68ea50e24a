package cli

import (
	"context"
	"strings"
	"testing"
)

// TestMqstatArrayDeletedMembers: mqstat --array lists every member of the
// array, deleted ones too, as a range of ids lists its jobs whatever
// their state (mqstat -j on a member says --array lists them); -s still
// narrows it, and a narrowing that matches none says so on stderr.
func TestMqstatArrayDeletedMembers(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	tb.submitted(t, "--array", "1-3", "sim", "true") // jobs 1-3
	var o, e strings.Builder
	if code := Run(ctx, Mqdel(tb.env(&o, &e)), []string{"mqdel", "2"}); code != 0 {
		t.Fatalf("mqdel 2: exit %d, %s", code, e.String())
	}
	o.Reset()
	e.Reset()
	code := Run(ctx, Mqstat(tb.env(&o, &e)), []string{"mqstat", "--array", "1"})
	if lines := strings.Split(strings.TrimSpace(o.String()), "\n"); code != 0 || len(lines) != 4 || !strings.HasPrefix(lines[2], "2 ") {
		t.Errorf("mqstat --array 1 with job 2 deleted: exit %d, stdout %q, stderr %q; want all 3 members", code, o.String(), e.String())
	}
	if code := Run(ctx, Mqdel(tb.env(&o, &e)), []string{"mqdel", "-Q", "1-3"}); code != 0 {
		t.Fatalf("mqdel 1-3: exit %d, %s", code, e.String())
	}
	o.Reset()
	e.Reset()
	code = Run(ctx, Mqstat(tb.env(&o, &e)), []string{"mqstat", "--array", "3"})
	if code != 0 || strings.Count(o.String(), "\n") != 4 {
		t.Errorf("mqstat --array 3, every member deleted: exit %d, stdout %q, stderr %q; want all 3 members", code, o.String(), e.String())
	}
	o.Reset()
	e.Reset()
	code = Run(ctx, Mqstat(tb.env(&o, &e)), []string{"mqstat", "--array", "3", "-s", "Q"})
	if code != 0 || strings.Count(o.String(), "\n") != 1 || e.String() != "mqstat: no job matches --array 3 -s Q\n" {
		t.Errorf("mqstat --array 3 -s Q: exit %d, stdout %q, stderr %q; want the header and no job matches", code, o.String(), e.String())
	}
}
