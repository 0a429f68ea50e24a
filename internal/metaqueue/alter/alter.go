// Package alter changes jobs that have not started (mqalter): their
// priority, time limit, estimate and resource request, in the core's
// transaction, in their rows and, through the core's hooks, in the memory
// of what keeps them (module priorities, module packing, the graph).
//
// The core checks the request (protocol.Alter.Check), selects the jobs
// (module selector, action Alter) and applies it to each (Core.Apply),
// which holds a job not held before and releases it after: it leaves its
// ready heap and enters it again ranked by its new values. Every write is
// in the one transaction the reply waits for, and any error rolls it back
// whole, so a crash or a failure leaves a job with its old values or its
// new ones, never half changed or held.
package alter

import (
	"context"
	"database/sql"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/sqlfile"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

//go:embed alter.sql
var alterSQL string

var queries = sqlfile.MustParse("alter.sql", alterSQL)

// Execer is the core's writer in its transaction.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Core is what Apply changes: the core's writer (in its transaction),
// its graph (read only) and its hooks.
type Core struct {
	X     Execer
	Graph *dag.Graph
	// SetEst changes a live job's estimate in the graph, and tells the cp
	// policy's b-levels, which the core settles once a batch is done.
	SetEst func(id int64, est float32) error
	// Hold and Release are the core's lifecycle transitions (Waiting or
	// Queued to Held, and back as the prerequisites say).
	Hold, Release func(id int64) error
	// Priority sets a job's priority (module priorities), Request the
	// amounts r gives in its request and drops those drop names (module
	// packing), each in its row and in memory.
	Priority func(id int64, prio int) error
	Request  func(id int64, r protocol.Resources, drop []string) error
}

// Apply gives live job id, Waiting, Queued or Held, the values a gives.
// One not held is held first and released after, so that it leaves its
// ready heap and enters it again ranked by its new values (a stale entry
// is passed over by dispatch). An error leaves the job half changed: the
// core rolls the whole transaction back.
func (k Core) Apply(id int64, a protocol.Alter) error {
	held := k.Graph.State(id) == job.Held
	if !held {
		if err := k.Hold(id); err != nil {
			return err
		}
	}
	if err := k.apply(context.Background(), id, a); err != nil || held {
		return err
	}
	return k.Release(id)
}

func (k Core) apply(ctx context.Context, id int64, a protocol.Alter) error {
	if a.Priority != nil {
		if err := k.Priority(id, *a.Priority); err != nil {
			return err
		}
	}
	if a.Resources.Asks() || len(a.Drop) > 0 {
		if err := k.Request(id, a.Resources, a.Drop); err != nil {
			return err
		}
	}
	if a.Time == 0 && a.Est == nil {
		return nil
	}
	n, ok := k.Graph.Node(id)
	if !ok {
		return fmt.Errorf("job %d is not live", id)
	}
	est := n.Est
	if a.Time > 0 {
		old, err := k.setLimit(ctx, id, a.Time)
		if err != nil {
			return err
		}
		// As mqsub --time: the limit is the estimate of a job that
		// has none of its own.
		if est == 0 || est == float32(old) {
			est = float32(a.Time)
		}
	}
	if a.Est != nil {
		est = float32(*a.Est)
	}
	var col any // NULL: unknown, as submit stores it
	if est > 0 {
		col = float64(est)
	}
	if _, err := k.X.ExecContext(ctx, queries.Get("SetEst"), col, id); err != nil {
		return err
	}
	return k.SetEst(id, est)
}

// setLimit writes job id's new time limit into its own environment, where
// the agent reads it (protocol.EnvTimeLimit), and returns the old one (0:
// none).
func (k Core) setLimit(ctx context.Context, id int64, limit float64) (old float64, err error) {
	env := map[string]string{}
	var text string
	err = k.X.QueryRowContext(ctx, queries.Get("JobEnv"), id).Scan(&text)
	switch {
	case err == nil:
		if err := json.Unmarshal([]byte(text), &env); err != nil {
			return 0, fmt.Errorf("job %d: stored environment: %w", id, err)
		}
	case !errors.Is(err, sql.ErrNoRows):
		return 0, err
	}
	old = protocol.TimeLimit([]string{protocol.EnvTimeLimit + "=" + env[protocol.EnvTimeLimit]})
	env[protocol.EnvTimeLimit] = strconv.FormatFloat(limit, 'f', -1, 64)
	b, err := json.Marshal(env)
	if err != nil {
		return 0, err
	}
	_, err = k.X.ExecContext(ctx, queries.Get("SetEnv"), id, string(b))
	return old, err
}
