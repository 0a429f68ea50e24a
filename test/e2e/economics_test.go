//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// TestQueueDeadlineBudget: cls queue set --deadline --budget and cls site
// add --price are stored, shown by cls queue list and cls site list, and
// survive a CLS restart.
func TestQueueDeadlineBudget(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startCLS("--local", "0")
	out := h.ok("cls", "queue", "set", "eq", "--deadline", "2030-01-02T03:04:05Z", "--budget", "5000")
	if !strings.Contains(out, "2030-01-02T03:04:05Z") || !strings.Contains(out, "5000") {
		t.Fatalf("cls queue set:\n%s", out)
	}
	h.ok("cls", "site", "add", "priced", "--type", "local", "--max", "1", "--price", "2.5")
	h.stopCLS(syscall.SIGTERM, time.Minute)
	h.startCLS("--local", "0")
	if list := h.ok("cls", "queue", "list"); !strings.Contains(list, "2030-01-02T03:04:05Z") || !strings.Contains(list, "5000") {
		t.Fatalf("after a restart, cls queue list:\n%s", list)
	}
	if list := h.ok("cls", "site", "list"); !strings.Contains(list, "2.5 per core-hour") {
		t.Fatalf("after a restart, cls site list:\n%s", list)
	}
	if out := h.ok("cls", "queue", "set", "eq", "--deadline", "none", "--budget", "0"); strings.Contains(out, "2030") || strings.Contains(out, "5000") {
		t.Fatalf("clearing:\n%s", out)
	}
}

// queueEcon is a queue's economics in `cls queue list --json`.
type queueEcon struct {
	Name         string             `json:"name"`
	Budget       float64            `json:"budget"`
	Spent        float64            `json:"spent"`
	SpentBySite  map[string]float64 `json:"spent_by_site"`
	Reserved     float64            `json:"reserved"`
	Unfinishable int                `json:"unfinishable"`
}

func (h *harness) queueEcon(name string) queueEcon {
	h.t.Helper()
	var ql struct {
		Queues []queueEcon `json:"queues"`
	}
	if err := json.Unmarshal([]byte(h.ok("cls", "queue", "list", "--json")), &ql); err != nil {
		h.t.Fatal(err)
	}
	for _, q := range ql.Queues {
		if q.Name == name {
			return q
		}
	}
	h.t.Fatalf("no queue %s in cls queue list", name)
	return queueEcon{}
}

// ranAt counts a queue's jobs by the site they ran (or run) at, and
// those not started.
func (h *harness) ranAt(queue string) (map[string]int, int) {
	h.t.Helper()
	sites, waiting := map[string]int{}, 0
	for _, j := range h.jobs("-q", queue) {
		if j.Site == "" {
			waiting++
			continue
		}
		sites[j.Site]++
	}
	return sites, waiting
}

// TestDeadlineBudgetSites runs queues with a deadline and a budget over
// two local sites that follow dbc-cost, one ten times the other's price:
//   - a deadline the cheap site alone meets: every job runs there;
//   - a deadline it cannot meet alone: the dear site gets placeholders and
//     jobs too, and once the deadline is lifted the rest go to the cheap one;
//   - a budget that pays for a few jobs: no job starts that the budget left
//     (less what running ones may cost, price x ceiling) cannot pay for,
//     spending never passes it, and the planner reports the rest.
//
// Numbers (docs/policies/dbc.md, "Live"): cheap 36 and dear 360 per core-hour,
// 4 one-slot placeholders at most each.
func TestDeadlineBudgetSites(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startCLS("--local", "0")
	for _, s := range []struct{ name, price string }{{"cheap", "36"}, {"dear", "360"}} {
		h.ok("cls", "site", "add", s.name, "--type", "local", "--max", "4", "--slots", "1", "--idle", "3s",
			"--price", s.price, "--provision", "dbc-cost")
	}
	if list := h.ok("cls", "site", "list"); !strings.Contains(list, "dbc-cost") || !strings.Contains(list, "360 per core-hour") {
		t.Fatalf("cls site list:\n%s", list)
	}
	// bulk submits n jobs of queue in one transaction, once the queue has
	// its deadline: the plan's clock starts with them.
	bulk := func(queue, prefix string, n int, secs int) {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, `{"queue":%q,"target":"%s%d","command":"sleep %d","est":%d}`+"\n", queue, prefix, i, secs, secs)
		}
		if r := h.runIn(h.dir, strings.NewReader(b.String()), "mqsub", "-f", "-"); r.code != 0 {
			t.Fatalf("mqsub -f: %v", r)
		}
	}
	waitDone := func(queue string, n int, timeout time.Duration) {
		waitFor(t, timeout, func() error {
			if c := h.summary()[queue]; c["D"] != n {
				return fmt.Errorf("queue %s: %v, want %d done", queue, c, n)
			}
			return nil
		})
	}

	// 1. Loose: 8 jobs of 1 s by a deadline of 10 min: cheap alone.
	h.ok("cls", "queue", "set", "loose", "--deadline", "10m", "--budget", "100")
	bulk("loose", "l", 8, 1)
	waitDone("loose", 8, 120*time.Second)
	sites, _ := h.ranAt("loose")
	if sites["dear"] != 0 || sites["cheap"] != 8 {
		t.Errorf("loose deadline: jobs ran at %v, want all 8 at cheap", sites)
	}
	looseQ := h.queueEcon("loose")
	t.Logf("loose: ran at %v, spent %.4f %v", sites, looseQ.Spent, looseQ.SpentBySite)

	// 2. Tight: 24 jobs of 5 s. Cheap alone needs 6 rounds (30 s); by a
	// deadline of 22 s it takes 16 and the dear site must take the rest.
	start := time.Now()
	h.ok("cls", "queue", "set", "tight", "--deadline", "22s", "--budget", "100")
	bulk("tight", "t", 24, 5)
	waitFor(t, 120*time.Second, func() error {
		if sites, _ := h.ranAt("tight"); sites["dear"] == 0 {
			return fmt.Errorf("tight deadline: nothing at dear yet (%v)", sites)
		}
		return nil
	})
	// Past the deadline, lift it: what is left goes to the cheap site.
	waitFor(t, 120*time.Second, func() error {
		if time.Since(start) < 25*time.Second {
			return fmt.Errorf("deadline not passed")
		}
		return nil
	})
	tightSites, left := h.ranAt("tight")
	tq := h.queueEcon("tight")
	t.Logf("tight: by the deadline + 3 s ran at %v, %d not started, %d unfinishable, spent %.4f %v", tightSites, left, tq.Unfinishable, tq.Spent, tq.SpentBySite)
	if left > 0 && tq.Unfinishable == 0 {
		t.Errorf("tight: %d jobs not started after the deadline, none reported unfinishable", left)
	}
	h.ok("cls", "queue", "set", "tight", "--deadline", "none")
	waitDone("tight", 24, 180*time.Second)
	after, _ := h.ranAt("tight")
	if after["dear"] != tightSites["dear"] {
		t.Errorf("tight: with the deadline lifted the dear site ran more (%v, was %v)", after, tightSites)
	}
	tq = h.queueEcon("tight")
	if tq.Spent > 100 || tq.SpentBySite["dear"] <= 0 || tq.SpentBySite["cheap"] <= 0 {
		t.Errorf("tight: spent %+v", tq)
	}
	t.Logf("tight: all done, ran at %v, spent %.4f %v", after, tq.Spent, tq.SpentBySite)

	// 3. Broke: a budget of 0.1 with each job bounded by a 5 s ceiling
	// (reserving 0.05 at cheap, 0.5 at dear): at most two at once at
	// cheap, none at dear, and about five in all.
	h.ok("cls", "queue", "set", "broke", "--budget", "0.1", "--ceiling", "5s")
	bulk("broke", "b", 10, 1)
	waitFor(t, 120*time.Second, func() error {
		q := h.queueEcon("broke")
		c := h.summary()["broke"]
		if c["E"] > 0 || c["D"] == 0 || q.Unfinishable == 0 {
			return fmt.Errorf("broke: %v, %+v", c, q)
		}
		return nil
	})
	// Nothing more starts: the budget left cannot pay for another job.
	bq := h.queueEcon("broke")
	c := h.summary()["broke"]
	bsites, waiting := h.ranAt("broke")
	t.Logf("broke: ran at %v, %d not started (%d reported unfinishable), spent %.4f of %.4f", bsites, waiting, bq.Unfinishable, bq.Spent, bq.Budget)
	if bq.Spent > bq.Budget || bq.Spent <= 0 || c["Q"] == 0 || bsites["dear"] != 0 {
		t.Errorf("broke: spent %.4f of %.4f, counts %v, ran at %v", bq.Spent, bq.Budget, c, bsites)
	}
	if 0.1-bq.Spent >= 0.05+1e-9 {
		t.Errorf("broke: %.4f left would pay for another job's bound of 0.05 and none started", 0.1-bq.Spent)
	}
	out := h.ok("mqstat", "--acct", "-q", "broke")
	if !strings.Contains(out, "COST") {
		t.Errorf("mqstat --acct:\n%s", out)
	}

	// cls site set changes a site in place, and the change is stored.
	if out := h.ok("cls", "site", "set", "dear", "--price", "720", "--max", "2"); !strings.Contains(out, "720 per core-hour") || !strings.Contains(out, "0-2") {
		t.Errorf("cls site set:\n%s", out)
	}
	oneLineErr(t, "cls", h.run("cls", "site", "set", "dear", "--provision", "fcfs"))
	oneLineErr(t, "cls", h.run("cls", "site", "set", "nosuch", "--price", "1"))
	h.stopCLS(syscall.SIGTERM, time.Minute)
	h.startCLS("--local", "0")
	if list := h.ok("cls", "site", "list"); !strings.Contains(list, "720 per core-hour") {
		t.Errorf("after a restart, cls site list:\n%s", list)
	}
	if q := h.queueEcon("broke"); math.Abs(q.Spent-bq.Spent) > 1e-9 {
		t.Errorf("after a restart broke spent %v, was %v", q.Spent, bq.Spent)
	}
}

// TestLPSites: two local sites that follow lp (seed 001's LPSched as a
// provisioner). A queue with a deadline is planned as a one-stage
// pipeline: 4 jobs of 1 s (declared), equal at both sites, need 4 slots,
// which the LP gives the first site, a; b is given none, holds no
// placeholder and runs none of the queue's jobs (its cap is 0).
func TestLPSites(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startCLS("--local", "0")
	for _, name := range []string{"a", "b"} {
		h.ok("cls", "site", "add", name, "--type", "local", "--max", "4", "--slots", "1", "--idle", "3s", "--provision", "lp")
	}
	if list := h.ok("cls", "site", "list"); !strings.Contains(list, "lp") {
		t.Fatalf("cls site list:\n%s", list)
	}
	h.ok("cls", "queue", "set", "stage", "--deadline", "10m")
	var b strings.Builder
	for i := range 4 {
		fmt.Fprintf(&b, `{"queue":"stage","target":"s%d","command":"sleep 1","est":1}`+"\n", i)
	}
	if r := h.runIn(h.dir, strings.NewReader(b.String()), "mqsub", "-f", "-"); r.code != 0 {
		t.Fatalf("mqsub -f: %v", r)
	}
	waitFor(t, 120*time.Second, func() error {
		if c := h.summary()["stage"]; c["D"] != 4 {
			return fmt.Errorf("queue stage: %v, want 4 done", c)
		}
		return nil
	})
	if sites, _ := h.ranAt("stage"); sites["a"] != 4 || sites["b"] != 0 {
		t.Errorf("jobs ran at %v, want all 4 at a as the LP planned", sites)
	}

	// A queue with neither deadline nor budget is a stage too, planned for
	// jobs still waiting on their prerequisites, and cls plan show says
	// what the LP decided.
	b.Reset()
	for i := range 2 {
		fmt.Fprintf(&b, `{"queue":"late","target":"l%d","command":"true","est":1,"prereqs":["gate"]}`+"\n", i)
	}
	if r := h.runIn(h.dir, strings.NewReader(b.String()), "mqsub", "-f", "-"); r.code != 0 {
		t.Fatalf("mqsub -f: %v", r)
	}
	waitFor(t, 60*time.Second, func() error {
		var r protocol.PlanShowReply
		if err := json.Unmarshal([]byte(h.ok("cls", "plan", "show", "--json")), &r); err != nil {
			return err
		}
		for _, p := range r.Provision {
			for _, q := range p.Queues {
				if p.Policy == "lp" && q.Queue == "late" && q.Waiting == 2 && q.Slots["a"]+q.Slots["b"] > 0 {
					return nil
				}
			}
		}
		return fmt.Errorf("no lp plan for late's 2 waiting jobs: %+v", r.Provision)
	})
	out := h.ok("cls", "plan", "show")
	t.Logf("cls plan show:\n%s", out)
	if !strings.Contains(out, "provisioning by lp") || !strings.Contains(out, "late") {
		t.Errorf("cls plan show:\n%s", out)
	}
	h.ok("mqsub", "gate", "true")
	waitFor(t, 120*time.Second, func() error {
		if c := h.summary()["late"]; c["D"] != 2 {
			return fmt.Errorf("queue late: %v, want 2 done", c)
		}
		return nil
	})
}
