package acct

import (
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

func TestSeconds(t *testing.T) {
	t.Parallel()
	for in, want := range map[float64]string{0: "0.000s", 1.5: "1.500s", 59.9994: "59.999s", 60: "00:01:00", 3725: "01:02:05", 90061: "1-01:01:01"} {
		if got := Seconds(in); got != want {
			t.Errorf("Seconds(%v) = %q, want %q", in, got, want)
		}
	}
}

// TestShortTime: times of today show the clock only, of another day their
// date too, of another year the year as well (mqstat, mqstat --acct).
func TestShortTime(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 4, 12, 0, 0, 0, time.Local)
	at := func(y int, m time.Month, d, h, min int) string {
		return time.Date(y, m, d, h, min, 7, 0, time.Local).UTC().Format(time.RFC3339Nano)
	}
	for _, tc := range []struct{ in, want string }{
		{at(2026, 3, 4, 5, 6), "05:06:07"},
		{at(2026, 3, 3, 23, 59), "Mar 03 23:59"},
		{at(2026, 12, 25, 1, 2), "Dec 25 01:02"},
		{at(2025, 3, 4, 5, 6), "2025-03-04 05:06"},
		{"", "-"},
		{"not a time\x1b[2J", `not a time\x1b[2J`},
	} {
		if got := ShortTime(tc.in, now); got != tc.want {
			t.Errorf("ShortTime(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// mqstat --acct adds a table of what each category (queue, target) asked
// for against what its attempts used, when some job asked for resources.
func TestMqstatAcctRequestedVsUsed(t *testing.T) {
	t.Parallel()
	zero := 0
	at := time.Date(2020, 3, 4, 5, 6, 7, 0, time.Local).Format(time.RFC3339Nano)
	ran := func(id int64, target string, r protocol.Resources, elapsed, cpu float64, rss int64, earlier ...protocol.AttemptInfo) protocol.JobInfo {
		return protocol.JobInfo{ID: id, Queue: "q", Target: target, State: "D", Started: at, Finished: at, Exit: &zero, Resources: r,
			Accounting: protocol.Accounting{Elapsed: elapsed, Usage: protocol.Usage{CPUUser: cpu, MaxRSS: rss}}, Earlier: earlier}
	}
	killed := protocol.AttemptInfo{Attempt: 1, Started: at, Finished: at,
		Accounting: protocol.Accounting{Elapsed: 3600, Usage: protocol.Usage{CPUUser: 3600, MaxRSS: 9 << 30}}}
	for _, tc := range []struct {
		name string
		jobs []protocol.JobInfo
		want [][]string // the table's rows after its header; nil: no table
	}{
		{"nothing asked", []protocol.JobInfo{ran(1, "a", protocol.Resources{}, 10, 10, 1<<20)}, nil},
		{"cores and memory", []protocol.JobInfo{
			// 4 cores asked, 2 used for an hour each: 2 idle core-hours a job.
			ran(1, "blast", protocol.Resources{CPUs: 4, Mem: 8 << 30}, 3600, 7200, 2<<30),
			ran(2, "blast", protocol.Resources{CPUs: 4, Mem: 8 << 30}, 3600, 7200, 4<<30),
			// An earlier attempt over its memory counts as a run too.
			ran(3, "asm", protocol.Resources{CPUs: 2, Mem: 16 << 30, MemAuto: false}, 3600, 7200, 12<<30, killed),
			ran(4, "parse", protocol.Resources{CPUsAuto: true}, 360, 36, 1<<20),
			{ID: 5, Queue: "q", Target: "parse", State: "Q", Resources: protocol.Resources{CPUs: 8}},
		}, [][]string{
			{"q", "asm", "2", "2", "1.50", "1", "16", "GiB", "12", "GiB", "75%"},
			{"q", "blast", "2", "4", "2.00", "4", "8", "GiB", "4", "GiB", "50%"},
			{"q", "parse", "1", "auto", "0.10", "0.09", "-", "1", "MiB", "-"},
		}},
		{"memory asked by some jobs", []protocol.JobInfo{
			{ID: 1, Queue: "q", Target: "infer", State: "Q", Resources: protocol.Resources{GPUs: 1, Mem: 30 << 30}},
			{ID: 2, Queue: "q", Target: "infer", State: "Q", Resources: protocol.Resources{GPUs: 4}},
		}, [][]string{
			{"q", "infer", "0", "1", "-", "-", "0-30", "GiB", "-", "-"}, // was "--30 GiB"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var u Use
			for _, j := range tc.jobs {
				u.Add(j)
			}
			var b strings.Builder
			u.Print(&b)
			if tc.want == nil {
				if b.Len() != 0 {
					t.Fatalf("a table without requests:\n%s", b.String())
				}
				return
			}
			lines := strings.Split(strings.TrimSpace(b.String()), "\n")
			if len(lines) != len(tc.want)+1 || !strings.HasPrefix(lines[0], "QUEUE") {
				t.Fatalf("table:\n%s", b.String())
			}
			for i, w := range tc.want {
				if got := strings.Fields(lines[i+1]); strings.Join(got, " ") != strings.Join(w, " ") {
					t.Errorf("row %d: %q, want %q", i, got, w)
				}
			}
		})
	}
}

// An earlier attempt's S in mqstat --acct is how it ended, not the job's
// state now.
func TestAttemptState(t *testing.T) {
	t.Parallel()
	zero, one := 0, 1
	for _, tt := range []struct {
		a    protocol.AttemptInfo
		want string
	}{
		{protocol.AttemptInfo{Exit: &one, Reason: "exit status 1; retried"}, "F"},
		{protocol.AttemptInfo{Exit: &zero, Reason: "done; rerun by user"}, "D"},
		{protocol.AttemptInfo{Exit: &one, Reason: "exit status 1; rerun by user"}, "F"},
		{protocol.AttemptInfo{Reason: "deleted by user; rerun by user"}, "X"},
		{protocol.AttemptInfo{Exit: &zero, Reason: "deleted by user while executing; rerun by user"}, "X"},
		{protocol.AttemptInfo{Reason: "interrupted: its placeholder was stopped"}, "-"},
	} {
		if got := attemptState(tt.a); got != tt.want {
			t.Errorf("attemptState(%q, exit %v) = %s, want %s", tt.a.Reason, tt.a.Exit, got, tt.want)
		}
	}
}
