package policy

import (
	"maps"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/dbc"
)

func TestProvisioner(t *testing.T) {
	now := time.Unix(1000, 0)
	// cheap and cheap2 cost the same per job (1 job/s at 36 G$/h: 0.01
	// G$ a job); dear's slots are twice as fast at four times the
	// price (0.02 G$ a job).
	sites := func() []SiteView {
		return []SiteView{
			{Name: "cheap", Max: 4, Slots: 1, Price: 36, Rate: 1},
			{Name: "cheap2", Max: 4, Slots: 1, Price: 36, Rate: 1},
			{Name: "dear", Min: 0, Max: 10, Slots: 2, Price: 144, Rate: 4},
		}
	}
	busy := func(vs []SiteView, i, n int) []SiteView {
		vs[i].Busy = n
		return vs
	}
	tests := []struct {
		name       string
		s          dbc.Strategy
		d          Demand
		want       map[string]int
		unassigned int
	}{
		{"cost: the first cheap site does all by a relaxed deadline", dbc.Cost,
			Demand{Ready: 8, Sites: sites(), Deadline: now.Add(10 * time.Second)}, map[string]int{"cheap": 4, "cheap2": 0, "dear": 0}, 0},
		{"costtime: both cheap sites", dbc.CostTime,
			Demand{Ready: 8, Sites: sites(), Deadline: now.Add(10 * time.Second)}, map[string]int{"cheap": 4, "cheap2": 4, "dear": 0}, 0},
		{"costtime: a tight deadline buys dear placeholders", dbc.CostTime,
			Demand{Ready: 20, Sites: sites(), Deadline: now.Add(1 * time.Second)}, map[string]int{"cheap": 4, "cheap2": 4, "dear": 6}, 0},
		{"budget caps it (8 cheap jobs cost 0.08; a dear one 0.02 more) and the rest is reported", dbc.CostTime,
			Demand{Ready: 20, Sites: sites(), Deadline: now.Add(1 * time.Second), Budget: 0.09}, map[string]int{"cheap": 4, "cheap2": 4, "dear": 0}, 12},
		{"a spent budget plans nothing", dbc.CostTime,
			Demand{Ready: 3, Sites: sites(), Budget: 0, Budgeted: true}, map[string]int{"cheap": 0, "cheap2": 0, "dear": 0}, 3},
		{"busy slots are held and end a job from now: 3 running at cheap, 4 more end by 1 s only by adding cheap2", dbc.Cost,
			Demand{Ready: 4, Sites: busy(sites(), 0, 3), Deadline: now.Add(1 * time.Second)}, map[string]int{"cheap": 4, "cheap2": 3, "dear": 0}, 0},
		{"nothing ready: each site's min", dbc.CostTime,
			Demand{Sites: sites()}, map[string]int{"cheap": 0, "cheap2": 0, "dear": 0}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, un := DBC{Strategy: tt.s}.Plan(now, tt.d)
			if !maps.Equal(got, tt.want) || un != tt.unassigned {
				t.Errorf("got %v, %d unassigned; want %v, %d", got, un, tt.want, tt.unassigned)
			}
		})
	}
	// No rate measured: one placeholder a site (at least min) to measure.
	vs := sites()
	for i := range vs {
		vs[i].Rate = 0
	}
	vs[2].Min = 2
	if got := (DBC{Strategy: dbc.Cost}).Provision(now, Demand{Ready: 5, Sites: vs}); !maps.Equal(got, map[string]int{"cheap": 1, "cheap2": 1, "dear": 2}) {
		t.Errorf("unmeasured: %v", got)
	}
	// Nothing ready and nothing measured: no probes, only busy slots held.
	vs[0].Busy = 1
	if got := (DBC{Strategy: dbc.Cost}).Provision(now, Demand{Sites: vs}); !maps.Equal(got, map[string]int{"cheap": 1, "cheap2": 0, "dear": 2}) {
		t.Errorf("nothing ready: %v", got)
	}
	vs[0].Busy = 0
	// Nothing measured but a runtime expected: every site at Slots/Est,
	// so cost fills cheap alone by a relaxed deadline (no probe at dear).
	if got := (DBC{Strategy: dbc.Cost}).Provision(now, Demand{Ready: 4, Sites: vs, Est: 1, Deadline: now.Add(10 * time.Second)}); !maps.Equal(got, map[string]int{"cheap": 4, "cheap2": 0, "dear": 2}) {
		t.Errorf("expected runtime: %v", got)
	}
}
