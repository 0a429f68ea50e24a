// Package inspect is the metaqueue's read side: what mqstat, mqstat -j and
// the dashboard show of jobs. It reads the database through the read pool
// it is given (a WAL snapshot that never waits for the core), and asks the
// core, through Sources, for what other features keep (a job's array, its
// running copies, its plan, its files' replicas) and for the marks held in
// the core's memory (the jobs in each state, for a listing by a state few
// jobs are in). It writes nothing.
package inspect

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"time"

	"github.com/mq-hpc/mq/internal/sqlfile"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

//go:embed inspect.sql
var inspectSQL string

var queries = sqlfile.MustParse("inspect.sql", inspectSQL)

// Querier is what reads need of a database or a transaction.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// DB is the read pool: a listing with earlier attempts reads them in its
// own transaction, so they come from the listing's snapshot.
type DB interface {
	Querier
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

var (
	_ DB      = (*sql.DB)(nil)
	_ Querier = (*sql.Tx)(nil)
)

// Sources is what a job's detail needs from the core beyond the rows this
// package reads: each answer is one call the core forwards to the feature
// that keeps it.
type Sources interface {
	// Array is the array job id belongs to, nil if none.
	Array(ctx context.Context, id int64) (*protocol.ArrayInfo, error)
	// RunningCopies lists the copies of job id running now.
	RunningCopies(ctx context.Context, id int64) ([]protocol.AttemptInfo, error)
	// Plan is job id's plan, nil if it has none.
	Plan(ctx context.Context, id int64) (*protocol.JobPlan, error)
	// Replicas lists where the catalog knows copies of a file.
	Replicas(ctx context.Context, path string) ([]protocol.Replica, error)
	// CostMarks are a live job's marks of its costed queue: why no site
	// can meet its deadline within budget, why its queue is over budget.
	CostMarks(ctx context.Context, id int64) (infeasible, overBudget string, err error)
	// Fit says why no placeholder fits a live job's request or time, and what
	// its running attempt was granted (nil: none).
	Fit(ctx context.Context, id int64) (unfit string, grant *protocol.Capacity, err error)
	// States runs fn on the core with its sets of jobs by state, or says
	// ErrBusy while the core is in a batch that holds it for seconds.
	States(ctx context.Context, fn func(StateSets) error) error
	// Graph runs fn on the core with its graph of live jobs.
	Graph(ctx context.Context, fn func(Graph) error) error
}

// StateSets is what reads ask of the core's sets of jobs by state (module
// bystate), in stored states: E with P.
type StateSets interface {
	// Page is at most limit jobs above after in the states given, in id
	// order, with how many jobs are in those states and in any.
	Page(states []job.State, after int64, limit int) (ids []int64, in, all int)
	// Span counts the jobs first..last by state letter.
	Span(first, last int64) [128]int
	// QueueRuns are runs of ids, first and last, that hold every job of
	// queue q, in id order, and false when they are not kept.
	QueueRuns(q int32) ([][2]int64, bool)
}

// inStates is a page of the core's jobs in the states given (StateSets.Page).
func (r *Reader) inStates(ctx context.Context, states []job.State, after int64, limit int) (ids []int64, in, all int, err error) {
	err = r.src.States(ctx, func(s StateSets) error { ids, in, all = s.Page(states, after, limit); return nil })
	return ids, in, all, err
}

// ErrBusy is Sources.States' answer while the core runs a batch that
// holds it for seconds (a bulk commit, an action's batch): a listing then
// reads its snapshot alone, as it does when no core keeps the states.
var ErrBusy = errors.New("the core is busy")

// Reader answers the read side's questions. Its zero value is not usable:
// make one with New.
type Reader struct {
	db        DB
	outputDir string
	src       Sources
}

// New returns a Reader over the read pool db, its queries prepared once
// (stmtCache); outputDir is where the CLS keeps its copies of jobs'
// output ("" if it keeps none).
func New(db DB, outputDir string, src Sources) *Reader {
	return &Reader{db: cached(db), outputDir: outputDir, src: src}
}

// TimeFormat is RFC 3339 with microseconds, the precision stored.
const TimeFormat = "2006-01-02T15:04:05.000000Z07:00"

// Micros formats a stored time (microseconds since the epoch), "" if NULL.
func Micros(v sql.NullInt64) string {
	if !v.Valid {
		return ""
	}
	return time.UnixMicro(v.Int64).Format(TimeFormat)
}

// Usage is an attempt's accounting columns as scanned.
type Usage struct {
	User, Sys sql.NullFloat64
	RSS       sql.NullInt64
	Cost      sql.NullFloat64 // charges.cost: NULL when not charged
}

// Accounting is an ended attempt's figures: elapsed from its times, the
// rest as measured (zero when not).
func (u Usage) Accounting(started, finished sql.NullInt64) protocol.Accounting {
	var a protocol.Accounting
	if started.Valid && finished.Valid && finished.Int64 >= started.Int64 {
		a.Elapsed = float64(finished.Int64-started.Int64) / 1e6
	}
	if u.Cost.Valid {
		c := u.Cost.Float64
		a.Cost = &c
	}
	if u.RSS.Valid && u.RSS.Int64 > 0 {
		a.CPUUser, a.CPUSys, a.MaxRSS = u.User.Float64, u.Sys.Float64, u.RSS.Int64
	}
	return a
}

// closeRows closes rows and reports any error iteration met.
func closeRows(rows *sql.Rows) error {
	err := rows.Err()
	return errors.Join(err, rows.Close())
}

// Scanner is a row to scan (*sql.Row).
type Scanner interface{ Scan(dest ...any) error }

// JobEnd is how job id ended, from its row of the core's JobEnd query
// (state, exit, reason, attempt, site, host, started, finished, user,
// sys, rss): what a wait answers. With no row it returns sql.ErrNoRows.
func JobEnd(row Scanner, id int64) (protocol.JobEnd, error) {
	end := protocol.JobEnd{ID: id}
	var st string
	var exit, started, finished sql.NullInt64
	var reason sql.NullString
	var u Usage
	if err := row.Scan(&st, &exit, &reason, &end.Attempt, &end.Site, &end.Host, &started, &finished, &u.User, &u.Sys, &u.RSS); err != nil {
		return end, err
	}
	end.State, end.Reason = st, reason.String
	end.Started, end.Finished = Micros(started), Micros(finished)
	if a := u.Accounting(started, finished); a.Measured() {
		end.Usage = &a.Usage
	}
	if exit.Valid {
		e := int(exit.Int64)
		end.Exit = &e
	}
	return end, nil
}
