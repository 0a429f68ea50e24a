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
		want       string
	}{
		{1, 1, "exit status 1"},
		{2, 3, "exit status 2 (after 3 attempts)"},
	} {
		if got := ExitReason(tt.exit, tt.used); got != tt.want {
			t.Errorf("ExitReason(%d, %d) = %q, want %q", tt.exit, tt.used, got, tt.want)
		}
	}
}
