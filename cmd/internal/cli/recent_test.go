package cli

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// mqstat's table lists the jobs not ended, then the last 20 ended ones
// and a line saying how to see the rest; -a lists every job, -s what it
// names, --limit shares its bound with the jobs not ended first.
func TestMqstatRecentView(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	var specs []protocol.JobSpec
	for i := range 30 {
		specs = append(specs, protocol.JobSpec{Target: fmt.Sprint("t", i), Command: "true", Cwd: "/tmp"})
	}
	ids, err := tb.store.Submit(ctx, specs)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tb.store.RegisterAs(ctx, protocol.Register{Site: "s", Host: "h", Slots: 27}, "socket")
	if err != nil {
		t.Fatal(err)
	}
	nr, err := tb.store.Next(ctx, protocol.Next{Placeholder: reg.ID, Free: 27})
	if err != nil || len(nr.Jobs) != 27 {
		t.Fatalf("next: %d jobs, %v", len(nr.Jobs), err)
	}
	now := time.Now()
	var reports []protocol.Report
	for _, a := range nr.Jobs[:26] { // 26 done, one executing, three queued
		reports = append(reports, protocol.Report{ID: a.ID, Attempt: a.Attempt, Started: now, Finished: now})
	}
	if err := tb.store.Report(ctx, reg.ID, reports); err != nil {
		t.Fatal(err)
	}
	rows := func(args ...string) (ids []string, tail string) {
		t.Helper()
		var o, e bytes.Buffer
		if code := Run(ctx, Mqstat(tb.env(&o, &e)), append([]string{"mqstat"}, args...)); code != 0 {
			t.Fatalf("mqstat %v: exit %d, %s", args, code, e.String())
		}
		lines := strings.Split(strings.TrimSpace(o.String()), "\n")
		for _, l := range lines[1:] {
			if strings.HasPrefix(l, "(") {
				tail = l
				continue
			}
			ids = append(ids, strings.Fields(l)[0])
		}
		return ids, tail
	}
	want := func(from, to int) []string { // ids[from..to], as printed
		var out []string
		for _, id := range ids[from : to+1] {
			out = append(out, fmt.Sprint(id))
		}
		return out
	}
	live := want(26, 29)
	for _, tc := range []struct {
		name string
		args []string
		ids  []string
		tail bool
	}{
		{"default", nil, append(live, want(6, 25)...), true},
		{"all", []string{"-a"}, want(0, 29), false},
		{"states", []string{"-s", "D"}, want(0, 25), false},
		{"limit", []string{"--limit", "6"}, append(live, want(24, 25)...), false},
		{"limit within the live", []string{"--limit", "3"}, want(26, 28), false},
	} {
		got, tail := rows(tc.args...)
		if strings.Join(got, " ") != strings.Join(tc.ids, " ") || (tail != "") != tc.tail {
			t.Errorf("%s: rows %v, tail %q; want %v (a tail line: %v)", tc.name, got, tail, tc.ids, tc.tail)
		}
	}
}

// The default table is one table: the jobs not ended and the ended ones
// below them are aligned under the same header, also when no job is
// left that has not ended.
func TestMqstatRecentAligned(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	ids, err := tb.store.Submit(ctx, []protocol.JobSpec{
		{Target: "a-long-target-name", Command: "true", Cwd: "/tmp", Queue: "a-long-queue"},
		{Target: "t", Command: "true", Cwd: "/tmp"},
	})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tb.store.RegisterAs(ctx, protocol.Register{Site: "s", Host: "h", Slots: 2}, "socket")
	if err != nil {
		t.Fatal(err)
	}
	nr, err := tb.store.Next(ctx, protocol.Next{Placeholder: reg.ID, Free: 2})
	if err != nil || len(nr.Jobs) != 2 {
		t.Fatalf("next: %d jobs, %v", len(nr.Jobs), err)
	}
	table := func() []string {
		t.Helper()
		var o, e bytes.Buffer
		if code := Run(ctx, Mqstat(tb.env(&o, &e)), []string{"mqstat"}); code != 0 {
			t.Fatalf("mqstat: exit %d, %s", code, e.String())
		}
		return strings.Split(strings.TrimSpace(o.String()), "\n")
	}
	aligned := func(lines []string) {
		t.Helper()
		col := strings.Index(lines[0], "TARGET")
		for _, l := range lines[1:] {
			if len(l) <= col || l[col-1] != ' ' || l[col] == ' ' {
				t.Errorf("row not under the header's TARGET (column %d):\n%s", col, strings.Join(lines, "\n"))
				return
			}
		}
	}
	now := time.Now()
	var done []protocol.Report
	for _, a := range nr.Jobs {
		if a.ID == ids[0] { // the long names ended, t executing
			done = append(done, protocol.Report{ID: a.ID, Attempt: a.Attempt, Started: now, Finished: now})
		}
	}
	if err := tb.store.Report(ctx, reg.ID, done); err != nil {
		t.Fatal(err)
	}
	if lines := table(); len(lines) != 3 {
		t.Fatalf("want a header and two rows:\n%s", strings.Join(lines, "\n"))
	} else {
		aligned(lines)
	}
	for _, a := range nr.Jobs {
		if a.ID == ids[1] {
			done = []protocol.Report{{ID: a.ID, Attempt: a.Attempt, Started: now, Finished: now}}
		}
	}
	if err := tb.store.Report(ctx, reg.ID, done); err != nil {
		t.Fatal(err)
	}
	aligned(table()) // only ended jobs
}
