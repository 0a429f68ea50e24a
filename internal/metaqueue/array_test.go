package metaqueue

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/arrays"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// submitArray commits n jobs of target as one array capped at limit and
// returns their first id.
func (e *env) submitArray(target string, n, limit int) int64 {
	e.t.Helper()
	b, err := e.s.NewBulk()
	if err != nil {
		e.t.Fatal(err)
	}
	var specs []protocol.JobSpec
	for i := 0; i < n; i++ {
		specs = append(specs, spec(target, fmt.Sprintf("member %d", i)))
	}
	if err := b.Add(1, specs); err != nil {
		e.t.Fatal(err)
	}
	if err := b.Array(fmt.Sprintf("1-%d%%%d", n, limit), limit); err != nil {
		e.t.Fatal(err)
	}
	first, err := b.Commit(context.Background())
	if err != nil {
		e.t.Fatalf("Commit: %v", err)
	}
	return first
}

// executingIn counts the jobs first..last Executing, as stored, and checks
// the core's count of its array agrees.
func (e *env) executingIn(first, last int64) int {
	e.t.Helper()
	n := 0
	for _, j := range e.stat(protocol.Stat{States: "E"}) {
		if j.ID >= first && j.ID <= last {
			n++
		}
	}
	var mem int
	e.s.do(context.Background(), func() error {
		mem, _ = e.s.arrays.Running(first)
		return nil
	})
	if mem != n {
		e.t.Fatalf("core counts %d members of array %d-%d executing; %d are", mem, first, last, n)
	}
	return n
}

// TestArrayLimit: an array with %3 never has more than 3 members
// executing, through ends, requeues, reruns, deletes and a restart; members
// beyond the cap start as others end, and jobs in no array are not held up.
func TestArrayLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.submitArray("arr", 10, 3)
	last := first + 9
	other := e.submit1("other", "x")
	ph := e.register("s")

	got := e.next(ph, 8)
	if n := e.executingIn(first, last); n != 3 || len(got) != 4 {
		t.Fatalf("first pick: %d jobs %v, %d members executing; want 3 members and the other job", len(got), ids(got), n)
	}
	e.mustBe(other, job.Executing)
	byID := map[int64]protocol.Assignment{}
	for _, a := range got {
		byID[a.ID] = a
	}

	// One ends: exactly one more member starts.
	done := got[0]
	got = e.next(ph, 8, ok(done))
	if n := e.executingIn(first, last); n != 3 || len(got) != 1 {
		t.Fatalf("after one ended: got %v, %d executing; want one more member", ids(got), n)
	}
	for _, a := range got {
		byID[a.ID] = a
	}
	delete(byID, done.ID)

	// A member handed back unstarted is requeued; the cap still holds.
	var back protocol.Assignment
	for _, a := range byID {
		if a.ID != other {
			back = a
			break
		}
	}
	got = e.next(ph, 8, protocol.Report{ID: back.ID, Attempt: back.Attempt, Reason: protocol.ReasonReturned})
	if n := e.executingIn(first, last); n != 3 || len(got) != 1 {
		t.Fatalf("after a requeue: got %v, %d executing; want one member back", ids(got), n)
	}
	delete(byID, back.ID)
	for _, a := range got {
		byID[a.ID] = a
	}

	// A rerun Done member waits for the cap too.
	if _, err := e.s.Rerun(context.Background(), protocol.Select{IDs: []int64{done.ID}}); err != nil {
		t.Fatal(err)
	}
	if got = e.next(ph, 8); len(got) != 0 || e.executingIn(first, last) != 3 {
		t.Fatalf("after a rerun at the cap: got %v", ids(got))
	}

	// A restart counts the executing members again.
	e.reopen()
	ph2 := e.register("s2")
	if got = e.next(ph2, 8); len(got) != 0 || e.executingIn(first, last) != 3 {
		t.Fatalf("after a restart at the cap: got %v", ids(got))
	}

	// Deleting an executing member frees its place.
	var del int64
	for id := range byID {
		if id != other {
			del = id
			break
		}
	}
	if _, err := e.s.Delete(context.Background(), protocol.Select{IDs: []int64{del}}); err != nil {
		t.Fatal(err)
	}
	delete(byID, del)
	got = e.next(ph2, 8)
	if n := e.executingIn(first, last); n != 3 || len(got) != 1 {
		t.Fatalf("after a delete: got %v, %d executing", ids(got), n)
	}
	for _, a := range got {
		byID[a.ID] = a
	}

	// Run the rest to the end, never above the cap.
	for range 40 {
		var reps []protocol.Report
		for id, a := range byID {
			reps = append(reps, ok(a))
			delete(byID, id)
		}
		// ph holds the jobs started before the restart, ph2 the others.
		var mine, theirs []protocol.Report
		for _, r := range reps {
			if e.job(r.ID).Placeholder == ph {
				theirs = append(theirs, r)
			} else {
				mine = append(mine, r)
			}
		}
		e.report(ph, theirs...)
		for _, a := range e.next(ph2, 8, mine...) {
			byID[a.ID] = a
		}
		if n := e.executingIn(first, last); n > 3 {
			t.Fatalf("%d members executing, above the cap of 3", n)
		}
		if len(byID) == 0 {
			break
		}
	}
	for id := first; id <= last; id++ {
		if id != del {
			e.mustBe(id, job.Done)
		}
	}
	e.check()
}

// TestArrayNoLimit: an array without a cap dispatches as any bulk does.
func TestArrayNoLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b, err := e.s.NewBulk()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Add(1, []protocol.JobSpec{spec("a", "1"), spec("a", "2"), spec("a", "3")}); err != nil {
		t.Fatal(err)
	}
	if err := b.Array("1-3", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := e.next(e.register("s"), 8); len(got) != 3 {
		t.Fatalf("got %v, want all 3", ids(got))
	}
	if b2, _ := e.s.NewBulk(); b2.Array("x", -1) == nil {
		t.Fatal("a negative limit was accepted")
	}
}

// TestArraysListing: op arrays counts an array's members by state, a
// collapsed listing leaves them out, From..To lists only them, and a
// member's detail names its array.
func TestArraysListing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	before := e.submit1("solo", "x")
	first := e.submitArray("arr", 5, 2)
	after := e.submit1("solo", "y")
	e.next(e.register("s"), 8)
	as, err := arrays.List(context.Background(), e.s.ReadDB(), e.s, protocol.ArrayQuery{})
	if err != nil || len(as) != 1 {
		t.Fatalf("Arrays = %+v, %v", as, err)
	}
	a := as[0]
	if a.First != first || a.Last != first+4 || a.Limit != 2 || a.Spec != "1-5%2" || a.Target != "arr" ||
		a.Counts["E"] != 2 || a.Counts["Q"] != 3 {
		t.Fatalf("array = %+v", a)
	}
	var listed []int64
	for _, j := range e.stat(protocol.Stat{Collapse: true}) {
		listed = append(listed, j.ID)
	}
	if fmt.Sprint(listed) != fmt.Sprint([]int64{before, after}) {
		t.Fatalf("collapsed listing = %v, want %d and %d", listed, before, after)
	}
	if l := e.stat(protocol.Stat{Collapse: true, Last: 1}); len(l) != 1 || l[0].ID != after {
		t.Fatalf("collapsed listing's last job = %+v, want %d", l, after)
	}
	if n := len(e.stat(protocol.Stat{From: first, To: first + 4})); n != 5 {
		t.Fatalf("listing the array's ids gave %d jobs", n)
	}
	for _, q := range []protocol.ArrayQuery{{Target: "solo"}, {States: "D"}} {
		if as, _ := arrays.List(context.Background(), e.s.ReadDB(), e.s, q); len(as) != 0 {
			t.Fatalf("Arrays(%+v) = %+v, want none", q, as)
		}
	}
	if d := e.job(first + 3); d.Array == nil || d.Array.First != first {
		t.Fatalf("member's detail: array %+v", d.Array)
	}
	if d := e.job(after); d.Array != nil {
		t.Fatalf("a job in no array has array %+v", d.Array)
	}
}

// TestArrayLimitPolicies: the cap holds whatever the queue's policy (an
// ordered heap or DC's choice), and members beyond it start one for one
// as others end.
func TestArrayLimitPolicies(t *testing.T) {
	t.Parallel()
	for _, pol := range []string{"fcfs", "sjf", "cp", "dc"} {
		t.Run(pol, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.setPolicy(protocol.DefaultQueue, pol)
			first := e.submitArray("arr", 6, 2)
			ph := e.register("s")
			run := e.next(ph, 8)
			for done := 0; done < 6; {
				want := min(2, 6-done)
				if n := e.executingIn(first, first+5); n != want || len(run) != want {
					t.Fatalf("%d done: %d executing, %d held by the placeholder; want %d", done, n, len(run), want)
				}
				a := run[0]
				done++
				run = append(run[1:], e.next(ph, 8, ok(a))...)
			}
			for id := first; id <= first+5; id++ {
				e.mustBe(id, job.Done)
			}
		})
	}
}

// storedCounts is array first..last's members by state as stored (P for
// an Executing one not started yet): what the core's counts must say.
func (e *env) storedCounts(first, last int64) string {
	e.t.Helper()
	rows, err := e.s.ReadDB().Query(`SELECT CASE WHEN state = 'E' AND prefetched = 1 THEN 'P' ELSE state END AS st, count(*)
		FROM jobs WHERE id BETWEEN ? AND ? GROUP BY st ORDER BY st`, first, last)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	var parts []string
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			e.t.Fatal(err)
		}
		parts = append(parts, fmt.Sprintf("%s:%d", st, n))
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	return "map[" + strings.Join(parts, " ") + "]"
}

// TestArrayCountsAgree: the counts an array is listed with and mqwait
// counts its range with, which the core keeps as its members change
// state, agree with the stored states
// through dispatch (ahead of the free slots too), ends, failures,
// hand-backs, holds, deletes, reruns, a purge and restarts.
func TestArrayCountsAgree(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	type span struct{ first, last int64 }
	var spans []span
	agree := func(step string) {
		t.Helper()
		as, err := arrays.List(ctx, e.s.ReadDB(), e.s, protocol.ArrayQuery{})
		if err != nil {
			t.Fatal(err)
		}
		listed := map[int64]string{}
		for _, a := range as {
			listed[a.First] = fmt.Sprint(a.Counts) // fmt sorts a map's keys
		}
		for _, sp := range spans {
			want := e.storedCounts(sp.first, sp.last)
			if listed[sp.first] != want && !(want == "map[]" && listed[sp.first] == "") {
				t.Fatalf("%s: array %d-%d listed with %s, stored %s", step, sp.first, sp.last, listed[sp.first], want)
			}
			// mqwait FIRST-LAST counts from the same kept counts.
			var got protocol.ProgressReply
			if err := e.s.Progress().Stream(ctx, protocol.Progress{First: sp.first, Last: sp.last, Once: true}, func(r protocol.ProgressReply) error {
				got = r
				return nil
			}); err != nil {
				t.Fatalf("%s: progress of %d-%d: %v", step, sp.first, sp.last, err)
			}
			if fmt.Sprint(got.Counts) != want {
				t.Fatalf("%s: progress of array %d-%d counts %v, stored %s", step, sp.first, sp.last, got.Counts, want)
			}
		}
	}
	first := e.submitArray("a", 12, 0)
	spans = append(spans, span{first, first + 11})
	e.submit1("solo", "x")
	capped := e.submitArray("b", 6, 2)
	spans = append(spans, span{capped, capped + 5})
	agree("submitted")

	ph := e.register("s")
	r, err := e.s.Next(ctx, protocol.Next{Placeholder: ph, Free: 6, Ahead: 3})
	if err != nil || len(r.Jobs) != 6 {
		t.Fatalf("Next = %+v, %v", r, err)
	}
	agree("dispatched, 3 ahead")
	e.report(ph, ok(r.Jobs[0]), exit(r.Jobs[1], 1), protocol.Report{ID: r.Jobs[5].ID, Attempt: r.Jobs[5].Attempt, Reason: protocol.ReasonReturned})
	agree("one done, one failed, one handed back")
	if _, err := e.s.Hold(ctx, protocol.Select{IDs: []int64{first + 10, first + 11}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.Delete(ctx, protocol.Select{IDs: []int64{first + 9, r.Jobs[2].ID}}); err != nil {
		t.Fatal(err)
	}
	agree("held and deleted")
	e.reopen()
	agree("restarted")
	ph = e.register("s2")
	if _, err := e.s.Release(ctx, protocol.Select{IDs: []int64{first + 10}}); err != nil {
		t.Fatal(err)
	}
	e.runAll(ph, capped+1)
	agree("run to the end")
	if _, err := e.s.Rerun(ctx, protocol.Select{IDs: []int64{first, capped + 1}}); err != nil {
		t.Fatal(err)
	}
	agree("rerun")
	e.runAll(ph)
	e.advance(time.Hour)
	// a's ended members stay (first+11 is held: live); b's named go.
	if r := e.purge(protocol.Purge{EndedBefore: 60, Select: protocol.Select{IDs: []int64{first, capped, capped + 1}}}); r.Purged != 2 {
		t.Fatalf("purge = %+v, want 2 members purged", r)
	}
	agree("some members purged")
	e.reopen()
	agree("restarted after the purge")
	if _, err := e.s.Delete(ctx, protocol.Select{IDs: []int64{first + 11}}); err != nil {
		t.Fatal(err)
	}
	agree("the held member deleted")
	e.purge(protocol.Purge{EndedBefore: 0, Select: protocol.Select{All: true}})
	agree("all purged")
	e.check()
}

// TestCollapsedListing: a collapsed listing lists exactly the jobs outside
// arrays, in id order, with --last, a limit, pages and named ids, as a
// listing of those jobs alone would: with a few arrays (one query) and
// with more than one query leaves out (inspect's maxCollapsed, 64), some
// arrays adjacent with no job between them.
func TestCollapsedListing(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 62, 63, 64, 65, 130, 200} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			var solo, firsts []int64
			for i := 0; i < n; i++ {
				if i%3 != 1 {
					solo = append(solo, e.submit1("solo", fmt.Sprint("s", i)))
				}
				firsts = append(firsts, e.submitArray("arr", 1+i%3, 1+i%3))
			}
			solo = append(solo, e.submit1("solo", "last"))
			list := func(st protocol.Stat, after int64) []int64 {
				t.Helper()
				st.Collapse = true
				var out []int64
				err := e.s.Inspect().Stat(context.Background(), st, after, func(js []protocol.JobInfo) error {
					for _, j := range js {
						out = append(out, j.ID)
					}
					return nil
				})
				if err != nil {
					t.Fatalf("Stat(%+v, %d): %v", st, after, err)
				}
				return out
			}
			tail := func(k int) []int64 { return solo[max(0, len(solo)-k):] }
			for _, tc := range []struct {
				name  string
				st    protocol.Stat
				after int64
				want  []int64
			}{
				{"all", protocol.Stat{}, 0, solo},
				{"by target", protocol.Stat{Target: "solo"}, 0, solo},
				{"the members' target", protocol.Stat{Target: "arr"}, 0, nil},
				{"last 1", protocol.Stat{Last: 1}, 0, tail(1)},
				{"last 5", protocol.Stat{Last: 5}, 0, tail(5)},
				{"last all but one", protocol.Stat{Last: len(solo) - 1}, 0, tail(len(solo) - 1)},
				{"last all", protocol.Stat{Last: len(solo)}, 0, solo},
				{"last more", protocol.Stat{Last: len(solo) + 3}, 0, solo},
				{"limit 1", protocol.Stat{Limit: 1}, 0, solo[:1]},
				{"limit 7", protocol.Stat{Limit: 7}, 0, solo[:min(7, len(solo))]},
				{"limit more", protocol.Stat{Limit: len(solo) + 1}, 0, solo},
				{"last 10 limit 3", protocol.Stat{Last: 10, Limit: 3}, 0, tail(10)[:min(3, len(tail(10)))]},
				{"after the first", protocol.Stat{}, solo[0], solo[1:]},
				{"after the middle, last 2", protocol.Stat{Last: 2}, solo[len(solo)/2], tail(min(2, len(solo)-1-len(solo)/2))},
				{"after the last", protocol.Stat{Last: 2}, solo[len(solo)-1], nil},
				{"named", protocol.Stat{IDs: append(slices.Clone(firsts), solo[0], solo[len(solo)-1])}, 0, []int64{solo[0], solo[len(solo)-1]}},
				{"from..to", protocol.Stat{From: firsts[0], To: solo[len(solo)/2]}, 0, solo[1 : len(solo)/2+1]},
			} {
				if got := list(tc.st, tc.after); !slices.Equal(got, tc.want) {
					t.Errorf("%s: listed %v, want %v", tc.name, got, tc.want)
				}
			}
		})
	}
}
