//go:build e2e

package sites

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// Deadline-and-budget economics (seed 002) on real batch
// sites: grid (SGE, mquser) at 36 and slurmy (Slurm, mquser2) at 360 per
// core-hour (0.01 and 0.1 a second), both provisioned by dbc-cost. Each
// case runs in a CLS of its own (a subtest), so its placeholders are
// cancelled before the next starts (SGE has 2 slots):
//   - cost: 4 jobs of 2 s, deadline 3 min, budget 1: the cheap site alone
//     can meet the deadline, so every job runs at grid, none at slurmy;
//     everything ends before the deadline and within the budget;
//   - budget: 10 jobs of 1 s under a budget of 0.1 with a 5 s ceiling
//     (each start reserves 0.05 at grid, 0.5 at slurmy): never more spent
//     than the budget, nothing at slurmy, and jobs left waiting once the
//     budget left cannot pay for another start;
//   - infeasible: a job declared to run 10 min under a deadline of 1 min
//     never starts and is reported in mqstat -j and --summary.
//
// Spending is read from mqstat --summary (per queue and site).
func TestEconomicsSites(t *testing.T) {
	need(t, "sge", "slurm")
	// Earlier tests' placeholders (their sites share these names) drain
	// first: the check at the end is of this test's own.
	drainEarlier(t, 2*time.Minute, 5*time.Minute)
	l := newLogin(t, "127.0.0.1")
	t.Run("cost", func(t *testing.T) {
		c := econSites(t, l)
		c.must("cls", "queue", "set", "econ", "--deadline", "3m", "--budget", "1")
		econBulk(t, c, "econ", "c", 4, 2)
		eventually(t, 3*time.Minute, "4 jobs done", func() bool { return econCounts(t, c, "econ").Counts["D"] == 4 })
		q := econCounts(t, c, "econ")
		sites := map[string]int{}
		for _, j := range c.jobs("") {
			if j.Queue != "econ" {
				continue
			}
			sites[j.Site]++
			fin, err := time.Parse(time.RFC3339Nano, j.Finished)
			if err != nil || float64(fin.UnixNano())/1e9 > q.Deadline {
				t.Errorf("job %d finished %q, after the deadline %v", j.ID, j.Finished, q.Deadline)
			}
		}
		t.Logf("cost: ran at %v, spent %.4f %v of %.4g", sites, q.Spent, q.SpentBySite, q.Budget)
		if sites["grid"] != 4 || sites["slurmy"] != 0 {
			t.Errorf("dbc-cost ran jobs at %v, want all 4 at the cheap site grid", sites)
		}
		if q.Spent <= 0 || q.Spent > q.Budget || q.SpentBySite["grid"] <= 0 || q.SpentBySite["slurmy"] != 0 {
			t.Errorf("spent %.4f %v of budget %.4g", q.Spent, q.SpentBySite, q.Budget)
		}
		if out := c.must("mqstat", "--summary"); !strings.Contains(out, "queue econ spent") || !strings.Contains(out, "grid") {
			t.Errorf("mqstat --summary shows no spending:\n%s", out)
		}
	})
	t.Run("budget", func(t *testing.T) {
		c := econSites(t, l)
		c.must("cls", "queue", "set", "broke", "--deadline", "3m", "--budget", "0.1", "--ceiling", "5s")
		econBulk(t, c, "broke", "b", 10, 1)
		// It stops: nothing runs, some ran, some wait, and spending
		// never passed the budget on the way.
		var q protocol.QueueCounts
		eventually(t, 3*time.Minute, "the budget spent", func() bool {
			q = econCounts(t, c, "broke")
			if q.Spent > q.Budget+1e-9 {
				t.Fatalf("spent %.4f of %.4g", q.Spent, q.Budget)
			}
			return q.Counts["E"] == 0 && q.Counts["D"] > 0 && q.Counts["Q"] > 0 && q.Budget-q.Spent < 0.05
		})
		// Still stopped a few polls later.
		time.Sleep(2 * time.Second)
		q = econCounts(t, c, "broke")
		t.Logf("budget: %v, spent %.4f %v of %.4g", q.Counts, q.Spent, q.SpentBySite, q.Budget)
		if q.Spent > q.Budget+1e-9 || q.Counts["E"] != 0 || q.SpentBySite["slurmy"] != 0 {
			t.Errorf("spent %.4f %v of %.4g, counts %v", q.Spent, q.SpentBySite, q.Budget, q.Counts)
		}
	})
	t.Run("infeasible", func(t *testing.T) {
		c := econSites(t, l)
		// A job declared to run 10 min under a deadline of 1 min: no
		// site can end it in time, so it never starts and is reported.
		c.must("cls", "queue", "set", "late", "--deadline", "1m", "--budget", "1")
		econBulk(t, c, "late", "l", 1, 600)
		var q protocol.QueueCounts
		eventually(t, time.Minute, "the job reported infeasible", func() bool {
			q = econCounts(t, c, "late")
			return q.Infeasible == 1
		})
		id := c.jobs("")[0].ID
		out := c.must("mqstat", "-j", fmt.Sprint(id))
		t.Logf("infeasible: %v; mqstat -j:\n%s", q.Counts, out)
		if !strings.Contains(out, "infeasible:") || !strings.Contains(out, "expected to run 600s") || q.Counts["Q"] != 1 {
			t.Errorf("job %d: counts %v, mqstat -j:\n%s", id, q.Counts, out)
		}
		if sum := c.must("mqstat", "--summary"); !strings.Contains(sum, "1 jobs cannot end by it") {
			t.Errorf("mqstat --summary:\n%s", sum)
		}
	})
	// A placeholder that started after its CLS stopped exits on its own
	// (idle 30 s, then its reconnect deadline): a generous bound.
	eventuallyShowing(t, 5*time.Minute, "no placeholders left in SGE or Slurm", func() bool { return ourBatchJobs(t) == 0 }, batchQueues)
}

// econSites starts a CLS with the two priced sites, both following
// dbc-cost.
func econSites(t *testing.T, l *login) *cls {
	t.Helper()
	c := startCLS(t)
	c.addSite("grid", "sge", l, "--max", "2", "--walltime", "5m", "--idle", "30s", "--price", "36", "--provision", "dbc-cost")
	c.addSite("slurmy", "slurm", l.as(t, secondUser), "--max", "1", "--walltime", "5m", "--idle", "30s", "--price", "360", "--provision", "dbc-cost")
	return c
}

// econBulk submits n jobs of secs seconds (declared) to queue in one
// transaction, after its deadline is set: the plan's clock starts then.
func econBulk(t *testing.T, c *cls, queue, prefix string, n, secs int) {
	t.Helper()
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"queue":%q,"target":"%s%d","command":"sleep %d","est":%d}`+"\n", queue, prefix, i, secs, secs)
	}
	file := filepath.Join(c.work, queue+".jobs")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	c.must("mqsub", "-f", file)
}

// econCounts is queue's row of mqstat --summary --json.
func econCounts(t *testing.T, c *cls, queue string) protocol.QueueCounts {
	t.Helper()
	var qs []protocol.QueueCounts
	if err := json.Unmarshal([]byte(c.must("mqstat", "--summary", "--json")), &qs); err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if q.Queue == queue {
			return q
		}
	}
	t.Fatalf("no queue %s in mqstat --summary", queue)
	return protocol.QueueCounts{}
}
