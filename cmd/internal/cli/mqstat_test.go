package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// Output lost to a full disk is not silent: mqstat -j says so, and
// mqstat --output prints what was kept, then says so on stderr and exits 1.
func TestMqstatOutputLost(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	ids, err := tb.store.Submit(ctx, []protocol.JobSpec{{Target: "t", Command: "yes", Cwd: "/tmp"}})
	if err != nil {
		t.Fatal(err)
	}
	outDir := t.TempDir()
	reg, err := tb.store.RegisterAs(ctx, protocol.Register{Site: "s", Host: "h", Slots: 1, OutDir: outDir}, "socket")
	if err != nil {
		t.Fatal(err)
	}
	nr, err := tb.store.Next(ctx, protocol.Next{Placeholder: reg.ID, Free: 1})
	if err != nil || len(nr.Jobs) != 1 {
		t.Fatalf("next: %+v, %v", nr, err)
	}
	stdout, _ := job.OutputPaths(outDir, ids[0], 1)
	os.MkdirAll(filepath.Dir(stdout), 0o700)
	if err := os.WriteFile(stdout, []byte("partial\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const why = "stdout: write /o/0/1.1.out: no space left on device"
	now := time.Now()
	if err := tb.store.Report(ctx, reg.ID, []protocol.Report{{ID: ids[0], Attempt: 1, Started: now, Finished: now, OutputLost: why}}); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, string, int) {
		var o, e bytes.Buffer
		code := Run(ctx, Mqstat(tb.env(&o, &e)), append([]string{"mqstat"}, args...))
		return o.String(), e.String(), code
	}
	if o, e, code := run("-j", "1"); code != 0 || !strings.Contains(o, "output lost: "+why) {
		t.Errorf("mqstat -j 1: exit %d, stdout %q, stderr %q; want a line \"output lost: %s\"", code, o, e, why)
	}
	if o, e, code := run("--output", "1"); code != ExitFailed || o != "partial\n" || !strings.Contains(e, "job 1's stdout was lost: "+why) {
		t.Errorf("mqstat --output 1: exit %d, stdout %q, stderr %q; want the partial output, then the loss on stderr, exit 1", code, o, e)
	}
	if o, e, code := run("--output", "1", "--stderr"); code != 0 || o != "" || e != "" {
		t.Errorf("mqstat --output 1 --stderr: exit %d, stdout %q, stderr %q; want nothing (only stdout was lost)", code, o, e)
	}
}
