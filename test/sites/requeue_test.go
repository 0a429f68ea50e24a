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

// A Slurm placeholder requeued while its job runs (scontrol requeue: what
// Slurm does to a batch job whose node failed, or that was preempted): the
// job is requeued and finishes, once; the site counts the placeholder as
// queued while Slurm holds it back, not as running; nothing is left over.
func TestSlurmRequeuedPlaceholder(t *testing.T) {
	need(t, "slurm")
	l := newLogin(t, "127.0.0.1")
	c := startCLS(t)
	c.addSite("rq", "slurm", l, "--max", "1", "--walltime", "10m", "--idle", "3s")
	mark, gate := filepath.Join(c.work, "runs"), filepath.Join(c.work, "gate")
	c.must("mqsub", "-q", "q", "victim", fmt.Sprintf("echo run >> %s; while [ ! -e %s ]; do sleep 0.2; done; echo finished", mark, gate))
	eventually(t, time.Minute, "the job executing", func() bool { return len(c.jobs("E")) == 1 })
	ids := batchIDs(t, "slurm", "mq-rq-")
	if len(ids) != 1 {
		t.Fatalf("placeholders in the batch queue: %q", ids)
	}
	if out, err := runAs("root", "scontrol requeue "+ids[0]); err != nil {
		t.Fatalf("scontrol requeue: %v %s", err, out)
	}
	sawQueued, released := false, false
	eventually(t, 3*time.Minute, "the job's second attempt executing", func() bool {
		if s := c.sites()["rq"]; s.Queued == 1 && s.Running == 0 {
			sawQueued = true
		}
		if sawQueued && !released {
			// Seen: Slurm need not hold it the rest of its BeginTime
			// (two minutes) for this test.
			released = true
			if out, err := runAs("root", "scontrol update JobId="+ids[0]+" StartTime=now"); err != nil {
				t.Logf("scontrol update StartTime=now: %v %s", err, out)
			}
		}
		js := c.jobs("E")
		return len(js) == 1 && js[0].Attempts == 2
	})
	if !sawQueued {
		t.Errorf("the site never counted its requeued placeholder as queued (Slurm held it back for its BeginTime)")
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the job done", func() bool { return len(c.jobs("D")) == 1 })
	if runs, _ := os.ReadFile(mark); strings.Count(string(runs), "run") != 2 {
		t.Errorf("the job ran %d times, want 2", strings.Count(string(runs), "run"))
	}
}
