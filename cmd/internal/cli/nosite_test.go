package cli

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/cmd/internal/cli/clitest"
	"github.com/mq-hpc/mq/protocol"
)

// TestWarnNoSite: a listing or summary warns on stderr, after the listing,
// when every site is degraded (queued jobs wait with nothing to say why);
// not when one site is well, when there are none, for --json, or when the
// CLS does not answer site.list.
func TestWarnNoSite(t *testing.T) {
	t.Parallel()
	const warning = "mqstat: warning: every site is degraded, so no placeholder starts and queued jobs wait: cls site list says why\n"
	degraded := protocol.SiteInfo{State: "degraded", Error: "ssh: connection refused"}
	for _, tc := range []struct {
		name  string
		sites *protocol.SiteList // nil: site.list unsupported
		args  []string
		warn  bool
	}{
		{"every site degraded", &protocol.SiteList{Sites: []protocol.SiteInfo{degraded, degraded}}, nil, true},
		{"summary, every site degraded", &protocol.SiteList{Sites: []protocol.SiteInfo{degraded}}, []string{"--summary"}, true},
		{"one site well", &protocol.SiteList{Sites: []protocol.SiteInfo{degraded, {State: "ok"}}}, nil, false},
		{"no sites", &protocol.SiteList{}, nil, false},
		{"json", &protocol.SiteList{Sites: []protocol.SiteInfo{degraded}}, []string{"--json"}, false},
		{"site.list unsupported", nil, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			replies := map[string]clitest.Reply{
				protocol.OpStat.Name:    {Body: protocol.StatReply{Jobs: []protocol.JobInfo{{ID: 1, Queue: "default", Target: "t", State: "Q"}}}},
				protocol.OpArrays.Name:  {Body: protocol.ArraysReply{}},
				protocol.OpSummary.Name: {Body: protocol.SummaryReply{}},
			}
			if tc.sites != nil {
				replies[protocol.OpSiteList.Name] = clitest.Reply{Body: *tc.sites}
			}
			var o, e bytes.Buffer
			env := Env{Stdin: strings.NewReader(""), Stdout: &o, Stderr: &e, Getwd: os.Getwd, Dial: clitest.Dial(replies)}
			if code := Run(context.Background(), Mqstat(env), append([]string{"mqstat"}, tc.args...)); code != 0 {
				t.Fatalf("exit %d, %s", code, e.String())
			}
			if got := e.String(); (got == warning) != tc.warn || (!tc.warn && got != "") {
				t.Errorf("stderr %q, want warning: %v", got, tc.warn)
			}
		})
	}
}
