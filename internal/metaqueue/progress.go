package metaqueue

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// A watch keeps the counts by state of a set of jobs up to date as the
// core applies state changes (applyChanges), so following a million jobs
// costs a few comparisons per change and nothing per frame. The set is a
// range of ids, a list of ids, or every job of a queue and/or target.
type watch struct {
	req    protocol.Progress
	ids    map[int64]bool
	queue  int32 // 0: any
	target dag.TargetID
	hasQ   bool
	hasT   bool
	counts [128]int
	// ended is signalled (without blocking) when no job is W, Q or E.
	ended chan struct{}
}

func (w *watch) has(c dag.Change) bool {
	switch {
	case w.req.First > 0:
		return c.ID >= w.req.First && c.ID <= w.req.Last
	case w.ids != nil:
		return w.ids[c.ID]
	}
	return (!w.hasQ || c.Queue == w.queue) && (!w.hasT || c.Target == w.target)
}

func (w *watch) apply(c dag.Change) {
	if c.From != 0 {
		w.counts[c.From]--
	}
	w.counts[c.To]++
	if w.pending() == 0 {
		select {
		case w.ended <- struct{}{}:
		default:
		}
	}
}

func (w *watch) pending() int {
	return w.counts[job.Waiting] + w.counts[job.Queued] + w.counts[job.Held] + w.counts[job.Executing]
}

// named reports whether the watch is over named jobs (a range or list),
// which count when deleted, rather than a queue, target or everything.
func (w *watch) named() bool { return w.req.First > 0 || w.ids != nil }

func (w *watch) reply() protocol.ProgressReply {
	r := protocol.ProgressReply{Counts: map[string]int{}}
	for _, st := range job.States {
		n := w.counts[st]
		if n != 0 {
			r.Counts[st.String()] = n
		}
		if st != job.Deleted || w.named() {
			r.Total += n // deleted jobs count only when named
		}
	}
	return r
}

// maxProgressIDs bounds a listed selection (a range has no bound).
const maxProgressIDs = 100000

// checkProgress validates a request before the core sees it.
func checkProgress(req protocol.Progress) error {
	named := 0
	if req.First != 0 || req.Last != 0 {
		named++
		if req.First <= 0 || req.Last < req.First {
			return protocol.Errorf(protocol.CodeBadRequest, "bad id range %d..%d", req.First, req.Last)
		}
	}
	if len(req.IDs) > 0 {
		named++
		if len(req.IDs) > maxProgressIDs {
			return protocol.Errorf(protocol.CodeBadRequest, "at most %d listed jobs (give a range)", maxProgressIDs)
		}
	}
	if named > 1 || (named == 1 && (req.Queue != "" || req.Target != "")) {
		return protocol.Errorf(protocol.CodeBadRequest, "select jobs by a range, by ids, or by queue and target: one of them")
	}
	if err := protocol.CheckMillis("interval_ms", int64(req.IntervalMS)); err != nil {
		return protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	return nil
}

// initWatch counts the watch's jobs as they are now.
func (s *Store) initWatch(w *watch) error {
	w.counts = [128]int{}
	switch {
	case w.req.First > 0:
		if w.req.Last >= s.nextID {
			return protocol.Errorf(protocol.CodeNotFound, "job %d does not exist", w.req.Last)
		}
		gone := 0
		for id := w.req.First; id <= w.req.Last; id++ {
			if j, ok := s.g.Node(id); ok {
				w.counts[j.State]++
			} else {
				gone++
			}
		}
		if gone > 0 {
			// Ended jobs are not in memory: one scan of the range.
			if err := s.countRows(w, jobsSQL.Get("EndedStates"), w.req.First, w.req.Last); err != nil {
				return err
			}
		}
	case w.ids != nil:
		for id := range w.ids {
			if j, ok := s.g.Node(id); ok {
				w.counts[j.State]++
				continue
			}
			end, err := s.jobEnd(id)
			if err != nil {
				return err
			}
			w.counts[end.State[0]]++
		}
	case w.req.Target != "":
		t, ok := s.g.Lookup(w.req.Target)
		if !ok {
			return protocol.Errorf(protocol.CodeNotFound, "target %s does not exist", w.req.Target)
		}
		w.target, w.hasT = t, true
		q := baseQuery(jobsSQL, "TargetStates")
		args := []any{int32(t)}
		if w.hasQ {
			q += " AND queue_id = ?"
			args = append(args, w.queue)
		}
		if err := s.countRows(w, q+" GROUP BY state", args...); err != nil {
			return err
		}
	default:
		for qid, c := range s.counts {
			if w.hasQ && qid != w.queue {
				continue
			}
			for _, st := range job.States {
				w.counts[st] += c[st]
			}
		}
	}
	return nil
}

// spending fills what the attempts of w's jobs cost, in all and per
// site: a target's (or a range's) from the charges table, a queue's or
// every queue's from memory. Listed ids get none.
func (s *Store) spending(w *watch, r *protocol.ProgressReply) error {
	by := map[string]float64{}
	switch {
	case w.ids != nil:
		return nil
	case w.hasT || w.req.First > 0:
		var q string
		var args []any
		if w.hasT {
			q = attemptsSQL.Get("SpentByTarget")
			args = append(args, int32(w.target))
			if w.hasQ {
				q = attemptsSQL.Get("SpentByTargetQueue")
				args = append(args, w.queue)
			}
		} else {
			q = attemptsSQL.Get("SpentByRange")
			args = append(args, w.req.First, w.req.Last)
		}
		rows, err := s.w.QueryContext(context.Background(), q, args...)
		if err != nil {
			return fatalError{err}
		}
		for rows.Next() {
			var site string
			var cost float64
			if err := rows.Scan(&site, &cost); err != nil {
				rows.Close()
				return fatalError{err}
			}
			by[site] += cost
		}
		if err := closeRows(rows); err != nil {
			return fatalError{err}
		}
	default:
		s.ledger.EachSpent(func(qid int32, site string, v float64) {
			if !w.hasQ || qid == w.queue {
				by[site] += v
			}
		})
	}
	for site, v := range by {
		if r.SpentBySite == nil {
			r.SpentBySite = map[string]float64{}
		}
		r.SpentBySite[site] = v
		r.Spent += v
	}
	return nil
}

func (s *Store) countRows(w *watch, q string, args ...any) error {
	rows, err := s.w.QueryContext(context.Background(), q, args...)
	if err != nil {
		return fatalError{err}
	}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			rows.Close()
			return fatalError{err}
		}
		w.counts[st[0]] += n
	}
	if err := closeRows(rows); err != nil {
		return fatalError{err}
	}
	return nil
}

// notDone lists up to protocol.MaxNotDone of the watch's jobs that ended
// otherwise than done (failed, deleted, blocked), and how many more there
// are. It reads through the read pool: the core is not held.
func (s *Store) notDone(ctx context.Context, w *watch) ([]protocol.JobEnd, int, error) {
	bad := w.counts[job.Failed] + w.counts[job.Blocked]
	states := "'F','B'"
	if w.named() {
		bad += w.counts[job.Deleted]
		states = "'F','B','X'"
	}
	if bad == 0 {
		return nil, 0, nil
	}
	var where []string
	var args []any
	switch {
	case w.req.First > 0:
		where, args = append(where, "id BETWEEN ? AND ?"), append(args, w.req.First, w.req.Last)
	case w.ids != nil:
		var b strings.Builder
		n := 0
		for id := range w.ids {
			if n > 0 {
				b.WriteByte(',')
			}
			fmt.Fprint(&b, id)
			n++
		}
		where = append(where, "id IN ("+b.String()+")")
	default:
		if w.hasT {
			where, args = append(where, "target_id = ?"), append(args, int32(w.target))
		}
		if w.hasQ {
			where, args = append(where, "queue_id = ?"), append(args, w.queue)
		}
	}
	where = append(where, "state IN ("+states+")")
	rows, err := s.rdb.QueryContext(ctx, baseQuery(jobsSQL, "NotDone")+" WHERE "+strings.Join(where, " AND ")+" ORDER BY id LIMIT ?", append(args, protocol.MaxNotDone)...)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var out []protocol.JobEnd
	for rows.Next() {
		var e protocol.JobEnd
		var exit sql.NullInt64
		var reason sql.NullString
		if err := rows.Scan(&e.ID, &e.State, &exit, &reason); err != nil {
			return nil, 0, err
		}
		if exit.Valid {
			x := int(exit.Int64)
			e.Exit = &x
		}
		e.Reason = reason.String
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	return out, max(0, bad-len(out)), nil
}

// Progress sends the counts by state of the selected jobs every interval
// (and at once when the last one ends) until none is waiting, queued or
// executing; the last frame has Ended set and names jobs that did not end
// done. With req.Once it sends the counts now and returns.
func (s *Store) Progress(ctx context.Context, req protocol.Progress, send func(protocol.ProgressReply) error) error {
	if err := checkProgress(req); err != nil {
		return err
	}
	every := time.Duration(req.IntervalMS) * time.Millisecond
	if every == 0 {
		every = time.Second
	}
	every = max(every, 100*time.Millisecond)
	w := &watch{req: req, ended: make(chan struct{}, 1)}
	if len(req.IDs) > 0 {
		w.ids = make(map[int64]bool, len(req.IDs))
		for _, id := range req.IDs {
			if id <= 0 {
				return protocol.Errorf(protocol.CodeBadRequest, "%d is not a job id", id)
			}
			w.ids[id] = true
		}
	}
	var snap protocol.ProgressReply
	pending := 0
	err := s.do(ctx, func() error {
		if req.Queue != "" {
			q := s.queues[req.Queue]
			if q == nil {
				return protocol.Errorf(protocol.CodeNotFound, "queue %s does not exist", req.Queue)
			}
			w.queue, w.hasQ = q.id, true
		}
		if err := s.initWatch(w); err != nil {
			return err
		}
		snap, pending = w.reply(), w.pending()
		if req.Once && req.Spending {
			if err := s.spending(w, &snap); err != nil {
				return err
			}
		}
		if !req.Once && pending > 0 {
			s.watches[w] = struct{}{}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if req.Once {
		return send(snap)
	}
	defer s.do(context.WithoutCancel(ctx), func() error {
		delete(s.watches, w)
		return nil
	})
	tick := time.NewTicker(every)
	defer tick.Stop()
	for pending > 0 {
		if err := send(snap); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		case <-w.ended:
		}
		if err := s.do(ctx, func() error {
			snap, pending = w.reply(), w.pending()
			if pending == 0 {
				delete(s.watches, w) // the counts are final
			}
			return nil
		}); err != nil {
			return err
		}
	}
	snap.Ended = true
	nd, more, err := s.notDone(ctx, w)
	if err != nil {
		return err
	}
	snap.NotDone, snap.MoreNotDone = nd, more
	return send(snap)
}

// watchChanges updates the watches with a batch of state changes.
func (s *Store) watchChanges(ch []dag.Change) {
	for w := range s.watches {
		for _, c := range ch {
			if w.has(c) {
				w.apply(c)
			}
		}
	}
}

// rewatch recounts every watch after the state was reloaded.
func (s *Store) rewatch() {
	for w := range s.watches {
		if err := s.initWatch(w); err != nil {
			s.log.Warn("progress watch dropped after a reload", "err", err)
			delete(s.watches, w)
		}
	}
}
