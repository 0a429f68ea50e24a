package progress

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// State is what counting a watch reads of the core, on the core
// goroutine.
type State interface {
	// Node is a job in memory (not ended), Lookup a target of the graph
	// and TargetName its name.
	Node(id int64) (dag.Node, bool)
	Lookup(target string) (dag.TargetID, bool)
	TargetName(t dag.TargetID) string
	// NextID is the id the next job submitted will get.
	NextID() int64
	// Queue is the id of the queue named.
	Queue(name string) (int32, bool)
	// EachCount calls f with each queue's counts by state letter.
	EachCount(f func(q int32, c *[128]int))
	// EndState is the state of a job no longer in memory.
	EndState(id int64) (job.State, error)
	// EachSpent calls f with what each queue spent at each site.
	EachSpent(f func(q int32, site string, cost float64))
	// Query reads through the core's writer, in its open transaction.
	Query(query string, args ...any) (*sql.Rows, error)
	// Unstarted are the Executing jobs handed out ahead whose placeholder
	// has not said it started them (shown P): as many as the placeholders
	// hold, not the metaqueue's size.
	Unstarted() iter.Seq[int64]
	// ArrayCounts is the members by state of the array whose ids are
	// exactly first..last, if there is one, kept as they change.
	ArrayCounts(first, last int64) ([128]int, bool)
	// Targets are the targets' jobs by state, kept as they change.
	Targets() Targets
}

// Targets is each target's jobs by state (those with a row: purged ones
// are not), kept as they change (module bystate).
type Targets interface {
	Target(t dag.TargetID) [128]int
	// TargetIn is the same of a target's jobs in queue q, and false when
	// the core does not know them (they are then counted from rows).
	TargetIn(t dag.TargetID, q int32) ([128]int, bool)
}

// count counts the watch's jobs as they are now.
func (w *Watch) count(st State) error {
	w.counts = [128]int{}
	switch {
	case w.req.First > 0:
		if counted, err := w.rangeKnown(st); counted || err != nil {
			return err
		}
		gone := 0
		for id := w.req.First; id <= w.req.Last; id++ {
			if j, ok := st.Node(id); ok {
				w.counts[j.State]++
			} else {
				gone++
			}
		}
		if gone > 0 {
			// Ended jobs are not in memory: one scan of the range.
			return w.countRows(st.Query, queries.Get("EndedStates"), w.req.First, w.req.Last)
		}
	case w.ids != nil:
		for id := range w.ids {
			if j, ok := st.Node(id); ok {
				w.counts[j.State]++
				continue
			}
			s, err := st.EndState(id)
			if err != nil {
				return err
			}
			w.counts[s]++
		}
	case w.req.Target != "":
		if counted, err := w.targetKnown(st); counted || err != nil {
			return err
		}
		return w.countRowsOf(st.Query)
	case w.req.TargetPrefix != "":
		w.name = st.TargetName
		return w.countRowsOf(st.Query)
	default:
		st.EachCount(func(qid int32, c *[128]int) {
			if w.hasQ && qid != w.queue {
				return
			}
			for _, s := range job.States {
				w.counts[s] += c[s]
			}
		})
	}
	return nil
}

// rangeKnown checks the watch's range exists and, if it is exactly one
// array's (mqsub -b --array, mqwait FIRST-LAST), counts it from the
// array's kept counts, reading no member.
func (w *Watch) rangeKnown(st State) (counted bool, err error) {
	if next := st.NextID(); w.req.First >= next {
		// No job has an id in it: said as mqdel and mqstat say it.
		return false, rangeNotFound(w.req.First, w.req.Last)
	} else if w.req.Last >= next {
		return false, notFound(w.req.Last)
	}
	c, ok := st.ArrayCounts(w.req.First, w.req.Last)
	if ok {
		w.counts = c
	}
	return ok, nil
}

// readsRows reports whether counting the watch reads rows: a target's
// jobs, a target prefix's, a range's or listed ones, rather than the
// core's counts by queue.
func (w *Watch) readsRows() bool { return w.req.Target != "" || w.req.TargetPrefix != "" || w.named() }

// lookup names, on the core, what the watch's request does: its queue and
// target, its range or listed jobs checked to exist (those past the last
// job submitted do not). A target (in no queue) or one array's range it
// counts from the core's kept counts (counted).
func (w *Watch) lookup(st State) (counted bool, err error) {
	if err := w.lookupQueue(st); err != nil {
		return false, err
	}
	switch {
	case w.req.First > 0:
		return w.rangeKnown(st)
	case w.ids != nil:
		next := st.NextID()
		var past int64
		for id := range w.ids {
			if id >= next && (past == 0 || id < past) {
				past = id
			}
		}
		if past != 0 {
			return false, notFound(past)
		}
		return false, nil
	case w.req.TargetPrefix != "":
		// Its targets' jobs are counted from their rows, which may be
		// many; changes are matched by their target's name.
		w.name = st.TargetName
		return false, nil
	}
	return w.targetKnown(st)
}

// targetKnown looks the watch's target up and counts it (in its queue,
// if one narrows it) from the target's kept counts, reading no job; false
// where the core does not know them by queue (Targets.In).
func (w *Watch) targetKnown(st State) (counted bool, err error) {
	if err := w.lookupTarget(st); err != nil {
		return false, err
	}
	if w.hasQ {
		w.counts, counted = st.Targets().TargetIn(w.target, w.queue)
		return counted, nil
	}
	w.counts = st.Targets().Target(w.target)
	return true, nil
}

func notFound(id int64) error {
	return protocol.Errorf(protocol.CodeNotFound, "job %d does not exist", id)
}

// rangeNotFound says that no job has an id in first..last.
func rangeNotFound(first, last int64) error {
	if first == last {
		return notFound(first)
	}
	return protocol.Errorf(protocol.CodeNotFound, "jobs %d-%d do not exist", first, last)
}

// query reads rows: the core's writer in its open transaction (State.Query),
// or the read pool.
type query func(q string, args ...any) (*sql.Rows, error)

// lookupQueue sets the watch's queue, if its request names one.
func (w *Watch) lookupQueue(st State) error {
	if w.req.Queue == "" {
		return nil
	}
	q, ok := st.Queue(w.req.Queue)
	if !ok {
		return protocol.Errorf(protocol.CodeNotFound, "queue %s does not exist", w.req.Queue)
	}
	w.queue, w.hasQ = q, true
	return nil
}

// lookupTarget sets the watch's target, which its request names.
func (w *Watch) lookupTarget(st State) error {
	t, ok := st.Lookup(w.req.Target)
	if !ok {
		return protocol.Errorf(protocol.CodeNotFound, "target %s does not exist", w.req.Target)
	}
	w.target, w.hasT = t, true
	return nil
}

// countRowsOf counts the watch's jobs by state from their rows: a scan of
// its target's or of its range, or its listed jobs' rows.
func (w *Watch) countRowsOf(read query) error {
	if w.ids != nil {
		return w.countListed(read)
	}
	where, args := w.where()
	return w.countRows(read, base("States")+" WHERE "+strings.Join(where, " AND ")+" GROUP BY state", args...)
}

// countListed counts the watch's listed jobs by state from their rows; a
// job with no row does not exist (purged, or never submitted).
func (w *Watch) countListed(read query) error {
	ids := slices.Sorted(maps.Keys(w.ids))
	i, missing := 0, int64(0)
	err := statesOf(read, ids, func(id int64, st job.State) {
		for ; ids[i] < id; i++ { // rows come in id order, as ids are
			missing = cmp.Or(missing, ids[i])
		}
		i++
		w.counts[st]++
	})
	if err != nil {
		return storage(err)
	}
	if i < len(ids) {
		missing = cmp.Or(missing, ids[i])
	}
	if missing != 0 {
		return notFound(missing)
	}
	return nil
}

// settle lays the changes since a snapshot over counts taken in it: each
// job of since (its latest state, 0: gone) takes its state in the
// snapshot, which read reads, off the counts and its latest one on. Every
// job in since is the watch's (Set.Changes): its row, if the snapshot has
// one, was counted.
func (w *Watch) settle(read query, since map[int64]job.State) error {
	err := statesOf(read, slices.Sorted(maps.Keys(since)), func(_ int64, st job.State) {
		w.counts[st]--
	})
	if err != nil {
		return storage(err)
	}
	for _, st := range since {
		if st != 0 {
			w.counts[st]++
		}
	}
	return nil
}

// statesOf calls f with the state of each of ids (in increasing order)
// that has a row, in id order, reading a few hundred a query.
func statesOf(read query, ids []int64, f func(id int64, st job.State)) error {
	q := base("JobStates") + " WHERE id IN (?"
	args := make([]any, 0, 500)
	for len(ids) > 0 {
		n := min(len(ids), 500)
		args = args[:0]
		for _, id := range ids[:n] {
			args = append(args, id)
		}
		rows, err := read(q+strings.Repeat(",?", n-1)+") ORDER BY id", args...)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id int64
			var st string
			if err := rows.Scan(&id, &st); err != nil {
				rows.Close()
				return err
			}
			f(id, job.State(st[0]))
		}
		if err := closeRows(rows); err != nil {
			return err
		}
		ids = ids[n:]
	}
	return nil
}

func (w *Watch) countRows(read query, q string, args ...any) error {
	rows, err := read(q, args...)
	if err != nil {
		return storage(err)
	}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			rows.Close()
			return storage(err)
		}
		w.counts[s[0]] += n
	}
	return storage(closeRows(rows))
}

// spending fills what the attempts of a queue's or every queue's jobs
// cost, in all and per site, from the core's memory. (A target's or a
// range's come from the charges table: spentRows.)
func (w *Watch) spending(st State, r *protocol.ProgressReply) {
	by := map[string]float64{}
	st.EachSpent(func(qid int32, site string, v float64) {
		if !w.hasQ || qid == w.queue {
			by[site] += v
		}
	})
	spent(r, by)
}

// spentRows fills what the attempts of w's target's (or range's) jobs
// cost, from the charges table.
func (w *Watch) spentRows(read query, r *protocol.ProgressReply) error {
	q, args := queries.Get("SpentByRange"), []any{w.req.First, w.req.Last}
	if w.hasT {
		few, err := w.fewCharges(read)
		if err != nil {
			return storage(err)
		}
		q, args = queries.Get("SpentByTarget"), []any{int32(w.target)}
		switch {
		case w.hasQ && few:
			q, args = queries.Get("SpentByTargetQueueCharges"), append(args, w.queue)
		case w.hasQ:
			q, args = queries.Get("SpentByTargetQueue"), append(args, w.queue)
		case few:
			q = queries.Get("SpentByTargetCharges")
		}
	}
	return w.spent(read, r, q, args)
}

// fewCharges says whether fewer attempts were charged than w counted
// jobs (a target of a million jobs, a few thousand run): its spending
// then reads every charge, each looking its job up, rather than every
// job of the target, each looking its charges up. Charges are counted
// up to that bound, so deciding costs at most what it saves; a target of
// fewer than smallTarget jobs is read by its jobs without asking.
func (w *Watch) fewCharges(read query) (bool, error) {
	jobs := 0
	for _, n := range w.counts {
		jobs += n
	}
	if jobs < smallTarget {
		return false, nil
	}
	rows, err := read(queries.Get("ChargesUpTo"), jobs+1)
	if err != nil {
		return false, err
	}
	n := 0
	for rows.Next() {
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return false, err
		}
	}
	return n <= jobs, closeRows(rows)
}

// smallTarget: fewCharges reads a target of fewer jobs by its jobs, a
// few lookups, rather than asking first how many charges there are.
const smallTarget = 64

// spent fills r with what query q (site, cost) says was spent.
func (w *Watch) spent(read query, r *protocol.ProgressReply, q string, args []any) error {
	rows, err := read(q, args...)
	if err != nil {
		return storage(err)
	}
	by := map[string]float64{}
	for rows.Next() {
		var site string
		var cost float64
		if err := rows.Scan(&site, &cost); err != nil {
			rows.Close()
			return storage(err)
		}
		by[site] += cost
	}
	if err := closeRows(rows); err != nil {
		return storage(err)
	}
	spent(r, by)
	return nil
}

// spent puts what was spent per site, by, in r.
func spent(r *protocol.ProgressReply, by map[string]float64) {
	for site, v := range by {
		if r.SpentBySite == nil {
			r.SpentBySite = map[string]float64{}
		}
		r.SpentBySite[site] = v
		r.Spent += v
	}
}

// notDone lists up to protocol.MaxNotDone of the watch's jobs that ended
// otherwise than done (failed, deleted, blocked), and how many more there
// are. It reads through the read pool db: the core is not held.
func (w *Watch) notDone(ctx context.Context, db Querier) ([]protocol.JobEnd, int, error) {
	bad := w.counts[job.Failed] + w.counts[job.Blocked]
	states := "'F','B'"
	if w.named() {
		bad += w.counts[job.Deleted]
		states = "'F','B','X'"
	}
	if bad == 0 {
		return nil, 0, nil
	}
	where, args := w.where()
	where = append(where, "state IN ("+states+")")
	rows, err := db.QueryContext(ctx, base("NotDone")+" WHERE "+strings.Join(where, " AND ")+" ORDER BY id LIMIT ?", append(args, protocol.MaxNotDone)...)
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

// where is the conditions on jobs that select the watch's jobs.
func (w *Watch) where() ([]string, []any) {
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
		if p := w.req.TargetPrefix; p != "" {
			// Names are valid UTF-8, which has no 0xff byte: those that
			// start with p are those in [p, p+0xff).
			where, args = append(where, "target_id IN (SELECT id FROM targets WHERE name >= ? AND name < ?)"), append(args, p, p+"\xff")
		}
		if w.hasQ {
			where, args = append(where, "queue_id = ?"), append(args, w.queue)
		}
	}
	return where, args
}
