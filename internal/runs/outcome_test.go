package runs

import (
	"testing"
	"time"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

func TestOutcomeOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		r    protocol.Report
		want Outcome
	}{
		{"exit 0", protocol.Report{}, Succeeded},
		{"non-zero exit", protocol.Report{Exit: 2}, Failed},
		{"exit 0 with a reason", protocol.Report{Reason: "could not start"}, Failed},
		{"past the ceiling", protocol.Report{Reason: protocol.ReasonCeiling}, OverCeiling},
		{"interrupted", protocol.Report{Reason: protocol.ReasonInterrupted}, Lost},
		{"stopped at its placeholder's walltime", protocol.Report{Exit: -1, Reason: protocol.WalltimeReason(time.Hour)}, Lost},
		{"a reason that begins with the word", protocol.Report{Exit: 1, Reason: "interrupted-by-user"}, Failed},
		{"handed back", protocol.Report{Reason: protocol.ReasonReturned}, Returned},
		{"stopped for a disk others filled", protocol.Report{Exit: 143, Reason: protocol.ReasonDiskFull + " (1 bytes free)"}, Uncounted},
		{"the bare words of a disk others filled", protocol.Report{Exit: 143, Reason: protocol.ReasonDiskFull}, Uncounted},
		{"stopped by its CLS stopping", protocol.Report{Exit: 143, Reason: protocol.ReasonCLSStopped}, Uncounted},
		{"stopped by its CLS, processes stuck", protocol.Report{Exit: 137, Reason: protocol.ReasonCLSStopped + "; its processes did not end"}, Uncounted},
		{"a reason that only begins like the CLS's", protocol.Report{Exit: 143, Reason: protocol.ReasonCLSStopped + "s"}, Lost},
		{"a disk it filled itself", protocol.Report{Exit: 143, Reason: "output: the disk of /o is nearly full"}, Failed},
	}
	for _, tt := range tests {
		if got := OutcomeOf(tt.r); got != tt.want {
			t.Errorf("%s: OutcomeOf = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestNext(t *testing.T) {
	t.Parallel()
	tests := []struct {
		out         Outcome
		used        int
		retryFailed bool
		want        job.State
	}{
		{Succeeded, 3, false, job.Done},
		{Returned, 3, false, job.Queued},
		{Lost, 1, false, job.Queued},
		{Lost, 3, false, job.Failed},
		{Uncounted, 1, false, job.Queued},
		{Uncounted, 3, false, job.Queued}, // not counted: its last attempt too
		{Failed, 1, false, job.Failed},
		{Failed, 1, true, job.Queued},
		{Failed, 3, true, job.Failed},
		{OverCeiling, 1, true, job.Failed},
	}
	for _, tt := range tests {
		if got := Next(tt.out, tt.used, 3, tt.retryFailed); got != tt.want {
			t.Errorf("Next(%d, used %d of 3, retry %v) = %v, want %v", tt.out, tt.used, tt.retryFailed, got, tt.want)
		}
	}
}

func TestSaid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		out    Outcome
		reason string
		want   string
		exit   bool
	}{
		{Succeeded, "", "", true},
		{Failed, "could not start", "could not start", true},
		{OverCeiling, protocol.ReasonCeiling, "killed after running past the queue's ceiling of 60s", true},
		{Lost, protocol.ReasonInterrupted, "interrupted: its placeholder was stopped", false},
		{Lost, "lost: lease expired", "lost: lease expired", false},
		{Returned, protocol.ReasonReturned, protocol.ReasonReturned, true},
		{Uncounted, protocol.ReasonDiskFull, protocol.ReasonDiskFull, false},
		{Uncounted, protocol.ReasonCLSStopped, protocol.ReasonCLSStopped, false},
		{Lost, protocol.ReasonReturned, "handed back unstarted after 100 attempts: counted as lost", false},
	}
	for _, tt := range tests {
		got, exit := tt.out.Said(tt.reason, 60)
		if got != tt.want || exit != tt.exit {
			t.Errorf("Said(%d, %q) = %q, %v; want %q, %v", tt.out, tt.reason, got, exit, tt.want, tt.exit)
		}
	}
}

func TestSpan(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	ru := &Run{Started: t0}
	now := t0.Add(time.Hour)
	tests := []struct {
		name          string
		r             protocol.Report
		started, done time.Time
	}{
		{"as reported", protocol.Report{Started: t0.Add(time.Minute), Finished: t0.Add(2 * time.Minute)}, t0.Add(time.Minute), t0.Add(2 * time.Minute)},
		{"no times: its start and now", protocol.Report{}, t0, now},
	}
	for _, tt := range tests {
		s, f := ru.Span(tt.r, now)
		if !s.Equal(tt.started) || !f.Equal(tt.done) {
			t.Errorf("%s: Span = %v, %v; want %v, %v", tt.name, s, f, tt.started, tt.done)
		}
	}
}

func TestExitReason(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		exit, used int
		retried    bool
		want       string
	}{
		{1, 1, false, "exit status 1"},
		{2, 3, false, "exit status 2 (after 3 attempts)"},
		{1, 2, true, "exit status 1; retried"},
	} {
		if got := ExitReason(tt.exit, tt.used, tt.retried); got != tt.want {
			t.Errorf("ExitReason(%d, %d, %v) = %q, want %q", tt.exit, tt.used, tt.retried, got, tt.want)
		}
	}
}

// What a walltime stop teaches: what the attempt ran (no more than the CLS
// saw), at most nine tenths of its placeholder's walltime the first time,
// and a second more than the walltime once the job, with that estimate,
// ran that long again.
func TestWalltimeFloor(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	stop := protocol.WalltimeReason(100 * time.Second)
	for _, tc := range []struct {
		name   string
		reason string
		ran    time.Duration // the report's span; the CLS saw 100 s pass
		est    float32
		want   float32
	}{
		{"not a walltime stop", protocol.ReasonInterrupted, 100 * time.Second, 0, 0},
		{"started late", stop, 40 * time.Second, 0, 40},
		{"started late, estimate near the walltime", stop, 40 * time.Second, 95, 40},
		{"a whole placeholder, first time", stop, 100 * time.Second, 0, 90},
		{"a whole placeholder, estimate below nine tenths", stop, 100 * time.Second, 89, 90},
		{"a whole placeholder again", stop, 100 * time.Second, 90, 101},
		{"a user's estimate near the walltime", stop, 95 * time.Second, 95, 101},
		{"the report claims more than the CLS saw", stop, 10 * time.Minute, 90, 101},
	} {
		ru := &Run{Started: t0}
		r := protocol.Report{Reason: tc.reason, Started: t0, Finished: t0.Add(tc.ran)}
		if got := ru.WalltimeFloor(r, t0.Add(100*time.Second), tc.est); got != tc.want {
			t.Errorf("%s: floor %g, want %g", tc.name, got, tc.want)
		}
	}
	// The CLS saw less pass than the report claims: what it saw.
	ru := &Run{Started: t0}
	r := protocol.Report{Reason: stop, Started: t0, Finished: t0.Add(100 * time.Second)}
	if got := ru.WalltimeFloor(r, t0.Add(50*time.Second), 90); got != 50 {
		t.Errorf("the CLS saw 50 s: floor %g, want 50", got)
	}
}

// TestBounded: a return or a stop for a full disk does not count until
// the job has had MaxUncounted attempts; then it counts as lost. Other
// ends are as they are.
func TestBounded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		out     Outcome
		attempt int
		want    Outcome
	}{
		{Returned, 1, Returned},
		{Returned, MaxUncounted - 1, Returned},
		{Returned, MaxUncounted, Lost},
		{Uncounted, MaxUncounted - 1, Uncounted},
		{Uncounted, MaxUncounted + 5, Lost},
		{Succeeded, MaxUncounted, Succeeded},
		{Failed, MaxUncounted, Failed},
		{Lost, MaxUncounted, Lost},
	}
	for _, tt := range tests {
		ru := &Run{Attempt: tt.attempt, Used: 1}
		if got := ru.Bounded(tt.out); got != tt.want {
			t.Errorf("attempt %d: Bounded(%d) = %d, want %d", tt.attempt, tt.out, got, tt.want)
		}
	}
}
