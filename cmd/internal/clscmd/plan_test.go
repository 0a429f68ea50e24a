package clscmd

import (
	"bytes"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// TestWritePlanTimeline: a plan prints its prediction, each site's load
// and timeline with the rest counted; names from users and sites reach
// the terminal escaped (no control bytes, no line breaks of their own).
func TestWritePlanTimeline(t *testing.T) {
	t.Parallel()
	p := protocol.PlanShown{ID: 3, Target: "z\x1b[2J", Planner: "heft", Made: "2026-11-24T11:00:00Z", MakespanS: 75, MovedBytes: 2048, Jobs: 3,
		Sites: []protocol.PlanSiteTimeline{
			{Site: "grid\nfake line", Slots: 1, Jobs: 3, BusyS: 60, Util: 0.8, More: 1, Timeline: []protocol.PlanSlot{
				{ID: 7, Target: "t\x07a", Slot: 0, StartS: 0, EndS: 30, State: "D", RanAt: "grid\nfake line"},
				{ID: 8, Target: "b", Slot: 0, StartS: 30, EndS: 45.5, State: "Q"},
			}},
			{Site: "idle", Slots: 2},
		}}
	var b bytes.Buffer
	writePlanTimeline(&b, p)
	out := b.String()
	for _, want := range []string{
		`plan 3: heft of "z\x1b[2J", made 2026-11-24T11:00:00Z: 3 jobs, predicted makespan 1m15s, 2.0 KiB moved between sites`,
		"site grid\\nfake line, in predicted start order:",
		"0.0    30.0  0     7    t\\aa",
		"30.0   45.5  0     8    b",
		"... and 1 more (--limit N lists more, up to what one reply holds)",
		"80%",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.ContainsAny(out, "\x1b\x07") || strings.Contains(out, "\nfake") || strings.Contains(out, "site idle") {
		t.Errorf("unescaped names, or a timeline for a site without jobs:\n%s", out)
	}
}

// TestWritePlanShow: cls plan show's text says plainly when jobs were
// planned before timelines were stored, rather than showing nothing for
// them, and says nothing of it otherwise.
func TestWritePlanShow(t *testing.T) {
	t.Parallel()
	const untimed = "2 planned jobs have no timeline: their plan was made before timelines were stored; run cls plan make again to see one"
	sites := []protocol.PlanSite{{Planner: "heft", Site: "a", Jobs: 2}}
	for _, tc := range []struct {
		name string
		r    protocol.PlanShowReply
		want []string
		not  []string
	}{
		{"none", protocol.PlanShowReply{}, []string{"no plans: jobs bind late"}, []string{untimed}},
		{"untimed", protocol.PlanShowReply{Sites: sites, Untimed: 2}, []string{"PLANNER", "heft", untimed}, []string{"plan 1:"}},
		{"timed", protocol.PlanShowReply{Sites: sites, Plans: []protocol.PlanShown{{ID: 1, Planner: "heft", Target: "z", Jobs: 2}}},
			[]string{"plan 1: heft of \"z\""}, []string{"no timeline"}},
		{"untimed and older", protocol.PlanShowReply{Sites: sites, Untimed: 2, Older: 1, Plans: []protocol.PlanShown{{ID: 2, Planner: "heft", Target: "z"}}},
			[]string{untimed, "1 older plans in force are not shown (the newest 1 are)", "plan 2:"}, nil},
		{"provisioning", protocol.PlanShowReply{Provision: []protocol.ProvisionShown{{Policy: "lp", Made: "2026-11-24T15:00:00Z", Rate: 0.55,
			Placeholders: map[string]int{"a": 4, "b\x1b[2J": 4},
			Queues:       []protocol.ProvisionQueue{{Queue: "blast", Ready: 8, OutBytes: 1 << 20, Slots: map[string]int{"a": 4, "b": 3}}, {Queue: "parse", Waiting: 8, Slots: map[string]int{"a": 0, "b": 1}}}}}},
			[]string{"provisioning by lp", "0.55 jobs/s", "1  blast", "a=4 b=3", "2  parse", "a=0 b=1", "1.0 MiB", "no plans: jobs bind late"}, []string{"\x1b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := writePlanShow(&b, tc.r); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, b.String())
				}
			}
			for _, w := range tc.not {
				if strings.Contains(b.String(), w) {
					t.Errorf("output has %q:\n%s", w, b.String())
				}
			}
		})
	}
}
