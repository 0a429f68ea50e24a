package queues

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/internal/modtest"
	"github.com/mq-hpc/mq/protocol"

	_ "modernc.org/sqlite"
)

// TestImports: the module imports the standard library, the public
// job and protocol packages and internal leaf packages only: never the
// metaqueue core nor another of its modules.
func TestImports(t *testing.T) { modtest.Imports(t) }

// TestQueriesUsed: every query of queues.sql is asked for by name in the
// package, and every name asked for is there.
func TestQueriesUsed(t *testing.T) {
	modtest.QueriesUsed(t, "queues.sql", queries.Names(), modtest.Asked)
}

func ptr[T any](v T) *T { return &v }

// TestCheck: each bad value is refused as a bad request naming what is
// wrong (cls queue set shows these words), before anything is written;
// good ones pass and the policy is resolved.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		qs   protocol.QueueSet
		want string // a part of the error; "" ok
	}{
		{"plain", protocol.QueueSet{Name: "q"}, ""},
		{"everything", protocol.QueueSet{Name: "q", Ceiling: ptr(60.0), MaxAttempts: ptr(3), RetryFailed: ptr(true),
			Policy: ptr("fcfs"), Budget: ptr(10.0), MaxCopies: ptr(2), MaxOutput: ptr(int64(1 << 20)), Output: ptr("files"),
			Defaults: &protocol.Resources{CPUs: 2}}, ""},
		{"clear output", protocol.QueueSet{Name: "q", Output: ptr("")}, ""},
		{"bad name", protocol.QueueSet{Name: "a b"}, "queue"},
		{"unknown policy", protocol.QueueSet{Name: "q", Policy: ptr("nosuch")}, "nosuch"},
		{"site policy", protocol.QueueSet{Name: "q", Policy: ptr("dbc-time")}, "decides how many placeholders sites hold, not which job a queue runs"},
		{"negative ceiling", protocol.QueueSet{Name: "q", Ceiling: ptr(-1.0)}, "(0 = none)"},
		{"negative budget", protocol.QueueSet{Name: "q", Budget: ptr(-1.0)}, "budget"},
		{"copies", protocol.QueueSet{Name: "q", MaxCopies: ptr(1001)}, "max copies must be 0..1000 (0: the policy's default, 1: never copy)"},
		{"negative copies", protocol.QueueSet{Name: "q", MaxCopies: ptr(-1)}, "max copies must be 0..1000"},
		{"max output", protocol.QueueSet{Name: "q", MaxOutput: ptr(int64(-1))}, "output"},
		{"output mode", protocol.QueueSet{Name: "q", Output: ptr("pipe")}, `a queue's output must be files (or empty: as the placeholder does), not "pipe"`},
		{"no attempts", protocol.QueueSet{Name: "q", MaxAttempts: ptr(0)}, "max attempts must be 1..1000"},
		{"many attempts", protocol.QueueSet{Name: "q", MaxAttempts: ptr(1001)}, "max attempts must be 1..1000"},
		{"defaults", protocol.QueueSet{Name: "q", Defaults: &protocol.Resources{CPUs: -1}}, "defaults: "},
	} {
		c, err := Check(tc.qs)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !protocol.IsCode(err, protocol.CodeBadRequest) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: Check = %v, want a bad request saying %q", tc.name, err, tc.want)
		case tc.want == "" && (tc.qs.Policy == nil) != (c.Policy == nil):
			t.Errorf("%s: policy %v resolved as %v", tc.name, tc.qs.Policy, c.Policy)
		}
	}
}

// TestSettings: a change sets what it names and leaves the rest.
func TestSettings(t *testing.T) {
	cur := protocol.QueueInfo{Name: "q", Ceiling: 60, MaxAttempts: 3, Policy: "fifo", Budget: 5, Deadline: 100,
		MaxCopies: 2, Output: "files", Defaults: protocol.Resources{CPUs: 2}}
	for _, tc := range []struct {
		name string
		qs   protocol.QueueSet
		want func(*protocol.QueueInfo)
	}{
		{"nothing", protocol.QueueSet{Name: "q"}, func(*protocol.QueueInfo) {}},
		{"ceiling", protocol.QueueSet{Name: "q", Ceiling: ptr(0.0)}, func(i *protocol.QueueInfo) { i.Ceiling = 0 }},
		{"economics", protocol.QueueSet{Name: "q", Budget: ptr(0.0), Deadline: ptr(200.0)}, func(i *protocol.QueueInfo) { i.Budget, i.Deadline = 0, 200 }},
		{"retries", protocol.QueueSet{Name: "q", MaxAttempts: ptr(7), RetryFailed: ptr(true)}, func(i *protocol.QueueInfo) { i.MaxAttempts, i.RetryFailed = 7, true }},
		{"policy", protocol.QueueSet{Name: "q", Policy: ptr("sjf")}, func(i *protocol.QueueInfo) { i.Policy = "sjf" }},
		{"copies and output", protocol.QueueSet{Name: "q", MaxCopies: ptr(1), MaxOutput: ptr(int64(9)), Output: ptr("")},
			func(i *protocol.QueueInfo) { i.MaxCopies, i.MaxOutput, i.Output = 1, 9, "" }},
		{"defaults cleared", protocol.QueueSet{Name: "q", Defaults: &protocol.Resources{}}, func(i *protocol.QueueInfo) { i.Defaults = protocol.Resources{} }},
	} {
		c, err := Check(tc.qs)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		want := cur
		tc.want(&want)
		if got := c.Settings(cur); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: Settings = %+v, want %+v", tc.name, got, want)
		}
		if e := tc.qs.Budget != nil || tc.qs.Deadline != nil; c.Economics() != e {
			t.Errorf("%s: Economics %v, want %v", tc.name, c.Economics(), e)
		}
	}
}

// TestQueriesPrepare: every query of queues.sql prepares against the
// schema the migrations make: a typo or a column the schema lost fails
// here, not in the CLS.
func TestQueriesPrepare(t *testing.T) {
	w := modtest.NewDB(t)
	for _, name := range queries.Names() {
		st, err := w.PrepareContext(context.Background(), queries.Get(name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		st.Close()
	}
}

// TestSave writes changes and reads back the rows: the queue's settings,
// its deadline and budget, and its defaults, kept, replaced and removed.
func TestSave(t *testing.T) {
	ctx := context.Background()
	w := modtest.NewDB(t)
	var id int32
	if err := w.QueryRowContext(ctx, "INSERT INTO queues (name, created) VALUES ('q', 0) RETURNING id").Scan(&id); err != nil {
		t.Fatal(err)
	}
	cur := protocol.QueueInfo{Name: "q", MaxAttempts: 1, Policy: "fcfs"}
	for _, tc := range []struct {
		name     string
		qs       protocol.QueueSet
		defaults *protocol.Resources // the stored defaults after; nil none
	}{
		{"settings", protocol.QueueSet{Name: "q", Ceiling: ptr(30.0), MaxAttempts: ptr(4), Policy: ptr("sjf"), Output: ptr("files")}, nil},
		{"defaults", protocol.QueueSet{Name: "q", Defaults: &protocol.Resources{CPUs: 4, Mem: 2 << 30}}, &protocol.Resources{CPUs: 4, Mem: 2 << 30}},
		{"economics keep defaults", protocol.QueueSet{Name: "q", Budget: ptr(50.0), Deadline: ptr(1e9)}, &protocol.Resources{CPUs: 4, Mem: 2 << 30}},
		{"defaults cleared", protocol.QueueSet{Name: "q", Defaults: &protocol.Resources{}}, nil},
	} {
		c, err := Check(tc.qs)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		cur = c.Settings(cur)
		if err := c.Save(ctx, w, id, cur, time.Now()); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got protocol.QueueInfo
		if err := w.QueryRowContext(ctx, `SELECT q.ceiling_s, q.max_attempts, q.policy, q.output,
			COALESCE(e.deadline, 0), COALESCE(e.budget, 0)
			FROM queues q LEFT JOIN queue_economics e ON e.queue_id = q.id WHERE q.id = ?`, id).
			Scan(&got.Ceiling, &got.MaxAttempts, &got.Policy, &got.Output, &got.Deadline, &got.Budget); err != nil {
			t.Fatal(err)
		}
		if got.Ceiling != cur.Ceiling || got.MaxAttempts != cur.MaxAttempts || got.Policy != cur.Policy ||
			got.Output != cur.Output || got.Deadline != cur.Deadline || got.Budget != cur.Budget {
			t.Errorf("%s: stored %+v, want %+v", tc.name, got, cur)
		}
		var loaded *protocol.Resources
		if err := Load(ctx, w, func(qid int32, info protocol.QueueInfo) {
			if qid != id {
				t.Errorf("%s: loaded queue %d, want %d", tc.name, qid, id)
			}
			if info.Defaults.Asks() {
				loaded = &info.Defaults
			}
			if !reflect.DeepEqual(info, cur) {
				t.Errorf("%s: loaded %+v, want %+v", tc.name, info, cur)
			}
		}); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(loaded, tc.defaults) {
			t.Errorf("%s: loaded defaults %+v, want %+v", tc.name, loaded, tc.defaults)
		}
	}
}

// TestLoad: every queue loads with its settings, deadline, budget and
// defaults; defaults that do not parse are an error naming their queue.
func TestLoad(t *testing.T) {
	ctx := context.Background()
	w := modtest.NewDB(t)
	for _, q := range []string{
		`INSERT INTO queues (id, name, created, ceiling_s, max_attempts, policy) VALUES (1, 'a', 0, 60, 2, 'sjf'), (2, 'b', 0, 0, 1, 'fcfs')`,
		`INSERT INTO queue_economics (queue_id, deadline, budget) VALUES (2, 1e9, 5)`,
		`INSERT INTO queue_defaults (queue_id, resources) VALUES (1, '{"cpus":2}')`,
	} {
		if _, err := w.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	got := map[int32]protocol.QueueInfo{}
	keep := func(id int32, info protocol.QueueInfo) { got[id] = info }
	if err := Load(ctx, w, keep); err != nil {
		t.Fatal(err)
	}
	want := map[int32]protocol.QueueInfo{
		1: {Name: "a", Ceiling: 60, MaxAttempts: 2, Policy: "sjf", Defaults: protocol.Resources{CPUs: 2}},
		2: {Name: "b", MaxAttempts: 1, Policy: "fcfs", Deadline: 1e9, Budget: 5},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("loaded %+v, want %+v", got, want)
	}
	if _, err := w.ExecContext(ctx, `INSERT INTO queue_defaults (queue_id, resources) VALUES (2, '{')`); err != nil {
		t.Fatal(err)
	}
	err := Load(ctx, w, keep)
	if err == nil || !strings.Contains(err.Error(), "queue b: stored resource defaults") {
		t.Errorf("unreadable defaults: %v", err)
	}
}

// TestSummary: a queue's summary row shows spending, budget and deadline
// only for a queue that spent or has a budget or deadline.
func TestSummary(t *testing.T) {
	counts := map[string]int{"queued": 2}
	for _, tc := range []struct {
		name string
		info protocol.QueueInfo
		econ bool
	}{
		{"plain", protocol.QueueInfo{Name: "q", Policy: "fifo", Infeasible: 1}, false},
		{"spent", protocol.QueueInfo{Name: "q", Policy: "fifo", Spent: 1.5, SpentBySite: map[string]float64{"a": 1.5}}, true},
		{"budget", protocol.QueueInfo{Name: "q", Policy: "fifo", Budget: 9, OverBudget: 2}, true},
		{"deadline", protocol.QueueInfo{Name: "q", Policy: "fifo", Deadline: 1e9, Infeasible: 3}, true},
	} {
		got := Summary(tc.info, counts)
		want := protocol.QueueCounts{Queue: "q", Policy: "fifo", Counts: counts}
		if tc.econ {
			want.Spent, want.SpentBySite, want.Budget, want.Deadline = tc.info.Spent, tc.info.SpentBySite, tc.info.Budget, tc.info.Deadline
			want.Infeasible, want.OverBudget = tc.info.Infeasible, tc.info.OverBudget
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: Summary = %+v, want %+v", tc.name, got, want)
		}
	}
}
