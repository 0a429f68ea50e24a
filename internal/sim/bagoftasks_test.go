package sim

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// seedTrends runs seed 000's comparison scaled down 4x (a quarter of the
// input, of the grid's power and of the link: the same tasks per host and
// the same transfer to compute ratio) so that it fits in go test;
// scripts/seed000.sh runs it full size.
func seedTrends(t *testing.T, seeds int) map[string]map[int64]GridSummary {
	t.Helper()
	s := GridSweep{
		Policies:      []string{"sa", "wqr", "xsufferage"},
		Granularities: []int64{3 << 20, 15 << 20, 75 << 20},
		Base:          GridConfig{AppHet: -1, Load: 0.5, TotalBytes: 512 << 20, Power: 250, LinkBits: 0.25e6},
	}
	for i := 1; i <= seeds; i++ {
		s.Seeds = append(s.Seeds, uint64(i))
	}
	rs, err := s.Run(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]map[int64]GridSummary{}
	for _, g := range SummarizeGrid(s, rs) {
		if by[g.Policy] == nil {
			by[g.Policy] = map[int64]GridSummary{}
		}
		by[g.Policy][g.Granularity] = g
		t.Logf("%-10s %2d MB: makespan %6.0f (sd %5.0f), cpu waste %5.1f%%, net waste %6.1f%%",
			g.Policy, g.Granularity>>20, g.Makespan, g.MakespanSD, 100*g.CPUWaste, 100*g.NetWaste)
	}
	return by
}

// The seed's headline results, as trends: WQR's makespan is several times
// SA's; SA is close to XSufferage overall, better at 3 MB, worse at 75
// MB; SA wastes CPU and little network, WQR the opposite.
func TestGridSeedTrends(t *testing.T) {
	t.Parallel()
	by := seedTrends(t, 4)
	sa, wqr, xs := by["sa"], by["wqr"], by["xsufferage"]
	if r := wqr[0].Makespan / sa[0].Makespan; r < 2 {
		t.Errorf("WQR/SA makespan %.2f, want >= 2 (seed: 3.0)", r)
	}
	if r := sa[0].Makespan / xs[0].Makespan; r < 0.75 || r > 1.25 {
		t.Errorf("SA/XSufferage makespan %.2f, want within 25%% (seed: 0.98)", r)
	}
	if sa[3<<20].Makespan >= xs[3<<20].Makespan {
		t.Errorf("at 3 MB SA %.0f s, XSufferage %.0f s: SA should win", sa[3<<20].Makespan, xs[3<<20].Makespan)
	}
	if sa[75<<20].Makespan <= xs[75<<20].Makespan {
		t.Errorf("at 75 MB SA %.0f s, XSufferage %.0f s: XSufferage should win", sa[75<<20].Makespan, xs[75<<20].Makespan)
	}
	if sa[0].CPUWaste <= wqr[0].CPUWaste || sa[0].NetWaste >= wqr[0].NetWaste || sa[0].NetWaste > 0.1 {
		t.Errorf("waste: SA cpu %.2f net %.2f, WQR cpu %.2f net %.2f; want SA's CPU waste higher and its network waste lower (and small)",
			sa[0].CPUWaste, sa[0].NetWaste, wqr[0].CPUWaste, wqr[0].NetWaste)
	}
	if xs[0].CPUWaste != 0 || xs[0].NetWaste != 0 {
		t.Errorf("XSufferage does not replicate, yet wasted cpu %.2f net %.2f", xs[0].CPUWaste, xs[0].NetWaste)
	}
}

// One task on two equal hosts at one site, by hand: the input takes 1 s
// alone on the link, the task 10 s on a host of speed 10.
func TestGridByHand(t *testing.T) {
	t.Parallel()
	task := []GridTask{{Cost: 100, Inputs: []GridFile{{Name: "in", Bytes: 125000}}}}
	tests := []struct {
		policy           string
		makespan         float64
		copies           int
		cpuWaste, netWst float64
	}{
		// both copies stage the input at once (2 s sharing the link), then
		// run 10 s; the first wins, the other's 10 s of work is wasted
		{"wqr", 12, 1, 1, 1},
		// the copy on the second host waits for the input to be at the
		// site (affinity), then runs beside the first and is killed
		{"sa", 11, 1, 1, 0},
		{"xsufferage", 11, 0, 0, 0},
		{"fcfs", 11, 0, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.policy, func(t *testing.T) {
			r, err := RunGrid(GridConfig{Policy: tc.policy, Sites: 1, GridHet: 1, Power: 20, Runs: 1, Tasks: task})
			if err != nil {
				t.Fatal(err)
			}
			if r.Hosts != 2 || len(r.Makespans) != 1 {
				t.Fatalf("%+v", r)
			}
			near := func(a, b float64) bool { return a > b-1e-6 && a < b+1e-6 }
			if !near(r.Makespan, tc.makespan) || r.Copies != tc.copies || !near(r.CPUWaste, tc.cpuWaste) || !near(r.NetWaste, tc.netWst) {
				t.Fatalf("makespan %g copies %d cpu waste %g net waste %g; want %g %d %g %g",
					r.Makespan, r.Copies, r.CPUWaste, r.NetWaste, tc.makespan, tc.copies, tc.cpuWaste, tc.netWst)
			}
		})
	}
}

func TestGridBadConfig(t *testing.T) {
	t.Parallel()
	for _, cfg := range []GridConfig{
		{Policy: "nope", Granularity: 1},
		{Policy: "dc", Granularity: 1},
		{Policy: "sa"},
		{Policy: "sa", Granularity: 1, Load: 1},
		{Policy: "sa", Granularity: 1, Sites: 31},
	} {
		if _, err := RunGrid(cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
}

// The replication cap: one task on four hosts makes three copies under
// WQR, one with MaxCopies 2.
func TestGridMaxCopies(t *testing.T) {
	t.Parallel()
	task := []GridTask{{Cost: 100, Inputs: []GridFile{{Name: "in", Bytes: 125000}}}}
	for _, tc := range []struct{ max, copies int }{{0, 3}, {2, 1}, {1, 0}} {
		r, err := RunGrid(GridConfig{Policy: "wqr", Sites: 2, GridHet: 1, Power: 40, Runs: 2, Tasks: task, MaxCopies: tc.max})
		if err != nil {
			t.Fatal(err)
		}
		if r.Hosts != 4 || r.Copies != 2*tc.copies {
			t.Errorf("max copies %d: %d hosts, %d copies over 2 runs; want 4 hosts, %d", tc.max, r.Hosts, r.Copies, 2*tc.copies)
		}
	}
}

// Ordered policies keep their own queue order in the grid model (sjf
// shortest first; cp, in a bag, longest first): three tasks on two equal
// hosts, by hand. They once all ran as FCFS.
func TestGridOrdered(t *testing.T) {
	t.Parallel()
	bag := func(costs ...float64) []GridTask {
		var ts []GridTask
		for _, c := range costs {
			ts = append(ts, GridTask{Cost: c})
		}
		return ts
	}
	for _, tc := range []struct {
		name     string
		policy   string
		tasks    []GridTask
		makespan float64
	}{
		{"fcfs 1,2,1", "fcfs", bag(100, 200, 100), 20}, // 1 and 2 at once, then 1 beside 2
		{"sjf 1,2,1", "sjf", bag(100, 200, 100), 30},   // both 1s first, then 2 alone
		{"cp 1,2,1", "cp", bag(100, 200, 100), 20},
		{"fcfs 1,1,2", "fcfs", bag(100, 100, 200), 30},
		{"cp 1,1,2", "cp", bag(100, 100, 200), 20}, // 2 first, the 1s beside it
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := RunGrid(GridConfig{Policy: tc.policy, Sites: 1, GridHet: 1, Power: 20, Runs: 1, Tasks: tc.tasks})
			if err != nil {
				t.Fatal(err)
			}
			if r.Hosts != 2 || r.Makespan < tc.makespan-1e-6 || r.Makespan > tc.makespan+1e-6 {
				t.Fatalf("%d hosts, makespan %g; want 2 hosts, %g", r.Hosts, r.Makespan, tc.makespan)
			}
		})
	}
}

func TestGridDefault(t *testing.T) {
	if got := strings.Join(GridDefault(), " "); got != "sa wqr xsufferage" {
		t.Errorf("GridDefault() = %s, want the seed's three heuristics", got)
	}
	for _, name := range GridDefault() {
		if !slices.Contains(GridPolicies(), name) {
			t.Errorf("%s is a default the grid model does not run", name)
		}
	}
}
