//go:build e2e

package sites

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// TestWalltimeStopsJob: on real SGE, whose h_rt ends a batch job with
// SIGKILL, a job with no estimate that outlasts its placeholder's walltime
// is stopped by the agent before that (the site's 60 s walltime less the
// 30 s margin) and reported interrupted for the walltime, with what to do,
// not found lost when its lease runs out; the placeholder exits.
func TestWalltimeStopsJob(t *testing.T) {
	need(t, "sge")
	l := newLogin(t, "127.0.0.1")
	c := startCLS(t)
	c.addSite("wt", "sge", l, "--max", "1", "--walltime", "60", "--idle", "3s")
	c.must("mqsub", "-q", "q", "long", "sleep 600")
	eventually(t, 2*time.Minute, "the job executing", func() bool { return len(c.jobs("E")) == 1 })
	id := c.jobs("E")[0].ID
	var d protocol.JobDetail
	eventually(t, 2*time.Minute, "the job's first attempt stopped", func() bool {
		if err := json.Unmarshal([]byte(c.must("mqstat", "-j", strconv.FormatInt(id, 10), "--json")), &d); err != nil {
			t.Fatal(err)
		}
		return len(d.History) >= 1
	})
	if r := d.History[0].Reason; !strings.HasPrefix(r, "interrupted: its placeholder reached the end of its walltime (30s") || !strings.Contains(r, "mqsub --est") {
		t.Errorf("attempt 1 ended with %q; want it stopped at its placeholder's 30 s walltime", r)
	}
	// What it ran became its estimate, capped so that a fresh placeholder
	// of the site (30 s for jobs) still takes it.
	if d.Est <= 0 || d.Est > 27 {
		t.Errorf("after attempt 1 the job's estimate is %gs; want what it ran, at most 27s", d.Est)
	}
	// Stopped again after that long (a fresh placeholder gives it about
	// 28 s), it needs more than a whole placeholder, and no site has a
	// longer one: it fails at once, not after its third attempt. A busy
	// machine can start it late enough to teach less: then it fails when
	// its attempts run out, which is also an end.
	eventually(t, 4*time.Minute, "the job failed", func() bool { return len(c.jobs("F")) == 1 })
	if err := json.Unmarshal([]byte(c.must("mqstat", "-j", strconv.FormatInt(id, 10), "--json")), &d); err != nil {
		t.Fatal(err)
	}
	t.Logf("failed after %d attempts: %s", d.Attempts, d.Reason)
	if outgrown := strings.Contains(d.Reason, "needs more than a whole placeholder's walltime"); !outgrown && d.Attempts != 3 || outgrown && !strings.Contains(d.Reason, "give a site a longer --walltime") {
		t.Errorf("failed after %d attempts with %q", d.Attempts, d.Reason)
	}
}
