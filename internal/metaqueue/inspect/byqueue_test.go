package inspect

import (
	"context"
	"math"
	"reflect"
	"testing"

	"github.com/mq-hpc/mq/internal/metaqueue/internal/modtest"
	"github.com/mq-hpc/mq/protocol"
)

// TestStatByQueue: a listing of a small queue's jobs reads only the runs
// of ids the core says hold them, and lists what the query over every job
// lists (ids and every field), with every other condition, page and
// bound kept; a queue of many jobs, or with a target, is read as before.
func TestStatByQueue(t *testing.T) {
	w := modtest.NewDB(t)
	fillJobs(t, w, 20000) // queue 1: every 1,000th F, every 1,000th (offset 500) Q, the rest D
	for _, q := range []string{
		"INSERT INTO queues (id, name, created) VALUES (2, 'small', 0), (3, 'empty', 0), (4, 'half', 0)",
		"INSERT INTO targets (id, name) VALUES (2, 'u')",
		// small: a run of 30 submitted together, a few alone later, one
		// purged (in the core's runs, no row)
		"UPDATE jobs SET queue_id = 2 WHERE id BETWEEN 5000 AND 5029 OR id IN (9001, 12000, 12002, 19999)",
		"UPDATE jobs SET target_id = 2 WHERE id IN (5003, 12002)",
		"UPDATE jobs SET queue_id = 4 WHERE id % 2 = 0 AND queue_id = 1",
	} {
		if _, err := w.ExecContext(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
	src := keptStates(t, w)
	if _, err := w.ExecContext(context.Background(), "DELETE FROM jobs WHERE id = 5010"); err != nil {
		t.Fatal(err)
	}
	scan, kept := New(w, "", nil), New(w, "", src)
	list := func(r *Reader, st protocol.Stat, after int64) []protocol.JobInfo {
		var out []protocol.JobInfo
		err := r.Stat(context.Background(), st, after, func(js []protocol.JobInfo) error {
			out = append(out, js...)
			return nil
		})
		if err != nil {
			t.Fatalf("Stat(%+v): %v", st, err)
		}
		return out
	}
	for _, tc := range []struct {
		st    protocol.Stat
		after int64
		wantN int
	}{
		{st: protocol.Stat{Queue: "small"}, wantN: 33},
		{st: protocol.Stat{Queue: "small"}, after: 5020, wantN: 13},
		{st: protocol.Stat{Queue: "small", Limit: 5}, after: 5027, wantN: 5},
		{st: protocol.Stat{Queue: "small", Limit: 101}, wantN: 33},
		{st: protocol.Stat{Queue: "small", States: "D"}, wantN: 31},
		{st: protocol.Stat{Queue: "small", States: "QF"}, wantN: 2},
		{st: protocol.Stat{Queue: "small", From: 5005, To: 12001}, wantN: 26},
		{st: protocol.Stat{Queue: "small", From: 1, To: math.MaxInt64}, wantN: 33},
		{st: protocol.Stat{Queue: "small", Earlier: true}, wantN: 33},
		{st: protocol.Stat{Queue: "small", Target: "u"}, wantN: 2},
		{st: protocol.Stat{Queue: "small", Last: 3}, wantN: 3},
		{st: protocol.Stat{Queue: "empty"}},
		{st: protocol.Stat{Queue: "nosuch"}},
		{st: protocol.Stat{Queue: "half", Limit: 101}, after: 300, wantN: 101},
		{st: protocol.Stat{Queue: protocol.DefaultQueue, Limit: 10}, wantN: 10},
	} {
		want := list(scan, tc.st, tc.after)
		src.calls = 0
		got := list(kept, tc.st, tc.after)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%+v after %d: %d jobs %v, the scan %d %v", tc.st, tc.after, len(got), ids(got), len(want), ids(want))
		}
		if len(want) != tc.wantN {
			t.Errorf("%+v after %d: %d jobs, want %d", tc.st, tc.after, len(want), tc.wantN)
		}
	}
	// The small queue's listing reads only its runs: a row the core never
	// counted (which cannot be: the snapshot is taken before the core is
	// asked) is not found outside them, where the scan finds it.
	if _, err := w.ExecContext(context.Background(), "UPDATE jobs SET queue_id = 2 WHERE id = 15000"); err != nil {
		t.Fatal(err)
	}
	if got, want := list(kept, protocol.Stat{Queue: "small"}, 0), list(scan, protocol.Stat{Queue: "small"}, 0); len(got) != 33 || len(want) != 34 {
		t.Errorf("small queue by its runs: %d jobs, the scan %d", len(got), len(want))
	}
}

func ids(js []protocol.JobInfo) []int64 {
	var out []int64
	for _, j := range js {
		out = append(out, j.ID)
	}
	return out
}
