//go:build e2e

package sites

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A placeholder suspended while its job runs (scontrol suspend or PBS's
// qsig -s suspend, as an admin or preemption by suspension does): the
// job's lease runs out, and another site provides for it at once instead
// of waiting for the resume. The suspended placeholder is not cancelled:
// it keeps its place.
func TestSuspendedPlaceholderWorkMoves(t *testing.T) {
	for _, tc := range []struct{ typ, suspend, resume string }{
		{"slurm", "scontrol suspend %s", "scontrol resume %s"},
		{"pbs", "qsig -s suspend %s", "qsig -s resume %s"},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			need(t, tc.typ, "sge")
			l := loginFor(t, tc.typ)
			// Both logins before the CLS: cleanups run last first, so the
			// CLS's stop still reaches them to cancel its placeholders.
			sge := newLogin(t, "127.0.0.1")
			var c *cls
			if tc.typ == "pbs" {
				c = startCLSWith(t, nil, reachableFromPBS())
			} else {
				c = startCLS(t)
			}
			c.addSite("susp", tc.typ, l, "--max", "1", "--walltime", "10m", "--idle", "3s")
			mark, gate := filepath.Join(c.work, "runs"), filepath.Join(c.work, "gate")
			c.must("mqsub", "-q", "q", "victim", fmt.Sprintf("echo run >> %s; while [ ! -e %s ]; do sleep 0.2; done; echo finished", mark, gate))
			eventually(t, time.Minute, "the job executing", func() bool { return len(c.jobs("E")) == 1 })
			ids := batchIDs(t, tc.typ, "mq-susp-")
			if len(ids) != 1 {
				t.Fatalf("placeholders in the batch queue: %q", ids)
			}
			c.addSite("other", "sge", sge, "--max", "1", "--walltime", "10m", "--idle", "3s")
			if out, err := asBatchAdmin(tc.typ, fmt.Sprintf(tc.suspend, ids[0])); err != nil {
				t.Fatalf("%s: %v %s", tc.suspend, err, out)
			}
			t.Cleanup(func() { asBatchAdmin(tc.typ, fmt.Sprintf(tc.resume, ids[0])) })
			eventually(t, 3*time.Minute, "the job's second attempt executing at the other site", func() bool {
				js := c.jobs("E")
				return len(js) == 1 && js[0].Attempts == 2
			})
			if err := os.WriteFile(gate, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			eventually(t, time.Minute, "the job done", func() bool { return len(c.jobs("D")) == 1 })
			if got := batchIDs(t, tc.typ, "mq-susp-"); len(got) != 1 || got[0] != ids[0] {
				t.Errorf("the suspended placeholder: %q in the batch queue, want %s kept", got, ids[0])
			}
			if !strings.Contains(c.log(), "placeholder suspended by the batch system") {
				t.Errorf("the suspension was not logged:\n%s", tail(c.log(), 30))
			}
		})
	}
}

// asBatchAdmin runs a batch system's administrative command (root's):
// inside the PBS server's namespace for PBS.
func asBatchAdmin(typ, cmd string) ([]byte, error) {
	if typ == "pbs" {
		return exec.Command("ip", "netns", "exec", pbsNS, "sh", "-c", "PATH=/opt/pbs/bin:$PATH; "+cmd).CombinedOutput()
	}
	return runAs("root", cmd)
}
