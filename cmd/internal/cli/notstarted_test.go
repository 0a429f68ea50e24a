package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// TestMqstatJobNotStarted: mqstat -j of a job that never started
// (deleted while held, queued or prefetched) shows no elapsed time, and
// such an attempt in its history (kept by a rerun) says it did not
// start rather than "local on vm,  to ...; elapsed 0.000s"; a job and an
// attempt that ran keep their span and elapsed time.
func TestMqstatJobNotStarted(t *testing.T) {
	t.Parallel()
	zero := 0
	const start, end = "2026-12-01T10:00:00Z", "2026-12-01T10:00:02Z"
	for _, tc := range []struct {
		name    string
		d       protocol.JobDetail
		want    []string
		wantNot []string
	}{
		{"deleted before it started",
			protocol.JobDetail{JobInfo: protocol.JobInfo{ID: 1, Queue: "q", Target: "t", State: "X", Command: "x", Finished: end, Reason: "deleted by user before it started (prefetched)"}},
			[]string{"finished:", end}, []string{"usage:", "started:"}},
		{"ran and deleted",
			protocol.JobDetail{JobInfo: protocol.JobInfo{ID: 1, Queue: "q", Target: "t", State: "X", Command: "x", Started: start, Finished: end,
				Reason: "deleted by user while executing", Accounting: protocol.Accounting{Elapsed: 2}}},
			[]string{"elapsed 2.000s"}, nil},
		{"an attempt not started, then rerun",
			protocol.JobDetail{JobInfo: protocol.JobInfo{ID: 1, Queue: "q", Target: "t", State: "D", Command: "x", Attempts: 2, Started: start, Finished: end,
				Accounting: protocol.Accounting{Elapsed: 2}},
				History: []protocol.AttemptInfo{{Attempt: 1, Site: "local", Host: "vm", Finished: start, Reason: "deleted by user before it started (prefetched); rerun by user"}}},
			[]string{" local on vm, not started, ended " + start + ", exit -: deleted by user before it started (prefetched); rerun by user\n"},
			[]string{"elapsed 0.000s", "vm,  to"}},
		{"an attempt that ran",
			protocol.JobDetail{JobInfo: protocol.JobInfo{ID: 1, Queue: "q", Target: "t", State: "D", Command: "x", Attempts: 2, Started: start, Finished: end,
				Accounting: protocol.Accounting{Elapsed: 2}},
				History: []protocol.AttemptInfo{{Attempt: 1, Site: "local", Host: "vm", Started: start, Finished: end, Exit: &zero, Reason: "done; rerun by user",
					Accounting: protocol.Accounting{Elapsed: 2}}}},
			[]string{" local on vm, " + start + " to " + end + ", exit 0: done; rerun by user; elapsed 2.000s\n"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			printJob(&b, tc.d)
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("want %q in:\n%s", w, b.String())
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(b.String(), w) {
					t.Errorf("want no %q in:\n%s", w, b.String())
				}
			}
		})
	}
}
