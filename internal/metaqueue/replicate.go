package metaqueue

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// Job replication (seed 000's WQR and Storage Affinity end
// game). When a placeholder asks and a queue that copies has no ready job,
// the queue's policy.Replicator picks a running job to copy: a new attempt
// of it runs at the asking placeholder beside the others (job_copies).
// The first attempt to finish wins: a copy that ends 0 (its report, or its
// agent's claim before it moves outputs into place) ends every other
// attempt of the job as a killed copy (attempts.killed_copy) and becomes
// the attempt the job row describes; the losers' placeholders are told to
// kill them at their next heartbeat, as for mqdel. An attempt that fails
// or is lost while another runs ends alone; the job follows the last one.
// Copies are not counted against max_attempts.

// replication is the core's memory of copies.
type replication struct {
	copies map[int64][]*run // job -> attempts running beside s.running[job]
	noCopy map[int64]bool   // jobs that opted out (job_no_replicate)
	// killed are copies killed for a winner whose placeholder has not
	// reported them yet: their report's CPU figures are still kept.
	killed map[protocol.JobRef]int64
	on     int    // queues that copy
	gen    uint64 // bumped when running attempts change (copy decisions may change)
	idx    copyIndex
}

func (r *replication) reset() {
	*r = replication{copies: map[int64][]*run{}, noCopy: map[int64]bool{}, killed: map[protocol.JobRef]int64{}}
	r.idx.reset()
}

// maxKilledKept bounds the killed copies whose late report is awaited.
const maxKilledKept = 100_000

// copying reports whether q copies running jobs, and its bound on the
// attempts of one job running at once (0: none).
func (q *queue) copying() (on bool, most int) {
	if q.pol.NewReplicator != nil {
		return q.MaxCopies != 1, q.MaxCopies
	}
	return q.MaxCopies >= 2, q.MaxCopies
}

// replicator is q's end game: its policy's, or WQR's for a queue that
// copies by --max-copies alone.
func (q *queue) replicator() policy.Replicator {
	if q.pol.NewReplicator != nil {
		return q.pol.NewReplicator()
	}
	return policy.WQR{}
}

func (s *Store) countCopying() {
	n := 0
	for _, q := range s.qlist {
		if on, _ := q.copying(); on {
			n++
		}
	}
	s.repl.on = n
}

// copyable says whether job id of queue q may run as several attempts at
// once: q copies, the job did not opt out, is not part of a bundle (a
// bundle's jobs share one slot), and every output it declared is a
// relative path inside its working directory (the agent makes those in a
// per-attempt directory; an absolute one it could not keep apart).
func (s *Store) copyable(id int64, q *queue) bool {
	if on, _ := q.copying(); !on || s.repl.noCopy[id] {
		return false
	}
	if _, ok := s.bundles.of[id]; ok {
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

// runOf finds the attempt of job id that placeholder ph runs, the job
// row's own or a copy (nil if none).
func (s *Store) runOf(id int64, attempt int, ph int64) *run {
	if ru := s.running[id]; ru != nil && ru.attempt == attempt && ru.placeholder == ph {
		return ru
	}
	for _, c := range s.repl.copies[id] {
		if c.attempt == attempt && c.placeholder == ph {
			return c
		}
	}
	return nil
}

// runsOn says whether placeholder ph runs an attempt of job id.
func (s *Store) runsOn(id, ph int64) bool {
	if ru := s.running[id]; ru != nil && ru.placeholder == ph {
		return true
	}
	for _, c := range s.repl.copies[id] {
		if c.placeholder == ph {
			return true
		}
	}
	return false
}

// attemptEnded moves a job on after one of its attempts ended as out,
// minding the other attempts running beside it.
func (s *Store) attemptEnded(id int64, j dag.Node, ru *run, out outcome, r protocol.Report) error {
	if len(s.repl.copies[id]) == 0 {
		return s.endAttempt(id, j, ru, out, r)
	}
	if out == succeeded {
		// The first to finish wins (unless its agent claimed first).
		if err := s.win(id, ru); err != nil {
			return err
		}
		return s.endAttempt(id, j, ru, out, r)
	}
	// Another attempt runs on: this one ends alone.
	if out != returned {
		if err := s.keepCopy(id, ru, r, false); err != nil {
			return err
		}
	}
	return s.dropRun(id, ru)
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
	for _, c := range s.repl.copies[id] {
		if c != ru {
			others = append(others, c)
		}
	}
	// The winner moves its outputs into place: no copy may start beside
	// it any more (a later one could claim and win again).
	if err := s.setApart(id, ru, false); err != nil {
		return err
	}
	if s.running[id] != ru {
		s.running[id] = ru
		if _, err := s.w.ExecContext(context.Background(), "UPDATE jobs SET row_attempt = ?, placeholder_id = ?, started = ? WHERE id = ?",
			ru.attempt, ru.placeholder, micros(ru.started), id); err != nil {
			return fatalError{err}
		}
	}
	delete(s.repl.copies, id)
	s.syncCopy(id)
	s.repl.gen++
	if _, err := s.w.ExecContext(context.Background(), "DELETE FROM job_copies WHERE job_id = ?", id); err != nil {
		return fatalError{err}
	}
	now := s.now()
	reason := fmt.Sprintf("killed: attempt %d of the job finished first", ru.attempt)
	for _, o := range others {
		if err := s.keepCopy(id, o, protocol.Report{Finished: now, Reason: reason}, true); err != nil {
			return err
		}
		s.killedCopy(id, o)
	}
	if len(others) > 0 {
		s.log.Info("an attempt finished first; the other attempts are killed", "job", id, "attempt", ru.attempt, "killed", len(others))
	}
	return nil
}

// keepCopy records an attempt that ended while the job goes on (or ended
// by another attempt) in attempts.
func (s *Store) keepCopy(id int64, ru *run, r protocol.Report, killed bool) error {
	if err := s.begin(); err != nil {
		return err
	}
	started, finished := r.Started, r.Finished
	if started.IsZero() {
		started = ru.started
	}
	if finished.IsZero() {
		finished = s.now()
	}
	var exit, cpuUser, cpuSys, maxRSS any
	if !killed && r.Reason != protocol.ReasonInterrupted && !strings.HasPrefix(r.Reason, "lost") {
		exit = r.Exit
	}
	if r.Usage.Measured() && protocol.CheckUsage(r.Usage) == nil {
		cpuUser, cpuSys, maxRSS = r.CPUUser, r.CPUSys, r.MaxRSS
	}
	reason := r.Reason
	if reason == "" {
		reason = fmt.Sprintf("exit status %d while another attempt ran on", r.Exit)
	}
	if _, err := s.w.ExecContext(context.Background(), `INSERT OR REPLACE INTO attempts (job_id, attempt, placeholder_id, started, finished,
		exit, reason, cpu_user, cpu_sys, max_rss, killed_copy) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		id, ru.attempt, ru.placeholder, micros(started), micros(finished), exit, reason, cpuUser, cpuSys, maxRSS, killed); err != nil {
		return fatalError{err}
	}
	// What it ran is spent, whether it lost, failed or was lost: charged
	// as any attempt (seed 002's budget counts every attempt).
	if j, ok := s.g.Node(id); ok {
		if q := s.queueIDs[j.Queue]; q != nil {
			return s.charge(id, q, ru, started, finished, false)
		}
	}
	return nil
}

// dropRun forgets attempt ru of job id, which ended while the job goes on:
// a copy leaves job_copies; the job row's own gives way to the oldest
// copy, which the row then describes.
func (s *Store) dropRun(id int64, ru *run) error {
	if err := s.begin(); err != nil {
		return err
	}
	s.repl.gen++
	s.econStop(id, ru)
	cs := s.repl.copies[id]
	if i := slices.Index(cs, ru); i >= 0 {
		cs = slices.Delete(cs, i, i+1)
		s.setCopies(id, cs)
		_, err := s.w.ExecContext(context.Background(), "DELETE FROM job_copies WHERE job_id = ? AND attempt = ?", id, ru.attempt)
		if err != nil {
			return fatalError{err}
		}
		return nil
	}
	if s.running[id] != ru || len(cs) == 0 {
		return nil
	}
	next := cs[0]
	s.setCopies(id, cs[1:])
	s.running[id] = next
	if err := s.setApart(id, next, next.apart); err != nil {
		return err
	}
	if _, err := s.w.ExecContext(context.Background(), "DELETE FROM job_copies WHERE job_id = ? AND attempt = ?", id, next.attempt); err != nil {
		return fatalError{err}
	}
	if _, err := s.w.ExecContext(context.Background(), "UPDATE jobs SET row_attempt = ?, placeholder_id = ?, started = ? WHERE id = ?",
		next.attempt, next.placeholder, micros(next.started), id); err != nil {
		return fatalError{err}
	}
	return nil
}

func (s *Store) setCopies(id int64, cs []*run) {
	if len(cs) == 0 {
		delete(s.repl.copies, id)
	} else {
		s.repl.copies[id] = cs
	}
	s.syncCopy(id)
}

// setApart records whether ru, the attempt job id's row describes, runs
// apart and may have copies beside it (job_apart: a restart must know).
// Only a change is written, so jobs of queues that never copy cost
// nothing.
func (s *Store) setApart(id int64, ru *run, apart bool) error {
	was := ru.apart
	ru.apart = apart
	s.syncCopy(id)
	var err error
	switch {
	case apart:
		_, err = s.w.ExecContext(context.Background(), "INSERT OR REPLACE INTO job_apart (job_id, attempt) VALUES (?, ?)", id, ru.attempt)
	case was:
		_, err = s.w.ExecContext(context.Background(), "DELETE FROM job_apart WHERE job_id = ?", id)
	}
	if err != nil {
		return fatalError{err}
	}
	return nil
}

// stopCopies ends every copy of job id, which stops executing for another
// reason (deleted, or its own attempt ended it): they are killed at their
// placeholders' next heartbeat.
func (s *Store) stopCopies(id int64, reason string) error {
	cs := s.repl.copies[id]
	if len(cs) == 0 {
		return nil
	}
	now := s.now()
	for _, c := range cs {
		if err := s.keepCopy(id, c, protocol.Report{Finished: now, Reason: reason}, true); err != nil {
			return err
		}
		s.killedCopy(id, c)
	}
	delete(s.repl.copies, id)
	s.syncCopy(id)
	s.repl.gen++
	if _, err := s.w.ExecContext(context.Background(), "DELETE FROM job_copies WHERE job_id = ?", id); err != nil {
		return fatalError{err}
	}
	return nil
}

// killedCopy remembers a copy of job id just killed, which runs on until
// its placeholder's next heartbeat: its late report is kept and its
// reservation held (and that time charged) until then (econDying). Past
// maxKilledKept, it is charged up to the kill only.
func (s *Store) killedCopy(id int64, o *run) {
	if len(s.repl.killed) >= maxKilledKept {
		s.econStop(id, o)
		return
	}
	ref := protocol.JobRef{ID: id, Attempt: o.attempt}
	s.repl.killed[ref] = o.placeholder
	s.econDying(ref, o)
}

// lateReport keeps the CPU figures of a killed copy's report, which came
// after another attempt won, charges it up to when it stopped and
// releases its reservation.
func (s *Store) lateReport(ph int64, r protocol.Report) error {
	ref := protocol.JobRef{ID: r.ID, Attempt: r.Attempt}
	if got, ok := s.repl.killed[ref]; !ok || got != ph {
		return nil
	}
	delete(s.repl.killed, ref)
	if err := s.begin(); err != nil {
		return err
	}
	err := s.extendCharge(r.ID, r.Attempt, r.Finished)
	s.econDied(ref)
	if err != nil {
		return err
	}
	if !r.Usage.Measured() || protocol.CheckUsage(r.Usage) != nil {
		return nil
	}
	_, err = s.w.ExecContext(context.Background(), `UPDATE attempts SET cpu_user = ?, cpu_sys = ?, max_rss = ?
		WHERE job_id = ? AND attempt = ? AND killed_copy = 1`, r.CPUUser, r.CPUSys, r.MaxRSS, r.ID, r.Attempt)
	if err != nil {
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
// queues that copy and have no ready job. It returns 0 for none. It looks
// at the copy candidates (copyIndex), not every running job.
func (s *Store) pickCopy(p *parkedNext) (int64, *queue, error) {
	if p.copyLooked && p.copyGen == s.repl.gen && p.copyDataGen == s.data.Gen() {
		return 0, nil, nil // nothing changed since the last look
	}
	p.copyLooked, p.copyGen, p.copyDataGen = true, s.repl.gen, s.data.Gen()
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
	x := &s.repl.idx
	x.fresh(s)
	k := siteKey{cur: cur, to: to}
	key, ok := x.keys[k]
	if !ok {
		key = uint32(len(x.keys) + 1)
		x.keys[k] = key
	}
	a := &copyAsk{p: p, ph: ph, cur: cur, to: to, key: key}
	for _, q := range s.qlist {
		// Only beside an attempt kept apart in scratch that has not won
		// (the index holds those): one run in the working directory
		// (dispatched before its queue copied) would write its outputs
		// over the winner's.
		if on, _ := q.copying(); !on || q.ready.Len() > 0 || x.queues[q.id] == nil {
			continue
		}
		rep := q.replicator()
		a.skip = a.skip[:0]
		for try := 0; try < maxCopyTries; try++ {
			id := s.chooseCopy(q, rep, a)
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
			a.skip = append(a.skip, id)
		}
	}
	return 0, nil, nil
}

// dispatchCopy starts a copy of running job id for placeholder p: a new
// attempt number, recorded in job_copies, its lease renewed by p's
// heartbeats as any attempt's.
func (s *Store) dispatchCopy(p *parkedNext, id int64, q *queue) error {
	if err := s.begin(); err != nil {
		return err
	}
	now := s.now()
	var r assignRow
	err := s.w.QueryRowContext(context.Background(), `UPDATE jobs SET row_attempt = coalesce(row_attempt, attempts), attempts = attempts + 1,
		attempt_base = attempt_base + 1 WHERE id = ? AND state = 'E'
		RETURNING attempts, command, cwd, submitted, coalesce((SELECT env FROM job_env WHERE job_id = jobs.id), '')`, id).
		Scan(&r.attempt, &r.command, &r.cwd, &r.submitted, &r.env)
	if err != nil {
		return fatalError{fmt.Errorf("copy job %d: %w", id, err)}
	}
	s.phWorked(p.req.Placeholder)
	if _, err := s.w.ExecContext(context.Background(), "INSERT INTO job_copies (job_id, attempt, placeholder_id, started) VALUES (?, ?, ?, ?)",
		id, r.attempt, p.req.Placeholder, micros(now)); err != nil {
		return fatalError{err}
	}
	ru := &run{attempt: r.attempt, used: 1, placeholder: p.req.Placeholder, lease: now.Add(s.opt.Lease), started: now, apart: true}
	s.repl.copies[id] = append(s.repl.copies[id], ru)
	s.syncCopy(id)
	s.repl.gen++
	if j, ok := s.g.Node(id); ok {
		s.econStart(id, q, j, ru, p.site)
	}
	a, err := s.assignment(id, q, r, 0, 0)
	if err != nil {
		return err
	}
	a.Scratch = true
	p.reply.Jobs = append(p.reply.Jobs, a)
	s.log.Info("copy of a running job dispatched", "job", id, "attempt", r.attempt, "placeholder", p.req.Placeholder, "copies", len(s.repl.copies[id]))
	return nil
}

// loadCopies reads the copies running beside executing jobs (each with a
// fresh lease, as the job rows' own) and the jobs that opted out.
func (s *Store) loadCopies(ctx context.Context, now time.Time) error {
	rows, err := s.w.QueryContext(ctx, `SELECT c.job_id, c.attempt, c.placeholder_id, c.started FROM job_copies c JOIN jobs j ON j.id = c.job_id
		WHERE j.state = 'E' ORDER BY c.job_id, c.attempt`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id, ph, started int64
		var attempt int
		if err := rows.Scan(&id, &attempt, &ph, &started); err != nil {
			rows.Close()
			return err
		}
		if s.running[id] == nil {
			continue
		}
		s.repl.copies[id] = append(s.repl.copies[id], &run{attempt: attempt, used: 1, placeholder: ph, lease: now.Add(s.opt.Lease), started: time.UnixMicro(started), apart: true})
		s.phs[ph] = true
	}
	if err := closeRows(rows); err != nil {
		return err
	}
	// Running copies take their reservations and places under the
	// planner's caps again, as the job rows' own attempts do (loadJobs).
	for id, cs := range s.repl.copies {
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
	// Which job rows' attempts run apart (job_apart; a row for another
	// attempt is stale).
	rows, err = s.w.QueryContext(ctx, "SELECT a.job_id, a.attempt FROM job_apart a JOIN jobs j ON j.id = a.job_id WHERE j.state = 'E'")
	if err != nil {
		return err
	}
	for rows.Next() {
		var id int64
		var attempt int
		if err := rows.Scan(&id, &attempt); err != nil {
			rows.Close()
			return err
		}
		if ru := s.running[id]; ru != nil && ru.attempt == attempt {
			ru.apart = true
		}
	}
	if err := closeRows(rows); err != nil {
		return err
	}
	rows, err = s.w.QueryContext(ctx, "SELECT job_id FROM job_no_replicate")
	if err != nil {
		return err
	}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		s.repl.noCopy[id] = true
	}
	return closeRows(rows)
}

// runningCopies lists the copies of job id running now.
func (s *Store) runningCopies(ctx context.Context, id int64) ([]protocol.AttemptInfo, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT c.attempt, coalesce(p.site, ''), coalesce(p.host, ''), c.started, coalesce(p.out_dir, '')
		FROM job_copies c LEFT JOIN placeholders p ON p.id = c.placeholder_id WHERE c.job_id = ? ORDER BY c.attempt`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []protocol.AttemptInfo
	for rows.Next() {
		var a protocol.AttemptInfo
		var started sql.NullInt64
		var outDir string
		if err := rows.Scan(&a.Attempt, &a.Site, &a.Host, &started, &outDir); err != nil {
			return nil, err
		}
		a.Started = formatMicros(started)
		if outDir != "" {
			a.Stdout, a.Stderr = job.OutputPaths(outDir, id, a.Attempt)
		}
		out = append(out, a)
	}
	return out, closeRows(rows)
}

// Waste totals what killed copies used (nil when none was killed).
func (s *Store) Waste(ctx context.Context) (*protocol.WasteTotals, error) {
	var w protocol.WasteTotals
	err := s.rdb.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(coalesce(cpu_user, 0) + coalesce(cpu_sys, 0)), 0),
		coalesce(sum(max(finished - started, 0)), 0) / 1e6 FROM attempts WHERE killed_copy = 1`).Scan(&w.Killed, &w.CPUSeconds, &w.WallSeconds)
	if err != nil || w.Killed == 0 {
		return nil, err
	}
	// Bytes staged for a job to a site where only a killed copy of it ran.
	err = s.rdb.QueryRowContext(ctx, `SELECT coalesce(sum(t.bytes), 0) FROM transfers t
		WHERE t.error = '' AND t.job_id IN (SELECT job_id FROM attempts WHERE killed_copy = 1)
		AND t.to_site IN (SELECT p.site FROM attempts a JOIN placeholders p ON p.id = a.placeholder_id WHERE a.job_id = t.job_id AND a.killed_copy = 1)
		AND t.to_site NOT IN (SELECT p.site FROM jobs j JOIN placeholders p ON p.id = j.placeholder_id WHERE j.id = t.job_id)`).Scan(&w.Bytes)
	return &w, err
}
