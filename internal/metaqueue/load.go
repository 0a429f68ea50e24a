package metaqueue

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// load (re)builds the in-memory state from the database, in dependency
// order: queues and targets before the jobs that name them, the jobs'
// prerequisites before the jobs enter the graph, the graph whole before its
// derived states are checked and the ready heaps filled.
func (s *Store) load(ctx context.Context) error {
	s.resetIndex()
	if err := s.loadBundles(ctx); err != nil {
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
	tgts := startPipe(ctx, s.rdb, targetsSQL.Get("LoadTargets"), 2, decodeTargetRow)
	defer tgts.stop()
	pre := startPipe(ctx, s.rdb, jobsSQL.Get("LoadPrereqs"), 5, decodePrereqRow)
	defer pre.stop()
	jobs := startPipe(ctx, s.rdb, jobsSQL.Get("LoadJobs"), 7, decodeJobRow)
	defer jobs.stop()
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
func (s *Store) loadTargets(rows *rowPipe[targetRow]) error {
	return rows.each(func(r *targetRow) error {
		if _, dup := s.g.Lookup(r.name); dup {
			return fmt.Errorf("target %q is stored twice", r.name)
		}
		s.g.LoadTarget(r.id, r.name)
		return nil
	})
}

// targetRow is a row of LoadTargets.
type targetRow struct {
	id   dag.TargetID
	name string
}

func decodeTargetRow(row []driver.Value, r *targetRow) error {
	id, _, err := valInt(row[0])
	if err != nil {
		return err
	}
	name, err := valText(row[1])
	if err != nil {
		return err
	}
	*r = targetRow{dag.TargetID(id), name}
	return nil
}

// loadPrereqs adds every target edge any job ever named to the graph
// and returns the after-ok and the after-any prerequisite targets of
// every live job, each in job id order (the table's key order): loadJobs
// walks them beside the jobs, with no map of millions of small slices.
// The graph drops repeated edges itself.
func (s *Store) loadPrereqs(rows *rowPipe[prereqRow]) (prereqs, afterAny prereqList, err error) {
	var edge [1]dag.TargetID
	err = rows.each(func(r *prereqRow) error {
		edge[0] = r.target
		s.g.AddEdges(r.jobTarget, edge[:])
		switch {
		case !r.live:
		case r.kind == prereqAfterAny:
			afterAny.add(r.job, r.target)
		default:
			prereqs.add(r.job, r.target)
		}
		return nil
	})
	return prereqs, afterAny, err
}

// prereqRow is a row of LoadPrereqs.
type prereqRow struct {
	job       int64
	target    dag.TargetID
	jobTarget dag.TargetID
	kind      int8
	live      bool
}

func decodePrereqRow(row []driver.Value, r *prereqRow) error {
	var v [5]int64
	for i := range v {
		n, _, err := valInt(row[i])
		if err != nil {
			return err
		}
		v[i] = n
	}
	*r = prereqRow{job: v[0], target: dag.TargetID(v[1]), kind: int8(v[2]), jobTarget: dag.TargetID(v[3]), live: v[4] != 0}
	return nil
}

// prereqList holds prerequisite targets by job, in job id order, in two
// flat slices; next hands them out to jobs taken in id order.
type prereqList struct {
	ids     []int64
	targets []dag.TargetID
	at      int
}

func (l *prereqList) add(id int64, t dag.TargetID) {
	l.ids = append(l.ids, id)
	l.targets = append(l.targets, t)
}

// next returns job id's targets (nil if none). Ids must come in
// ascending order, as the jobs' scan gives them.
func (l *prereqList) next(id int64) []dag.TargetID {
	for l.at < len(l.ids) && l.ids[l.at] < id {
		l.at++ // a job not scanned as live (it cannot be; be safe)
	}
	from := l.at
	for l.at < len(l.ids) && l.ids[l.at] == id {
		l.at++
	}
	if from == l.at {
		return nil
	}
	return l.targets[from:l.at:l.at]
}

// job_prereqs.kind: what a job needs of a prerequisite target.
const (
	prereqAfterOK  = 0 // every job Done
	prereqAfterAny = 1 // every job ended, in any state
)

// loadJobs makes one pass over every job: ended jobs only count toward
// their target and queue (and Done ones teach the estimator their
// runtimes); live ones enter the graph, and Executing ones get a fresh
// lease from now with their placeholder known. It returns the Queued jobs
// in id order.
func (s *Store) loadJobs(ctx context.Context, rows *rowPipe[jobRow], prereqs, afterAny prereqList, now time.Time) ([]int64, error) {
	type count struct {
		t, q int32
		st   job.State
	}
	ended := map[count]int{}
	var queued []int64 // in id order
	s.reg.Checked(now) // every lease is fresh
	// Runtimes of Done jobs, by target: SJF and DC go on from what earlier
	// runs learned rather than from nothing.
	type sum struct {
		secs float64
		n    int
	}
	learned := map[int32]*sum{}
	var costedRuns []int64
	err := rows.each(func(r *jobRow) error {
		id, q, t, state := r.id, r.queue, r.target, r.state
		s.nextID = id + 1
		if state.Terminal() {
			ended[count{t, q, state}]++
			if state == job.Done && r.ran.Valid {
				l := learned[t]
				if l == nil {
					l = &sum{}
					learned[t] = l
				}
				l.secs += float64(r.ran.Int64) / 1e6
				l.n++
			}
			return nil
		}
		s.g.LoadJob(id, dag.Node{Target: dag.TargetID(t), Queue: q, Est: float32(r.est), State: state, Prereqs: prereqs.next(id), AfterAny: afterAny.next(id)})
		if eq := s.queueIDs[q]; eq != nil {
			eq.noteEst(r.est)
		}
		s.countsFor(q)[state]++
		switch state {
		case job.Queued:
			queued = append(queued, id)
		case job.Executing:
			// A fresh lease: the placeholder may still be running it and will
			// report or heartbeat once it reconnects.
			attempts, ph := int(r.attempts), r.placeholder
			ru := &run{Attempt: attempts, Used: max(attempts-int(r.base), 1), Placeholder: ph, Lease: now.Add(s.opt.Lease), Started: time.UnixMicro(r.ran.Int64), Unstarted: r.prefetched}
			s.running[id] = ru
			s.runStarted(id)
			costedRuns = append(costedRuns, id)
			// Known at once, so it may heartbeat and report after a
			// restart; others are known when they register again.
			s.phKnow(ph)
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
	for t, l := range learned {
		s.data.Expect().Load(s.g.Name(dag.TargetID(t)), l.secs, l.n)
	}

	if s.nextID == 0 {
		s.nextID = 1
	}
	return queued, nil
}

// jobRow is a row of LoadJobs.
type jobRow struct {
	id  int64
	est float64
	// ran is a Done job's runtime in microseconds (if its times say), a
	// live job's start (Valid false: none).
	ran            sql.NullInt64
	placeholder    int64
	queue, target  int32
	attempts, base int32
	state          job.State
	prefetched     bool
}

func decodeJobRow(row []driver.Value, r *jobRow) error {
	var v [6]int64
	var ok [6]bool
	for i := range v {
		if i == 4 {
			continue // est, a real
		}
		n, valid, err := valInt(row[i])
		if err != nil {
			return err
		}
		v[i], ok[i] = n, valid
	}
	if !ok[3] || v[3] <= 0 || v[3] > 127 {
		return fmt.Errorf("job %d has no valid state", v[0])
	}
	est, err := valFloat(row[4])
	if err != nil {
		return err
	}
	*r = jobRow{id: v[0], queue: int32(v[1]), target: int32(v[2]), state: job.State(v[3]), est: est,
		ran: sql.NullInt64{Int64: v[5], Valid: ok[5]}}
	if row[6] == nil {
		return nil
	}
	// An Executing job: "attempt base placeholder prefetched".
	run, err := valText(row[6])
	if err != nil {
		return err
	}
	var f [4]int64
	fields := strings.Fields(run)
	if len(fields) != len(f) {
		return fmt.Errorf("job %d: attempt fields %q", r.id, run)
	}
	for i, s := range fields {
		if f[i], err = strconv.ParseInt(s, 10, 64); err != nil {
			return fmt.Errorf("job %d: attempt fields %q: %w", r.id, run, err)
		}
	}
	r.attempts, r.base, r.placeholder, r.prefetched = int32(f[0]), int32(f[1]), f[2], f[3] != 0
	return nil
}

// fillReady pushes the Queued jobs onto their queues' ready heaps, in id
// order (cheap pushes for FCFS). A DC queue counts their queue time from
// now, this run's start.
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
					s.data.LoadReady(id, now)
				}
			}
		}
	}
}
