package metaqueue

import (
	"context"
	"fmt"
	"time"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/loadscan"
	"github.com/mq-hpc/mq/internal/metaqueue/dc"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// load (re)builds the in-memory state from the database, in dependency
// order: queues and targets before the jobs that name them, the jobs'
// prerequisites before the jobs enter the graph, the graph whole before its
// derived states are checked and the ready heaps filled.
func (s *Store) load(ctx context.Context) error {
	s.resetIndex()
	if err := s.bundles.Load(ctx, s.w); err != nil {
		return err
	}
	if err := s.loadFiles(ctx, 0); err != nil {
		return err
	}
	if err := s.loadQueues(ctx); err != nil {
		return err
	}
	if err := s.loadLedger(ctx); err != nil {
		return err
	}
	// Targets, prerequisites and jobs are scanned on reader connections
	// at once, each ahead of the core by a few batches: SQLite steps the
	// tables while the graph is built from them, in order.
	src := loadscan.Source{DB: s.rdb, Release: connSQL.Get("ShrinkMemory")}
	tgts := loadscan.Targets(ctx, src, targetsSQL.Get("LoadTargets"))
	defer tgts.Stop()
	pre := loadscan.Prereqs(ctx, src, jobsSQL.Get("LoadPrereqs"))
	defer pre.Stop()
	jobs := loadscan.Jobs(ctx, src, jobsSQL.Get("LoadJobs"))
	defer jobs.Stop()
	if err := s.loadTargets(tgts); err != nil {
		return err
	}
	prereqs, afterAny, err := s.loadPrereqs(pre)
	if err != nil {
		return err
	}
	if err := s.arrays.Load(ctx, s.w); err != nil {
		return err
	}
	if err := s.prio.Load(ctx, s.w); err != nil {
		return err
	}
	now := s.now()
	queued, err := s.loadJobs(ctx, jobs, prereqs, afterAny, now)
	if err != nil {
		return err
	}
	if err := s.loadCopies(ctx, now); err != nil {
		return err
	}
	if err := s.loadRequests(ctx); err != nil {
		return err
	}
	if queued, err = s.reconcile(ctx, queued); err != nil {
		return err
	}
	s.rebuildCopies()
	s.fillReady(queued, now)
	return s.plans.Load(ctx, s.w, s.g, s.now())
}

// resetIndex empties the in-memory index before a load.
func (s *Store) resetIndex() {
	s.g = dag.New()
	s.queues = map[string]*queue{}
	s.queueIDs = map[int32]*queue{}
	s.qlist = nil
	s.running = map[int64]*run{}
	s.copyRuns = map[int64][]*run{}
	s.repl.Reset()
	s.arrays.Reset()
	s.states.Reset()
	s.ledger.Reset(s.log)
	s.reg.Reset()
	s.counts = map[int32]*[128]int{}
	s.nextID = 0
	s.data.Reset(s.now())
	s.data.UseLinks(&s.links, s.opt.Links, s.opt.DefaultLink)
	s.cat.Reset()
	s.bl.Off()
	s.prio.Reset()
}

// loadTargets gives the graph every target, with its stored id.
func (s *Store) loadTargets(rows *loadscan.Pipe[loadscan.Target]) error {
	return rows.Each(func(r *loadscan.Target) error {
		if _, dup := s.g.Lookup(r.Name); dup {
			return fmt.Errorf("target %q is stored twice", r.Name)
		}
		s.g.LoadTarget(r.ID, r.Name)
		return nil
	})
}

// loadPrereqs adds every target edge any job ever named to the graph
// and returns the after-ok and the after-any prerequisite targets of
// every live job, each in job id order (the table's key order): loadJobs
// walks them beside the jobs, with no map of millions of small slices.
// The graph drops repeated edges itself.
func (s *Store) loadPrereqs(rows *loadscan.Pipe[loadscan.Prereq]) (prereqs, afterAny loadscan.PrereqList, err error) {
	var edge [1]dag.TargetID
	err = rows.Each(func(r *loadscan.Prereq) error {
		edge[0] = r.Target
		s.g.AddEdges(r.JobTarget, edge[:])
		switch {
		case !r.Live:
		case r.Kind == prereqAfterAny:
			afterAny.Add(r.Job, r.Target)
		default:
			prereqs.Add(r.Job, r.Target)
		}
		return nil
	})
	return prereqs, afterAny, err
}

// job_prereqs.kind: what a job needs of a prerequisite target.
const (
	prereqAfterOK  = loadscan.AfterOK  // every job Done
	prereqAfterAny = loadscan.AfterAny // every job ended, in any state
)

// loadJobs makes one pass over every job: ended jobs only count toward
// their target and queue (and Done ones teach the estimator their
// runtimes); live ones enter the graph, and Executing ones get a fresh
// lease from now with their placeholder known. It returns the Queued jobs
// in id order.
func (s *Store) loadJobs(ctx context.Context, rows *loadscan.Pipe[loadscan.Job], prereqs, afterAny loadscan.PrereqList, now time.Time) ([]int64, error) {
	type count struct {
		t, q int32
		st   job.State
	}
	ended := map[count]int{}
	var queued []int64 // in id order
	s.reg.Checked(now) // every lease is fresh
	var ran dc.Ran     // runtimes of Done jobs, by target, for the estimator
	var costedRuns []int64
	err := rows.Each(func(r *loadscan.Job) error {
		id, q, t, state := r.ID, r.Queue, r.Target, r.State
		s.nextID = id + 1
		s.arrays.Count(id, 0, state)
		s.states.Move(id, dag.TargetID(t), q, 0, state)
		if state.Terminal() {
			ended[count{t, q, state}]++
			if state == job.Done && r.Ran.Valid {
				ran.Add(t, r.Ran.Int64)
			}
			return nil
		}
		s.g.LoadJob(id, dag.Node{Target: dag.TargetID(t), Queue: q, Est: float32(r.Est), State: state, Prereqs: prereqs.Next(id), AfterAny: afterAny.Next(id)})
		if eq := s.queueIDs[q]; eq != nil {
			eq.est.Note(r.Est)
		}
		s.countsFor(q)[state]++
		switch state {
		case job.Queued:
			queued = append(queued, id)
			if eq := s.queueIDs[q]; eq != nil && eq.isDC() { // queue time since the stored ready time
				s.data.LoadReady(id, q, time.UnixMicro(r.Ran.Int64), now)
			}
		case job.Executing:
			// A fresh lease: the placeholder may still be running it and will
			// report or heartbeat once it reconnects.
			attempts, ph := int(r.Attempts), r.Placeholder
			ru := &run{Attempt: attempts, Used: max(attempts-int(r.Base), 1), Placeholder: ph, Lease: now.Add(s.opt.Lease), Started: time.UnixMicro(r.Ran.Int64), Unstarted: r.Prefetched}
			s.running[id] = ru
			s.runStarted(id)
			costedRuns = append(costedRuns, id)
			// Known at once, so it may heartbeat and report after a
			// restart; others are known when they register again.
			s.reg.Know(ph)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Executing attempts take their reservations and places under the
	// planner's caps again (their sites are read now, the scan closed).
	for _, id := range costedRuns {
		n, _ := s.g.Node(id)
		ru := s.running[id]
		if eq := s.queueIDs[n.Queue]; eq != nil && (eq.costed() || s.ledger.Priced()) {
			site, err := s.siteName(ru.Placeholder)
			if err != nil {
				return nil, err
			}
			s.ledger.Start(protocol.JobRef{ID: id, Attempt: ru.Attempt}, eq.account(), n, site, s.guess, s.jobCores(id))
		}
	}
	for c, n := range ended {
		s.g.LoadCounts(dag.TargetID(c.t), c.st, n)
		s.g.NoteQueue(dag.TargetID(c.t), c.q)
		s.countsFor(c.q)[c.st] += n
	}
	if err := s.loadPurged(ctx); err != nil {
		return nil, err
	}
	s.data.Learn(&ran, func(t int32) string { return s.g.Name(dag.TargetID(t)) })

	s.nextID = max(s.nextID, 1)
	return queued, nil
}

// fillReady pushes the Queued jobs onto their queues' ready heaps, in id
// order (cheap pushes for FCFS). A DC queue counts their queue time from
// their stored ready time (loadJobs), one the load made ready from now.
func (s *Store) fillReady(queued []int64, now time.Time) {
	if s.bl.On() {
		s.rankAll() // now that the jobs are loaded
	}
	// Each heap is allocated once, to size: appends leave up to a quarter
	// of it empty (tens of MB at millions of jobs).
	per := map[int32]int{}
	for _, id := range queued {
		if j, ok := s.g.Node(id); ok && j.State == job.Queued {
			per[j.Queue]++
		}
	}
	for qid, n := range per {
		if q := s.queueIDs[qid]; q != nil {
			q.ready.Grow(n)
		}
	}
	for _, id := range queued {
		if j, ok := s.g.Node(id); ok && j.State == job.Queued {
			if q := s.queueIDs[j.Queue]; q != nil {
				q.ready.Push(s.readyEntry(q, id, j.Est, j.Target))
				if q.isDC() {
					s.data.LoadReady(id, j.Queue, now, now)
				}
			}
		}
	}
}
