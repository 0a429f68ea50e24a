package selector

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/metaqueue/internal/modtest"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"

	_ "modernc.org/sqlite"
)

// TestImports: the module imports the standard library, the public
// job and protocol packages and internal leaf packages only: never the
// metaqueue core nor another of its modules.
func TestImports(t *testing.T) { modtest.Imports(t) }

// TestQueriesUsed: every query of selector.sql is asked for by name in
// the package, and every name asked for is there.
func TestQueriesUsed(t *testing.T) {
	modtest.QueriesUsed(t, "selector.sql", queries.Names(), modtest.Asked)
}

// names is a core's targets and queues.
type names struct {
	targets map[string]dag.TargetID
	queues  map[string]int64
}

func (n names) Lookup(name string) (dag.TargetID, bool) { id, ok := n.targets[name]; return id, ok }
func (n names) Queue(name string) (int64, bool)         { id, ok := n.queues[name]; return id, ok }

var testNames = names{
	targets: map[string]dag.TargetID{"t": 7, "x' OR 1=1 --": 8},
	queues:  map[string]int64{"default": 1, "fast": 2},
}

var base = strings.TrimSuffix(queries.Get("SelectIDs"), ";")

func TestBuild(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sel    protocol.Select
		states string
		ids    []int64
		sql    string // after the base query
		args   []any
		code   string // the error's, "" for none
		msg    string // the error's words, exactly
	}{
		{name: "ids", sel: protocol.Select{IDs: []int64{3, 1}}, states: "WQ", ids: []int64{3, 1}},
		{name: "ids in a queue", sel: protocol.Select{IDs: []int64{3}, Queue: "nope"}, states: "WQ", ids: []int64{3}},
		{name: "ids and a last id", sel: protocol.Select{IDs: []int64{3}, Last: 9}, states: "WQ", ids: []int64{3}},
		{name: "nothing", states: "WQ", code: protocol.CodeBadRequest, msg: "no jobs named: give job ids or a target"},
		{name: "both", sel: protocol.Select{IDs: []int64{1}, Target: "t"}, states: "WQ", code: protocol.CodeBadRequest,
			msg: "give job ids or a selection (target, states, range, all), not both"},
		{name: "all", sel: protocol.Select{All: true}, states: "DFX", sql: " ORDER BY id", args: []any{"DFX"}},
		{name: "target", sel: protocol.Select{Target: "t"}, states: "WQHEB",
			sql: " AND target_id = ? ORDER BY id", args: []any{"WQHEB", int32(7)}},
		{name: "target bound, not spliced", sel: protocol.Select{Target: "x' OR 1=1 --"}, states: "WQ",
			sql: " AND target_id = ? ORDER BY id", args: []any{"WQ", int32(8)}},
		{name: "no such target", sel: protocol.Select{Target: "u"}, states: "WQ", code: protocol.CodeNotFound, msg: "target u does not exist"},
		{name: "queue alone", sel: protocol.Select{Queue: "fast"}, states: "H",
			sql: " AND queue_id = ? ORDER BY id", args: []any{"H", int64(2)}},
		{name: "no such target, one line", sel: protocol.Select{Target: "a\nb"}, states: "WQ", code: protocol.CodeNotFound, msg: `target a\nb does not exist`},
		{name: "no such queue", sel: protocol.Select{Queue: "slow"}, states: "H", code: protocol.CodeNotFound, msg: "queue slow does not exist"},
		{name: "range", sel: protocol.Select{First: 5, Last: 9}, states: "WQ",
			sql: " AND id BETWEEN ? AND ? ORDER BY id", args: []any{"WQ", int64(5), int64(9)}},
		{name: "one id range", sel: protocol.Select{First: 5, Last: 5}, states: "WQ",
			sql: " AND id BETWEEN ? AND ? ORDER BY id", args: []any{"WQ", int64(5), int64(5)}},
		{name: "range backwards", sel: protocol.Select{First: 9, Last: 5}, states: "WQ", code: protocol.CodeBadRequest, msg: "bad id range 9..5"},
		{name: "range from 0", sel: protocol.Select{All: true, Last: 5}, states: "WQ", code: protocol.CodeBadRequest, msg: "bad id range 0..5"},
		{name: "range negative", sel: protocol.Select{First: -2, Last: 5}, states: "WQ", code: protocol.CodeBadRequest, msg: "bad id range -2..5"},
		{name: "states within", sel: protocol.Select{States: "QE"}, states: "WQHEB", sql: " ORDER BY id", args: []any{"QE"}},
		{name: "states partly within", sel: protocol.Select{States: "DQ"}, states: "WQ", sql: " ORDER BY id", args: []any{"Q"}},
		{name: "states outside", sel: protocol.Select{States: "D"}, states: "WQ", code: protocol.CodeBadRequest,
			msg: "no job in states D can be acted on (only WQ)"},
		{name: "states unknown", sel: protocol.Select{States: "Z"}, states: "WQ", code: protocol.CodeBadRequest},
		{name: "everything", sel: protocol.Select{Target: "t", Queue: "default", States: "W", First: 1, Last: 2}, states: "WQ",
			sql: " AND target_id = ? AND queue_id = ? AND id BETWEEN ? AND ? ORDER BY id", args: []any{"W", int32(7), int64(1), int64(1), int64(2)}},
		// The lookups go before the range's check, as the error says.
		{name: "target before range", sel: protocol.Select{Target: "u", First: 9, Last: 1}, states: "WQ", code: protocol.CodeNotFound, msg: "target u does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := Build(tc.sel, tc.states, testNames)
			if tc.code != "" {
				if !protocol.IsCode(err, tc.code) || (tc.msg != "" && err.Error() != tc.msg) {
					t.Fatalf("Build = %v, want %s %q", err, tc.code, tc.msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(q.IDs, tc.ids) {
				t.Errorf("IDs %v, want %v", q.IDs, tc.ids)
			}
			want := ""
			if tc.sql != "" {
				want = base + tc.sql
			}
			if q.SQL != want || !slices.Equal(q.Args, tc.args) {
				t.Errorf("got %q %v\nwant %q %v", q.SQL, q.Args, want, tc.args)
			}
		})
	}
}

// TestBuildRuns runs the queries Build makes on a jobs table: each
// selects what it says, in id order.
func TestBuildRuns(t *testing.T) {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE TABLE jobs (id INTEGER PRIMARY KEY, state TEXT, target_id INTEGER, queue_id INTEGER);
		INSERT INTO jobs VALUES (1,'W',7,1),(2,'Q',7,2),(3,'D',8,1),(4,'H',7,1),(5,'E',8,2),(6,'Q',8,1)`); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sel    protocol.Select
		states string
		want   []int64
	}{
		{protocol.Select{All: true}, "WQ", []int64{1, 2, 6}},
		{protocol.Select{Target: "t"}, "WQHEB", []int64{1, 2, 4}},
		{protocol.Select{Target: "x' OR 1=1 --"}, "DFX", []int64{3}},
		{protocol.Select{Queue: "fast"}, "WQHEB", []int64{2, 5}},
		{protocol.Select{First: 2, Last: 5}, "WQHEB", []int64{2, 4, 5}},
		{protocol.Select{States: "QH", Queue: "default"}, "WQHEB", []int64{4, 6}},
	} {
		q, err := Build(tc.sel, tc.states, testNames)
		if err != nil {
			t.Fatalf("%+v: %v", tc.sel, err)
		}
		rows, err := db.QueryContext(ctx, q.SQL, q.Args...)
		if err != nil {
			t.Fatalf("%+v: %v", tc.sel, err)
		}
		var got []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			got = append(got, id)
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%+v in %s: %v, want %v", tc.sel, tc.states, got, tc.want)
		}
	}
}

// FuzzBuild: whatever a client sends, Build does not panic, and a query
// it makes is the base query and the known conditions, in order, with
// one bound argument for each "?": nothing the client sent is spliced.
func FuzzBuild(f *testing.F) {
	f.Add("", "", "", int64(0), int64(0), false, int64(0), uint8(0))
	f.Add("t", "default", "WQ", int64(1), int64(9), true, int64(0), uint8(1))
	f.Add("x' OR 1=1 --", "fast", "DFX", int64(-1), int64(-5), false, int64(3), uint8(2))
	f.Add("", "q?", "Z", int64(0), int64(4), true, int64(3), uint8(3))
	f.Fuzz(func(t *testing.T, target, queue, states string, first, last int64, all bool, id int64, action uint8) {
		a := Action(action % uint8(len(actions)))
		sel := protocol.Select{Target: target, Queue: queue, States: states, First: first, Last: last, All: all}
		if id != 0 {
			sel.IDs = []int64{id}
		}
		q, err := Build(sel, a.States(), testNames)
		if err != nil {
			var pe *protocol.Error
			if !errors.As(err, &pe) || strings.Contains(pe.Msg, "\n") {
				t.Fatalf("Build: %v, want a one-line protocol error", err)
			}
			return
		}
		if q.SQL == "" {
			if len(q.IDs) == 0 || len(q.Args) != 0 {
				t.Fatalf("no query, ids %v args %v", q.IDs, q.Args)
			}
			return
		}
		rest, ok := strings.CutPrefix(q.SQL, base)
		if !ok {
			t.Fatalf("%q does not begin with the base query", q.SQL)
		}
		for _, clause := range []string{" AND target_id = ?", " AND queue_id = ?", " AND id BETWEEN ? AND ?"} {
			rest = strings.TrimPrefix(rest, clause)
		}
		if rest != " ORDER BY id" {
			t.Fatalf("%q: unknown conditions %q", q.SQL, rest)
		}
		if n := strings.Count(q.SQL, "?"); n != len(q.Args) || n > 5 {
			t.Fatalf("%q has %d parameters, %d arguments", q.SQL, n, len(q.Args))
		}
		got, _ := q.Args[0].(string)
		if got == "" || strings.Trim(got, a.States()) != "" {
			t.Fatalf("states %q, want some of %q", got, a.States())
		}
	})
}

func TestRefusal(t *testing.T) {
	live := func(id int64, st job.State, queue string) Job {
		return Job{ID: id, Found: true, Live: true, State: st, Queue: queue}
	}
	ended := func(id int64, st job.State, queue string) Job {
		return Job{ID: id, Found: true, State: st, Queue: queue}
	}
	prefetched := func(id int64) Job {
		return Job{ID: id, Found: true, Live: true, State: job.Executing, Prefetched: true, Queue: "default"}
	}
	// The words are mqdel's, mqsub --rerun's, mqhold's and mqrls's.
	for _, tc := range []struct {
		a     Action
		j     Job
		queue string
		want  string
	}{
		{Delete, live(1, job.Queued, "default"), "", ""},
		{Delete, live(1, job.Executing, "default"), "default", ""},
		{Delete, live(1, job.Blocked, "default"), "", ""},
		{Delete, live(1, job.Held, "default"), "fast", "job 1 is not in queue fast"},
		{Delete, ended(2, job.Done, "default"), "", "job 2 has already ended (done)"},
		{Delete, ended(2, job.Deleted, "default"), "fast", "job 2 has already ended (deleted)"},
		{Delete, Job{ID: 9}, "", "job 9 does not exist"},
		{Rerun, ended(3, job.Failed, "default"), "", ""},
		{Rerun, ended(3, job.Done, "default"), "default", ""},
		{Rerun, ended(3, job.Done, "default"), "fast", "job 3 is not in queue fast"},
		{Rerun, live(4, job.Blocked, "default"), "", "job 4 is blocked by a failed or deleted prerequisite; rerun that job instead"},
		{Rerun, live(4, job.Queued, "default"), "fast", "job 4 is queued; only ended jobs (done, failed, deleted) can be rerun"},
		{Rerun, Job{ID: 9}, "", "job 9 does not exist"},
		{Hold, live(5, job.Waiting, "default"), "", ""},
		{Hold, live(5, job.Queued, "fast"), "fast", ""},
		{Hold, live(5, job.Executing, "default"), "", "job 5 is executing; only waiting or queued jobs can be held"},
		{Hold, live(5, job.Held, "default"), "", "job 5 is held; only waiting or queued jobs can be held"},
		{Hold, live(5, job.Queued, "default"), "fast", "job 5 is not in queue fast"},
		{Hold, ended(6, job.Failed, "default"), "", "job 6 has already ended (failed)"},
		{Hold, Job{ID: 9}, "", "job 9 does not exist"},
		{Hold, prefetched(5), "", "job 5 is prefetched; only waiting or queued jobs can be held"},
		{Delete, prefetched(5), "", ""},
		{Rerun, prefetched(5), "", "job 5 is prefetched; only ended jobs (done, failed, deleted) can be rerun"},
		{Alter, prefetched(5), "", "job 5 is prefetched; only jobs not started (waiting, queued or held) can be changed"},
		{Release, live(7, job.Held, "default"), "", ""},
		{Release, live(7, job.Queued, "default"), "", "job 7 is queued; only held jobs can be released"},
		{Release, ended(8, job.Done, "default"), "", "job 8 has already ended (done)"},
		{Release, Job{ID: 9}, "", "job 9 does not exist"},
	} {
		if got := tc.a.Refusal(tc.j, tc.queue); got != tc.want {
			t.Errorf("%d.Refusal(%+v, %q) = %q, want %q", tc.a, tc.j, tc.queue, got, tc.want)
		}
	}
}

func TestWalk(t *testing.T) {
	jobs := map[int64]Job{
		1: {ID: 1, Found: true, Live: true, State: job.Queued, Queue: "default"},
		2: {ID: 2, Found: true, Live: true, State: job.Held, Queue: "default"},
		3: {ID: 3, Found: true, Live: true, State: job.Waiting, Queue: "default"},
	}
	facts := func(id int64) (Job, error) {
		if id == 99 {
			return Job{}, errors.New("disk")
		}
		j := jobs[id] // a missing id is not Found
		j.ID = id
		return j, nil
	}
	for _, tc := range []struct {
		name    string
		ids     []int64
		atomic  bool
		applied []int64
		refused []string
		err     bool
	}{
		{"each", []int64{1, 2, 3}, false, []int64{1, 3}, []string{"job 2 is held; only waiting or queued jobs can be held"}, false},
		{"atomic refused", []int64{1, 2, 3, 4}, true, nil,
			[]string{"job 2 is held; only waiting or queued jobs can be held", "job 4 does not exist"}, false},
		{"atomic", []int64{3, 1}, true, []int64{3, 1}, nil, false},
		{"error stops", []int64{1, 99, 3}, false, []int64{1}, nil, true},
		{"atomic error stops before any", []int64{1, 99}, true, nil, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var applied []int64
			reply, err := Hold.Walk(tc.ids, protocol.Select{IDs: tc.ids, Atomic: tc.atomic}, facts, func(id int64) error {
				applied = append(applied, id)
				return nil
			})
			if (err != nil) != tc.err {
				t.Fatalf("err %v, want one: %v", err, tc.err)
			}
			if !slices.Equal(applied, tc.applied) || !slices.Equal(reply.IDs, tc.applied) || !slices.Equal(reply.Errors, tc.refused) {
				t.Errorf("applied %v, reply %+v; want %v and refused %q", applied, reply, tc.applied, tc.refused)
			}
		})
	}
	// An apply that fails stops the walk; what went before stays in the reply.
	reply, err := Delete.Walk([]int64{1, 3}, protocol.Select{}, facts, func(id int64) error {
		if id == 3 {
			return errors.New("full")
		}
		return nil
	})
	if err == nil || !slices.Equal(reply.IDs, []int64{1}) {
		t.Errorf("apply failing on 3: %+v %v", reply, err)
	}
	// A selection's later batch passes over, unreported, the jobs that left
	// the action's states or are gone; a facts error still stops it.
	var applied []int64
	reply, err = Hold.WalkLeft([]int64{1, 2, 3, 4}, "", facts, func(id int64) error {
		applied = append(applied, id)
		return nil
	})
	if err != nil || !slices.Equal(applied, []int64{1, 3}) || !slices.Equal(reply.IDs, []int64{1, 3}) || reply.Refused() != 0 {
		t.Errorf("WalkLeft: applied %v, reply %+v, %v", applied, reply, err)
	}
	if _, err := Hold.WalkLeft([]int64{1, 99}, "", facts, func(int64) error { return nil }); err == nil {
		t.Error("WalkLeft went on past a facts error")
	}
}

// TestAddReply: a later batch's reply adds its ids and refusals, their
// counts beyond the lists kept, within the lists' bounds.
func TestAddReply(t *testing.T) {
	t.Parallel()
	var all protocol.ActionReply
	for i := range protocol.MaxActionIDs - 1 {
		all.AddID(int64(i))
	}
	all.AddError("one")
	r := protocol.ActionReply{IDs: []int64{-1, -2, -3}, Count: 5, Errors: []string{"two"}, ErrorCount: 4}
	addReply(&all, r)
	if all.Acted() != protocol.MaxActionIDs+4 || len(all.IDs) != protocol.MaxActionIDs || all.IDs[len(all.IDs)-1] != -1 {
		t.Errorf("acted %d, %d ids ending %d", all.Acted(), len(all.IDs), all.IDs[len(all.IDs)-1])
	}
	if all.Refused() != 5 || !slices.Equal(all.Errors, []string{"one", "two"}) {
		t.Errorf("refused %d: %v", all.Refused(), all.Errors)
	}
}

// TestRun: an action on a selection goes Size jobs a batch (one batch when
// atomic); a job that left the action's states between batches is passed
// over when the query chose it and named when it was listed; a batch that
// fails ends the run with an error saying how many jobs the ones before
// acted on.
func TestRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name            string
		byQuery, atomic bool
		failAt          int // the batch Do fails (1: the first), 0: none
		acted, refused  int
		batches         int
		err             string
	}{
		{name: "by query", byQuery: true, acted: 6, batches: 3},
		{name: "listed", acted: 6, refused: 1, batches: 3},
		{name: "atomic", atomic: true, acted: 7, batches: 1},
		{name: "a batch fails", byQuery: true, failAt: 2, acted: 3, batches: 2, err: "full (after 3 jobs were acted on)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			state := map[int64]job.State{}
			var ids []int64
			for id := int64(1); id <= 7; id++ {
				ids, state[id] = append(ids, id), job.Queued
			}
			batches := 0
			r := Run{
				Action: Hold, Sel: protocol.Select{Atomic: tc.atomic}, Size: 3,
				Select: func() ([]int64, bool, error) { return ids, tc.byQuery, nil },
				Facts: func(id int64) (Job, error) {
					return Job{ID: id, Found: true, Live: true, State: state[id]}, nil
				},
				Apply: func(id int64) error { state[id] = job.Held; return nil },
				Do: func(batch func() error) error {
					if batches++; batches == tc.failAt {
						return errors.New("full")
					}
					return batch()
				},
				Between: func() { state[7] = job.Executing }, // another call started it
			}
			reply, err := r.Act()
			if (err != nil || tc.err != "") && (err == nil || err.Error() != tc.err) {
				t.Fatalf("err %v, want %q", err, tc.err)
			}
			if reply.Acted() != tc.acted || reply.Refused() != tc.refused || batches != tc.batches {
				t.Errorf("acted %d, refused %d (%v), %d batches; want %d, %d, %d", reply.Acted(), reply.Refused(), reply.Errors, batches, tc.acted, tc.refused, tc.batches)
			}
		})
	}
}
