//go:build e2e

package sites

import (
	"strings"
	"testing"
	"time"
)

// SGE puts a placeholder whose working directory does not exist on the
// node into its error state (Eqw): the site cancels it and is degraded
// saying so, with SGE's reason (and what to check), and cls site set
// --submit-args mends it.
func TestSGEErrorStateMended(t *testing.T) {
	need(t, "sge")
	l := newLogin(t, "127.0.0.1")
	c := startCLS(t)
	c.addSite("eqw", "sge", l, "--max", "1", "--walltime", "10m", "--idle", "3s", "--submit-args", "-wd /nonexistent/mq-eqw")
	c.must("mqsub", "-q", "q", "j", "echo mended")
	eventually(t, 2*time.Minute, "degraded by the error state", func() bool {
		s := c.sites()["eqw"]
		return s.State == "degraded" && strings.Contains(s.Error, "error state") &&
			strings.Contains(s.Error, "can't chdir to /nonexistent/mq-eqw: No such file or directory: check the site's --submit-args")
	})
	c.must("cls", "site", "set", "eqw", "--submit-args", "")
	eventually(t, 2*time.Minute, "the job done at the mended site", func() bool { return len(c.jobs("D")) == 1 })
	eventually(t, 30*time.Second, "the site ok", func() bool { return c.sites()["eqw"].State == "ok" })
	if ids := batchIDs(t, "sge", "mq-eqw-"); len(ids) > 1 {
		t.Errorf("placeholders left: %q", ids)
	}
}
