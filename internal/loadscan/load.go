package loadscan

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strconv"
	"strings"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/job"
)

// The metaqueue's load scans, each query given by the caller (the core
// keeps its SQL): what each row must hold is said at its type.

// Target is a row of the targets' scan: id, name.
type Target struct {
	ID   dag.TargetID
	Name string
}

// Targets starts the targets' scan.
func Targets(ctx context.Context, src Source, query string) *Pipe[Target] {
	return Start(ctx, src, query, 2, decodeTarget)
}

func decodeTarget(row []driver.Value, r *Target) error {
	id, _, err := Int(row[0])
	if err != nil {
		return err
	}
	name, err := Text(row[1])
	if err != nil {
		return err
	}
	*r = Target{dag.TargetID(id), name}
	return nil
}

// Prereq is a row of the prerequisites' scan: job, prerequisite target,
// kind, the job's target, whether the job is live.
type Prereq struct {
	Job       int64
	Target    dag.TargetID
	JobTarget dag.TargetID
	Kind      int8
	Live      bool
}

// Prereqs starts the prerequisites' scan.
func Prereqs(ctx context.Context, src Source, query string) *Pipe[Prereq] {
	return Start(ctx, src, query, 5, decodePrereq)
}

func decodePrereq(row []driver.Value, r *Prereq) error {
	var v [5]int64
	for i := range v {
		n, _, err := Int(row[i])
		if err != nil {
			return err
		}
		v[i] = n
	}
	*r = Prereq{Job: v[0], Target: dag.TargetID(v[1]), Kind: int8(v[2]), JobTarget: dag.TargetID(v[3]), Live: v[4] != 0}
	return nil
}

// Job is a row of the jobs' scan: id, queue, target, state (as an
// integer), est, ran, and an Executing job's "attempt base placeholder
// prefetched" as one text (NULL for others).
type Job struct {
	ID  int64
	Est float64
	// Ran is a Done job's runtime in microseconds (if its times say), a
	// live job's start (Valid false: none).
	Ran            sql.NullInt64
	Placeholder    int64
	Queue, Target  int32
	Attempts, Base int32
	State          job.State
	Prefetched     bool
}

// Jobs starts the jobs' scan.
func Jobs(ctx context.Context, src Source, query string) *Pipe[Job] {
	return Start(ctx, src, query, 7, decodeJob)
}

func decodeJob(row []driver.Value, r *Job) error {
	var v [6]int64
	var ok [6]bool
	for i := range v {
		if i == 4 {
			continue // est, a real
		}
		n, valid, err := Int(row[i])
		if err != nil {
			return err
		}
		v[i], ok[i] = n, valid
	}
	if !ok[3] || v[3] <= 0 || v[3] > 127 {
		return fmt.Errorf("job %d has no valid state", v[0])
	}
	est, err := Float(row[4])
	if err != nil {
		return err
	}
	*r = Job{ID: v[0], Queue: int32(v[1]), Target: int32(v[2]), State: job.State(v[3]), Est: est,
		Ran: sql.NullInt64{Int64: v[5], Valid: ok[5]}}
	if row[6] == nil {
		return nil
	}
	run, err := Text(row[6])
	if err != nil {
		return err
	}
	var f [4]int64
	fields := strings.Fields(run)
	if len(fields) != len(f) {
		return fmt.Errorf("job %d: attempt fields %q", r.ID, run)
	}
	for i, s := range fields {
		if f[i], err = strconv.ParseInt(s, 10, 64); err != nil {
			return fmt.Errorf("job %d: attempt fields %q: %w", r.ID, run, err)
		}
	}
	r.Attempts, r.Base, r.Placeholder, r.Prefetched = int32(f[0]), int32(f[1]), f[2], f[3] != 0
	return nil
}

// PrereqList holds prerequisite targets by job, in job id order, in two
// flat slices; Next hands them out to jobs taken in id order, with no map
// of millions of small slices.
type PrereqList struct {
	ids     []int64
	targets []dag.TargetID
	at      int
}

// Add appends target t to job id's list; ids come in ascending order.
func (l *PrereqList) Add(id int64, t dag.TargetID) {
	l.ids = append(l.ids, id)
	l.targets = append(l.targets, t)
}

// Next returns job id's targets (nil if none). Ids must come in
// ascending order, as the jobs' scan gives them.
func (l *PrereqList) Next(id int64) []dag.TargetID {
	for l.at < len(l.ids) && l.ids[l.at] < id {
		l.at++ // a job not scanned as live (it cannot be; be safe)
	}
	from := l.at
	for l.at < len(l.ids) && l.ids[l.at] == id {
		l.at++
	}
	if from == l.at {
		return nil
	}
	return l.targets[from:l.at:l.at]
}
