package protocol

import "fmt"

// Purge removes ended jobs for good (cls purge): the jobs Select names
// (states among D, F, X; ids, a range, a queue or a target) that ended more
// than EndedBefore seconds ago, in batches of at most Batch jobs, each its
// own commit.
type Purge struct {
	Select
	EndedBefore float64 `json:"ended_before"` // seconds before now
	Batch       int     `json:"batch,omitempty"`
	DryRun      bool    `json:"dry_run,omitempty"`
}

// PurgeStates are the states a job may be purged in.
const PurgeStates = "DFX"

// DefaultPurgeBatch is how many jobs one purge commit removes by default:
// about 6 ms of the writer's CPU here (13 µs a job), so dispatch and
// reports wait at most a few ms per batch; larger batches purge faster
// (fewer commits) and hold the writer longer.
const DefaultPurgeBatch = 500

// MaxPurgeBatch bounds Purge.Batch: a batch holds the metaqueue's writer.
const MaxPurgeBatch = 50_000

// Check validates the request's own fields.
func (p Purge) Check() error {
	if err := CheckSeconds("ended before", p.EndedBefore); err != nil {
		return err
	}
	if p.Batch < 0 || p.Batch > MaxPurgeBatch {
		return fmt.Errorf("batch must be 1..%d jobs (0: the default)", MaxPurgeBatch)
	}
	return nil
}

// PurgeReply says what a purge removed (or, with DryRun, would remove):
// Purged jobs and the Bytes of their output files, in Batches commits;
// Kept jobs were selected but stay, because a live job waits on their
// target or they belong to an array or bundle with live members. Errors
// name the first jobs given by id that could not be purged (at most
// MaxActionErrors; ErrorCount counts them all).
type PurgeReply struct {
	Purged     int64    `json:"purged"`
	Kept       int64    `json:"kept"`
	Bytes      int64    `json:"bytes"`
	Batches    int      `json:"batches"`
	Errors     []string `json:"errors,omitempty"`
	ErrorCount int      `json:"error_count,omitempty"`
}

// AddError notes why a named job was not purged.
func (r *PurgeReply) AddError(msg string) {
	r.ErrorCount++
	if len(r.Errors) < MaxActionErrors {
		r.Errors = append(r.Errors, msg)
	}
}
