package extents

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/mq-hpc/mq/internal/metaqueue/internal/modtest"
	"github.com/mq-hpc/mq/protocol"
)

func TestImports(t *testing.T) { modtest.Imports(t) }

// execs records the inserts Save makes; fail makes every one fail.
type execs struct {
	rows [][]any
	fail error
}

func (e *execs) ExecContext(_ context.Context, _ string, args ...any) (sql.Result, error) {
	if e.fail != nil {
		return nil, e.fail
	}
	e.rows = append(e.rows, args)
	return nil, nil
}

// TestSave: a report's extents are kept only when well formed and in a
// stream file of the placeholder that sent it; stderr is stream 1.
func TestSave(t *testing.T) {
	const ph = 7
	own := protocol.StreamFileName(ph, 0)
	ok := func(stream, file string) protocol.Streamed {
		return protocol.Streamed{Stream: stream, File: file, Last: 36, Bytes: 3}
	}
	for _, tc := range []struct {
		name string
		in   []protocol.Streamed
		want []string // "stream file" of each row kept
	}{
		{"stdout and stderr", []protocol.Streamed{ok("stdout", own), ok("stderr", own)}, []string{"0 " + own, "1 " + own}},
		{"another placeholder's file", []protocol.Streamed{ok("stdout", protocol.StreamFileName(8, 0))}, nil},
		{"a path, not a stream file name", []protocol.Streamed{ok("stdout", "../7-0.mqs"), ok("stdout", "/etc/passwd")}, nil},
		{"a stream that is neither", []protocol.Streamed{ok("stdin", own)}, nil},
		{"no bytes", []protocol.Streamed{{Stream: "stdout", File: own, Last: 0, Bytes: 0}}, nil},
		{"kept beside refused", []protocol.Streamed{ok("stdout", "x"), ok("stderr", own)}, []string{"1 " + own}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e execs
			if err := Save(context.Background(), &e, ph, protocol.Report{ID: 3, Attempt: 2, Streamed: tc.in}); err != nil {
				t.Fatal(err)
			}
			if len(e.rows) != len(tc.want) {
				t.Fatalf("rows %v, want %v", e.rows, tc.want)
			}
			for i, r := range e.rows {
				if got := fmt.Sprint(r[2], " ", r[4]); got != tc.want[i] || r[0] != int64(3) || r[1] != 2 || r[3] != int64(ph) {
					t.Errorf("row %d: %v, want stream and file %q of job 3 attempt 2 placeholder %d", i, r, tc.want[i], ph)
				}
			}
		})
	}
	broken := errors.New("disk I/O error")
	e := execs{fail: broken}
	if err := Save(context.Background(), &e, ph, protocol.Report{ID: 3, Attempt: 1, Streamed: []protocol.Streamed{ok("stdout", own)}}); !errors.Is(err, broken) {
		t.Errorf("a failed insert: %v, want it returned", err)
	}
}

// TestSaveLost: a report that says its output was lost records the
// cause with the job and attempt, beside its extents.
func TestSaveLost(t *testing.T) {
	var e execs
	r := protocol.Report{ID: 3, Attempt: 2, OutputLost: "no space left on device",
		Streamed: []protocol.Streamed{{Stream: "stdout", File: protocol.StreamFileName(7, 0), Last: 36, Bytes: 3}}}
	if err := Save(context.Background(), &e, 7, r); err != nil {
		t.Fatal(err)
	}
	if len(e.rows) != 2 || fmt.Sprint(e.rows[0]) != "[3 2 no space left on device]" {
		t.Errorf("rows %v, want the cause of job 3 attempt 2, then the extent", e.rows)
	}
}
