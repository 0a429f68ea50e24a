package cli

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/cmd/internal/acct"
	"github.com/mq-hpc/mq/cmd/internal/cli/clitest"
	"github.com/mq-hpc/mq/protocol"
)

// TestWarnNoSite: a listing or summary warns on stderr, after the listing,
// when every site is degraded (queued jobs wait with nothing to say why),
// when a site waits for the user to log in to it, and when placeholders take no new jobs for their full output disk; not
// when one site is well, when there are none, for --json, or when the
// CLS does not answer site.list.
func TestWarnNoSite(t *testing.T) {
	t.Parallel()
	const warning = "mqstat: warning: every site is degraded, so no placeholder starts and queued jobs wait: cls site list says why\n"
	const paused = "mqstat: warning: 3 placeholder(s) take no new jobs: their output disk is nearly full or refuses writes (a quota used up?): free space there (cls site list)\n"
	const broken = "mqstat: warning: 2 placeholder(s) stopped taking jobs in the last day: their node cannot run them (latest: placeholder 7 on n7: job 9 (attempt 1): its processes did not end 60s after SIGKILL): drain the node (cls site list)\n"
	degraded := protocol.SiteInfo{State: "degraded", Error: "ssh: connection refused"}
	since := time.Now().Add(-5 * time.Minute)
	until := since.Add(30 * time.Minute)
	// As mqstat writes them (a time past midnight with its date).
	cut := "mqstat: warning: site far\\x1b[2J may be cut off from the CLS (unreachable since " + acct.TimeOf(since, time.Now()) + ", 2 placeholders' 3 jobs held until " +
		acct.TimeOf(until, time.Now()) + "): its jobs stay E until it is back or the hold ends (cls site list)\n"
	for _, tc := range []struct {
		name  string
		sites *protocol.SiteList // nil: site.list unsupported
		args  []string
		want  string // on stderr
	}{
		{"every site degraded", &protocol.SiteList{Sites: []protocol.SiteInfo{degraded, degraded}}, nil, warning},
		{"summary, every site degraded", &protocol.SiteList{Sites: []protocol.SiteInfo{degraded}}, []string{"--summary"}, warning},
		{"one site well", &protocol.SiteList{Sites: []protocol.SiteInfo{degraded, {State: "ok"}}}, nil, ""},
		{"no sites", &protocol.SiteList{}, nil, ""},
		{"json", &protocol.SiteList{Sites: []protocol.SiteInfo{degraded}}, []string{"--json"}, ""},
		{"site.list unsupported", nil, nil, ""},
		{"placeholders paused", &protocol.SiteList{Sites: []protocol.SiteInfo{{State: "ok", Paused: 2}, {State: "ok", Paused: 1}}}, nil, paused},
		{"paused, json", &protocol.SiteList{Sites: []protocol.SiteInfo{{State: "ok", Paused: 2}}}, []string{"--json"}, ""},
		{"placeholders broken", &protocol.SiteList{Sites: []protocol.SiteInfo{{State: "ok", Broken: []protocol.BrokenPlaceholder{{ID: 3, Why: "old", At: time.Unix(100, 0)}}},
			{State: "ok", Broken: []protocol.BrokenPlaceholder{{ID: 7, Host: "n7", Why: "job 9 (attempt 1): its processes did not end 60s after SIGKILL", At: time.Unix(200, 0)}}}}}, nil, broken},
		{"a site cut off, its jobs held", &protocol.SiteList{Sites: []protocol.SiteInfo{{SiteSpec: protocol.SiteSpec{Name: "far\x1b[2J"}, State: "degraded", Unreachable: true, AnsweredAt: since,
			HeldPlaceholders: 2, HeldLeases: 3, HeldUntil: until}, {SiteSpec: protocol.SiteSpec{Name: "near"}, State: "ok"}}}, nil, cut},
		{"a site cut off, nothing held", &protocol.SiteList{Sites: []protocol.SiteInfo{{SiteSpec: protocol.SiteSpec{Name: "far"}, State: "degraded", Unreachable: true, AnsweredAt: since}, {SiteSpec: protocol.SiteSpec{Name: "near"}, State: "ok"}}}, nil, ""},
		{"cut off, json", &protocol.SiteList{Sites: []protocol.SiteInfo{{SiteSpec: protocol.SiteSpec{Name: "far"}, State: "degraded", Unreachable: true, HeldPlaceholders: 1, HeldLeases: 1, HeldUntil: until}}}, []string{"--json"}, ""},
		{"a site waits for a login", &protocol.SiteList{Sites: []protocol.SiteInfo{{SiteSpec: protocol.SiteSpec{Name: "hpc"}, State: "degraded", NeedsLogin: true}, {SiteSpec: protocol.SiteSpec{Name: "near"}, State: "ok"}}}, nil,
			"mqstat: warning: site hpc waits for you to log in: cls site login hpc\n"},
		{"waits for a login, json", &protocol.SiteList{Sites: []protocol.SiteInfo{{SiteSpec: protocol.SiteSpec{Name: "hpc"}, State: "degraded", NeedsLogin: true}}}, []string{"--json"}, ""},
		{"broken, json", &protocol.SiteList{Sites: []protocol.SiteInfo{{State: "ok", Broken: []protocol.BrokenPlaceholder{{ID: 7, Why: "x"}}}}}, []string{"--json"}, ""},
		// -j of a queued job (job 1 is Q) says why it may wait; of one
		// that runs (job 2), or in JSON, nothing.
		{"-j of a queued job, every site degraded", &protocol.SiteList{Sites: []protocol.SiteInfo{degraded}}, []string{"-j", "1"}, warning},
		{"-j of a running job", &protocol.SiteList{Sites: []protocol.SiteInfo{degraded}}, []string{"-j", "2"}, ""},
		{"-j json", &protocol.SiteList{Sites: []protocol.SiteInfo{degraded}}, []string{"-j", "1", "--json"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			replies := map[string]clitest.Reply{
				protocol.OpStat.Name:    {Body: protocol.StatReply{Jobs: []protocol.JobInfo{{ID: 1, Queue: "default", Target: "t", State: "Q"}}}},
				protocol.OpArrays.Name:  {Body: protocol.ArraysReply{}},
				protocol.OpSummary.Name: {Body: protocol.SummaryReply{}},
				protocol.OpJob.Name:     {Body: protocol.JobDetail{JobInfo: protocol.JobInfo{ID: 1, Queue: "default", Target: "t", State: "Q"}}},
			}
			if slices.Contains(tc.args, "2") {
				replies[protocol.OpJob.Name] = clitest.Reply{Body: protocol.JobDetail{JobInfo: protocol.JobInfo{ID: 2, Queue: "default", Target: "t", State: "E"}}}
			}
			if tc.sites != nil {
				replies[protocol.OpSiteList.Name] = clitest.Reply{Body: *tc.sites}
			}
			var o, e bytes.Buffer
			env := Env{Stdin: strings.NewReader(""), Stdout: &o, Stderr: &e, Getwd: os.Getwd, Dial: clitest.Dial(replies)}
			if code := Run(context.Background(), Mqstat(env), append([]string{"mqstat"}, tc.args...)); code != 0 {
				t.Fatalf("exit %d, %s", code, e.String())
			}
			if got := e.String(); got != tc.want {
				t.Errorf("stderr %q, want %q", got, tc.want)
			}
		})
	}
}
