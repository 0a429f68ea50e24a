package plan

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/mq-hpc/mq/internal/lpplace"
	"github.com/mq-hpc/mq/internal/policy"
)

// LP is seed 001's LPSched over a target DAG: the jobs at each depth of
// the DAG form a stage (BLAST, then Parse), lpplace chooses how many of
// each site's slots each stage holds from the jobs' runtimes per site,
// their output sizes and the sites' links, and each stage's jobs go to
// the sites in proportion to the flow the plan sends there. The placeholder
// counts are what the plan is for; the job sites follow from them so that
// the CLS, which follows job sites, runs the stages where the plan put
// them. docs/policies/lp.md says what is approximated.
type LP struct {
	MinUtil   float64       // W_MIN
	TimeLimit time.Duration // bounds the solve; 0: 30 s
}

// MaxLPCells bounds depths x sites for LP (20 sites x 10 stages took
// minutes on a loaded 2-core machine: BENCHMARKS.md).
const MaxLPCells = 200

// Plan implements policy.Planner.
func (l LP) Plan(ctx context.Context, p policy.Problem) (policy.Plan, error) {
	m, err := compile(p)
	if err != nil {
		return policy.Plan{}, err
	}
	lp, stageOf, stages := lpProblem(m)
	// gonum's simplex is dense and cannot be interrupted: a DAG of many
	// depths over many sites would hold the planner for hours
	// (BENCHMARKS.md).
	if cells := len(lp.Stages) * len(lp.Sites); cells > MaxLPCells {
		return policy.Plan{}, fmt.Errorf("plan: lp: %d depths x %d sites is over %d: too large for its solver; use heft", len(lp.Stages), len(lp.Sites), MaxLPCells)
	}
	lp.MinUtil = l.MinUtil
	// A DAG may have more depths than slots: a site's placeholders take
	// turns at the stages, as mq's pull any job, so counts are shares.
	lp.Relaxed = true
	limit := l.TimeLimit
	if limit <= 0 {
		limit = 30 * time.Second
	}
	pctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	pl, err := lp.Plan(pctx)
	if err != nil {
		return policy.Plan{}, fmt.Errorf("plan: lp: %w", err)
	}
	// Each stage's jobs, in id order, go to the sites by largest
	// remainder of their share of the stage's flow; a job that cannot
	// run at its site's turn goes to the next that can.
	n := len(m.ids)
	sc := schedule{alloc: make([]int32, n+len(m.fileSize))}
	for k, jobs := range stages {
		quota := shares(len(jobs), pl.Flow[k])
		for _, j := range jobs {
			best := -1
			for s := range m.sites {
				if !math.IsInf(m.exec[j][s], 1) && (best < 0 || quota[s] > quota[best]) {
					best = s
				}
			}
			sc.alloc[j] = int32(best)
			quota[best]--
		}
	}
	m.filesAtProducers(sc.alloc)
	sc.order = make([]int32, n)
	for i := range sc.order {
		sc.order[i] = int32(i)
	}
	slices.SortStableFunc(sc.order, func(a, b int32) int {
		if stageOf[a] != stageOf[b] {
			return stageOf[a] - stageOf[b]
		}
		return int(a - b)
	})
	return m.toPlan(sc, newEval(m)), ctx.Err()
}

// lpProblem is the DAG as a pipeline: stage k is the jobs whose longest
// chain of prerequisites has k jobs; an item is one job of the first
// stage, so a stage with r times as many jobs does r jobs per item.
func lpProblem(m *model) (lpplace.Problem, []int, [][]int32) {
	n := len(m.ids)
	stageOf := make([]int, n)
	depth := 0
	for _, i := range m.topo {
		for _, q := range m.pred[i] {
			stageOf[i] = max(stageOf[i], stageOf[q]+1)
		}
		depth = max(depth, stageOf[i]+1)
	}
	stages := make([][]int32, depth)
	for i := range n {
		stages[stageOf[i]] = append(stages[stageOf[i]], int32(i))
	}
	var p lpplace.Problem
	for s, site := range m.sites {
		link := 0.0 // the fastest way out of the site; +Inf: unbounded
		for t := range m.sites {
			if t != s {
				link = max(link, m.bw[s][t])
			}
		}
		if math.IsInf(link, 1) {
			link = 0
		}
		p.Sites = append(p.Sites, lpplace.Site{Name: site.Name, Speed: 1, Max: site.Slots, Link: link})
	}
	first := float64(len(stages[0]))
	for k, jobs := range stages {
		per := float64(len(jobs)) / first // jobs per item
		st := lpplace.Stage{Name: fmt.Sprintf("depth%d", k), Times: make([]float64, len(m.sites))}
		for s := range m.sites {
			sum := 0.0
			for _, j := range jobs {
				sum += m.exec[j][s] + m.staticCost[j][s]
			}
			// +Inf if a job cannot run there; a stage of jobs that take
			// no time still holds a slot for an instant (lpplace runs a
			// stage only where its time is above 0).
			st.Times[s] = max(per*sum/float64(len(jobs)), minStageTime)
		}
		var out float64
		for _, j := range jobs {
			for _, f := range m.outs[j] {
				out += float64(m.fileSize[f])
			}
		}
		st.Out = out / first
		st.Work = 1 // unused: Times are set
		p.Stages = append(p.Stages, st)
	}
	return p, stageOf, stages
}

// minStageTime is the least seconds an item of a stage takes in the LP.
const minStageTime = 1e-3

// shares splits n among sites in proportion to flow, by largest
// remainder.
func shares(n int, flow []float64) []int {
	total := 0.0
	for _, f := range flow {
		total += f
	}
	q := make([]int, len(flow))
	if total <= 0 {
		return q
	}
	given := 0
	rem := make([]float64, len(flow))
	for s, f := range flow {
		x := float64(n) * f / total
		q[s] = int(x)
		rem[s] = x - float64(q[s])
		given += q[s]
	}
	for ; given < n; given++ {
		b := 0
		for s := range rem {
			if rem[s] > rem[b] {
				b = s
			}
		}
		q[b]++
		rem[b] = -1
	}
	return q
}
