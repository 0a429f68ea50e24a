package policy

import (
	"reflect"
	"testing"
	"time"
)

// The LP provisioner asks for the counts worked out in each comment.
func TestLPProvision(t *testing.T) {
	two := func(aRate, bRate float64, busyA int) []SiteView {
		return []SiteView{{Name: "a", Max: 4, Slots: 1, Rate: aRate, Busy: busyA}, {Name: "b", Max: 4, Slots: 1, Rate: bRate}}
	}
	tests := []struct {
		name   string
		stages []Demand
		want   map[string]int
		slots  []map[string]int
	}{{
		// 2 jobs left: 2 slots at the faster a (10 s a job) carry the
		// most; b's (40 s) would add nothing the jobs can use.
		name:   "one stage on the faster site",
		stages: []Demand{{Ready: 2, Sites: two(0.1, 0.025, 0)}},
		want:   map[string]int{"a": 2, "b": 0},
		slots:  []map[string]int{{"a": 2, "b": 0}},
	}, {
		// BLAST (a 10 s, b 20 s a job) then Parse (1 s at either), 8
		// jobs each: per item a needs 10 s of BLAST, b 20 s. a's 4
		// slots and b's 4 split between the stages: BLAST takes a's 4
		// (0.4 items/s) and 3 of b's (0.15 items/s, for 0.55), Parse's
		// 0.55 items/s need 0.55 of a slot: b's last.
		name: "BLAST then Parse",
		stages: []Demand{
			{Ready: 8, Sites: two(0.1, 0.05, 0)},
			{Ready: 8, Sites: two(1, 1, 0)},
		},
		want:  map[string]int{"a": 4, "b": 4},
		slots: []map[string]int{{"a": 4, "b": 3}, {"a": 0, "b": 1}},
	}, {
		// Nothing measured: Est (20 s) everywhere, 1 job left: one slot,
		// at the first site.
		name:   "estimate where nothing is measured",
		stages: []Demand{{Ready: 1, Est: 20, Sites: two(0, 0, 0)}},
		want:   map[string]int{"a": 1, "b": 0},
		slots:  []map[string]int{{"a": 1, "b": 0}},
	}, {
		// A stage with nothing ready keeps its busy slot.
		name:   "nothing ready keeps what runs",
		stages: []Demand{{Ready: 0, Running: 1, Sites: two(0.1, 0.1, 1)}},
		want:   map[string]int{"a": 1, "b": 0},
		slots:  []map[string]int{{"a": 1, "b": 0}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, slots := LP{}.ProvisionStages(time.Now(), tt.stages)
			if !reflect.DeepEqual(want, tt.want) || !reflect.DeepEqual(slots, tt.slots) {
				t.Errorf("want %v slots %v; expected %v %v", want, slots, tt.want, tt.slots)
			}
		})
	}
	p, err := Lookup("lp")
	if err != nil || p.Kind != Provisioning || p.NewProvisioner == nil {
		t.Fatalf("lp: %+v %v", p, err)
	}
	if _, ok := p.NewProvisioner().(StageProvisioner); !ok {
		t.Error("lp plans no stages")
	}
}

// A later stage is planned for the jobs still waiting on the one before
// (they are the items to come), and what one stage sends the next is
// priced on the sites' links: BLAST runs only at a (10 s; nothing
// measured or estimated at b), Parse well only at b (1 s; 20 s at a). With links that carry BLAST's
// 1 MB a job, Parse goes to b; over links of 1 kB/s, shipping an item
// would take 1,000 s, so the plan keeps Parse at a, beside BLAST.
func TestLPProvisionLinksAndWaiting(t *testing.T) {
	sites := func(link float64, blast bool) []SiteView {
		a, b := 1/20.0, 1.0 // Parse
		if blast {
			a, b = 1/10.0, 0
		}
		return []SiteView{{Name: "a", Max: 4, Slots: 1, Rate: a, Link: link}, {Name: "b", Max: 4, Slots: 1, Rate: b, Link: link}}
	}
	for _, tt := range []struct {
		name        string
		link        float64
		feeds       bool
		parseAtB    bool
		parseAtSome bool
	}{
		{"fast links", 100e6, true, true, true},
		{"slow links", 1e3, true, false, true},
		// Unrelated queues: BLAST's output goes to no stage listed, so
		// it crosses no link and the slow links change nothing.
		{"slow links, unrelated", 1e3, false, true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			stages := []Demand{
				{Ready: 8, Out: 1e6, FeedsNext: tt.feeds, Sites: sites(tt.link, true)},
				{Waiting: 8, Sites: sites(tt.link, false)},
			}
			_, slots, rate, err := LP{}.PlanStages(time.Now(), stages)
			if err != nil {
				t.Fatal(err)
			}
			if rate <= 0 {
				t.Fatalf("no rate: slots %v", slots)
			}
			if got := slots[1]["b"] > 0; got != tt.parseAtB {
				t.Errorf("Parse at b: %v (slots %v), want %v", got, slots, tt.parseAtB)
			}
			if got := slots[1]["a"]+slots[1]["b"] > 0; got != tt.parseAtSome {
				t.Errorf("Parse planned: %v (slots %v): its 8 waiting jobs are to come", got, slots)
			}
		})
	}
}

// An LP with no plan (here: no time to find one) leaves the stages uncapped and the sites holding what their work
// needs, first sites first (the seed's Total), and says why; it does not
// cap every queue at nothing.
func TestLPProvisionNoPlan(t *testing.T) {
	sites := []SiteView{{Name: "a", Max: 2, Slots: 2, Rate: 0.2}, {Name: "b", Max: 4, Slots: 2, Rate: 0.2}}
	stages := []Demand{{Ready: 6, Sites: sites}, {Waiting: 6, Sites: sites}}
	want, slots, rate, err := LP{TimeLimit: time.Nanosecond}.PlanStages(time.Now(), stages)
	if err == nil {
		t.Fatalf("the LP found a plan in 1ns (rate %v, slots %v)", rate, slots)
	}
	if slots[0] != nil || slots[1] != nil {
		t.Errorf("slots %v: want no caps", slots)
	}
	// 12 jobs left: a's 2x2 slots, then 8 of b's: 2 and 4 placeholders.
	if want["a"] != 2 || want["b"] != 4 {
		t.Errorf("want %v, expected a 2, b 4", want)
	}
}
