package sitewarn

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

func TestLines(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		sites []protocol.SiteInfo
		want  []string // each a prefix of a line, in order
	}{
		{"no site", nil, nil},
		{"one up", []protocol.SiteInfo{{SiteSpec: protocol.SiteSpec{Name: "a"}, State: "up"}}, nil},
		{"every one degraded", []protocol.SiteInfo{{SiteSpec: protocol.SiteSpec{Name: "a"}, State: "degraded"}, {SiteSpec: protocol.SiteSpec{Name: "b"}, State: "degraded"}},
			[]string{"every site is degraded"}},
		{"one of two degraded", []protocol.SiteInfo{{SiteSpec: protocol.SiteSpec{Name: "a"}, State: "degraded"}, {SiteSpec: protocol.SiteSpec{Name: "b"}, State: "up"}}, nil},
		{"paused and a login", []protocol.SiteInfo{{SiteSpec: protocol.SiteSpec{Name: "a"}, State: "up", Paused: 2}, {SiteSpec: protocol.SiteSpec{Name: "h\x1b[2J"}, State: "degraded", NeedsLogin: true}},
			[]string{"2 placeholder(s) take no new jobs", `site h\x1b[2J waits for you to log in`}},
		{"broken, the latest named", []protocol.SiteInfo{{SiteSpec: protocol.SiteSpec{Name: "a"}, State: "up", Broken: []protocol.BrokenPlaceholder{
			{ID: 4, Why: "old", At: now.Add(-time.Hour)}, {ID: 7, Host: "n1", Why: "no /tmp", At: now.Add(-time.Minute)}}}},
			[]string{"2 placeholder(s) stopped taking jobs in the last day: their node cannot run them (latest: placeholder 7 on n1: no /tmp)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Lines(tc.sites, now)
			if len(got) != len(tc.want) || !slices.EqualFunc(got, tc.want, strings.HasPrefix) {
				t.Errorf("Lines = %q, want lines starting %q", got, tc.want)
			}
		})
	}
}
