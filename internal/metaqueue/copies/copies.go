// Package copies runs a job as several attempts at once: the end game of
// Workqueue with Replication (WQR) and Storage Affinity, the bag-of-tasks
// schedulers of Santos-Neto's 2004 thesis (docs/policies/bag-of-tasks.md).
// When a placeholder asks and a queue that copies has no ready job, the
// queue's policy.Replicator picks a running job to copy: a new attempt of
// it runs at the asking placeholder beside the others (job_copies). The first
// attempt to finish wins: a copy that ends 0 (its report, or its agent's
// claim before it moves outputs into place) ends every other attempt of
// the job as a killed copy (attempts.killed_copy) and becomes the attempt
// the job row describes; the losers' placeholders are told to kill them at
// their next heartbeat, as for mqdel. An attempt that fails or is lost
// while another runs ends alone; the job follows the last one, and one
// that failed by itself (an exit status, not a lost placeholder) stops new
// copies of the job until it stops running. Copies are not counted
// against max_attempts.
//
// The metaqueue's core keeps every running attempt (its lease, its
// placeholder) and calls this package where they change: each event of a
// job's attempts is one call, Apply, whose Facts (the row's attempt, the
// copies left, the attempts to charge and hold) the core applies; a look
// for a copy is one call, Pick, asking the core through an Ask. Copies
// keeps what replication alone knows: which jobs opted out, which row
// attempts run apart in scratch, the copies killed whose late report is
// awaited, and the index of jobs a copy may start beside (Sync, Choose).
// It writes its own tables inside the core's write transaction, through
// an Execer, and calls no other module.
package copies

import (
	"context"
	"database/sql"
	_ "embed"
	"fmt"

	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/internal/sqlfile"
	"github.com/mq-hpc/mq/protocol"
)

//go:embed copies.sql
var copiesSQL string

var queries = sqlfile.MustParse("copies.sql", copiesSQL)

// Execer is the connection the module reads and writes through: the
// core's writer (*sql.Conn, *sql.Tx) or its reader pool (*sql.DB).
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// MaxKilledKept bounds the killed copies whose late report is awaited.
const MaxKilledKept = 100_000

// Copies is replication's state, owned by the core goroutine.
type Copies struct {
	noCopy map[int64]bool // jobs that opted out (job_no_replicate)
	// apart: the attempt each job row describes, when it runs in a
	// scratch directory of its own and has not won a race, so copies may
	// run beside it (job_apart).
	apart map[int64]int
	// failed: jobs with an attempt that failed by itself while another
	// ran on, until they stop running. No new copy starts beside them: a
	// command that fails would otherwise fail again in every copy an idle
	// placeholder takes, attempt after attempt, as long as one still runs.
	failed map[int64]bool
	// killed are copies killed for a winner whose placeholder has not
	// reported them yet (the placeholder that ran each): their report's
	// CPU figures are still kept.
	killed map[protocol.JobRef]int64
	// copying are the queues that copy, in the core's order (SetQueues);
	// looked is PickFor's room for the ones a look walks.
	copying []copying
	looked  []Queue
	gen     uint64 // bumped when running attempts change (copy decisions may change)
	idx     index
}

// New returns empty state.
func New() *Copies {
	c := &Copies{}
	c.Reset()
	return c
}

// Reset forgets everything (before a load).
func (c *Copies) Reset() {
	*c = Copies{noCopy: map[int64]bool{}, apart: map[int64]int{}, failed: map[int64]bool{}, killed: map[protocol.JobRef]int64{}}
	c.idx.reset()
}

// Limit says whether a queue copies running jobs, and its bound on the
// attempts of one job running at once (0: none), from its max_copies and
// whether its policy has a Replicator of its own. A policy that
// replicates copies unless max_copies is 1; another only with
// max_copies 2 or more.
func Limit(replicates bool, maxCopies int) (on bool, most int) {
	if replicates {
		return maxCopies != 1, maxCopies
	}
	return maxCopies >= 2, maxCopies
}

// Replicator is a queue's end game: its policy's (newRep, nil if none),
// or WQR's for a queue that copies by max_copies alone.
func Replicator(newRep func() policy.Replicator) policy.Replicator {
	if newRep != nil {
		return newRep()
	}
	return policy.WQR{}
}

// copying is a queue that copies, and its bound on attempts (Limit).
type copying struct {
	Setting
	most int
}

// On says whether any queue copies.
func (c *Copies) On() bool { return len(c.copying) > 0 }

// Changed notes that running attempts, or what a copy may spend, changed:
// a placeholder that found nothing to copy looks again.
func (c *Copies) Changed() { c.gen++ }

// Gen numbers the state Changed last moved on to.
func (c *Copies) Gen() uint64 { return c.gen }

// Asked is what one asker last looked at: it looks again once running
// attempts or data locations changed.
type Asked struct {
	looked       bool
	gen, dataGen uint64
}

// Again says whether the asker that last looked as a says must look
// again at data generation dataGen, and notes this look in a.
func (c *Copies) Again(a *Asked, dataGen uint64) bool {
	if a.looked && a.gen == c.gen && a.dataGen == dataGen {
		return false // nothing changed since the last look
	}
	*a = Asked{looked: true, gen: c.gen, dataGen: dataGen}
	return true
}

// OptedOut says whether job id asked never to be copied.
func (c *Copies) OptedOut(id int64) bool { return c.noCopy[id] }

// OptOut records that job id, being submitted, is never to be copied.
func (c *Copies) OptOut(ctx context.Context, ex Execer, id int64) error {
	if _, err := ex.ExecContext(ctx, queries.Get("OptOut"), id); err != nil {
		return fmt.Errorf("job %d opts out of copies: %w", id, err)
	}
	c.noCopy[id] = true
	return nil
}
