package resource

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// A Category is the unit sizes are learned for: jobs of one target in
// one queue are assumed alike.
type Category struct {
	Queue, Target string
}

// A Learner learns per category how much memory and how many cores
// finished jobs used, and suggests requests for the category's next
// jobs. Each category keeps a uniform sample of at most Keep jobs
// (reservoir sampling), so memory is bounded however many jobs finish.
// It is not safe for concurrent use.
type Learner struct {
	MinJobs    int     // jobs finished before a suggestion is made (default 5)
	Percentile float64 // of the sample (default 0.95)
	Headroom   float64 // added to the memory percentile (default 0.20)
	Round      int64   // memory is rounded up to a multiple of this (default 64 MiB)
	Keep       int     // sample size per category (default 256)

	rng  *rand.Rand
	cats map[Category]*sample
}

type usage struct {
	rss   int64
	cores float64 // CPU time over elapsed
}

type sample struct {
	seen  int // jobs observed
	jobs  []usage
	dirty bool
	mem   int64 // cached suggestion
	cores int
}

// NewLearner returns a learner with the defaults.
func NewLearner() *Learner {
	return &Learner{MinJobs: 5, Percentile: 0.95, Headroom: 0.20, Round: 64 * MiB, Keep: 256,
		rng: rand.New(rand.NewPCG(1, 2)), cats: make(map[Category]*sample)}
}

// Observe records a finished job's max RSS (bytes), CPU time and
// elapsed time.
func (l *Learner) Observe(c Category, maxRSS int64, cpu, elapsed time.Duration) {
	u := usage{rss: maxRSS, cores: 1}
	if elapsed > 0 {
		u.cores = float64(cpu) / float64(elapsed)
	}
	s := l.cats[c]
	if s == nil {
		s = &sample{}
		l.cats[c] = s
	}
	s.seen++
	if len(s.jobs) < l.Keep {
		s.jobs = append(s.jobs, u)
	} else if i := l.rng.IntN(s.seen); i < l.Keep {
		s.jobs[i] = u
	}
	s.dirty = true
}

// coreSlack forgives a job measured slightly over a whole number of
// cores (startup, a helper process): 1.05 cores asks for 1.
const coreSlack = 0.1

// Suggest returns what the category's next job should request: the
// percentile of the sample's max RSS plus headroom, rounded up, and the
// percentile of its CPU time over elapsed, rounded up to whole cores;
// each at most max's (when max gives it). Before MinJobs have finished
// it returns max itself (the declared maximum, or the whole placeholder)
// and learned false.
func (l *Learner) Suggest(c Category, max Request) (r Request, learned bool) {
	s := l.cats[c]
	if s == nil || s.seen < l.MinJobs {
		return Request{CPUs: max.CPUs, Mem: max.Mem}, false
	}
	if s.dirty {
		l.refresh(s)
	}
	r = Request{CPUs: s.cores, Mem: s.mem}
	if max.CPUs > 0 && r.CPUs > max.CPUs {
		r.CPUs = max.CPUs
	}
	if max.Mem > 0 && r.Mem > max.Mem {
		r.Mem = max.Mem
	}
	return r, true
}

// Resolve returns r with its auto fields replaced by the suggestion for
// c, bounded by max.
func (l *Learner) Resolve(c Category, r, max Request) Request {
	if !r.AutoCPUs && !r.AutoMem {
		return r
	}
	s, _ := l.Suggest(c, max)
	if r.AutoCPUs {
		r.CPUs, r.AutoCPUs = s.CPUs, false
	}
	if r.AutoMem {
		r.Mem, r.AutoMem = s.Mem, false
	}
	return r
}

func (l *Learner) refresh(s *sample) {
	rss := make([]int64, len(s.jobs))
	cores := make([]float64, len(s.jobs))
	for i, u := range s.jobs {
		rss[i], cores[i] = u.rss, u.cores
	}
	slices.Sort(rss)
	slices.Sort(cores)
	k := rank(l.Percentile, len(s.jobs))
	mem := float64(rss[k]) * (1 + l.Headroom)
	if mem >= math.MaxInt64/2 {
		mem = math.MaxInt64 / 2
	}
	s.mem = roundUp(int64(math.Ceil(mem)), l.Round)
	s.cores = max(1, int(math.Ceil(cores[k]-coreSlack)))
	s.dirty = false
}

// rank is the nearest-rank index of percentile p in n sorted values.
func rank(p float64, n int) int {
	k := int(math.Ceil(p*float64(n))) - 1
	return min(max(k, 0), n-1)
}

func roundUp(n, to int64) int64 {
	if to <= 0 {
		return n
	}
	if n <= 0 {
		return to
	}
	return (n + to - 1) / to * to
}

// MemRetry decides a job killed for going over its memory request, after
// retries such retries: whether to run it again, and with how much. The
// first retry is at twice its request, up to max (when max is given). A
// job whose size mq learned (auto) gets a second, at max itself: the
// guess was mq's, so the job fails only when the whole placeholder is not
// enough. A retry is made only when it gives more than the job had, and
// does not use one of the job's attempts: the job did not fail, its
// request did.
func MemRetry(asked, max int64, retries int, auto bool) (next int64, retry bool) {
	switch {
	case asked <= 0 || retries > 1:
		return asked, false
	case retries == 1:
		if auto && max > asked {
			return max, true
		}
		return asked, false
	}
	next = asked * 2
	if next < asked { // overflow
		next = math.MaxInt64
	}
	if max > 0 && next > max {
		next = max
	}
	return next, next > asked
}
