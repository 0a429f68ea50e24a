package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestMqsubStdinRefused: mqsub T CMD with data on stdin is a usage error
// naming the fix, and adds nothing; mqsub -f - still reads its jobs there.
func TestMqsubStdinRefused(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	var o, e bytes.Buffer
	env := tb.env(&o, &e)
	env.Stdin = strings.NewReader("data\n")
	if code := Run(ctx, Mqsub(env), []string{"mqsub", "t", "cat"}); code != ExitUsage || !strings.Contains(e.String(), "mq does not give a job mqsub's stdin") || strings.Count(e.String(), "\n") != 1 || o.Len() != 0 {
		t.Errorf("echo data | mqsub t cat: exit %d, stdout %q, stderr %q", code, o.String(), e.String())
	}
	o.Reset()
	e.Reset()
	env = tb.env(&o, &e)
	env.Stdin = strings.NewReader(`{"target":"t","command":"cat"}` + "\n")
	if code := Run(ctx, Mqsub(env), []string{"mqsub", "-f", "-"}); code != 0 || strings.TrimSpace(o.String()) != "1" {
		t.Errorf("mqsub -f -: exit %d, stdout %q, stderr %q; want job 1 (the refused one added nothing)", code, o.String(), e.String())
	}
}
