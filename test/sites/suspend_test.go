//go:build e2e

package sites

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A Slurm placeholder suspended while its job runs (scontrol suspend, as an
// admin or preemption by suspension does): the job's lease runs out, and
// another site provides for it at once instead of waiting for the resume.
// The suspended placeholder is not cancelled: it keeps its place.
func TestSuspendedPlaceholderWorkMoves(t *testing.T) {
	need(t, "slurm", "sge")
	l := newLogin(t, "127.0.0.1")
	c := startCLS(t)
	c.addSite("susp", "slurm", l, "--max", "1", "--walltime", "10m", "--idle", "3s")
	mark, gate := filepath.Join(c.work, "runs"), filepath.Join(c.work, "gate")
	c.must("mqsub", "-q", "q", "victim", fmt.Sprintf("echo run >> %s; while [ ! -e %s ]; do sleep 0.2; done; echo finished", mark, gate))
	eventually(t, time.Minute, "the job executing", func() bool { return len(c.jobs("E")) == 1 })
	ids := batchIDs(t, "slurm", "mq-susp-")
	if len(ids) != 1 {
		t.Fatalf("placeholders in the batch queue: %q", ids)
	}
	c.addSite("other", "sge", l, "--max", "1", "--walltime", "10m", "--idle", "3s")
	if out, err := runAs("root", "scontrol suspend "+ids[0]); err != nil {
		t.Fatalf("scontrol suspend: %v %s", err, out)
	}
	t.Cleanup(func() { runAs("root", "scontrol resume "+ids[0]) })
	eventually(t, 3*time.Minute, "the job's second attempt executing at the other site", func() bool {
		js := c.jobs("E")
		return len(js) == 1 && js[0].Attempts == 2
	})
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the job done", func() bool { return len(c.jobs("D")) == 1 })
	if got := batchIDs(t, "slurm", "mq-susp-"); len(got) != 1 || got[0] != ids[0] {
		t.Errorf("the suspended placeholder: %q in Slurm, want %s kept", got, ids[0])
	}
	if !strings.Contains(c.log(), "placeholder suspended by the batch system") {
		t.Errorf("the suspension was not logged:\n%s", tail(c.log(), 30))
	}
}
