package metaqueue

import (
	"cmp"
	"context"
	"database/sql"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/sqlfile"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

//go:embed purge.sql
var purgeFile string

var purgeSQL = sqlfile.MustParse("purge.sql", purgeFile)

// purgeRow is a candidate read from the snapshot.
type purgeRow struct {
	id       int64
	target   int32
	attempts int
	bundle   int64
}

// purgeScope is the request resolved against the core's names, once.
type purgeScope struct {
	cutoff        int64 // Unix µs
	states        string
	target, queue int64 // 0: any
	first, last   int64
	// named are the targets held and executing jobs name: those are not
	// in the graph's lists of waiting jobs (dag.Graph.Waited), yet a held
	// job waits once released, and a requeued one again.
	named map[dag.TargetID]bool
}

// Purge removes ended jobs older than req.EndedBefore, with every row the
// metaqueue keeps of them and their output files in the CLS's output
// area, in batches (protocol.DefaultPurgeBatch): the candidates are read from the read pool's
// snapshot, and each batch is one durable call on the core, so dispatch
// and reports go on between batches, and a crash between them leaves
// every batch whole or absent. A purged job still counts toward its
// target (targets.purged_done, purged_bad), and its id is never given
// again (meta next_job_id).
func (s *Store) Purge(ctx context.Context, req protocol.Purge) (protocol.PurgeReply, error) {
	var reply protocol.PurgeReply
	if err := req.Check(); err != nil {
		return reply, protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	batch := req.Batch
	if batch == 0 {
		batch = protocol.DefaultPurgeBatch
	}
	sc, err := s.purgeScope(ctx, req)
	if err != nil {
		return reply, err
	}
	ids := append([]int64(nil), req.IDs...)
	named := map[int64]bool{}
	for _, id := range ids {
		named[id] = true
	}
	var cursor int64
	for {
		var rows []purgeRow
		if len(req.IDs) > 0 {
			if len(ids) == 0 {
				break
			}
			chunk := ids[:min(batch, len(ids))]
			ids = ids[len(chunk):]
			if rows, err = s.purgeCandidates(ctx, sc, 0, chunk, batch); err != nil {
				return reply, err
			}
			for _, r := range rows {
				delete(named, r.id)
			}
		} else {
			if rows, err = s.purgeCandidates(ctx, sc, cursor, nil, batch); err != nil {
				return reply, err
			}
			if len(rows) == 0 {
				break
			}
			cursor = rows[len(rows)-1].id
		}
		if len(rows) == 0 {
			continue
		}
		gone, kept, err := s.purgeBatch(ctx, sc, rows, req.DryRun)
		if err != nil {
			return reply, err
		}
		reply.Batches++
		reply.Kept += kept
		reply.Purged += int64(len(gone))
		reply.Bytes += s.removeOutput(gone, req.DryRun)
	}
	for _, id := range req.IDs {
		if named[id] {
			reply.AddError(fmt.Sprintf("job %d does not exist, has not ended, or ended less than %s ago", id, time.Duration(req.EndedBefore*float64(time.Second))))
		}
	}
	return reply, nil
}

// purgeScope checks the selection's names on the core and fixes the
// cutoff by the store's clock.
func (s *Store) purgeScope(ctx context.Context, req protocol.Purge) (purgeScope, error) {
	sc := purgeScope{states: protocol.PurgeStates, first: req.First, last: req.Last}
	if req.States != "" {
		want, err := job.ParseStates(req.States)
		if err != nil {
			return sc, protocol.Errorf(protocol.CodeBadRequest, "%v", err)
		}
		var b strings.Builder
		for _, st := range want {
			if !st.Terminal() {
				return sc, protocol.Errorf(protocol.CodeBadRequest, "-s %s: only ended jobs (states %s) can be purged", req.States, protocol.PurgeStates)
			}
			b.WriteByte(byte(st))
		}
		sc.states = b.String()
	}
	if (sc.first != 0 || sc.last != 0) && (sc.first <= 0 || sc.last < sc.first) {
		return sc, protocol.Errorf(protocol.CodeBadRequest, "bad id range %d..%d", sc.first, sc.last)
	}
	if len(req.IDs) > 0 && (req.Target != "" || req.States != "" || sc.first != 0 || req.All) {
		return sc, protocol.Errorf(protocol.CodeBadRequest, "give job ids or a selection (target, states, range, all), not both")
	}
	err := s.do(ctx, func() error {
		sc.cutoff = micros(s.now().Add(-time.Duration(req.EndedBefore * float64(time.Second))))
		sc.named = map[dag.TargetID]bool{}
		s.g.Each(func(_ int64, j dag.Node) {
			if j.State == job.Held || j.State == job.Executing {
				for _, p := range j.Prereqs {
					sc.named[p] = true
				}
			}
		})
		if req.Target != "" {
			t, ok := s.g.Lookup(req.Target)
			if !ok {
				return protocol.Errorf(protocol.CodeNotFound, "target %s does not exist", req.Target)
			}
			sc.target = int64(t)
		}
		if req.Queue != "" {
			q := s.queues[req.Queue]
			if q == nil {
				return protocol.Errorf(protocol.CodeNotFound, "queue %s does not exist", req.Queue)
			}
			sc.queue = int64(q.id)
		}
		return nil
	})
	return sc, err
}

// purgeCandidates reads the next candidates after cursor (or among ids)
// from the read pool: the scan never holds the writer.
func (s *Store) purgeCandidates(ctx context.Context, sc purgeScope, cursor int64, ids []int64, limit int) ([]purgeRow, error) {
	q := baseQuery(purgeSQL, "Candidates")
	args := []any{sc.states, cursor, sc.cutoff}
	if sc.target != 0 {
		q += " AND target_id = ?"
		args = append(args, sc.target)
	}
	if sc.queue != 0 {
		q += " AND queue_id = ?"
		args = append(args, sc.queue)
	}
	if sc.first != 0 {
		q += " AND id BETWEEN ? AND ?"
		args = append(args, sc.first, sc.last)
	}
	if len(ids) > 0 {
		q += " AND id IN (?" + strings.Repeat(",?", len(ids)-1) + ")"
		for _, id := range ids {
			args = append(args, id)
		}
	}
	q += " ORDER BY id LIMIT " + strconv.Itoa(limit)
	rows, err := s.rdb.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	var out []purgeRow
	for rows.Next() {
		var r purgeRow
		if err := rows.Scan(&r.id, &r.target, &r.attempts, &r.bundle); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, r)
	}
	return out, closeRows(rows)
}

// purgeBatch removes the candidates that may go, on the core, in one
// durable call (a dry run only counts them). It returns the jobs removed
// and how many were kept.
func (s *Store) purgeBatch(ctx context.Context, sc purgeScope, rows []purgeRow, dry bool) (gone []purgeRow, kept int64, err error) {
	fn := func() error {
		gone, kept = gone[:0], 0 // afresh if tried again
		groups, err := s.groupsOf(rows)
		if err != nil {
			return err
		}
		byID := map[int64]purgeRow{}
		var ids []int64
		for _, r := range rows {
			if _, live := s.g.Node(r.id); live {
				continue // rerun since the snapshot: no longer ended
			}
			if t := dag.TargetID(r.target); sc.named[t] || s.g.Waited(t) || groups.keep(r) {
				kept++
				continue
			}
			if dry {
				gone = append(gone, r)
				continue
			}
			byID[r.id] = r
			ids = append(ids, r.id)
		}
		if dry || len(ids) == 0 {
			return nil
		}
		if err := s.begin(); err != nil {
			return err
		}
		idList, err := json.Marshal(ids)
		if err != nil {
			return err
		}
		type counts struct{ done, bad int64 }
		byTarget := map[int32]*counts{}
		res, err := s.w.QueryContext(context.Background(), purgeSQL.Get("DeleteJobs"), string(idList), sc.cutoff)
		if err != nil {
			return fatalError{err}
		}
		for res.Next() {
			var id int64
			var st string
			var q int32
			if err := res.Scan(&id, &st, &q); err != nil {
				res.Close()
				return fatalError{err}
			}
			r := byID[id]
			c := byTarget[r.target]
			if c == nil {
				c = &counts{}
				byTarget[r.target] = c
			}
			if job.State(st[0]) == job.Done {
				c.done++
			} else {
				c.bad++
			}
			s.countsFor(q)[job.State(st[0])]--
			gone = append(gone, r)
		}
		if err := closeRows(res); err != nil {
			return fatalError{err}
		}
		if len(gone) < len(ids) { // some went back to live since: list only those gone
			if idList, err = json.Marshal(purgedIDs(gone)); err != nil {
				return err
			}
		}
		for _, q := range purgeRows() {
			if _, err := s.w.ExecContext(context.Background(), q, string(idList)); err != nil {
				return fatalError{err}
			}
		}
		for t, c := range byTarget {
			if _, err := s.w.ExecContext(context.Background(), purgeSQL.Get("AddPurged"), t, c.done, c.bad); err != nil {
				return fatalError{err}
			}
		}
		for _, a := range groups.arrays {
			if _, err := s.w.ExecContext(context.Background(), purgeSQL.Get("DropEmptyArray"), a.id); err != nil {
				return fatalError{err}
			}
		}
		// Ids are given from memory at max(id)+1 when loading: keep the
		// high-water mark so that purging the newest jobs frees no id.
		if _, err := s.w.ExecContext(context.Background(), purgeSQL.Get("SetNextID"), s.nextID); err != nil {
			return fatalError{err}
		}
		return nil
	}
	if dry {
		err = s.do(ctx, fn)
	} else {
		err = s.doDurable(ctx, fn)
	}
	return gone, kept, err
}

// purgeRows are the statements that remove the purged jobs' other rows,
// each given the batch's ids as a JSON array.
func purgeRows() []string {
	return []string{purgeSQL.Get("DeleteAttempts"), purgeSQL.Get("DeletePrereqs"), purgeSQL.Get("DeleteEnv"),
		purgeSQL.Get("DeleteResources"), purgeSQL.Get("DeletePriority"), purgeSQL.Get("DeleteOutputLost"),
		purgeSQL.Get("DeleteFiles"), purgeSQL.Get("DeletePlan"), purgeSQL.Get("DeleteNoReplicate"),
		purgeSQL.Get("DeleteCopies"), purgeSQL.Get("DeleteApart")}
}

// groupCheck answers, within one batch, whether a job's array or bundle
// still has live members (such a job is kept: an array's listing and a
// bundle's dispatch need their ended members).
type groupCheck struct {
	s      *Store
	arrays []purgeArray // the batch's arrays, by first job
}

type purgeArray struct {
	id, first, last int64
	live            int8 // 0 unknown, 1 no live member, 2 some
}

// groupsOf reads the arrays rows' ids may belong to (rows are in id order).
func (s *Store) groupsOf(rows []purgeRow) (*groupCheck, error) {
	g := &groupCheck{s: s}
	if len(rows) == 0 {
		return g, nil
	}
	res, err := s.w.QueryContext(context.Background(), purgeSQL.Get("ArraysIn"), rows[0].id, rows[len(rows)-1].id)
	if err != nil {
		return nil, fatalError{err}
	}
	for res.Next() {
		var a purgeArray
		if err := res.Scan(&a.id, &a.first, &a.last); err != nil {
			res.Close()
			return nil, fatalError{err}
		}
		g.arrays = append(g.arrays, a)
	}
	if err := closeRows(res); err != nil {
		return nil, fatalError{err}
	}
	slices.SortFunc(g.arrays, func(a, b purgeArray) int { return cmp.Compare(a.first, b.first) })
	return g, nil
}

func (g *groupCheck) keep(r purgeRow) bool {
	if r.bundle != 0 && len(g.s.bundles.Members(r.bundle)) > 0 {
		return true
	}
	i, _ := slices.BinarySearchFunc(g.arrays, r.id, func(a purgeArray, id int64) int { return cmp.Compare(a.first, id+1) })
	if i == 0 {
		return false
	}
	a := &g.arrays[i-1] // the last array beginning at or before r.id
	if r.id > a.last {
		return false
	}
	if a.live == 0 {
		a.live = 1
		if g.s.g.LiveIn(a.first, a.last) {
			a.live = 2
		}
	}
	return a.live == 2
}

// removeOutput removes (or, dry, measures) the output files the CLS keeps
// of the jobs gone, every attempt's stdout and stderr under its output
// area: local placeholders' own and its copies of remote ones. A user's
// -o/-e files are elsewhere and never touched. It returns the bytes. A
// crash before this leaves files no job names; they are harmless.
func (s *Store) removeOutput(gone []purgeRow, dry bool) int64 {
	if s.opt.OutputDir == "" {
		return 0
	}
	var bytes int64
	dirs := map[string]bool{}
	for _, r := range gone {
		for a := 1; a <= r.attempts; a++ {
			out, errPath := job.OutputPaths(s.opt.OutputDir, r.id, a)
			for _, p := range [...]string{out, errPath} {
				fi, err := os.Lstat(p)
				if err != nil || !fi.Mode().IsRegular() {
					continue
				}
				if dry {
					bytes += fi.Size()
					continue
				}
				if os.Remove(p) == nil {
					bytes += fi.Size()
					dirs[filepath.Dir(p)] = true
				}
			}
		}
	}
	for d := range dirs {
		os.Remove(d) // only if empty: other jobs of the shard may remain
	}
	return bytes
}

// loadPurged adds what purges removed to the graph's counts and keeps ids
// past every id given, when loading.
func (s *Store) loadPurged(ctx context.Context) error {
	rows, err := s.w.QueryContext(ctx, purgeSQL.Get("LoadPurged"))
	if err != nil {
		return err
	}
	for rows.Next() {
		var t int32
		var done, bad int
		if err := rows.Scan(&t, &done, &bad); err != nil {
			rows.Close()
			return err
		}
		if done > 0 {
			s.g.LoadCounts(dag.TargetID(t), job.Done, done)
		}
		if bad > 0 {
			s.g.LoadCounts(dag.TargetID(t), job.Failed, bad)
		}
	}
	if err := closeRows(rows); err != nil {
		return err
	}
	var next string
	err = s.w.QueryRowContext(ctx, purgeSQL.Get("NextID")).Scan(&next)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	n, err := strconv.ParseInt(next, 10, 64)
	if err != nil {
		return fmt.Errorf("meta next_job_id %q: %w", next, err)
	}
	s.nextID = max(s.nextID, n)
	return nil
}

func purgedIDs(rows []purgeRow) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.id
	}
	return out
}
