package runs

import (
	"testing"
	"time"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

func TestEnding(t *testing.T) {
	t.Parallel()
	start := time.Unix(1000, 0)
	now := start.Add(time.Hour)
	none := func(float64) string { return "" }
	lim := Limits{MaxAttempts: 3, RetryFailed: true, Ceiling: 60}

	// A failure with attempts left is retried, its exit status its reason;
	// what the report lacks is the core's.
	ru := &Run{Attempt: 4, Used: 1, Placeholder: 7, Started: start}
	e, next := ru.Ending(Failed, protocol.Report{Exit: 2}, now, 0, lim, none)
	if next != job.Queued || e.Reason != "exit status 2; retried" || e.Exit != 2 {
		t.Errorf("failed, retried: next %s, reason %q, exit %v", next, e.Reason, e.Exit)
	}
	if e.Attempt != 4 || e.Placeholder != 7 || !e.Started.Equal(start) || !e.Finished.Equal(now) {
		t.Errorf("failed: %+v, want attempt 4 of placeholder 7 from its start to now", e)
	}

	// A lost attempt keeps no exit status.
	if e, _ := ru.Ending(Lost, protocol.Report{Exit: 9, Reason: protocol.ReasonInterrupted}, now, 0, lim, none); e.Exit != nil {
		t.Errorf("lost: exit %v kept", e.Exit)
	}

	// Stopped at its placeholder's walltime: it teaches its estimate, and
	// fails when no placeholder known runs it that long.
	r := protocol.Report{Exit: -1, Reason: protocol.WalltimeReason(time.Hour), Started: start, Finished: start.Add(50 * time.Minute)}
	e, next = ru.Ending(Lost, r, now, 0, lim, none)
	if next != job.Queued || e.Floor != 3000 {
		t.Errorf("walltime stop: next %s, floor %g; want Queued, 3000", next, e.Floor)
	}
	var asked float64
	e, next = ru.Ending(Lost, r, now, 0, lim, func(floor float64) string { asked = floor; return "too long" })
	if next != job.Failed || e.Reason != "too long" || asked != 3000 {
		t.Errorf("outgrown: next %s, reason %q, asked about %g; want Failed, too long, 3000", next, e.Reason, asked)
	}
	// A job that is not run again is not failed for its length.
	if _, next := ru.Ending(Succeeded, protocol.Report{}, now, 0, lim, func(float64) string { return "too long" }); next != job.Done {
		t.Errorf("succeeded: next %s, want Done", next)
	}
}
