package sim

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/internal/resource"
)

// Sweep is a grid of runs: every combination of its lists.
type Sweep struct {
	Policies     []string
	Placeholders []int
	Inflations   []float64
	Networks     []Platform
	Seeds        []uint64
	// Workload returns the workload for a seed; nil means the thesis's
	// PA workload, PA(seed, 1000, 16). It is called once per seed and the
	// result is shared by concurrent runs, which only read it.
	Workload func(seed uint64) (*Workload, error)
	DC       policy.DC // as Config.DC
	Staging  string    // as Config.Staging, for every run
	// Capacity and StarveAfter are Config's, for every run.
	Capacity    resource.Capacity
	StarveAfter float64
}

// Outcome is one run of a sweep.
type Outcome struct {
	Policy       string
	Placeholders int
	Inflation    float64
	Network      string
	Seed         uint64
	Staging      string // the run's staging mode (StagingInline for "")
	Result
}

// Len is the number of runs.
func (s Sweep) Len() int {
	return len(s.Policies) * len(s.Placeholders) * len(s.Inflations) * len(s.Networks) * len(s.Seeds)
}

// config returns the i-th run, in the order network, inflation,
// placeholders, policy, seed (the last varies fastest).
func (s Sweep) config(i int) (Platform, Config) {
	seed := s.Seeds[i%len(s.Seeds)]
	i /= len(s.Seeds)
	pol := s.Policies[i%len(s.Policies)]
	i /= len(s.Policies)
	ph := s.Placeholders[i%len(s.Placeholders)]
	i /= len(s.Placeholders)
	inf := s.Inflations[i%len(s.Inflations)]
	i /= len(s.Inflations)
	return s.Networks[i], Config{Policy: pol, Placeholders: ph, Inflation: inf, Seed: seed, DC: s.DC, Staging: s.Staging,
		Capacity: s.Capacity, StarveAfter: s.StarveAfter}
}

// Run runs the sweep on workers goroutines (0: GOMAXPROCS) and calls emit
// with each outcome in grid order, whatever order they finish in. It stops
// at the first error, from a run or from emit.
func (s Sweep) Run(ctx context.Context, workers int, emit func(Outcome) error) error {
	n := s.Len()
	if n == 0 {
		return nil
	}
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	gen := s.Workload
	if gen == nil {
		gen = func(seed uint64) (*Workload, error) { return PA(seed, 1000, 16), nil }
	}
	loads := make(map[uint64]*Workload, len(s.Seeds))
	for _, seed := range s.Seeds {
		if loads[seed] != nil {
			continue
		}
		w, err := gen(seed)
		if err != nil {
			return err
		}
		loads[seed] = w
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make([]Outcome, n)
	errs := make([]error, n)
	done := make([]chan struct{}, n)
	for i := range done {
		done[i] = make(chan struct{})
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				p, cfg := s.config(i)
				r, err := RunContext(ctx, loads[cfg.Seed], p, cfg)
				if err != nil {
					err = fmt.Errorf("%s/%s x%g %d placeholders seed %d: %w", cfg.Policy, p.Name, cfg.Inflation, cfg.Placeholders, cfg.Seed, err)
				}
				out[i] = Outcome{Policy: cfg.Policy, Placeholders: cfg.Placeholders, Inflation: cfg.Inflation,
					Network: p.Name, Seed: cfg.Seed, Staging: cmp.Or(cfg.Staging, StagingInline), Result: r}
				errs[i] = err
				close(done[i])
			}
		}()
	}
	go func() {
		defer close(next)
		for i := range n {
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	// On an early return stop feeding runs, then let the running ones end.
	defer func() { cancel(); wg.Wait() }()
	for i := range n {
		select {
		case <-done[i]:
		case <-ctx.Done():
			return ctx.Err()
		}
		if errs[i] != nil {
			return errs[i]
		}
		if err := emit(out[i]); err != nil {
			return err
		}
	}
	return nil
}

// Summary is the mean and standard deviation over seeds of one grid point.
type Summary struct {
	Policy                                           string
	Placeholders                                     int
	Inflation                                        float64
	Network                                          string
	Seeds                                            int
	Makespan, DataAffinity, MeanResponse, BytesMoved Stat
	// CoreUtil is Result.CoreUtil's, when the runs modelled resources
	// (Resources).
	CoreUtil  Stat
	Resources bool
}

// Stat is a mean and a (population) standard deviation.
type Stat struct{ Mean, SD float64 }

// Summarize groups outcomes by everything but the seed, keeping the order
// in which each group first appears.
func Summarize(runs []Outcome) []Summary {
	type key struct {
		pol, net string
		ph       int
		inf      float64
	}
	idx := map[key]int{}
	var groups [][]Outcome
	for _, r := range runs {
		k := key{r.Policy, r.Network, r.Placeholders, r.Inflation}
		i, ok := idx[k]
		if !ok {
			i = len(groups)
			idx[k] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], r)
	}
	out := make([]Summary, len(groups))
	for i, g := range groups {
		stat := func(f func(Outcome) float64) Stat {
			var sum, sq float64
			for _, r := range g {
				sum += f(r)
			}
			mean := sum / float64(len(g))
			for _, r := range g {
				sq += (f(r) - mean) * (f(r) - mean)
			}
			return Stat{mean, math.Sqrt(sq / float64(len(g)))}
		}
		out[i] = Summary{Policy: g[0].Policy, Placeholders: g[0].Placeholders, Inflation: g[0].Inflation,
			Network: g[0].Network, Seeds: len(g),
			Makespan:     stat(func(r Outcome) float64 { return r.Makespan }),
			DataAffinity: stat(func(r Outcome) float64 { return r.DataAffinity }),
			MeanResponse: stat(func(r Outcome) float64 { return r.MeanResponse }),
			BytesMoved:   stat(func(r Outcome) float64 { return float64(r.BytesMoved) }),
			CoreUtil:     stat(func(r Outcome) float64 { return r.CoreUtil }),
			Resources:    g[0].Resources,
		}
	}
	return out
}
