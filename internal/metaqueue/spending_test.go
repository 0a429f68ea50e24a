package metaqueue

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// TestTargetSpendingAsBefore: what a target's jobs spent (mqstat
// --summary -t, with -q and without) is, to the bit, what the query that
// read every job of the target gave, whichever way it is read now: from
// the charges, for targets of more jobs than there are charges, or from
// the target's jobs. Targets of 1 to 400 jobs in two queues, charges of
// random costs at three sites on some of their attempts.
func TestTargetSpendingAsBefore(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(3, 4))
	var ids []int64
	for ti, n := range []int{1, 3, 40, 400, 7, 250} {
		specs := make([]protocol.JobSpec, n)
		for i := range specs {
			specs[i] = protocol.JobSpec{Target: fmt.Sprintf("t%d", ti), Command: "x"}
			if r.IntN(3) == 0 {
				specs[i].Queue = "other"
			}
		}
		ids = append(ids, e.submit(specs...)...)
	}
	// Charges as the ledger writes them (each names its job's queue), on
	// about 120 attempts: fewer than the big targets' jobs, more than the
	// small ones'; in no order, as attempts end.
	r.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	for _, id := range ids {
		if r.IntN(10) != 0 {
			continue
		}
		for _, a := range r.Perm(1 + r.IntN(3)) {
			_, err := e.s.w.ExecContext(ctx, "INSERT INTO charges (job_id, attempt, queue_id, site, seconds, price, cost) SELECT id, ?, queue_id, ?, 1, 1, ? FROM jobs WHERE id = ?",
				a+1, fmt.Sprint("site", r.IntN(3)), r.Float64()*1000/3, id)
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	// The queries as they were, reading every job of the target.
	const byTarget = `SELECT c.site, sum(c.cost) FROM charges c JOIN jobs j ON j.id = c.job_id
WHERE j.target_id = (SELECT id FROM targets WHERE name = ?) AND EXISTS (SELECT 1 FROM charges) GROUP BY c.site`
	const byTargetQueue = `SELECT c.site, sum(c.cost) FROM charges c JOIN jobs j ON j.id = c.job_id
WHERE j.target_id = (SELECT id FROM targets WHERE name = ?) AND j.queue_id = (SELECT id FROM queues WHERE name = ?)
AND EXISTS (SELECT 1 FROM charges) GROUP BY c.site`
	for ti := range 6 {
		target := fmt.Sprintf("t%d", ti)
		for _, queue := range []string{"", protocol.DefaultQueue, "other"} {
			want := map[string]float64{}
			q, args := byTarget, []any{target}
			if queue != "" {
				q, args = byTargetQueue, append(args, queue)
			}
			rows, err := e.s.rdb.QueryContext(ctx, q, args...)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var site string
				var v float64
				if err := rows.Scan(&site, &v); err != nil {
					t.Fatal(err)
				}
				want[site] = v
			}
			if err := closeRows(rows); err != nil {
				t.Fatal(err)
			}
			var got protocol.ProgressReply
			err = e.s.Progress().Stream(ctx, protocol.Progress{Target: target, Queue: queue, Once: true, Spending: true}, func(r protocol.ProgressReply) error {
				got = r
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(want) == 0 {
				want = nil
			}
			if !maps.Equal(got.SpentBySite, want) {
				t.Errorf("target %s, queue %q: spent %v, the old query %v", target, queue, got.SpentBySite, want)
			}
		}
	}
}
