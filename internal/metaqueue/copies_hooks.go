package metaqueue

import (
	"context"
	"fmt"
	"time"

	"github.com/mq-hpc/mq/internal/dispatch"
	"github.com/mq-hpc/mq/internal/metaqueue/catalog"

	"github.com/mq-hpc/mq/internal/metaqueue/copies"
	"github.com/mq-hpc/mq/internal/metaqueue/dc"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/internal/runs"
	"github.com/mq-hpc/mq/job"
)

// The core's side of job replication (package copies): the copies of a
// job are attempts the core runs as any other (s.copyRuns beside
// s.running, leases, placeholders); the module keeps what replication
// alone knows and writes its tables. An event of a job's attempts is one
// call into the module (Apply), whose facts the core applies: its own
// rows, the ledger's charges and reservations, packing's grants.

// replication is the copies module's state as the Store holds it.
type replication = copies.Copies

// copyAsked is what one placeholder's request last looked at for a copy.
type copyAsked = copies.Asked

// countCopying tells the copies module every queue's replication
// settings: it keeps those that copy.
func (s *Store) countCopying() {
	qs := make([]copies.Setting, len(s.qlist))
	for i, q := range s.qlist {
		qs[i] = copies.Setting{ID: q.id, NewRep: q.pol.NewReplicator, MaxCopies: q.MaxCopies, NeedsFiles: q.pol.Needs&policy.NeedsFiles != 0}
	}
	s.repl.SetQueues(qs)
}

// copyable says whether job id of queue q may run as several attempts at
// once: q copies, the job did not opt out, is not part of a bundle (a
// bundle's jobs share one slot), and every output it declared is a
// relative path inside its working directory (the agent makes those in a
// per-attempt directory; an absolute one it could not keep apart).
func (s *Store) copyable(id int64, q *queue) bool {
	if !s.repl.Copying(q.id) || s.repl.OptedOut(id) {
		return false
	}
	if _, ok := s.bundles.Of(id); ok {
		return false
	}
	jf := s.data.Job(id)
	return jf == nil || !jf.OutsideCwd
}

// win makes ru, whose agent claimed first, the attempt the job row
// describes and kills every other attempt of the job.
func (s *Store) win(id int64, ru *run) error {
	n, ok := s.g.Node(id)
	_, err := s.copiesEvent(id, n, ok, ru, copies.Change{Event: copies.Claimed})
	return err
}

// stopCopies kills every copy of job id, which stops executing for
// reason (deleted).
func (s *Store) stopCopies(id int64, reason string) error {
	n, ok := s.g.Node(id)
	_, err := s.copiesEvent(id, n, ok, nil, copies.Change{Event: copies.Stopped, Reason: reason})
	return err
}

// setApart records whether the attempt job id's row describes runs apart
// and may have copies beside it.
func (s *Store) setApart(id int64, apart bool) error {
	return storeErr(s.repl.SetApart(context.Background(), s.w, s.copyJob(id), apart))
}

// pickCopy chooses a running job to copy for placeholder p, from the
// queues that copy and have no ready job (copies.PickFor). It returns 0 for
// none.
func (s *Store) pickCopy(p *parkedNext) (int64, *queue, error) {
	if !s.repl.Again(&p.copied, s.data.Gen()) {
		return 0, nil, nil
	}
	ph := p.req.Placeholder
	cur, to, err := s.phPlaces(ph)
	if err != nil {
		return 0, nil, err
	}
	look := s.repl.Look(copies.Where{Site: cur, StoreSite: to.Site, StoreHost: to.Host}, s.data.SiteAt(cur).Site, s.data.Untold())
	a := &p.copyAsk
	a.s, a.p, a.cur, a.to = s, p, cur, to
	id, qid, err := s.repl.PickFor(&look, a)
	if err != nil || id == 0 {
		return 0, nil, err
	}
	return id, s.queueIDs[qid], nil
}

// copyAsk is the core's side of one look for a copy: the asking
// placeholder and its site (kept in the request so a look allocates
// nothing).
type copyAsk struct {
	s   *Store
	p   *parkedNext
	cur policy.Site
	to  catalog.Place
}

var _ copies.Ask = (*copyAsk)(nil)

// Copyable says whether job id, of queue qid's candidates, may be copied
// for a: a copy spends as a first run does, so the same walltime, budget
// and deadline gate (and the planner's cap at the asking site).
func (a *copyAsk) Copyable(qid int32, id int64) bool {
	s := a.s
	j, ok := s.g.Node(id)
	if !ok || j.State != job.Executing || j.Queue != qid {
		return false
	}
	q := s.queueIDs[qid]
	if ru := s.running[id]; q == nil || ru == nil || !s.repl.Apart(id, ru.Attempt) || !s.copyable(id, q) || runs.On(ru, s.copyRuns[id], a.p.req.Placeholder) {
		return false
	}
	return dispatch.Fits(j.Est, q.Ceiling, a.p.req.WalltimeLeft) && s.affordable(id, q, j, a.p.site)
}

// LocalBytes is how many bytes of job id's inputs are at a's site.
func (a *copyAsk) LocalBytes(id int64) int64 {
	return a.s.data.LocalBytes(id, a.cur, dc.Place(a.to), a.s.opt.Stager != nil, dcCatalog{a.s})
}

// Inputs lists the files job id reads.
func (a *copyAsk) Inputs(id int64) []string { return a.s.data.InputPaths(id) }

// Ready says whether queue qid has a ready job.
func (a *copyAsk) Ready(qid int32) bool { return a.s.queueIDs[qid].ready.Len() > 0 }

// Est is job id's expected runtime.
func (a *copyAsk) Est(id int64) float32 {
	j, _ := a.s.g.Node(id)
	return j.Est
}

// Here says whether job id's inputs are at a's storage place (always,
// without staging).
func (a *copyAsk) Here(id int64) (bool, error) {
	if a.s.opt.Stager == nil {
		return true, nil
	}
	return a.s.inputsAt([]int64{id}, a.to)
}

// dispatchCopy starts a copy of running job id for placeholder p: a new
// attempt number, recorded in job_copies, its lease renewed by p's
// heartbeats as any attempt's.
func (s *Store) dispatchCopy(p *parkedNext, id int64, q *queue) error {
	if !s.packFits(id, p) {
		return nil // its resources are not free here now
	}
	if err := s.begin(); err != nil {
		return err
	}
	now := s.now()
	var r assignRow
	err := s.w.QueryRowContext(context.Background(), jobsSQL.Get("NewCopyAttempt"), id).
		Scan(&r.attempt, &r.command, &r.cwd, &r.submitted, &r.env, &r.shared)
	if err != nil {
		return fatalError{fmt.Errorf("copy job %d: %w", id, err)}
	}
	s.reg.Worked(p.req.Placeholder)
	ru := &run{Attempt: r.attempt, Used: 1, Placeholder: p.req.Placeholder, Lease: now.Add(s.opt.Lease), Started: now}
	s.copyRuns[id] = append(s.copyRuns[id], ru)
	cr, cj := copies.Run{Job: id, Attempt: ru.Attempt, Placeholder: ru.Placeholder, Started: ru.Started}, s.copyJob(id)
	if err := s.repl.Started(context.Background(), s.w, cr, cj); err != nil {
		return fatalError{err}
	}
	j, ok := s.g.Node(id)
	if ok {
		s.econStart(id, q, j, ru, p.site)
	}
	a, err := s.assignment(id, j.Target, q, r, 0, 0)
	if err != nil {
		return err
	}
	a.Scratch = true
	a.Grant = s.packStartAttempt(id, r.attempt, p.req.Placeholder)
	p.reply.Jobs = append(p.reply.Jobs, a)
	s.log.Info("copy of a running job dispatched", "job", id, "attempt", r.attempt, "placeholder", p.req.Placeholder, "copies", len(s.copyRuns[id]))
	return nil
}

// loadCopies reads the copies running beside executing jobs (each with a
// fresh lease, as the job rows' own), which row attempts run apart and
// the jobs that opted out.
func (s *Store) loadCopies(ctx context.Context, now time.Time) error {
	runs, err := s.repl.Load(ctx, s.w)
	if err != nil {
		return err
	}
	for _, r := range runs {
		if s.running[r.Job] == nil {
			continue
		}
		c := &run{Attempt: r.Attempt, Used: 1, Placeholder: r.Placeholder, Lease: now.Add(s.opt.Lease), Started: r.Started}
		s.copyRuns[r.Job] = append(s.copyRuns[r.Job], c)
		s.reg.Know(r.Placeholder)
		// Running copies take their reservations and places under the
		// planner's caps again, as the job rows' own attempts do
		// (loadJobs).
		n, _ := s.g.Node(r.Job)
		if q := s.queueIDs[n.Queue]; q != nil && (q.costed() || s.ledger.Priced()) {
			site, err := s.siteName(c.Placeholder)
			if err != nil {
				return err
			}
			s.econStart(r.Job, q, n, c, site)
		}
	}
	return nil
}

// rebuildCopies makes the copy candidates afresh from s.running (after a
// load).
func (s *Store) rebuildCopies() {
	s.repl.Rebuild()
	for id := range s.running {
		s.repl.Sync(s.copyJob(id))
	}
}

// copyJob is what the module needs of job id's attempts running now.
func (s *Store) copyJob(id int64) copies.Job {
	j := copies.Job{ID: id, Runs: 1 + len(s.copyRuns[id])}
	if ru := s.running[id]; ru != nil {
		if n, ok := s.g.Node(id); ok {
			j.Row, j.Queue = ru.Attempt, n.Queue
		}
	}
	return j
}

// dataMoved bumps data.gen for outputs made or replicas added at the
// files of fs: the copy candidates reading them forget their local bytes.
func (s *Store) dataMoved(fs []fileDecl) {
	for _, f := range fs {
		s.repl.Moved(f.Path)
	}
	s.data.Changed()
}

// dataChanged bumps data.gen for a change that moved no file (the ready
// set, the placeholders predicted).
func (s *Store) dataChanged() { s.data.Changed() }
