package metaqueue

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// runStoreOps interprets bytes as a sequence of metaqueue operations and
// checks after each one that memory, storage and the dependency rules
// agree (env.check). Targets t0..t5 only depend on lower ones, so
// submissions never form a cycle; cycle attempts are made on purpose.
func runStoreOps(t *testing.T, e *env, ops []byte) {
	ctx := context.Background()
	phs := []int64{e.register("p0"), e.register("p1")}
	running := map[int64]protocol.Assignment{} // last assignment seen per job
	var maxID int64
	byte3 := func(i int) (byte, byte, byte) { return ops[i], ops[i+1], ops[i+2] }
	for i := 0; i+2 < len(ops); i += 3 {
		op, a, b := byte3(i)
		what := fmt.Sprintf("op %d (%d %d %d)", i/3, op%15, a, b)
		switch op % 15 {
		case 0, 1: // submit 1-3 jobs
			var specs []protocol.JobSpec
			for k := 0; k <= int(b%3); k++ {
				ti := (int(a) + k) % 6
				js := protocol.JobSpec{Target: fmt.Sprintf("t%d", ti), Command: "x", Est: float64(b % 4 * 10)}
				if ti > 0 && b&4 != 0 {
					js.Prereqs = append(js.Prereqs, fmt.Sprintf("t%d", int(b>>3)%ti))
				}
				if b&128 != 0 {
					js.Queue = "other"
				}
				specs = append(specs, js)
			}
			got, err := e.s.Submit(ctx, specs)
			if err != nil {
				t.Fatalf("%s: Submit: %v", what, err)
			}
			maxID = got[len(got)-1]
		case 2: // a submission that would close a cycle is refused whole
			_, err := e.s.Submit(ctx, []protocol.JobSpec{
				{Target: "t0", Command: "x", Prereqs: []string{fmt.Sprintf("t%d", 1+a%5)}},
				{Target: fmt.Sprintf("t%d", 1+a%5), Command: "x", Prereqs: []string{"t0"}},
			})
			if !protocol.IsCode(err, protocol.CodeBadRequest) {
				t.Fatalf("%s: cyclic submit: %v", what, err)
			}
		case 3, 4: // ask for work
			var walltime float64
			if b&1 != 0 {
				walltime = float64(b % 25)
			}
			r, err := e.s.Next(ctx, protocol.Next{Placeholder: phs[a%2], Free: 1 + int(b%3), WalltimeLeft: walltime})
			if err != nil {
				t.Fatalf("%s: Next: %v", what, err)
			}
			for _, as := range r.Jobs {
				if old, ok := running[as.ID]; ok && old.Attempt >= as.Attempt {
					t.Fatalf("%s: job %d handed out again with attempt %d after %d", what, as.ID, as.Attempt, old.Attempt)
				}
				if walltime > 0 {
					need := e.job(as.ID).Est
					if need == 0 {
						need = as.Ceiling
					}
					if need > walltime {
						t.Fatalf("%s: job %d needs %gs, handed out with %gs left", what, as.ID, need, walltime)
					}
				}
				running[as.ID] = as
			}
		case 5, 6: // report one attempt (possibly stale)
			if len(running) == 0 {
				continue
			}
			var as protocol.Assignment
			n := int(a) % len(running)
			for _, x := range running {
				if n == 0 {
					as = x
					break
				}
				n--
			}
			rep := protocol.Report{ID: as.ID, Attempt: as.Attempt}
			switch b % 5 {
			case 1:
				rep.Exit = 1
			case 2:
				rep.Exit, rep.Reason = -1, protocol.ReasonInterrupted
			case 3:
				rep.Exit, rep.Reason = -1, protocol.ReasonCeiling
			}
			if err := e.s.Report(ctx, phs[b%2], []protocol.Report{rep}); err != nil {
				t.Fatalf("%s: Report: %v", what, err)
			}
			if b&8 != 0 {
				delete(running, as.ID)
			}
		case 7: // delete
			if maxID == 0 {
				continue
			}
			if _, err := e.s.Delete(ctx, protocol.Select{IDs: []int64{1 + int64(a)%maxID}}); err != nil {
				t.Fatalf("%s: Delete: %v", what, err)
			}
		case 8: // rerun
			if maxID == 0 {
				continue
			}
			sel := protocol.Select{IDs: []int64{1 + int64(a)%maxID}}
			if b&1 != 0 {
				sel = protocol.Select{Target: fmt.Sprintf("t%d", a%6)}
			}
			_, err := e.s.Rerun(ctx, sel)
			if err != nil && !protocol.IsCode(err, protocol.CodeNotFound) {
				t.Fatalf("%s: Rerun: %v", what, err)
			}
		case 9: // time passes; leases may run out
			e.clock.Advance(time.Duration(a%3) * testLease / 2)
			var hb []protocol.JobRef
			for _, as := range running {
				hb = append(hb, protocol.JobRef{ID: as.ID, Attempt: as.Attempt})
			}
			if b&1 != 0 {
				if _, err := e.s.Heartbeat(ctx, protocol.Heartbeat{Placeholder: phs[0], Running: hb}); err != nil {
					t.Fatalf("%s: Heartbeat: %v", what, err)
				}
			}
			if err := e.s.do(ctx, e.s.expire); err != nil {
				t.Fatalf("%s: expire: %v", what, err)
			}
		case 10: // queue settings
			pol := []string{"fcfs", "sjf", "cp"}[a%3]
			retry := b&1 != 0
			att := 1 + int(b>>1)%3
			if _, err := e.s.SetQueue(ctx, protocol.QueueSet{Name: protocol.DefaultQueue, Policy: &pol, RetryFailed: &retry, MaxAttempts: &att}); err != nil {
				t.Fatalf("%s: SetQueue: %v", what, err)
			}
		case 11: // restart (placeholders register again, as agents do)
			if a%4 != 0 {
				continue
			}
			e.reopen()
			for k, ph := range phs {
				r, err := e.s.Register(ctx, protocol.Register{ID: ph, Site: fmt.Sprintf("p%d", k), Host: fmt.Sprintf("h-p%d", k), Slots: 4})
				if err != nil || r.ID != ph {
					t.Fatalf("%s: re-register: %+v, %v", what, r, err)
				}
			}
		case 12, 13: // hold or release a job or a target's jobs
			if maxID == 0 {
				continue
			}
			sel := protocol.Select{IDs: []int64{1 + int64(a)%maxID}}
			if b&1 != 0 {
				sel = protocol.Select{Target: fmt.Sprintf("t%d", a%6)}
			}
			act := e.s.Hold
			if op%15 == 13 {
				act = e.s.Release
			}
			if _, err := act(ctx, sel); err != nil && !protocol.IsCode(err, protocol.CodeNotFound) {
				t.Fatalf("%s: hold/release: %v", what, err)
			}
		case 14: // purge every ended job, or a target's
			req := protocol.Purge{Select: protocol.Select{All: true}, Batch: 1 + int(b%4)}
			if a&1 != 0 {
				req.Select = protocol.Select{Target: fmt.Sprintf("t%d", a%6)}
			}
			if _, err := e.s.Purger().Run(ctx, req); err != nil && !protocol.IsCode(err, protocol.CodeNotFound) {
				t.Fatalf("%s: purge: %v", what, err)
			}
		}
		e.check()
		e.checkTargetProgress(fmt.Sprintf("t%d", b%6), what)
	}
}

// checkTargetProgress checks that a target's counts (mqstat --summary -t),
// kept by the core, are its rows' by state, as counted before they were
// kept; with a queue as well (counted from the counts kept by target and
// queue) they are still its rows'.
func (e *env) checkTargetProgress(target, what string) {
	e.t.Helper()
	if _, ok := e.s.g.Lookup(target); !ok {
		return
	}
	for _, queue := range []string{"", protocol.DefaultQueue, "other"} {
		if _, ok := e.s.queues[queue]; !ok && queue != "" {
			continue // "other" until a job is submitted to it
		}
		var got map[string]int
		err := e.s.Progress().Stream(context.Background(), protocol.Progress{Target: target, Queue: queue, Once: true}, func(r protocol.ProgressReply) error {
			got = r.Counts
			return nil
		})
		if err != nil {
			e.t.Fatalf("%s: progress of %s: %v", what, target, err)
		}
		q := "SELECT j.state, count(*) FROM jobs j JOIN targets t ON t.id = j.target_id WHERE t.name = ?"
		args := []any{target}
		if queue != "" {
			q += " AND j.queue_id = (SELECT id FROM queues WHERE name = ?)"
			args = append(args, queue)
		}
		want := map[string]int{}
		rows, err := e.s.ReadDB().Query(q+" GROUP BY j.state", args...)
		if err != nil {
			e.t.Fatal(err)
		}
		for rows.Next() {
			var st string
			var n int
			if err := rows.Scan(&st, &n); err != nil {
				e.t.Fatal(err)
			}
			want[st] = n
		}
		if err := closeRows(rows); err != nil {
			e.t.Fatal(err)
		}
		if p := got["P"]; p > 0 { // P is shown out of E
			got["E"] += p
			delete(got, "P")
		}
		if !maps.Equal(got, want) {
			e.t.Fatalf("%s: progress of target %s in queue %q: %v, its rows %v", what, target, queue, got, want)
		}
	}
}

func TestRandomStoreOps(t *testing.T) {
	t.Parallel()
	seeds := 12
	if testing.Short() {
		seeds = 3
	}
	for seed := 0; seed < seeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			ops := make([]byte, 3*120)
			x := uint64(seed)*0x9E3779B97F4A7C15 + 7
			for i := range ops {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				ops[i] = byte(x)
			}
			e := newEnv(t)
			runStoreOps(t, e, ops)
			e.reopen()
			e.check()
			integrity(t, e.opt.Path)
		})
	}
}

func FuzzStore(f *testing.F) {
	f.Add([]byte{0, 0, 5, 3, 0, 1, 5, 0, 8, 9, 2, 0, 3, 0, 1, 8, 0, 0})
	f.Add([]byte{0, 1, 7, 0, 2, 4, 3, 0, 2, 6, 0, 1, 7, 0, 0, 8, 1, 1, 11, 0, 0, 3, 1, 2})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 300 {
			ops = ops[:300]
		}
		e := newEnv(t)
		runStoreOps(t, e, ops)
	})
}
