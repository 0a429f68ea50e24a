// Package packing is the metaqueue's module for resources per job: what
// each job asks (cores, memory, GPUs, named amounts), what each
// placeholder holds and has free, the grants of running attempts, and the
// reservation that keeps a big job from starving behind a stream of small
// ones. The core calls it at its hooks: a placeholder registered or gone,
// a job's request known, the feasibility check for an asking placeholder,
// an attempt started or stopped. The fit rule itself is package resource's,
// which mqsim calls too.
//
// A placeholder that does not say what it holds has no pool: it runs
// one-core jobs as slots, as before, and nothing bigger. A job with no
// request is the zero resource.Request: one core.
package packing

import (
	"fmt"
	"time"

	"github.com/mq-hpc/mq/internal/resource"
	"github.com/mq-hpc/mq/internal/wire"
	"github.com/mq-hpc/mq/protocol"
)

// DefaultStarveAfter is how long a job that a placeholder could hold, but
// whose need is never free there, waits before the placeholder reserves
// itself for it (takes only jobs that leave its need free).
const DefaultStarveAfter = 5 * time.Minute

// StarveRuns and MinStarveAfter make the bound when StarveAfter is not
// set: StarveRuns times the recent mean run, at least MinStarveAfter.
const (
	StarveRuns     = 1
	MinStarveAfter = time.Second
)

// Run names one attempt of a job.
type Run struct {
	Job     int64
	Attempt int
}

// Packing is the module's state. It is owned by the core goroutine.
type Packing struct {
	// StarveAfter is the reservation bound (DefaultStarveAfter if zero).
	StarveAfter time.Duration

	pools   map[int64]*resource.Pool     // placeholder -> what it has free
	reqs    map[int64]resource.Request   // job -> its request, when not the zero one
	cats    map[int64]resource.Category  // job -> its category, for auto requests
	grants  map[Run]granted              // running attempts' grants
	since   map[int64]time.Time          // job -> when it first did not fit a pool that could hold it
	holds   map[int64]int64              // placeholder -> the job it is reserved for
	goneAt  int                          // placeholders held that make Registered forget those gone
	sites   map[string]resource.Capacity // site -> what its placeholders are asked to hold
	learn   *resource.Learner
	retried map[int64]memRetries // jobs run again with more memory
	// autos counts the jobs known per category that ask for an auto
	// size: only those categories are taught (Observe), so the learner
	// holds no sample for the many that never need one.
	autos map[resource.Category]int
	// now is the time of the decision being made (Begin): reading the
	// clock for every job examined cost a tenth of a decision.
	now time.Time
	// ahead: the placeholder of the decision asks for more jobs than it
	// has free cores, fetching ahead to run them in turn (Begin).
	ahead bool
	// first is the first job of the decision, in the policy's order,
	// that the placeholder could hold but not now (0: none yet): only it
	// waits for the placeholder, as a backfill reserves for the head of
	// the queue; the jobs behind it would wait their turn anyway.
	first int64
	// meanRun is the recent mean run of ended attempts, in nanoseconds
	// (Ran; 0: none yet).
	meanRun float64
	// firstStart is when the first attempt started (Start): before any
	// run ends, the runs are known to last at least since then.
	firstStart time.Time
	// left are the distinct capacities of placeholders gone (at most
	// maxLeft), for Unholdable: one lapsing on a busy machine, or leaving
	// between two of its site's batch jobs, must not make every job look
	// holdable by no placeholder while another alike is on its way.
	left []resource.Capacity
	// walls is how long placeholders can run jobs, for TooLong.
	walls walls
	// classes numbers the placeholders' shapes, for HoldsClass.
	classes classes
}

// Begin starts a dispatch decision at now for placeholder ph, which asks
// for want jobs. Asking for more than it has free cores is fetching
// ahead, as agents do to run short jobs in turn without a round trip:
// then jobs that ask for nothing go to it beyond its free cores, as
// before resources, without a grant (the agent runs them as cores free
// up); jobs that ask must still fit what is free.
func (p *Packing) Begin(now time.Time, ph int64, want int) {
	p.now, p.ahead, p.first = now, false, 0
	if pool := p.pools[ph]; pool != nil {
		p.ahead = want > pool.FreeCPUs()
	}
}

// FitsNow is Fits for the decision Begin started.
func (p *Packing) FitsNow(id, ph int64) bool { return p.Fits(id, ph, p.now) }

// AdmitsAll says whether Fits(id, ph, now) holds for every job id in the
// decision Begin started, touching nothing: no job asks for more than a
// slot and ph has no pool, or fetches ahead (Begin). A pick need not ask
// Fits then.
func (p *Packing) AdmitsAll(ph int64) bool { return !p.AnyAsks() && (p.pools[ph] == nil || p.ahead) }

type granted struct {
	ph  int64
	g   resource.Grant
	req resource.Request // what was taken (an auto request resolved)
}

// New returns an empty module.
func New() *Packing {
	return &Packing{
		pools:   map[int64]*resource.Pool{},
		reqs:    map[int64]resource.Request{},
		cats:    map[int64]resource.Category{},
		grants:  map[Run]granted{},
		since:   map[int64]time.Time{},
		holds:   map[int64]int64{},
		sites:   map[string]resource.Capacity{},
		learn:   resource.NewLearner(),
		retried: map[int64]memRetries{},
		autos:   map[resource.Category]int{},
	}
}

// Placeholder records what placeholder ph holds (registered, or known
// again after a restart). A capacity that does not validate is refused.
func (p *Packing) Placeholder(ph int64, c resource.Capacity) error {
	if old, ok := p.pools[ph]; ok && !old.Idle() {
		return fmt.Errorf("placeholder %d: capacity changed while it runs jobs", ph)
	}
	pool, err := resource.NewPool(c)
	if err != nil {
		return fmt.Errorf("placeholder %d: %w", ph, err)
	}
	p.pools[ph] = pool
	p.classes.add(ph, c)
	return nil
}

// PlaceholderGone forgets placeholder ph (its attempts were stopped first).
func (p *Packing) PlaceholderGone(ph int64) {
	if pool, ok := p.pools[ph]; ok {
		p.remember(pool.Capacity())
	}
	delete(p.pools, ph)
	delete(p.holds, ph)
	delete(p.classes.of, ph)
	p.wallGone(ph)
}

// maxLeft bounds the capacities of placeholders gone that are kept.
const maxLeft = 16

func (p *Packing) remember(c resource.Capacity) {
	key := c.String()
	for _, l := range p.left {
		if l.String() == key {
			return
		}
	}
	if len(p.left) == maxLeft {
		p.left = p.left[1:]
	}
	p.left = append(p.left, c)
}

// Site records what site spec's placeholders are asked to hold, for Why,
// and how long they can run jobs, for TooLong.
func (p *Packing) Site(spec protocol.SiteSpec) {
	p.site(spec.Name, wire.SiteCapacity(spec))
	p.siteWalltime(spec.Name, wire.SiteWalltime(spec))
}

// SiteGone forgets site name.
func (p *Packing) SiteGone(name string) {
	p.site(name, resource.Capacity{})
	delete(p.walls.site, name)
}

func (p *Packing) site(name string, c resource.Capacity) {
	if c.CPUs == 0 {
		delete(p.sites, name)
		return
	}
	p.sites[name] = c
}

// Job records job id's request and its category (queue and target, whose
// finished jobs teach an auto request its size); the zero request needs no
// record.
func (p *Packing) Job(id int64, r resource.Request, c resource.Category) {
	p.dropCat(id)
	if isZero(r) {
		delete(p.reqs, id)
		return
	}
	p.reqs[id] = r
	if r.AutoCPUs || r.AutoMem {
		p.cats[id] = c
		p.autos[c]++
	}
}

// dropCat forgets job id's category.
func (p *Packing) dropCat(id int64) {
	c, ok := p.cats[id]
	if !ok {
		return
	}
	delete(p.cats, id)
	if p.autos[c]--; p.autos[c] <= 0 {
		delete(p.autos, c)
	}
}

// Learns reports whether category c has jobs that ask for an auto size:
// what its finished jobs used is worth Observe.
func (p *Packing) Learns(c resource.Category) bool { return p.autos[c] > 0 }

// request is what job id takes from pool: its request, with auto sizes
// resolved from its category's finished jobs, bounded by the pool's whole
// capacity (the first jobs of a category run with the whole placeholder).
func (p *Packing) request(id int64, pool *resource.Pool) resource.Request {
	r := p.reqs[id]
	if !r.AutoCPUs && !r.AutoMem {
		return r
	}
	c := pool.Capacity()
	return p.learn.Resolve(p.cats[id], r, resource.Request{CPUs: c.CPUs, Mem: c.Mem})
}

// Observe teaches the job's category what a finished attempt used.
func (p *Packing) Observe(c resource.Category, maxRSS int64, cpu, elapsed time.Duration) {
	p.learn.Observe(c, maxRSS, cpu, elapsed)
}

// KilledForMemory is told that attempt ru was killed over its memory. It
// returns whether the job runs again with more (resource.MemRetry: twice
// what it had, up to its placeholder's; a learned size then the whole
// placeholder's), not counted as an attempt; its request is raised to
// that.
func (p *Packing) KilledForMemory(ru Run) bool {
	gr, ok := p.grants[ru]
	if !ok || gr.req.Mem == 0 {
		return false
	}
	var most int64
	if pool := p.pools[gr.ph]; pool != nil {
		most = pool.Capacity().Mem
	}
	r := p.reqs[ru.Job]
	m := p.retried[ru.Job]
	if m.n == 0 {
		m.auto = r.AutoMem
	}
	next, retry := resource.MemRetry(gr.req.Mem, most, m.n, m.auto)
	if !retry {
		return false
	}
	m.n++
	p.retried[ru.Job] = m
	r.Mem, r.AutoMem = next, false
	p.reqs[ru.Job] = r
	return true
}

// memRetries is how often a job ran again with more memory, and whether
// its size was learned (auto) when it first did: the request no longer
// says so once raised.
type memRetries struct {
	n    int
	auto bool
}

// Request returns job id's request (the zero one when none was recorded).
func (p *Packing) Request(id int64) resource.Request { return p.reqs[id] }

// JobEnded forgets job id's wait and any reservation for it; its request
// stays while it may run again (Forget drops it).
func (p *Packing) JobEnded(id int64) {
	delete(p.since, id)
	p.release(id)
}

// release ends job id's reservation, if it has one.
func (p *Packing) release(id int64) {
	for ph, j := range p.holds {
		if j == id {
			delete(p.holds, ph)
		}
	}
}

// reserving says whether job id holds a placeholder already. The holds
// are at most one per placeholder, so the scan is short.
func (p *Packing) reserving(id int64) bool {
	for _, j := range p.holds {
		if j == id {
			return true
		}
	}
	return false
}

// Forget drops everything about job id (deleted, or gone from memory).
func (p *Packing) Forget(id int64) {
	p.JobEnded(id)
	delete(p.reqs, id)
	p.dropCat(id)
	delete(p.retried, id)
}

func isZero(r resource.Request) bool {
	return r.CPUs <= 1 && r.Mem == 0 && r.GPUs == 0 && len(r.Named) == 0 && !r.AutoCPUs && !r.AutoMem
}

// Fits is the feasibility check: may job id start on placeholder ph now?
// Its request must fit what ph has free and, while ph is reserved for a
// starving job, leave that job's whole need free. A job that does not fit
// a placeholder that could hold it starts its wait if it is the first
// such job of the decision (Begin); once it has waited StarveAfter, that
// placeholder is reserved for it, unless the job holds another already:
// one placeholder drains for it, and its reservation ends when it starts
// anywhere.
func (p *Packing) Fits(id, ph int64, now time.Time) bool {
	pool := p.pools[ph]
	if pool == nil {
		return isZero(p.reqs[id]) // a slot
	}
	r := p.request(id, pool)
	if p.ahead && isZero(r) {
		return true
	}
	if big, ok := p.holds[ph]; ok && big != id {
		if !resource.Admits(pool, p.request(big, pool), r) {
			return false
		}
	}
	if pool.Fits(r) {
		return true
	}
	if pool.Capacity().Holds(r) {
		if p.first == 0 {
			p.first = id
		}
		if p.first != id {
			return false
		}
		t, ok := p.since[id]
		if !ok {
			p.since[id] = now
			t = now
		}
		// One placeholder drains for a starving job, not every one it
		// asks of: the others keep packing small jobs.
		if _, held := p.holds[ph]; !held && resource.Starving(pool, r, now.Sub(t), p.starveAfter()) && !p.reserving(id) {
			p.holds[ph] = id
		}
	}
	return false
}

// starveAfter is the reservation bound: StarveAfter when set, else
// StarveRuns times the mean run of the attempts that ended lately (Ran),
// within [MinStarveAfter, DefaultStarveAfter]. Before any ended, the
// runs are known to last at least as long as the first has been running,
// so that is the bound (in the same range): a wide job submitted with
// the first ones waits about one of their runs, not the 5-minute ceiling.
// A bound in run times keeps a wide job's wait a few of its neighbours'
// runs, whether they run a second or an hour.
func (p *Packing) starveAfter() time.Duration {
	if p.StarveAfter > 0 {
		return p.StarveAfter
	}
	run := time.Duration(StarveRuns * p.meanRun)
	if p.meanRun <= 0 {
		if p.firstStart.IsZero() {
			return DefaultStarveAfter
		}
		run = p.now.Sub(p.firstStart)
	}
	return min(max(run, MinStarveAfter), DefaultStarveAfter)
}

// Ran tells how long an attempt that ended ran: the mean run the
// starvation bound follows (an average that weighs the last 32 most).
func (p *Packing) Ran(elapsed time.Duration) {
	if elapsed <= 0 {
		return
	}
	if p.meanRun == 0 {
		p.meanRun = float64(elapsed)
		return
	}
	p.meanRun += (float64(elapsed) - p.meanRun) / 32
}

// Start takes attempt ru's request from its placeholder's pool and returns
// the grant (ok false: it does not fit, which Fits said it did, or the
// placeholder has no pool: then the job runs as a slot, grant zero).
func (p *Packing) Start(ru Run, ph int64) (resource.Grant, bool) {
	pool := p.pools[ph]
	if pool == nil {
		return resource.Grant{}, isZero(p.reqs[ru.Job])
	}
	r := p.request(ru.Job, pool)
	g, ok := pool.Take(r)
	if !ok {
		// Fetched ahead, it runs in turn: nothing to take.
		return resource.Grant{}, p.ahead && isZero(r)
	}
	p.grants[ru] = granted{ph: ph, g: g, req: r}
	if p.firstStart.IsZero() {
		p.firstStart = p.now
	}
	delete(p.since, ru.Job)
	p.release(ru.Job) // wherever it started, its reservation is done
	return g, true
}

// Pass hands attempt from's grant to attempt to, which runs in the same
// cores after it (the next job of a bundle): the pool keeps it taken.
// Without a grant for from it does nothing.
func (p *Packing) Pass(from, to Run) {
	gr, ok := p.grants[from]
	if !ok {
		return
	}
	delete(p.grants, from)
	p.grants[to] = gr
}

// Stop gives attempt ru's grant back (it ended, was requeued, lost its
// lease, or was killed). Stopping an attempt with no grant does nothing.
func (p *Packing) Stop(ru Run) {
	gr, ok := p.grants[ru]
	if !ok {
		return
	}
	delete(p.grants, ru)
	if pool := p.pools[gr.ph]; pool != nil {
		pool.Give(gr.g)
	}
}

// Free returns what placeholder ph has free (ok false: it has no pool).
func (p *Packing) Free(ph int64) (resource.Capacity, bool) {
	pool := p.pools[ph]
	if pool == nil {
		return resource.Capacity{}, false
	}
	return pool.Free(), true
}

// Why says why job id, queued, is not running for lack of resources, or
// "" when some placeholder or site could hold it: its request against the
// largest placeholder or site there is ("needs 4 GPUs; the largest
// placeholder or site holds 2").
func (p *Packing) Why(id int64) string {
	r := p.reqs[id]
	if isZero(r) {
		return ""
	}
	return p.Unholdable(r)
}

// Unholdable says why no placeholder registered (now, or before it left)
// and no site declared could ever hold r, or "" if one could. mqsub warns
// with it at submit.
func (p *Packing) Unholdable(r resource.Request) string {
	var most resource.Capacity
	known := false
	consider := func(c resource.Capacity) bool {
		if c.Holds(r) {
			return true
		}
		known = true
		most.CPUs = max(most.CPUs, c.CPUs)
		most.Mem = max(most.Mem, c.Mem)
		if len(c.GPUIDs) > len(most.GPUIDs) {
			most.GPUIDs = c.GPUIDs
		}
		for n, v := range c.Named {
			if most.Named == nil {
				most.Named = map[string]int{}
			}
			most.Named[n] = max(most.Named[n], v)
		}
		return false
	}
	for _, pool := range p.pools {
		if consider(pool.Capacity()) {
			return ""
		}
	}
	for _, c := range p.sites {
		if consider(c) {
			return ""
		}
	}
	for _, c := range p.left {
		if consider(c) {
			return ""
		}
	}
	if !known {
		return "" // nothing is known yet: a site may be added
	}
	switch {
	case r.Cores() > most.CPUs:
		return fmt.Sprintf("needs %d cores; the largest placeholder or site holds %d", r.Cores(), most.CPUs)
	case r.GPUs > len(most.GPUIDs):
		gpus := "GPUs"
		if r.GPUs == 1 {
			gpus = "GPU"
		}
		return fmt.Sprintf("needs %d %s; the largest placeholder or site holds %d", r.GPUs, gpus, len(most.GPUIDs))
	case most.Mem > 0 && r.Mem > most.Mem:
		return fmt.Sprintf("needs %s of memory; the largest placeholder or site holds %s", resource.FormatMem(r.Mem), resource.FormatMem(most.Mem))
	}
	for _, n := range sortedKeys(r.Named) {
		if r.Named[n] > most.Named[n] {
			return fmt.Sprintf("needs %s=%d; the most any placeholder or site holds is %d", n, r.Named[n], most.Named[n])
		}
	}
	return "no single placeholder or site holds all it needs at once"
}

// Numbered renames the grant job id took before its attempt number was
// known (Start with attempt 0, as dispatch takes grants before it writes
// the claim) to attempt.
func (p *Packing) Numbered(id int64, attempt int) {
	if gr, ok := p.grants[Run{Job: id}]; ok {
		delete(p.grants, Run{Job: id})
		p.grants[Run{Job: id, Attempt: attempt}] = gr
	}
}

// Has reports whether placeholder ph has a pool.
func (p *Packing) Has(ph int64) bool { return p.pools[ph] != nil }

// Reload forgets every grant, request and wait, keeping each placeholder's
// pool (emptied) and what the learner learned: the core rebuilds its state
// from the database and re-takes its running attempts' grants.
func (p *Packing) Reload() {
	for ph, pool := range p.pools {
		fresh, err := resource.NewPool(pool.Capacity())
		if err != nil {
			delete(p.pools, ph) // validated when it was made
			continue
		}
		p.pools[ph] = fresh
	}
	clear(p.reqs)
	clear(p.cats)
	clear(p.autos)
	clear(p.grants)
	clear(p.since)
	clear(p.holds)
	clear(p.retried)
}

// Asks reports whether job id asks for anything beyond one core: more
// cores, memory, GPUs, named amounts, or an auto size.
func (p *Packing) Asks(id int64) bool { return !isZero(p.reqs[id]) }
