package copies

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/protocol"
)

// TestApply: each event of a job's attempts, as one call, returns the
// facts the core acts on (whether the job moves on, its row's attempt,
// the copies left, what ended and how it is charged) and leaves the
// module's tables, apartness and index as the event says.
func TestApply(t *testing.T) {
	ctx := context.Background()
	t0, fin, now := time.UnixMicro(1_000_000), time.UnixMicro(4_000_000), time.UnixMicro(5_000_000)
	row := Run{1, 1, 10, t0}
	c2, c3 := Run{1, 2, 11, t0}, Run{1, 3, 12, t0}
	type spent struct {
		attempt      int
		charge, kept bool
		finished     time.Time
	}
	for _, tc := range []struct {
		name     string
		copies   []Run // running beside the row's attempt 1 (apart)
		ch       Change
		won      bool
		row      int // the row's attempt after
		moved    bool
		left     []int // copies left
		spent    []spent
		apart    int // the attempt apart after, 0 none
		indexed  int // attempts running in the index, 0 not indexed
		rows     int // job_copies rows after
		attempts int // attempts rows after
	}{
		{"alone, ended", nil, Change{Event: Ended, Attempt: 1, Succeeded: true}, true, 1, false, nil, nil, 0, 0, 0, 0},
		{"alone, claimed", nil, Change{Event: Claimed, Attempt: 1}, true, 1, false, nil, nil, 0, 0, 0, 0},
		{"alone, stopped", nil, Change{Event: Stopped, Reason: "deleted"}, false, 1, false, nil, nil, 0, 0, 0, 0},
		{"copy 3 finishes first", []Run{c2, c3}, Change{Event: Ended, Attempt: 3, Succeeded: true, Now: now}, true, 3, true, nil,
			[]spent{{1, true, true, now}, {2, true, true, now}}, 0, 0, 0, 2},
		{"the row's attempt finishes first", []Run{c2}, Change{Event: Ended, Attempt: 1, Succeeded: true, Now: now}, true, 1, false, nil,
			[]spent{{2, true, true, now}}, 0, 0, 0, 1},
		{"copy 2 claims first", []Run{c2, c3}, Change{Event: Claimed, Attempt: 2, Now: now}, true, 2, true, nil,
			[]spent{{1, true, true, now}, {3, true, true, now}}, 0, 0, 0, 2},
		{"copy 3 fails", []Run{c2, c3}, Change{Event: Ended, Attempt: 3, Report: protocol.Report{Exit: 1, Finished: fin}}, false, 1, false, []int{2},
			[]spent{{3, true, false, fin}}, 1, 0, 1, 1}, // no new copy beside it: its command fails
		{"the row's attempt is lost; copy 2 takes the row", []Run{c2, c3}, Change{Event: Ended, Attempt: 1, Report: protocol.Report{Reason: "lost"}, Now: now}, false, 2, true, []int{3},
			[]spent{{1, true, false, now}}, 2, 2, 1, 1},
		{"copy 2 handed back", []Run{c2}, Change{Event: Ended, Attempt: 2, Returned: true}, false, 1, false, nil,
			[]spent{{2, false, false, time.Time{}}}, 1, 1, 0, 0},
		{"deleted with copies", []Run{c2, c3}, Change{Event: Stopped, Reason: "deleted", Now: now}, false, 1, false, nil,
			[]spent{{2, true, true, now}, {3, true, true, now}}, 0, 0, 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := testDB(t)
			c := New()
			if err := c.SetApart(ctx, db, Job{ID: 1, Row: 1, Queue: 7, Runs: 1}, true); err != nil {
				t.Fatal(err)
			}
			for i, r := range tc.copies {
				if err := c.Started(ctx, db, r, Job{ID: 1, Row: 1, Queue: 7, Runs: 2 + i}); err != nil {
					t.Fatal(err)
				}
			}
			gen := c.Gen()
			a := Attempts{Job: 1, Queue: 7, Row: row, Copies: tc.copies}
			if NeedsNow(a, tc.ch) != !tc.ch.Now.IsZero() {
				t.Errorf("NeedsNow = %v, the case gives now %v", NeedsNow(a, tc.ch), tc.ch.Now)
			}
			f, err := c.Apply(ctx, db, a, tc.ch)
			if err != nil {
				t.Fatal(err)
			}
			if f.Won != tc.won || f.Row.Attempt != tc.row || f.RowMoved != tc.moved {
				t.Errorf("won %v, row %d, moved %v; want %v, %d, %v", f.Won, f.Row.Attempt, f.RowMoved, tc.won, tc.row, tc.moved)
			}
			var left []int
			for _, r := range f.Copies {
				left = append(left, r.Attempt)
			}
			if !slices.Equal(left, tc.left) {
				t.Errorf("copies left %v, want %v", left, tc.left)
			}
			var got []spent
			for _, s := range f.Spent {
				got = append(got, spent{s.Run.Attempt, s.Charge, s.Kept, s.Finished})
				if s.Charge && !s.Started.Equal(t0) {
					t.Errorf("attempt %d started %v, want %v", s.Run.Attempt, s.Started, t0)
				}
			}
			if !slices.Equal(got, tc.spent) {
				t.Errorf("spent %+v, want %+v", got, tc.spent)
			}
			for a := 1; a <= 3; a++ {
				if c.Apart(1, a) != (a == tc.apart) {
					t.Errorf("attempt %d apart: %v", a, c.Apart(1, a))
				}
			}
			want := map[int64]Entry{}
			if tc.indexed > 0 {
				want[1] = Entry{Queue: 7, Runs: tc.indexed}
			}
			if err := c.Check(want); err != nil {
				t.Error(err)
			}
			var rows, attempts int
			if err := db.QueryRow("SELECT (SELECT count(*) FROM job_copies), (SELECT count(*) FROM attempts)").Scan(&rows, &attempts); err != nil {
				t.Fatal(err)
			}
			if rows != tc.rows || attempts != tc.attempts {
				t.Errorf("job_copies %d, attempts %d; want %d, %d", rows, attempts, tc.rows, tc.attempts)
			}
			if len(tc.copies) > 0 && c.Gen() == gen {
				t.Error("the generation did not move")
			}
		})
	}
}

// TestLate: a killed copy's report is awaited from the placeholder that
// ran it, once; its CPU figures are kept.
func TestLate(t *testing.T) {
	ctx := context.Background()
	db := testDB(t)
	c := New()
	ref := protocol.JobRef{ID: 1, Attempt: 2}
	if _, err := db.Exec("INSERT INTO attempts (job_id, attempt, killed_copy) VALUES (1, 2, 1)"); err != nil {
		t.Fatal(err)
	}
	c.Kill(ref, 10)
	r := protocol.Report{ID: 1, Attempt: 2}
	r.CPUUser, r.MaxRSS = 3, 1<<20
	for _, tc := range []struct {
		ph     int64
		awaits bool
	}{{11, false}, {10, true}, {10, false}} {
		if got := c.Awaits(ref, tc.ph); got != tc.awaits {
			t.Errorf("Awaits(%d) = %v, want %v", tc.ph, got, tc.awaits)
		}
		if err := c.Late(ctx, db, tc.ph, r); err != nil {
			t.Fatal(err)
		}
	}
	var cpu float64
	if err := db.QueryRow("SELECT cpu_user FROM attempts WHERE job_id = 1 AND attempt = 2").Scan(&cpu); err != nil || cpu != 3 {
		t.Errorf("cpu_user %v, %v; want 3", cpu, err)
	}
}

// TestPick: the first queue with a candidate whose inputs are here wins;
// a candidate whose inputs are away is skipped, at most MaxTries a queue;
// a look repeats only once something changed.
func TestPick(t *testing.T) {
	ctx := context.Background()
	db := testDB(t)
	c := New()
	// Queue 1: jobs 1, 2; queue 2: jobs 11..20.
	for _, id := range []int64{1, 2, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20} {
		q := int32(1)
		if id > 10 {
			q = 2
		}
		if err := c.SetApart(ctx, db, Job{ID: id, Row: 1, Queue: q, Runs: 1}, true); err != nil {
			t.Fatal(err)
		}
	}
	wqr := policy.WQR{}
	away := func(ids ...int64) map[int64]bool {
		m := map[int64]bool{}
		for _, id := range ids {
			m[id] = true
		}
		return m
	}
	for _, tc := range []struct {
		name  string
		qs    []Queue
		away  map[int64]bool
		want  int64
		wantQ int
	}{
		{"first queue", []Queue{{ID: 1, Rep: wqr}, {ID: 2, Rep: wqr}}, nil, 1, 0},
		{"inputs away: the next", []Queue{{ID: 1, Rep: wqr}, {ID: 2, Rep: wqr}}, away(1), 2, 0},
		{"a queue all away: the next queue", []Queue{{ID: 1, Rep: wqr}, {ID: 2, Rep: wqr}}, away(1, 2), 11, 1},
		{"a queue without candidates", []Queue{{ID: 3, Rep: wqr}, {ID: 2, Rep: wqr}}, nil, 11, 1},
		{"MaxTries a queue", []Queue{{ID: 2, Rep: wqr}}, away(11, 12, 13, 14, 15, 16, 17, 18), 0, 0},
		{"within MaxTries", []Queue{{ID: 2, Rep: wqr}}, away(11, 12, 13, 14, 15, 16, 17), 18, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &ask{no: map[int64]bool{}, away: tc.away}
			l := c.Look(Where{Site: 1}, "s1", 0)
			id, q, err := c.Pick(&l, tc.qs, a)
			if err != nil || id != tc.want || id != 0 && q != tc.wantQ {
				t.Errorf("Pick = %d, queue %d, %v; want %d, queue %d", id, q, err, tc.want, tc.wantQ)
			}
		})
	}
	// PickFor walks the queues that copy (SetQueues: in the core's
	// order, Limit deciding), less those with a ready job.
	rep := func() policy.Replicator { return wqr }
	for _, tc := range []struct {
		name  string
		qs    []Setting
		ready map[int32]bool
		want  int64
		wantQ int32
	}{
		{"first that copies", []Setting{{ID: 1, MaxCopies: 2}, {ID: 2, MaxCopies: 2}}, nil, 1, 1},
		{"the core's order", []Setting{{ID: 2, MaxCopies: 2}, {ID: 1, MaxCopies: 2}}, nil, 11, 2},
		{"max_copies 1: not copying", []Setting{{ID: 1, MaxCopies: 1}, {ID: 2, MaxCopies: 2}}, nil, 11, 2},
		{"a policy's Replicator copies unbounded", []Setting{{ID: 1, NewRep: rep}}, nil, 1, 1},
		{"a policy's Replicator, max_copies 1", []Setting{{ID: 1, NewRep: rep, MaxCopies: 1}}, nil, 0, 0},
		{"a ready job: the next queue", []Setting{{ID: 1, MaxCopies: 2}, {ID: 2, MaxCopies: 2}}, map[int32]bool{1: true}, 11, 2},
		{"none copies", nil, nil, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.SetQueues(tc.qs)
			a := &ask{no: map[int64]bool{}, ready: tc.ready}
			l := c.Look(Where{Site: 1}, "s1", 0)
			id, q, err := c.PickFor(&l, a)
			if err != nil || id != tc.want || q != tc.wantQ {
				t.Errorf("PickFor = %d, queue %d, %v; want %d, queue %d", id, q, err, tc.want, tc.wantQ)
			}
			if tc.wantQ != 0 && !c.Copying(tc.wantQ) {
				t.Errorf("queue %d picked from but not Copying", tc.wantQ)
			}
		})
	}
	var asked Asked
	for _, tc := range []struct {
		name    string
		before  func()
		dataGen uint64
		again   bool
	}{
		{"first look", nil, 1, true},
		{"nothing changed", nil, 1, false},
		{"data moved", nil, 2, true},
		{"attempts changed", c.Changed, 2, true},
		{"nothing changed again", nil, 2, false},
	} {
		if tc.before != nil {
			tc.before()
		}
		if got := c.Again(&asked, tc.dataGen); got != tc.again {
			t.Errorf("%s: Again = %v, want %v", tc.name, got, tc.again)
		}
	}
}

// TestApplyNotRunning: an attempt that does not run cannot end beside
// others: an error, not a record of another attempt.
func TestApplyNotRunning(t *testing.T) {
	ctx := context.Background()
	db := testDB(t)
	c := New()
	t0 := time.UnixMicro(1_000_000)
	a := Attempts{Job: 1, Queue: 7, Row: Run{1, 1, 10, t0}, Copies: []Run{{1, 2, 11, t0}}}
	if _, err := c.Apply(ctx, db, a, Change{Event: Ended, Attempt: 9, Report: protocol.Report{Exit: 1, Finished: t0}}); err == nil {
		t.Fatal("attempt 9 ended without an error")
	}
	var n int
	if err := db.QueryRow("SELECT count(*) FROM attempts").Scan(&n); err != nil || n != 0 {
		t.Errorf("%d attempts recorded (%v), want none", n, err)
	}
}
