// Package queues keeps the queues' settings: the checks of a change
// (`cls queue set`), the settings it makes, their rows (queues,
// queue_economics, queue_defaults) and the rows of the listings. The
// core keeps each queue's ready heap and policy, and applies what a
// change returns (a new policy, new deadline or budget) to them and to
// the other modules.
//
// A queue's resource defaults are stored apart from its other settings,
// one JSON row per queue that has them: the request type may grow
// without a migration per field.
package queues

import (
	"context"
	"database/sql"
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/mq-hpc/mq/internal/batchfail"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/internal/sqlfile"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

//go:embed queues.sql
var queuesSQL string

var queries = sqlfile.MustParse("queues.sql", queuesSQL)

// Execer is the connection the module reads and writes through: the
// core's writer (*sql.Conn, *sql.Tx).
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// A Change is a checked `cls queue set`: the request and its policy
// resolved (nil: unchanged).
type Change struct {
	Set    protocol.QueueSet
	Policy *policy.Info
}

// Check checks qs's values before anything is written, and resolves its
// policy.
func Check(qs protocol.QueueSet) (Change, error) {
	c := Change{Set: qs}
	if err := job.ValidName("queue", qs.Name); err != nil {
		return c, protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	if qs.Policy != nil {
		p, err := policy.Lookup(*qs.Policy)
		if err != nil {
			return c, protocol.Errorf(protocol.CodeBadRequest, "%v", err)
		}
		if !p.ForQueues() {
			return c, protocol.Errorf(protocol.CodeBadRequest, "policy %s decides how many placeholders sites hold, not which job a queue runs", p.Name)
		}
		c.Policy = &p
	}
	if qs.Ceiling != nil {
		if err := protocol.CheckSeconds("ceiling", *qs.Ceiling); err != nil {
			return c, protocol.Errorf(protocol.CodeBadRequest, "%v (0 = none)", err)
		}
	}
	if qs.Deadline != nil {
		if err := protocol.CheckDeadline(*qs.Deadline); err != nil {
			return c, protocol.Errorf(protocol.CodeBadRequest, "%v", err)
		}
	}
	if qs.Budget != nil {
		if err := protocol.CheckBudget(*qs.Budget); err != nil {
			return c, protocol.Errorf(protocol.CodeBadRequest, "%v", err)
		}
	}
	if qs.MaxCopies != nil && (*qs.MaxCopies < 0 || *qs.MaxCopies > 1000) {
		return c, protocol.Errorf(protocol.CodeBadRequest, "max copies must be 0..1000 (0: the policy's default, 1: never copy)")
	}
	if qs.MaxOutput != nil {
		if err := protocol.CheckQueueOutput(*qs.MaxOutput); err != nil {
			return c, protocol.Errorf(protocol.CodeBadRequest, "%v", err)
		}
	}
	if qs.Output != nil && *qs.Output != "" && *qs.Output != protocol.OutputModeFiles {
		return c, protocol.Errorf(protocol.CodeBadRequest, "a queue's output must be files (or empty: as the placeholder does), not %q", protocol.ClipText(*qs.Output, 64))
	}
	if qs.MaxAttempts != nil && (*qs.MaxAttempts < 1 || *qs.MaxAttempts > 1000) {
		return c, protocol.Errorf(protocol.CodeBadRequest, "max attempts must be 1..1000")
	}
	if qs.Defaults != nil {
		if err := protocol.CheckResources(*qs.Defaults); err != nil {
			return c, protocol.Errorf(protocol.CodeBadRequest, "defaults: %v", err)
		}
	}
	return c, nil
}

// Settings is cur, a queue's settings, with c's changes; the fields c
// leaves unset stay.
func (c Change) Settings(cur protocol.QueueInfo) protocol.QueueInfo {
	qs, next := c.Set, cur
	set := func(dst *float64, v *float64) {
		if v != nil {
			*dst = *v
		}
	}
	set(&next.Ceiling, qs.Ceiling)
	set(&next.Deadline, qs.Deadline)
	set(&next.Budget, qs.Budget)
	if qs.MaxAttempts != nil {
		next.MaxAttempts = *qs.MaxAttempts
	}
	if qs.RetryFailed != nil {
		next.RetryFailed = *qs.RetryFailed
	}
	if c.Policy != nil {
		next.Policy = c.Policy.Name
	}
	if qs.MaxCopies != nil {
		next.MaxCopies = *qs.MaxCopies
	}
	if qs.MaxOutput != nil {
		next.MaxOutput = *qs.MaxOutput
	}
	if qs.Output != nil {
		next.Output = *qs.Output
	}
	if qs.Defaults != nil {
		next.Defaults = *qs.Defaults
	}
	return next
}

// Economics says whether c changes the queue's deadline or budget: copies
// refused for them and the ledger's checks are to be looked at again.
func (c Change) Economics() bool { return c.Set.Deadline != nil || c.Set.Budget != nil }

// Save writes queue id's settings next (c.Settings) in the open
// transaction: its row, and its defaults, deadline and budget where c
// sets them. A switch to a choosing policy (DC, SA, XSufferage) from one
// that is not is kept as the queue's choosing_since, now: its ready jobs'
// queue time counts from no earlier, after a restart as before it.
func (c Change) Save(ctx context.Context, ex Execer, id int32, next protocol.QueueInfo, now time.Time) error {
	if c.Policy != nil && c.Policy.Kind == policy.Choosing {
		if _, err := ex.ExecContext(ctx, queries.Get("StartChoosing"), now.UnixMicro(), id, choosingNames()); err != nil {
			return batchfail.Store{Err: err}
		}
	}
	if _, err := ex.ExecContext(ctx, queries.Get("UpdateQueue"),
		next.Ceiling, next.MaxAttempts, next.RetryFailed, next.Policy, next.MaxCopies, next.MaxOutput, next.Output, id); err != nil {
		return batchfail.Store{Err: err}
	}
	if c.Set.Defaults != nil {
		if err := saveDefaults(ctx, ex, id, next.Defaults); err != nil {
			return err
		}
	}
	if c.Economics() {
		if _, err := ex.ExecContext(ctx, queries.Get("SetEconomics"), id, next.Deadline, next.Budget); err != nil {
			return batchfail.Store{Err: err}
		}
	}
	return nil
}

// saveDefaults stores queue id's defaults r; the zero request removes
// them.
func saveDefaults(ctx context.Context, ex Execer, id int32, r protocol.Resources) error {
	if !r.Asks() {
		if _, err := ex.ExecContext(ctx, queries.Get("DeleteDefaults"), id); err != nil {
			return batchfail.Store{Err: err}
		}
		return nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if _, err := ex.ExecContext(ctx, queries.Get("SetDefaults"), id, string(b)); err != nil {
		return batchfail.Store{Err: err}
	}
	return nil
}

// Load calls f with every stored queue's id and settings, its deadline,
// budget and resource defaults with them (loading).
func Load(ctx context.Context, ex Execer, f func(id int32, info protocol.QueueInfo)) error {
	rows, err := ex.QueryContext(ctx, queries.Get("LoadQueues"))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id int32
		var q protocol.QueueInfo
		var defaults sql.NullString
		if err := rows.Scan(&id, &q.Name, &q.Ceiling, &q.MaxAttempts, &q.RetryFailed, &q.Policy, &q.Deadline, &q.Budget, &q.MaxCopies, &q.MaxOutput, &q.Output, &defaults); err != nil {
			return err
		}
		if defaults.Valid {
			if err := json.Unmarshal([]byte(defaults.String), &q.Defaults); err != nil {
				return fmt.Errorf("queue %s: stored resource defaults: %w", q.Name, err)
			}
		}
		f(id, q)
	}
	return rows.Err()
}

// Summary is a queue's row of `mqstat --summary`: info, its settings
// with what the ledger filled in, and its jobs counted by state. A
// queue that spent or has a deadline or budget shows them.
func Summary(info protocol.QueueInfo, counts map[string]int) protocol.QueueCounts {
	qc := protocol.QueueCounts{Queue: info.Name, Policy: info.Policy, Counts: counts}
	if info.Spent > 0 || info.Budget > 0 || info.Deadline > 0 {
		qc.Spent, qc.SpentBySite, qc.Infeasible, qc.OverBudget = info.Spent, info.SpentBySite, info.Infeasible, info.OverBudget
		qc.Budget, qc.Deadline = info.Budget, info.Deadline
	}
	return qc
}

// CloneSummary is a copy of sum whose maps its caller may change.
func CloneSummary(sum []protocol.QueueCounts) []protocol.QueueCounts {
	out := slices.Clone(sum)
	for i := range out {
		out[i].Counts = maps.Clone(out[i].Counts)
		out[i].SpentBySite = maps.Clone(out[i].SpentBySite)
	}
	return out
}

// choosingNames are the policies that choose, as ",dc,sa,": a stored
// name in it chose already (StartChoosing).
func choosingNames() string {
	names := ","
	for _, p := range policy.All() {
		if p.Kind == policy.Choosing {
			names += p.Name + ","
		}
	}
	return names
}
