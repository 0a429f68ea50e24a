package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// Every row of a listing is aligned under its header, however many
// requests (ids, then ranges) and frames it comes in: mqstat 1 2 99-100
// printed the range's rows in columns of their own.
func TestMqstatListingAligned(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	// More jobs than one frame holds, the longer names last.
	var specs []protocol.JobSpec
	for range 1000 {
		specs = append(specs, protocol.JobSpec{Target: "t", Command: "true", Cwd: "/tmp"})
	}
	for range 3 {
		specs = append(specs, protocol.JobSpec{Target: "a-much-longer-target-name", Queue: "a-longer-queue", Command: "true", Cwd: "/tmp"})
	}
	if _, err := tb.store.Submit(ctx, specs); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args   []string
		header string
		rows   int
	}{
		{[]string{"1", "2", "1001-1002"}, tableHeader, 4},
		{[]string{"1-2", "1003"}, tableHeader, 3},
		{[]string{"1", "2,1001-1003"}, tableHeader, 5},
		{[]string{"-s", "Q", "1", "2", "1001-1002"}, tableHeader, 4},
		{[]string{"-a"}, tableHeader, 1003},
		{nil, tableHeader, 1003},
		{[]string{"--acct", "1", "1001-1002"}, "JOBID\tTARGET\tQUEUE\tS\tHOST\tSTART\tELAPSED\tUSER\tSYS\tMAXRSS\tEXIT\tCOST", 3},
	} {
		name := strings.Join(tc.args, " ")
		if name == "" {
			name = "the default view"
		}
		t.Run(name, func(t *testing.T) {
			var o, e bytes.Buffer
			if code := Run(ctx, Mqstat(tb.env(&o, &e)), append([]string{"mqstat"}, tc.args...)); code != 0 {
				t.Fatalf("exit %d, %s", code, e.String())
			}
			lines := strings.Split(o.String(), "\n")
			if len(lines) < tc.rows+1 {
				t.Fatalf("%d lines, want a header and %d rows:\n%s", len(lines), tc.rows, o.String())
			}
			lines = lines[:tc.rows+1]
			// Where each column starts in the header line.
			var starts []int
			at := 0
			for _, h := range strings.Split(tc.header, "\t") {
				at = strings.Index(lines[0][at:], h) + at
				starts = append(starts, at)
				at += len(h)
			}
			for _, l := range lines[1:] {
				for _, col := range starts[1:] {
					if len(l) <= col || l[col-1] != ' ' || l[col] == ' ' {
						t.Fatalf("row not in the header's columns (column at %d):\n%s\n%s", col, lines[0], l)
					}
				}
			}
		})
	}
}
