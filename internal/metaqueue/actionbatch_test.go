package metaqueue

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// TestActionBatches: an action on a selection larger than a batch goes on
// in later batches, the core answering between them (the hook's own calls
// go through); a job a selection's query chose that another call took out
// of the action's states meanwhile is passed over quietly, while a listed
// one is named; an atomic selection is one batch.
func TestActionBatches(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		act     func(*env) func(context.Context, protocol.Select) (protocol.ActionReply, error)
		setup   func(e *env, ids []int64) // before the action
		listed  bool                      // select the ids, not the target
		atomic  bool
		between func(e *env, ids []int64) // at the first gap between batches
		want    job.State                 // of the jobs acted on
		acted   int
		refused int
		gaps    int
	}{
		{name: "delete by target", act: func(e *env) func(context.Context, protocol.Select) (protocol.ActionReply, error) { return e.s.Delete },
			between: func(e *env, ids []int64) { e.del(ids[5]) }, want: job.Deleted, acted: 6, gaps: 2},
		{name: "delete listed", act: func(e *env) func(context.Context, protocol.Select) (protocol.ActionReply, error) { return e.s.Delete },
			listed: true, between: func(e *env, ids []int64) { e.del(ids[5]) }, want: job.Deleted, acted: 6, refused: 1, gaps: 2},
		{name: "delete atomic", act: func(e *env) func(context.Context, protocol.Select) (protocol.ActionReply, error) { return e.s.Delete },
			atomic: true, want: job.Deleted, acted: 7},
		{name: "hold by target", act: func(e *env) func(context.Context, protocol.Select) (protocol.ActionReply, error) { return e.s.Hold },
			between: func(e *env, ids []int64) { e.del(ids[4], ids[6]) }, want: job.Held, acted: 5, gaps: 2},
		{name: "rerun by target", act: func(e *env) func(context.Context, protocol.Select) (protocol.ActionReply, error) { return e.s.Rerun },
			setup: func(e *env, ids []int64) { e.del(ids...) },
			between: func(e *env, ids []int64) {
				if _, err := e.s.Rerun(context.Background(), protocol.Select{IDs: ids[6:]}); err != nil {
					e.t.Fatal(err)
				}
			}, want: job.Queued, acted: 6, gaps: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			var ids []int64
			for range 7 {
				ids = append(ids, e.submit1("t", "true"))
			}
			e.submit1("other", "true")
			if tc.setup != nil {
				tc.setup(e, ids)
			}
			e.s.actionBatch = 3
			gaps := 0
			e.s.betweenBatches = func() {
				if gaps++; gaps == 1 && tc.between != nil {
					tc.between(e, ids)
				}
			}
			sel := protocol.Select{Target: "t", Atomic: tc.atomic}
			if tc.listed {
				sel = protocol.Select{IDs: ids}
			}
			r, err := tc.act(e)(context.Background(), sel)
			if err != nil {
				t.Fatal(err)
			}
			if r.Acted() != tc.acted || r.Refused() != tc.refused || gaps != tc.gaps {
				t.Fatalf("acted on %d (%v), refused %d (%v), %d gaps; want %d, %d, %d", r.Acted(), r.IDs, r.Refused(), r.Errors, gaps, tc.acted, tc.refused, tc.gaps)
			}
			if !slices.IsSorted(r.IDs) {
				t.Errorf("ids out of order: %v", r.IDs)
			}
			for _, id := range r.IDs {
				e.mustBe(id, tc.want)
			}
			e.check()
		})
	}
}

// TestActionBatchFails: a batch that fails ends the action with an error
// that says how many jobs the batches before it acted on; those stay
// acted on, the others as they were.
func TestActionBatchFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var ids []int64
	for range 7 {
		ids = append(ids, e.submit1("t", "true"))
	}
	e.s.actionBatch = 3
	var restore func()
	e.s.betweenBatches = func() {
		if restore == nil {
			restore = e.failCommits()
		}
	}
	_, err := e.s.Delete(context.Background(), protocol.Select{Target: "t"})
	restore()
	if err == nil || !strings.Contains(err.Error(), "(after 3 jobs were acted on)") {
		t.Fatalf("Delete = %v", err)
	}
	for i, id := range ids {
		want := job.Queued
		if i < 3 {
			want = job.Deleted
		}
		e.mustBe(id, want)
	}
	e.check()
}

// del deletes ids, failing the test if any is not.
func (e *env) del(ids ...int64) {
	e.t.Helper()
	r, err := e.s.Delete(context.Background(), protocol.Select{IDs: ids})
	if err != nil || r.Acted() != len(ids) {
		e.t.Fatalf("delete %v: %+v, %v", ids, r, err)
	}
}
