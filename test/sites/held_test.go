//go:build e2e

package sites

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// A placeholder held in its batch queue (here by --submit-args, as an
// admin's qhold or scontrol hold would): cls site list says why it waits,
// in the batch system's words. Released (SGE, PBS), or the site mended with cls
// site set --submit-args "" (Slurm: the held placeholder is cancelled and
// a new one submitted), the job runs.
func TestHeldPlaceholderSaysWhy(t *testing.T) {
	for _, tc := range []struct{ typ, hold, why, release string }{
		{"slurm", "-H", "JobHeld", ""},
		{"sge", "-h", "held", "qrls %s"},
		{"pbs", "-h", "held", "qrls %s"},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			need(t, tc.typ)
			l := loginFor(t, tc.typ)
			var c *cls
			if tc.typ == "pbs" {
				c = startCLSWith(t, nil, reachableFromPBS())
			} else {
				c = startCLS(t)
			}
			c.addSite("held", tc.typ, l, "--max", "1", "--walltime", "10m", "--idle", "3s", "--submit-args", tc.hold)
			c.must("mqsub", "-q", "q", "j", "echo released")
			eventually(t, time.Minute, "the site saying its placeholder is held", func() bool {
				return strings.Contains(c.sites()["held"].OldestWhy, tc.why)
			})
			if out := c.must("cls", "site", "list"); !strings.Contains(out, tc.why) {
				t.Errorf("cls site list does not say why:\n%s", out)
			}
			ids := batchIDs(t, tc.typ, "mq-held-")
			if len(ids) != 1 {
				t.Fatalf("placeholders: %q", ids)
			}
			if tc.release != "" {
				asUserOf(t, tc.typ, strings.Replace(tc.release, "%s", ids[0], 1))
			} else if out := c.must("cls", "site", "set", "held", "--submit-args", ""); !strings.Contains(out, "(data .mq-data/") || strings.Contains(out, "CLSID") {
				// The site's line names the data root it has, this
				// CLS's id and all, as cls site list does.
				t.Errorf("cls site set prints:\n%s", out)
			}
			eventually(t, 2*time.Minute, "the job done once released", func() bool { return len(c.jobs("D")) == 1 })
			if tc.release == "" && slices.Contains(batchIDs(t, tc.typ, "mq-held-"), ids[0]) {
				t.Errorf("the held placeholder %s was left queued after cls site set", ids[0])
			}
		})
	}
}
