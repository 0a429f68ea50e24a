package metaqueue

import (
	"context"
	"fmt"
	"github.com/mq-hpc/mq/internal/dispatch"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mq-hpc/mq/internal/metaqueue/catalog"
	"github.com/mq-hpc/mq/internal/metaqueue/dc"

	"github.com/mq-hpc/mq/internal/metaqueue/copies"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/internal/runs"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// checkCopyIndex (on the core) says how the copy candidates index
// disagrees with a full scan of the running jobs, or nil.
func (s *Store) checkCopyIndex() error {
	want := map[int64]copies.Entry{}
	for id, ru := range s.running {
		if !s.repl.Apart(id, ru.Attempt) || s.repl.FailedBeside(id) {
			continue
		}
		j, ok := s.g.Node(id)
		if !ok {
			continue
		}
		want[id] = copies.Entry{Queue: j.Queue, Runs: 1 + len(s.copyRuns[id])}
	}
	return s.repl.Check(want)
}

// pickCopyScan is pickCopy as it was before the index: every running job
// walked on every look. The model test holds the index to it.
func (s *Store) pickCopyScan(p *parkedNext) (int64, *queue, error) {
	ph := p.req.Placeholder
	cur, to, err := s.phPlaces(ph)
	if err != nil {
		return 0, nil, err
	}
	site := s.data.SiteAt(cur).Site
	byQueue := map[*queue][]policy.Running{}
	for id, ru := range s.running {
		j, ok := s.g.Node(id)
		if !ok || j.State != job.Executing {
			continue
		}
		q := s.queueIDs[j.Queue]
		if q == nil || !s.repl.Apart(id, ru.Attempt) || s.repl.FailedBeside(id) || q.ready.Len() > 0 || !s.copyable(id, q) || runs.On(ru, s.copyRuns[id], ph) {
			continue
		}
		n := 1 + len(s.copyRuns[id])
		if _, most := copies.Limit(q.pol.NewReplicator != nil, q.MaxCopies); most > 0 && n >= most {
			continue
		}
		if !dispatch.Fits(j.Est, q.Ceiling, p.req.WalltimeLeft) || !s.affordable(id, q, j, p.site) {
			continue
		}
		var local int64
		if q.pol.Needs&policy.NeedsFiles != 0 {
			local = s.data.LocalBytes(id, cur, dc.Place(to), s.opt.Stager != nil, dcCatalog{s})
		}
		byQueue[q] = append(byQueue[q], policy.Running{ID: id, Replicas: n, LocalBytes: local, Est: j.Est})
	}
	for _, q := range s.qlist {
		runs := byQueue[q]
		if len(runs) == 0 {
			continue
		}
		rep := copies.Replicator(q.pol.NewReplicator)
		for try := 0; try < copies.MaxTries && len(runs) > 0; try++ {
			id, ok := rep.Replicate(site, runs)
			if !ok {
				break
			}
			here := true
			if s.opt.Stager != nil {
				if here, err = s.inputsAt([]int64{id}, to); err != nil {
					return 0, nil, err
				}
			}
			if here {
				return id, q, nil
			}
			runs = slices.DeleteFunc(runs, func(r policy.Running) bool { return r.ID == id })
		}
	}
	return 0, nil, nil
}

// TestCopyIndexModel: after every step of random sequences of submits,
// dispatches and copies, wins (by report and by claim), failures, mqdel,
// leases running out, policy changes, file moves (outputs made, replicas
// added, data.gen bumped with and without word of what moved) and CLS
// restarts, the
// copy candidates index agrees with a full scan of the running jobs, and
// pickCopy chooses what the full scan chooses for every placeholder at
// every walltime asked.
func TestCopyIndexModel(t *testing.T) {
	seeds := uint64(6)
	if testing.Short() {
		seeds = 2 // the race run
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { copyIndexModel(t, seed) })
	}
}

func copyIndexModel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 17))
	e := newEnv(t)
	ctx := context.Background()
	queues := []string{"w", "a", "f"}
	e.setQueue("w", "wqr", -1)
	e.setQueue("a", "sa", -1)
	e.setQueue("f", "sa", 3)
	sites := []string{"s1", "s2", "s3"}
	var phs []int64
	phSite := map[int64]string{}
	for i := 0; i < 5; i++ {
		site := sites[i%len(sites)]
		ph := e.register(site)
		phs = append(phs, ph)
		phSite[ph] = site
	}
	const files = 6
	// live: attempts handed out and not yet reported, by placeholder.
	live := map[int64][]protocol.JobRef{}
	var jobs []int64
	added := 0   // /w/g0.. the catalog has a replica of
	saPicks := 0 // copies Storage Affinity chose
	drop := func(ph int64, r protocol.JobRef) {
		live[ph] = slices.DeleteFunc(live[ph], func(x protocol.JobRef) bool { return x == r })
	}
	randLive := func() (int64, protocol.JobRef, bool) {
		var all []int64
		for ph, rs := range live {
			if len(rs) > 0 {
				all = append(all, ph)
			}
		}
		if len(all) == 0 {
			return 0, protocol.JobRef{}, false
		}
		slices.Sort(all)
		ph := all[rng.IntN(len(all))]
		return ph, live[ph][rng.IntN(len(live[ph]))], true
	}
	verify := func(step int, op string) {
		t.Helper()
		err := e.s.do(ctx, func() error {
			if err := e.s.checkCopyIndex(); err != nil {
				return err
			}
			for _, ph := range phs {
				for _, wall := range []float64{0, 5, 50} {
					for range 2 { // the second look finds SA's local bytes cached
						p := &parkedNext{req: protocol.Next{Placeholder: ph, Free: 1, WalltimeLeft: wall}}
						got, gq, err := e.s.pickCopy(p)
						if err != nil {
							return err
						}
						want, wq, err := e.s.pickCopyScan(&parkedNext{req: p.req})
						if err != nil {
							return err
						}
						if got != 0 && gq.pol.Name == "sa" {
							saPicks++
						}
						if got != want || gq != wq {
							return fmt.Errorf("placeholder %d walltime %g: index chose job %d, a full scan %d", ph, wall, got, want)
						}
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("step %d (%s): %v", step, op, err)
		}
	}
	for step := 0; step < 400; step++ {
		var op string
		switch k := rng.IntN(100); {
		case k < 10:
			op = "submit"
			var specs []protocol.JobSpec
			for range 1 + rng.IntN(3) {
				// Some make a file others read: a report moves it.
				in := rng.IntN(files)
				sp := protocol.JobSpec{Queue: queues[rng.IntN(len(queues))], Target: "t", Cwd: "/w",
					Command: fmt.Sprint("run ", len(jobs)), Est: float64(rng.IntN(3) * 10), NoReplicate: rng.IntN(8) == 0,
					Inputs: []protocol.File{{Path: fmt.Sprintf("/w/f%d", in)}, {Path: fmt.Sprintf("/w/g%d", rng.IntN(files))}}}
				if rng.IntN(2) == 0 {
					size := int64(1 + rng.IntN(5)*100)
					sp.Outputs = []protocol.File{{Path: fmt.Sprintf("/w/f%d", (in+1)%files), Size: &size}}
				}
				specs = append(specs, sp)
			}
			jobs = append(jobs, e.submit(specs...)...)
		case k < 40:
			op = "next"
			ph := phs[rng.IntN(len(phs))]
			for _, a := range e.next(ph, 1+rng.IntN(2)) {
				live[ph] = append(live[ph], refOf(a))
			}
		case k < 52:
			op = "report ok"
			if ph, r, ok := randLive(); ok {
				e.report(ph, protocol.Report{ID: r.ID, Attempt: r.Attempt})
				drop(ph, r)
			}
		case k < 58:
			op = "report failed"
			if ph, r, ok := randLive(); ok {
				e.report(ph, protocol.Report{ID: r.ID, Attempt: r.Attempt, Exit: 1})
				drop(ph, r)
			}
		case k < 63:
			op = "claim"
			if ph, r, ok := randLive(); ok {
				e.heartbeat(ph, live[ph], r)
			}
		case k < 68:
			op = "heartbeat"
			ph := phs[rng.IntN(len(phs))]
			for _, r := range e.heartbeat(ph, live[ph]).Kill {
				drop(ph, r)
			}
		case k < 72:
			op = "mqdel"
			if len(jobs) > 0 {
				id := jobs[rng.IntN(len(jobs))]
				if _, err := e.s.Delete(ctx, protocol.Select{IDs: []int64{id}}); err != nil {
					t.Fatal(err)
				}
			}
		case k < 74:
			op = "lease expires"
			lost := phs[rng.IntN(len(phs))]
			for range 5 {
				for _, ph := range phs {
					if ph != lost {
						e.heartbeat(ph, live[ph])
					}
				}
				e.clock.Advance(testLease / 4)
				e.tick()
			}
			live[lost] = nil
		case k < 78:
			op = "policy"
			pols := []struct {
				pol    string
				copies int
			}{{"wqr", -1}, {"wqr", 2}, {"sa", -1}, {"fcfs", 3}, {"fcfs", 1}, {"xsufferage", -1}, {"sjf", 2}}
			pc := pols[rng.IntN(len(pols))]
			e.setQueue(queues[rng.IntN(len(queues))], pc.pol, pc.copies)
		case k < 97:
			op = "file moves"
			if err := e.s.do(ctx, func() error {
				d := &e.s.data
				path := fmt.Sprintf("/w/f%d", rng.IntN(files))
				site := sites[rng.IntN(len(sites))]
				switch rng.IntN(4) {
				case 0: // forgotten, data.gen bumped with no word of what moved
					d.Gone([]string{path})
				case 1:
					d.Locate(path, dc.Loc{At: d.At(site, ""), Size: int64(1 + rng.IntN(3)*1000)})
					d.Bump()
				case 2: // moved, and said so
					d.Locate(path, dc.Loc{At: d.At(site, ""), Size: int64(1 + rng.IntN(3)*1000)})
					e.s.dataMoved([]fileDecl{{Path: path}})
				default: // a replica of a file the catalog did not have
					if added == files {
						return nil
					}
					added++
					return e.s.addReplica(fmt.Sprintf("/w/g%d", added-1), catalog.Place{Site: site}, int64(1+rng.IntN(3)*1000), "")
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		default:
			op = "restart"
			e.reopen()
			for _, ph := range phs {
				if _, err := e.s.Register(ctx, protocol.Register{ID: ph, Site: phSite[ph], Host: "h-" + phSite[ph], PID: 42, Slots: 4}); err != nil {
					t.Fatal(err)
				}
			}
		}
		verify(step, op)
	}
	// The sequences must have reached what they test.
	var copies, killed int
	if err := e.s.rdb.QueryRow("SELECT count(*), coalesce(sum(killed_copy), 0) FROM attempts").Scan(&copies, &killed); err != nil {
		t.Fatal(err)
	}
	if killed == 0 || saPicks == 0 {
		t.Fatalf("%d copies killed for a winner in %d attempts, %d copies chosen by SA", killed, copies, saPicks)
	}
	e.check()
}

// TestCopyIndexSAOrder: Storage Affinity copies the job with the most
// local bytes at the asking site among the fewest attempts, the lowest id
// among equals, whatever order the index holds them in.
func TestCopyIndexSAOrder(t *testing.T) {
	e := newEnv(t)
	e.setQueue("a", "sa", -1)
	var specs []protocol.JobSpec
	for i := range 6 {
		specs = append(specs, protocol.JobSpec{Queue: "a", Target: "t", Cwd: "/w", Command: fmt.Sprint("run ", i),
			Inputs: []protocol.File{{Path: fmt.Sprintf("/w/f%d", i%3)}}})
	}
	ids := e.submit(specs...)
	busy, idle := e.register("s1"), e.register("s1")
	if got := e.next(busy, 6); len(got) != 6 {
		t.Fatalf("%d jobs dispatched", len(got))
	}
	err := e.s.do(context.Background(), func() error {
		d := &e.s.data
		at := d.At("s1", "")
		// f1 is the biggest at s1: the second and fifth jobs read it.
		for i, size := range []int64{100, 300, 200} {
			d.Locate(fmt.Sprintf("/w/f%d", i), dc.Loc{At: at, Size: size})
		}
		d.Bump()
		// Reverse each bucket so the best comes last.
		e.s.repl.Reverse()
		return e.s.checkCopyIndex()
	})
	if err != nil {
		t.Fatal(err)
	}
	first := e.next(idle, 1)
	if len(first) != 1 || first[0].ID != ids[1] {
		t.Fatalf("first copy %+v, want job %d (most bytes, lowest id)", first, ids[1])
	}
	// Job 1 has two attempts now: job 4 (as many bytes, one attempt) next.
	idle2 := e.register("s1")
	if got := e.next(idle2, 1); len(got) != 1 || got[0].ID != ids[4] {
		t.Fatalf("second copy %+v, want job %d", got, ids[4])
	}
}
