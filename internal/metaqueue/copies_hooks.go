package metaqueue

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/copies"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// The core's side of job replication (package copies): the copies of a
// job are attempts the core runs as any other (s.copyRuns beside
// s.running, leases, placeholders); the module keeps what replication
// alone knows and writes its tables. What a copy spends goes to the
// ledger and what it reads is asked of the catalog from here, with the
// facts the module returns.

// replication is the copies module's state as the Store holds it.
type replication = copies.Copies

// copying reports whether q copies running jobs, and its bound on the
// attempts of one job running at once (0: none).
func (q *queue) copying() (on bool, most int) {
	return copies.Limit(q.pol.NewReplicator != nil, q.MaxCopies)
}

// replicator is q's end game: its policy's, or WQR's for a queue that
// copies by --max-copies alone.
func (q *queue) replicator() policy.Replicator {
	return copies.Replicator(q.pol.NewReplicator)
}

func (s *Store) countCopying() {
	n := 0
	for _, q := range s.qlist {
		if on, _ := q.copying(); on {
			n++
		}
	}
	s.repl.SetCopying(n)
}

// copyable says whether job id of queue q may run as several attempts at
// once: q copies, the job did not opt out, is not part of a bundle (a
// bundle's jobs share one slot), and every output it declared is a
// relative path inside its working directory (the agent makes those in a
// per-attempt directory; an absolute one it could not keep apart).
func (s *Store) copyable(id int64, q *queue) bool {
	if on, _ := q.copying(); !on || s.repl.OptedOut(id) {
		return false
	}
	if _, ok := s.bundles.Of(id); ok {
		return false
	}
	if jf := s.data.Job(id); jf != nil && jf.OutsideCwd {
		return false
	}
	return true
}

// under says whether path p lies strictly inside directory dir.
func under(dir, p string) bool {
	if dir == "" {
		return false
	}
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel)
}

// win makes ru the attempt the job row describes and ends every other
// attempt of the job as a killed copy.
func (s *Store) win(id int64, ru *run) error {
	if err := s.begin(); err != nil {
		return err
	}
	var others []*run
	if p := s.running[id]; p != nil && p != ru {
		others = append(others, p)
	}
	for _, c := range s.copyRuns[id] {
		if c != ru {
			others = append(others, c)
		}
	}
	if s.running[id] != ru {
		s.running[id] = ru
		if _, err := s.w.ExecContext(context.Background(), jobsSQL.Get("SetRowAttempt"),
			ru.attempt, ru.placeholder, micros(ru.started), id); err != nil {
			return fatalError{err}
		}
	}
	delete(s.copyRuns, id)
	j := s.copyJob(id)
	var now time.Time
	if len(others) > 0 {
		now = s.now()
	}
	ends, err := s.repl.Win(context.Background(), s.w, j, ru.attempt, copyRunsOf(id, others), now)
	if err != nil {
		return fatalError{err}
	}
	if err := s.chargeKilled(id, others, ends); err != nil {
		return err
	}
	if len(others) > 0 {
		s.log.Info("an attempt finished first; the other attempts are killed", "job", id, "attempt", ru.attempt, "killed", len(others))
	}
	return nil
}

// copyRunsOf is rs, attempts of job id, as the module sees them.
func copyRunsOf(id int64, rs []*run) []copies.Run {
	out := make([]copies.Run, len(rs))
	for i, r := range rs {
		out[i] = copies.Run{Job: id, Attempt: r.attempt, Placeholder: r.placeholder, Started: r.started}
	}
	return out
}

// chargeKilled charges what the killed attempts rs of job id ran (ends,
// in the same order, from the module) and holds the reservation of each
// whose late report is awaited until it comes (econDying), or releases it.
func (s *Store) chargeKilled(id int64, rs []*run, ends []copies.Ended) error {
	if len(ends) == 0 {
		return nil
	}
	var q *queue
	if j, ok := s.g.Node(id); ok {
		q = s.queueIDs[j.Queue]
	}
	for i, e := range ends {
		o := rs[i]
		s.packStop(id, o)
		if q != nil {
			if err := s.charge(id, q, o, e.Started, e.Finished, false); err != nil {
				return err
			}
		}
		if e.Kept {
			s.econDying(protocol.JobRef{ID: id, Attempt: o.attempt}, o)
		} else {
			s.econStop(id, o)
		}
	}
	return nil
}

// endAlone ends attempt ru of job id, which ended as out while another
// runs on: it is recorded (unless handed back unstarted) and charged as
// any attempt (the budget counts every attempt, failed or lost), and
// forgotten: a copy leaves the job's copies; the row's own gives way to
// the oldest copy, which the row then describes.
func (s *Store) endAlone(id int64, ru *run, out outcome, r protocol.Report) error {
	if err := s.begin(); err != nil {
		return err
	}
	cs := s.copyRuns[id]
	promoted := false
	if i := slices.Index(cs, ru); i >= 0 {
		s.setCopies(id, slices.Delete(cs, i, i+1))
	} else if s.running[id] == ru && len(cs) > 0 {
		next := cs[0]
		s.setCopies(id, cs[1:])
		s.running[id] = next
		promoted = true
		if _, err := s.w.ExecContext(context.Background(), jobsSQL.Get("SetRowAttempt"),
			next.attempt, next.placeholder, micros(next.started), id); err != nil {
			return fatalError{err}
		}
	}
	record := out != returned
	now := r.Finished
	if record && now.IsZero() {
		now = s.now()
	}
	j := s.copyJob(id)
	a := copies.Run{Job: id, Attempt: ru.attempt, Placeholder: ru.placeholder, Started: ru.started}
	started, finished, err := s.repl.EndAlone(context.Background(), s.w, j, a, r, record, promoted, now)
	if err != nil {
		return fatalError{err}
	}
	if record {
		if n, ok := s.g.Node(id); ok {
			if q := s.queueIDs[n.Queue]; q != nil {
				if err := s.charge(id, q, ru, started, finished, false); err != nil {
					return err
				}
			}
		}
	}
	s.econStop(id, ru)
	s.packStop(id, ru)
	return nil
}

// setCopies makes cs the copies of job id running (the caller tells the
// module).
func (s *Store) setCopies(id int64, cs []*run) {
	if len(cs) == 0 {
		delete(s.copyRuns, id)
	} else {
		s.copyRuns[id] = cs
	}
}

// setApart records whether the attempt job id's row describes runs apart
// and may have copies beside it.
func (s *Store) setApart(id int64, apart bool) error {
	j := s.copyJob(id)
	if err := s.repl.SetApart(context.Background(), s.w, j, apart); err != nil {
		return fatalError{err}
	}
	return nil
}

// stopCopies is the end of the attempt job id's row describes, for
// replication: it no longer runs apart, and every copy of the job, which
// stops executing for another reason (deleted, or its own attempt ended
// it), is killed at its placeholder's next heartbeat.
func (s *Store) stopCopies(id int64, reason string) error {
	cs := s.copyRuns[id]
	delete(s.copyRuns, id)
	j := s.copyJob(id)
	var now time.Time
	if len(cs) > 0 {
		now = s.now()
	}
	ends, err := s.repl.Stop(context.Background(), s.w, j, copyRunsOf(id, cs), reason, now)
	if err != nil {
		return fatalError{err}
	}
	return s.chargeKilled(id, cs, ends)
}

// lateReport keeps the CPU figures of a killed copy's report, which came
// after another attempt won, charges it up to when it stopped and
// releases its reservation.
func (s *Store) lateReport(ph int64, r protocol.Report) error {
	ref := protocol.JobRef{ID: r.ID, Attempt: r.Attempt}
	if !s.repl.TakeKilled(ref, ph) {
		return nil
	}
	if err := s.begin(); err != nil {
		return err
	}
	err := s.extendCharge(r.ID, r.Attempt, r.Finished)
	s.econDied(ref)
	if err != nil {
		return err
	}
	if err := s.repl.LateUsage(context.Background(), s.w, r); err != nil {
		return fatalError{err}
	}
	return nil
}

// localBytes is how many bytes of job id's inputs are at the asking
// placeholder's site (cur, with storage place to): with staging, those
// the catalog has a replica of there; without, those produced there.
func (s *Store) localBytes(id int64, cur policy.Site, to Place) int64 {
	jf := s.data.Job(id)
	if jf == nil {
		return 0
	}
	var b int64
	for _, f := range jf.In {
		size := f.Size
		if s.opt.Stager != nil {
			n, ok := s.cat.SizeAt(f.Path, to)
			if !ok {
				continue
			}
			if n >= 0 {
				size = n
			}
		} else {
			loc, ok := s.data.Where(f.Path)
			if !ok || loc.At != cur {
				continue
			}
			if size < 0 {
				size = loc.Size
			}
		}
		b += max(size, 0)
	}
	return b
}

// maxCopyTries bounds the jobs one request looks at to copy whose inputs
// turn out not to be at the asking placeholder's place.
const maxCopyTries = 8

// pickCopy chooses a running job to copy for placeholder p, from the
// queues that copy and have no ready job. It returns 0 for none.
func (s *Store) pickCopy(p *parkedNext) (int64, *queue, error) {
	gen := s.repl.Gen()
	if p.copyLooked && p.copyGen == gen && p.copyDataGen == s.data.Gen() {
		return 0, nil, nil // nothing changed since the last look
	}
	p.copyLooked, p.copyGen, p.copyDataGen = true, gen, s.data.Gen()
	ph := p.req.Placeholder
	cur, err := s.phSite(ph)
	if err != nil {
		return 0, nil, err
	}
	var to Place
	if s.opt.Stager != nil {
		if to, err = s.storePlace(ph); err != nil {
			return 0, nil, err
		}
	}
	look := s.repl.Look(copies.Where{Site: cur, StoreSite: to.Site, StoreHost: to.Host}, s.data.SiteAt(cur).Site, s.data.Untold())
	a := &p.copyAsk
	*a = copyAsk{s: s, p: p, cur: cur, to: to}
	for _, q := range s.qlist {
		// Only beside an attempt kept apart in scratch that has not won
		// (the index holds those): one run in the working directory
		// (dispatched before its queue copied) would write its outputs
		// over the winner's.
		on, most := q.copying()
		if !on || q.ready.Len() > 0 || !s.repl.Has(q.id) {
			continue
		}
		a.q = q
		look.Unskip()
		cq := copies.Queue{ID: q.id, Rep: q.replicator(), Most: most, NeedsFiles: q.pol.Needs&policy.NeedsFiles != 0}
		for try := 0; try < maxCopyTries; try++ {
			id := s.repl.Choose(&look, cq, a)
			if id == 0 {
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
			// Its inputs are on their way here: it may be copied once
			// they land (data.gen moves on then).
			look.Skip(id)
		}
	}
	return 0, nil, nil
}

// copyAsk is the core's side of one look for a copy: the asking
// placeholder, its site and the queue looked at.
type copyAsk struct {
	s   *Store
	p   *parkedNext
	q   *queue
	cur policy.Site
	to  Place
}

var _ copies.Ask = (*copyAsk)(nil)

// Copyable says whether job id, in a.q's index, may be copied for a.
func (a *copyAsk) Copyable(id int64) bool {
	s := a.s
	j, ok := s.g.Node(id)
	if !ok || j.State != job.Executing || s.queueIDs[j.Queue] != a.q {
		return false
	}
	if ru := s.running[id]; ru == nil || !s.repl.Apart(id, ru.attempt) || !s.copyable(id, a.q) || s.runsOn(id, a.p.req.Placeholder) {
		return false
	}
	// A copy spends as a first run does: the same budget and deadline
	// gate (and the planner's cap at the asking site).
	return fits(j.Est, a.q, a.p.req.WalltimeLeft) && s.affordable(a.q, j, a.p.site)
}

// LocalBytes is how many bytes of job id's inputs are at a's site.
func (a *copyAsk) LocalBytes(id int64) int64 { return a.s.localBytes(id, a.cur, a.to) }

// Inputs lists the files job id reads.
func (a *copyAsk) Inputs(id int64) []string {
	jf := a.s.data.Job(id)
	if jf == nil || len(jf.In) == 0 {
		return nil
	}
	out := make([]string, len(jf.In))
	for i, f := range jf.In {
		out[i] = f.Path
	}
	return out
}

// Est is job id's expected runtime.
func (a *copyAsk) Est(id int64) float32 {
	j, _ := a.s.g.Node(id)
	return j.Est
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
		Scan(&r.attempt, &r.command, &r.cwd, &r.submitted, &r.env)
	if err != nil {
		return fatalError{fmt.Errorf("copy job %d: %w", id, err)}
	}
	s.phWorked(p.req.Placeholder)
	ru := &run{attempt: r.attempt, used: 1, placeholder: p.req.Placeholder, lease: now.Add(s.opt.Lease), started: now}
	s.copyRuns[id] = append(s.copyRuns[id], ru)
	cj := s.copyJob(id)
	if err := s.repl.Started(context.Background(), s.w, copies.Run{Job: id, Attempt: r.attempt, Placeholder: p.req.Placeholder, Started: now}, cj); err != nil {
		return fatalError{err}
	}
	if j, ok := s.g.Node(id); ok {
		s.econStart(id, q, j, ru, p.site)
	}
	a, err := s.assignment(id, q, r, 0, 0)
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
		s.copyRuns[r.Job] = append(s.copyRuns[r.Job], &run{attempt: r.Attempt, used: 1, placeholder: r.Placeholder, lease: now.Add(s.opt.Lease), started: r.Started})
		s.phs[r.Placeholder] = true
	}
	// Running copies take their reservations and places under the
	// planner's caps again, as the job rows' own attempts do (loadJobs).
	for id, cs := range s.copyRuns {
		n, _ := s.g.Node(id)
		q := s.queueIDs[n.Queue]
		if q == nil || (!q.costed() && !s.ledger.Priced()) {
			continue
		}
		for _, c := range cs {
			site, err := s.siteName(c.placeholder)
			if err != nil {
				return err
			}
			s.econStart(id, q, n, c, site)
		}
	}
	return nil
}

// rebuildCopies makes the copy candidates afresh from s.running (after a
// load).
func (s *Store) rebuildCopies() {
	s.repl.Rebuild()
	for id := range s.running {
		s.syncCopy(id)
	}
}

// syncCopy tells the copy candidates index of job id's attempts running:
// every change of s.running or of s.copyRuns the module is not told of
// otherwise calls it for the job.
func (s *Store) syncCopy(id int64) {
	j := s.copyJob(id)
	s.repl.Sync(j)
}

// copyJob is what the module needs of job id's attempts running now.
func (s *Store) copyJob(id int64) copies.Job {
	j := copies.Job{ID: id, Runs: 1 + len(s.copyRuns[id])}
	if ru := s.running[id]; ru != nil {
		if n, ok := s.g.Node(id); ok {
			j.Row, j.Queue = ru.attempt, n.Queue
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

// dataMoved1 is dataMoved for one path.
func (s *Store) dataMoved1(path string) {
	s.repl.Moved(path)
	s.data.Changed()
}

// dataChanged bumps data.gen for a change that moved no file (the ready
// set, the placeholders predicted).
func (s *Store) dataChanged() {
	s.data.Changed()
}

// runningCopies lists the copies of job id running now.
func (s *Store) runningCopies(ctx context.Context, id int64) ([]protocol.AttemptInfo, error) {
	cs, err := copies.Running(ctx, s.rdb, id)
	if err != nil {
		return nil, err
	}
	var out []protocol.AttemptInfo
	for _, c := range cs {
		a := protocol.AttemptInfo{Attempt: c.Attempt, Site: c.Site, Host: c.Host, Started: formatMicros(c.Started)}
		if c.OutDir != "" {
			a.Stdout, a.Stderr = job.OutputPaths(c.OutDir, id, c.Attempt)
		}
		out = append(out, a)
	}
	return out, nil
}

// Waste totals what killed copies used (nil when none was killed).
func (s *Store) Waste(ctx context.Context) (*protocol.WasteTotals, error) {
	return copies.Waste(ctx, s.rdb)
}
