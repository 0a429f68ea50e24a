//go:build e2e

package sites

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A batch system that refuses the site's submissions (a queue or
// partition that does not exist): the site is degraded with the batch
// command's own words, logged once, the CLS keeps answering, and cls
// site set --queue mends it in place: the job then runs there. A value
// wrong in itself is a usage error (exit 2) to cls site set as to add.
func TestRefusedSubmissionMendedBySet(t *testing.T) {
	for _, tc := range []struct{ typ, bad, good, cmd, says string }{
		{"slurm", "nosuch", "debug", "sbatch", "invalid partition"},
		{"sge", "nosuch.q", "all.q", "qsub", "unknown queue"},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			need(t, tc.typ)
			l := newLogin(t, "127.0.0.1")
			c := startCLS(t)
			c.addSite("refused", tc.typ, l, "--max", "1", "--walltime", "10m", "--idle", "3s", "--queue", tc.bad)
			c.must("mqsub", "-q", "q", "j", "echo mended")
			eventuallyShowing(t, 2*time.Minute, "degraded with the batch system's words", func() bool {
				s := c.sites()["refused"]
				return s.State == "degraded" && strings.Contains(s.Error, tc.says)
			}, func(*testing.T) string { return c.must("cls", "site", "list") + tail(c.log(), 20) })
			s := c.sites()["refused"]
			t.Logf("degraded: %s", s.Error)
			if !strings.HasPrefix(s.Error, "submit: "+tc.cmd+": exit status") {
				t.Errorf("the error does not name %s: %s", tc.cmd, s.Error)
			}
			if js := c.jobs("Q"); len(js) != 1 {
				t.Errorf("mqstat while the site is refused: %d queued jobs, want 1", len(js))
			}
			if _, err := c.run("cls", "site", "set", "refused", "--max", "-1"); err == nil || !strings.Contains(err.Error(), "exit status 2") {
				t.Errorf("cls site set --max -1: %v, want exit 2", err)
			}
			c.must("cls", "site", "set", "refused", "--queue", tc.good)
			eventually(t, 2*time.Minute, "the job done at the mended site", func() bool { return len(c.jobs("D")) == 1 })
			eventually(t, 30*time.Second, "the site ok", func() bool { return c.sites()["refused"].State == "ok" })
			log := c.log()
			if n := strings.Count(log, `msg="site degraded"`); n != 1 {
				t.Errorf("the refusal was logged %d times, want once:\n%s", n, tail(log, 30))
			}
			if !strings.Contains(log, `msg="site recovered"`) {
				t.Errorf("the recovery was not logged:\n%s", tail(log, 30))
			}
		})
	}
}

// log is what the CLS has logged so far.
func (c *cls) log() string {
	b, _ := os.ReadFile(filepath.Join(c.home, "cls.log"))
	return string(b)
}
