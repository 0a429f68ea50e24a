package runs

import (
	"testing"

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
