package metaqueue

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/metaqueue/bundles"
	"github.com/mq-hpc/mq/internal/metaqueue/specs"
	"github.com/mq-hpc/mq/internal/metaqueue/tokens"
	"github.com/mq-hpc/mq/internal/sqlfile"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// Submit adds jobs in one transaction and returns their ids. Either all are
// added or none.
func (s *Store) Submit(ctx context.Context, specs []protocol.JobSpec) ([]int64, error) {
	return s.SubmitRequest(ctx, protocol.Submit{Jobs: specs})
}

// slowSubmit is how many jobs a submission holds before it is a slow call
// (call.slow): a summary asked meanwhile answers from before it.
const slowSubmit = 1000

// SubmitRequest is Submit with the request's options: Bundle makes the jobs
// one bundle; Token makes a resent request return the first one's ids.
func (s *Store) SubmitRequest(ctx context.Context, req protocol.Submit) ([]int64, error) {
	jobs := req.Jobs
	if len(jobs) == 0 {
		return nil, protocol.Errorf(protocol.CodeBadRequest, "no jobs to submit")
	}
	edges, err := specs.Check(jobs)
	if err != nil {
		return nil, err
	}
	if err := tokens.Check(req.Token); err != nil {
		return nil, err
	}
	if err := bundles.Check(req); err != nil {
		return nil, err
	}
	if req.Bundle {
		bundles.Envelope(jobs) // one grant runs them all
	}
	var ids []int64
	err = s.doNeedingRoom(ctx, call{durable: true, slow: len(jobs) > slowSubmit}, func() error {
		if done, err := s.tokenIDs(req.Token); err != nil || done != nil {
			ids = done
			return err
		}
		if c := s.g.FindCycleIn(edges); c != "" {
			return protocol.Errorf(protocol.CodeBadRequest, "prerequisites would form a cycle: %s", c)
		}
		ins := s.newInserter()
		first := s.nextID
		for i := range jobs {
			if err := ins.add(&jobs[i]); err != nil {
				return err
			}
		}
		if err := ins.flush(); err != nil {
			return err
		}
		ids = make([]int64, len(jobs))
		for i := range ids {
			ids[i] = first + int64(i)
		}
		if req.Bundle && len(ids) > 1 {
			if err := storeErr(s.bundles.Add(context.Background(), s.w, first, len(ids))); err != nil {
				return err
			}
		}
		return storeErr(tokens.Save(context.Background(), s.w, req.Token, first, len(ids), s.now()))
	})
	return ids, err
}

// inserter adds jobs on the core, buffering rows for multi-row INSERTs. A
// state change to a job still in the buffer patches the buffer.
type inserter struct {
	s        *Store
	bufStart int64
	rows     []row
	now      int64
	args     []any
	prereqs  sqlfile.Batch // (job id, target id, kind) rows not yet inserted
	envs     sqlfile.Batch // (job id, environment) rows: an array's members each have one
	targets  sqlfile.Names // new targets not yet inserted
	// recent caches the last two names looked up: a job's target is often
	// the one before's, and a pipeline stage's prerequisite the previous
	// job's target, so most look-ups skip hashing into a large map.
	recent [2]recentTarget
}

type recentTarget struct {
	name string
	id   dag.TargetID // 0: empty
}

type row struct {
	queue   int32
	target  dag.TargetID
	state   job.State
	command string
	cwd     string
	est     float64
}

func (s *Store) newInserter() *inserter {
	return &inserter{s: s, bufStart: s.nextID, now: micros(s.now()), args: make([]any, 0, 8*bulkRows),
		prereqs: sqlfile.Batch{Width: 3, Rows: bulkRows}, envs: sqlfile.Batch{Width: 2, Rows: bulkRows}}
}

func (in *inserter) add(js *protocol.JobSpec) error {
	s := in.s
	if err := s.begin(); err != nil {
		return err
	}
	q, err := s.queueFor(js.Queue)
	if err != nil {
		return err
	}
	t, err := in.target(js.Target)
	if err != nil {
		return err
	}
	var prereqs []dag.TargetID
	if len(js.Prereqs) > 0 {
		prereqs = make([]dag.TargetID, 0, len(js.Prereqs))
		for _, name := range js.Prereqs {
			p, err := in.target(name)
			if err != nil {
				return err
			}
			prereqs = append(prereqs, p)
		}
		s.g.AddEdges(t, prereqs)
	}
	var afterAny []dag.TargetID
	for _, name := range js.AfterAny {
		p, err := in.target(name)
		if err != nil {
			return err
		}
		// A target also needed after-ok is needed Done: the stricter
		// edge is the one kept (and job_prereqs keys a pair once).
		if !slices.Contains(prereqs, p) && !slices.Contains(afterAny, p) {
			afterAny = append(afterAny, p)
		}
	}
	if len(afterAny) > 0 {
		s.g.AddEdges(t, afterAny)
	}
	id := s.nextID
	s.nextID++
	in.rows = append(in.rows, row{queue: q.id, target: t, command: js.Command, cwd: js.Cwd, est: js.Est})
	for kind, list := range [][]dag.TargetID{prereqs, afterAny} {
		for _, p := range list {
			// int64s: database/sql converts other integers by reflection.
			if err := in.prereqs.Put(s.stmts.insPrereqs, s.stmts.insPrereq, id, int64(p), int64(prereqAfterOK+kind)); err != nil {
				return fatalError{err}
			}
		}
	}
	if err := s.addFiles(id, js); err != nil {
		return err
	}
	if js.NoReplicate {
		if err := s.repl.OptOut(context.Background(), s.w, id); err != nil {
			return fatalError{err}
		}
	}
	if err := s.keepRequest(id, q, js); err != nil {
		return err
	}
	if len(js.Env) > 0 {
		env, err := json.Marshal(js.Env)
		if err != nil {
			return err
		}
		if err := in.envs.Put(s.stmts.insEnvs, s.stmts.insEnv, id, string(env)); err != nil {
			return fatalError{err}
		}
	}
	if err := s.prio.Add(context.Background(), s.w, id, js.Priority); err != nil {
		return fatalError{err}
	}
	n := dag.Node{Target: t, Queue: q.id, Est: float32(js.Est), Prereqs: prereqs, AfterAny: afterAny}
	if js.Hold {
		n.State = job.Held
	}
	if err := s.submitted(id, n, q, js.Est, in); err != nil {
		return err
	}
	if len(in.rows) == bulkRows {
		return in.flushJobs()
	}
	return nil
}

// target returns a target's id, creating it on first use (a prerequisite
// may name a target before any of its jobs arrive). New targets' rows are
// buffered for multi-row INSERTs: a bulk file may name 100,000 targets.
func (in *inserter) target(name string) (dag.TargetID, error) {
	for _, r := range in.recent {
		if r.id != 0 && r.name == name {
			return r.id, nil
		}
	}
	t, ok := in.s.g.Lookup(name)
	if !ok {
		t = in.s.g.AddTarget(name)
		if err := in.newTarget(t, name); err != nil {
			return 0, err
		}
	}
	in.recent[1], in.recent[0] = in.recent[0], recentTarget{name, t}
	return t, nil
}

// newTarget buffers a new target's row.
func (in *inserter) newTarget(t dag.TargetID, name string) error {
	if !in.targets.Add(int64(t), name) { // not consecutive (never, today)
		if err := in.flushTargets(); err != nil {
			return err
		}
		in.targets.Add(int64(t), name)
	}
	if in.targets.Len() == targetRows {
		return in.flushTargets()
	}
	return nil
}

// targetRows is how many new targets one INSERT carries.
const targetRows = 4096

func (in *inserter) flushTargets() error {
	if in.targets.Len() == 0 {
		return nil
	}
	_, err := in.s.stmts.insTargets.Exec(in.targets.Take())
	return storeErr(err)
}

// flush inserts everything still buffered and ranks the added jobs' chains
// for cp queues; the inserter is done after it.
func (in *inserter) flush() error {
	if in.s.bl.On() {
		in.s.settle()
	}
	if err := in.flushTargets(); err != nil {
		return err
	}
	st := in.s.stmts // a failed flush fails the batch: its transaction is rolled back
	if err := errors.Join(in.prereqs.Flush(st.insPrereqs, st.insPrereq), in.envs.Flush(st.insEnvs, st.insEnv)); err != nil {
		return fatalError{err}
	}
	return in.flushJobs()
}

// queueFor returns a queue, creating it on first use.
func (s *Store) queueFor(name string) (*queue, error) {
	if q := s.queues[name]; q != nil {
		return q, nil
	}
	if err := s.begin(); err != nil {
		return nil, err
	}
	q := &queue{}
	q.Name = name
	err := s.stmts.insQueue.QueryRow(name, micros(s.now())).Scan(&q.id, &q.Ceiling, &q.MaxAttempts, &q.RetryFailed, &q.Policy)
	if err != nil {
		return nil, fatalError{err}
	}
	q.setPolicy(q.Policy)
	s.addQueue(q)
	return q, nil
}
