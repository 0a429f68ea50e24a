// Package purge removes ended jobs for good (cls purge): every row the
// metaqueue keeps of them and their output files, in batches, while a
// purged job still counts toward its target and its id is never given
// again.
//
// Run drives a purge: it reads the candidates from the read pool's
// snapshot and hands each batch to the core (Core.Batch), which runs Plan
// and Delete inside one durable call on its writer and applies the facts
// Delete returns; the output files go after the commit. What needs the
// core's memory (the graph, bundles) comes through State.
package purge

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
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

var queries = sqlfile.MustParse("purge.sql", purgeFile)

// Querier is where the candidates are read: the core's read pool.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Execer is the core's writer, inside its open write transaction.
type Execer interface {
	Querier
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Core is the metaqueue core as a purge sees it.
type Core interface {
	// Do runs fn on the core, with its names and clock.
	Do(ctx context.Context, fn func(Names) error) error
	// Write runs fn on the core with its writer (durable: fsync'd before
	// the reply); a *StorageError fn returns fails the core's batch.
	Write(ctx context.Context, durable bool, fn func(Batch) error) error
}

// Batch is the core inside a call of Write.
type Batch interface {
	State
	DB() Execer     // the writer
	Begin() error   // opens the write transaction
	NextID() int64  // the next id the core gives
	Forget(e Ended) // takes a deleted job off the core's counts
}

// Names is the core's memory a request is resolved against.
type Names interface {
	Now() time.Time
	Each(fn func(id int64, j dag.Node)) // every live job
	Lookup(target string) (dag.TargetID, bool)
	Queue(name string) (int64, bool)
}

// State is the core's memory a batch's plan asks.
type State interface {
	Live(id int64) bool            // not ended (rerun since the snapshot)
	Waited(t dag.TargetID) bool    // a waiting job names t
	LiveIn(first, last int64) bool // a job in first..last is not ended
	BundleLive(bundle int64) bool  // the bundle has live members
}

// Row is a candidate read from the snapshot.
type Row struct {
	ID       int64
	Target   int32
	Attempts int
	Bundle   int64
}

// Scope is the request resolved once: validated (NewScope), then its
// names and cutoff resolved on the core (Core.Do).
type Scope struct {
	Cutoff        int64 // Unix µs
	States        string
	Target, Queue int64 // 0: any
	First, Last   int64
	// Named are the targets held and executing jobs name: those are not
	// in the graph's lists of waiting jobs (dag.Graph.Waited), yet a held
	// job waits once released, and a requeued one again.
	Named map[dag.TargetID]bool
}

// NewScope checks the request's selection.
func NewScope(req protocol.Purge) (Scope, error) {
	sc := Scope{States: protocol.PurgeStates, First: req.First, Last: req.Last}
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
		sc.States = b.String()
	}
	if (sc.First != 0 || sc.Last != 0) && (sc.First <= 0 || sc.Last < sc.First) {
		return sc, protocol.Errorf(protocol.CodeBadRequest, "bad id range %d..%d", sc.First, sc.Last)
	}
	if len(req.IDs) > 0 && (req.Target != "" || req.States != "" || sc.First != 0 || req.All) {
		return sc, protocol.Errorf(protocol.CodeBadRequest, "give job ids or a selection (target, states, range, all), not both")
	}
	return sc, nil
}

// resolve fixes the cutoff by the core's clock and resolves the
// request's target and queue names and the targets held and executing
// jobs name.
func (sc *Scope) resolve(req protocol.Purge, n Names) error {
	sc.Cutoff = Cutoff(n.Now(), req.EndedBefore)
	sc.Named = map[dag.TargetID]bool{}
	n.Each(func(_ int64, j dag.Node) {
		if j.State == job.Held || j.State == job.Executing {
			for _, p := range j.Prereqs {
				sc.Named[p] = true
			}
		}
	})
	if req.Target != "" {
		t, ok := n.Lookup(req.Target)
		if !ok {
			return protocol.Errorf(protocol.CodeNotFound, "target %s does not exist", req.Target)
		}
		sc.Target = int64(t)
	}
	if req.Queue != "" {
		q, ok := n.Queue(req.Queue)
		if !ok {
			return protocol.Errorf(protocol.CodeNotFound, "queue %s does not exist", req.Queue)
		}
		sc.Queue = q
	}
	return nil
}

// Cutoff is the end time before which jobs go, for a purge of jobs ended
// more than endedBefore seconds before now.
func Cutoff(now time.Time, endedBefore float64) int64 {
	return now.Add(-time.Duration(endedBefore * float64(time.Second))).UnixMicro()
}

// Purger runs purges on a core (Store.Purger).
type Purger struct {
	core      Core
	rdb       Querier
	outputDir string
}

// NewPurger is Run on core, reading candidates through the read pool rdb
// and removing output files from outputDir.
func NewPurger(core Core, rdb Querier, outputDir string) Purger {
	return Purger{core: core, rdb: rdb, outputDir: outputDir}
}

// Run is Run on p's core.
func (p Purger) Run(ctx context.Context, req protocol.Purge) (protocol.PurgeReply, error) {
	return Run(ctx, req, p.core, p.rdb, p.outputDir)
}

// Run purges what req selects, in batches of req.Batch
// (protocol.DefaultPurgeBatch): each batch is one durable call on the
// core, so dispatch and reports go on between batches, and a crash
// between them leaves every batch whole or absent. The output files of
// the jobs gone are removed from outputDir after each batch's commit, and
// the stream files no extent names any more at the end (RemoveStreams).
func Run(ctx context.Context, req protocol.Purge, c Core, rdb Querier, outputDir string) (protocol.PurgeReply, error) {
	var reply protocol.PurgeReply
	if err := req.Check(); err != nil {
		return reply, protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	batch := req.Batch
	if batch == 0 {
		batch = protocol.DefaultPurgeBatch
	}
	sc, err := NewScope(req)
	if err != nil {
		return reply, err
	}
	if err := c.Do(ctx, func(n Names) error { return sc.resolve(req, n) }); err != nil {
		return reply, err
	}
	ids := append([]int64(nil), req.IDs...)
	named := map[int64]bool{}
	for _, id := range ids {
		named[id] = true
	}
	var cursor int64
	var going Going // a dry run's: the extents of the jobs that would go
	if req.DryRun {
		going = Going{}
	}
	for {
		var rows []Row
		if len(req.IDs) > 0 {
			if len(ids) == 0 {
				break
			}
			chunk := ids[:min(batch, len(ids))]
			ids = ids[len(chunk):]
			if rows, err = Candidates(ctx, rdb, sc, 0, chunk, batch); err != nil {
				return reply, err
			}
			for _, r := range rows {
				delete(named, r.ID)
			}
		} else {
			if rows, err = Candidates(ctx, rdb, sc, cursor, nil, batch); err != nil {
				return reply, err
			}
			if len(rows) == 0 {
				break
			}
			cursor = rows[len(rows)-1].ID
		}
		if len(rows) == 0 {
			continue
		}
		gone, kept, err := runBatch(ctx, c, sc, rows, req.DryRun)
		if err != nil {
			return reply, err
		}
		reply.Batches++
		reply.Kept += kept
		reply.Purged += int64(len(gone))
		reply.Bytes += RemoveOutput(outputDir, gone, req.DryRun)
		if req.DryRun {
			if err := going.Add(ctx, rdb, gone); err != nil {
				return reply, err
			}
		}
	}
	// Stream files are shared by many jobs' outputs: one goes when no
	// extent names it any more, whichever purge dropped the last.
	var n int64
	if req.DryRun {
		n, err = CountStreams(ctx, rdb, outputDir, StreamGrace, time.Now(), going)
	} else {
		n, err = RemoveStreams(ctx, rdb, outputDir, StreamGrace, time.Now())
	}
	if err != nil {
		reply.AddError(fmt.Sprintf("stream files not cleaned or counted: %v", err))
	}
	reply.Bytes += n
	for _, id := range req.IDs {
		if named[id] {
			reply.AddError(fmt.Sprintf("job %d does not exist, has not ended, or ended less than %s ago", id, time.Duration(req.EndedBefore*float64(time.Second))))
		}
	}
	return reply, nil
}

// Candidates reads the next candidates after cursor (or among ids) from
// the read pool: the scan never holds the writer.
func Candidates(ctx context.Context, q Querier, sc Scope, cursor int64, ids []int64, limit int) ([]Row, error) {
	text, args := candidatesQuery(sc, cursor, ids, limit)
	rows, err := q.QueryContext(ctx, text, args...)
	if err != nil {
		return nil, err
	}
	var out []Row
	for rows.Next() {
		var r Row
		if err := rows.Scan(&r.ID, &r.Target, &r.Attempts, &r.Bundle); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, r)
	}
	return out, closeRows(rows)
}

// candidatesQuery builds the Candidates query for sc's selection.
func candidatesQuery(sc Scope, cursor int64, ids []int64, limit int) (string, []any) {
	q := strings.TrimSuffix(queries.Get("Candidates"), ";")
	args := []any{sc.States, cursor, sc.Cutoff}
	if sc.Target != 0 {
		q += " AND target_id = ?"
		args = append(args, sc.Target)
	}
	if sc.Queue != 0 {
		q += " AND queue_id = ?"
		args = append(args, sc.Queue)
	}
	if sc.First != 0 {
		q += " AND id BETWEEN ? AND ?"
		args = append(args, sc.First, sc.Last)
	}
	if len(ids) > 0 {
		q += " AND id IN (?" + strings.Repeat(",?", len(ids)-1) + ")"
		for _, id := range ids {
			args = append(args, id)
		}
	}
	return q + " ORDER BY id LIMIT " + strconv.Itoa(limit), args
}

// Loaded is what purges left in the database, read when loading.
type Loaded struct {
	Targets []Purged
	NextID  int64 // 0: none recorded
}

// Purged is how many Done and bad jobs of a target were purged.
type Purged struct {
	Target    dag.TargetID
	Done, Bad int
}

// Counts is where loading puts the purged jobs (the core's graph).
type Counts interface {
	LoadCounts(t dag.TargetID, s job.State, n int)
}

// AddTo adds the purged jobs to their targets' counts: a purged job
// still counts toward its target.
func (l Loaded) AddTo(c Counts) {
	for _, p := range l.Targets {
		if p.Done > 0 {
			c.LoadCounts(p.Target, job.Done, p.Done)
		}
		if p.Bad > 0 {
			c.LoadCounts(p.Target, job.Failed, p.Bad)
		}
	}
}

// Load reads the targets' purged counts and the ids' high-water mark.
func Load(ctx context.Context, ex Execer) (Loaded, error) {
	var l Loaded
	rows, err := ex.QueryContext(ctx, queries.Get("LoadPurged"))
	if err != nil {
		return l, err
	}
	for rows.Next() {
		var p Purged
		if err := rows.Scan(&p.Target, &p.Done, &p.Bad); err != nil {
			rows.Close()
			return l, err
		}
		l.Targets = append(l.Targets, p)
	}
	if err := closeRows(rows); err != nil {
		return l, err
	}
	var next string
	err = ex.QueryRowContext(ctx, queries.Get("NextID")).Scan(&next)
	if errors.Is(err, sql.ErrNoRows) {
		return l, nil
	}
	if err != nil {
		return l, err
	}
	if l.NextID, err = strconv.ParseInt(next, 10, 64); err != nil {
		return l, fmt.Errorf("meta next_job_id %q: %w", next, err)
	}
	return l, nil
}

func closeRows(rows *sql.Rows) error {
	err := rows.Err()
	return errors.Join(err, rows.Close())
}
