package sim

import (
	"context"
	"math"
)

// GridSweep runs every policy at every granularity for every seed, each
// seed drawing its platform and application (sites, grid and application
// heterogeneity, application kind) the same for every policy, as the seed
// ran its three heuristics on each simulated scenario.
type GridSweep struct {
	Policies      []string
	Granularities []int64 // mean task input bytes
	Seeds         []uint64
	Base          GridConfig // everything else (Runs, MaxCopies, ...)
}

// Run runs the sweep on workers goroutines (0: GOMAXPROCS) and returns
// the results in sweep order (granularity, seed, policy; the last varies
// fastest). It stops at the first error.
func (s GridSweep) Run(ctx context.Context, workers int) ([]GridResult, error) {
	n := len(s.Policies) * len(s.Granularities) * len(s.Seeds)
	return runIndexed(ctx, n, workers, func(i int) (GridResult, error) {
		cfg := s.Base
		cfg.Policy = s.Policies[i%len(s.Policies)]
		j := i / len(s.Policies)
		cfg.Seed = s.Seeds[j%len(s.Seeds)]
		cfg.Granularity = s.Granularities[j/len(s.Seeds)]
		return RunGrid(cfg)
	})
}

// GridSummary is the mean and standard deviation of a policy's results
// over some runs.
type GridSummary struct {
	Policy               string
	Granularity          int64 // 0: every granularity
	N                    int
	Makespan, MakespanSD float64
	CPUWaste, CPUWasteSD float64
	NetWaste, NetWasteSD float64
	FirstRun, LaterRuns  float64 // mean makespan of execution 1 and of 2..n
	Copies               float64 // mean copies beyond one per task
}

// SummarizeGrid groups results by policy and granularity (each policy also
// over all granularities, Granularity 0), in first-seen order. The
// results must come from one GridSweep (it finds the granularity of a
// result by its place).
func SummarizeGrid(s GridSweep, rs []GridResult) []GridSummary {
	type key struct {
		pol string
		g   int64
	}
	acc := map[key]*[]GridResult{}
	var keys []key
	add := func(k key, r GridResult) {
		if acc[k] == nil {
			acc[k] = &[]GridResult{}
			keys = append(keys, k)
		}
		*acc[k] = append(*acc[k], r)
	}
	for i, r := range rs {
		g := s.Granularities[i/len(s.Policies)/len(s.Seeds)]
		add(key{r.Policy, g}, r)
	}
	for _, r := range rs {
		add(key{r.Policy, 0}, r)
	}
	var out []GridSummary
	for _, k := range keys {
		g := *acc[k]
		sum := GridSummary{Policy: k.pol, Granularity: k.g, N: len(g)}
		var ms, cw, nw, first, later, copies []float64
		for _, r := range g {
			ms = append(ms, r.Makespan)
			cw = append(cw, r.CPUWaste)
			nw = append(nw, r.NetWaste)
			copies = append(copies, float64(r.Copies))
			if len(r.Makespans) > 0 {
				first = append(first, r.Makespans[0])
				later = append(later, mean(r.Makespans[1:]))
			}
		}
		sum.Makespan, sum.MakespanSD = meanSD(ms)
		sum.CPUWaste, sum.CPUWasteSD = meanSD(cw)
		sum.NetWaste, sum.NetWasteSD = meanSD(nw)
		sum.FirstRun, _ = meanSD(first)
		sum.LaterRuns, _ = meanSD(later)
		sum.Copies, _ = meanSD(copies)
		out = append(out, sum)
	}
	return out
}

func meanSD(xs []float64) (m, sd float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	m = mean(xs)
	for _, x := range xs {
		sd += (x - m) * (x - m)
	}
	if len(xs) > 1 {
		sd = math.Sqrt(sd / float64(len(xs)-1))
	}
	return m, sd
}
