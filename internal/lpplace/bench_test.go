package lpplace

import (
	"context"
	"fmt"
	"testing"
)

// benchProblem is sites x stages: a pinned reader at site 0, stages of
// varied work and output, sites of varied speed, size and link.
func benchProblem(sites, stages int) Problem {
	var p Problem
	for s := range sites {
		p.Sites = append(p.Sites, Site{Name: fmt.Sprintf("s%d", s), Speed: 1 + float64(s%7)/3, Max: 4 + s%13,
			NIC: 12.5e6, Link: 1e6 * float64(1+s%5)})
	}
	p.Stages = append(p.Stages, Stage{Name: "read", Work: 0.05, Out: 1e5, Sites: []string{"s0"}, MaxCopies: 1})
	for k := 1; k < stages; k++ {
		p.Stages = append(p.Stages, Stage{Name: fmt.Sprintf("k%d", k), Work: 0.2 * float64(1+k%4), Out: 1e4 * float64(k%3)})
	}
	return p
}

// BenchmarkPlan times planning, the branch and bound in full, cut to its
// root (MaxNodes 1: the relaxation, its counts rounded and the rates
// re-solved) and Relaxed (one LP); BENCHMARKS.md records it.
func BenchmarkPlan(b *testing.B) {
	for _, size := range [][2]int{{5, 3}, {10, 5}, {20, 5}, {20, 10}, {50, 10}, {100, 10}} {
		for _, mode := range []struct {
			name    string
			nodes   int
			relaxed bool
		}{{"bb", 0, false}, {"root", 1, false}, {"relaxed", 0, true}} {
			b.Run(fmt.Sprintf("%dsites_%dstages_%s", size[0], size[1], mode.name), func(b *testing.B) {
				p := benchProblem(size[0], size[1])
				p.MaxNodes, p.Relaxed = mode.nodes, mode.relaxed
				var pl Plan
				for b.Loop() {
					var err error
					if pl, err = p.Plan(context.Background()); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(pl.Nodes), "lps")
				b.ReportMetric(float64(pl.Placeholders), "placeholders")
				b.ReportMetric(pl.Rate, "items/s")
			})
		}
	}
}
