package sim

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"

	"github.com/mq-hpc/mq/internal/dispatch"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/internal/resource"
)

// Config is one simulation run.
type Config struct {
	Policy       string  // a policy.Lookup name
	Placeholders int     // one per host unless the platform says otherwise
	Inflation    float64 // multiplies the size of every file a job writes (thesis: 1, 10, 100); 0 means 1
	Seed         uint64  // staggers the hosts' batch queues at time 0
	// DC overrides the data-conscious policy's parameters; the zero value
	// means policy.DefaultDC with the platform's one-way latency.
	DC policy.DC
	// MaxTime stops a run that has not finished by then (virtual seconds);
	// 0 means 10^8 (three years: idle placeholders ask about ten times a
	// virtual second, so a run that long is about 10^9 events).
	MaxTime float64
	// Staging is how inputs move: StagingInline ("" means it), the
	// thesis's placeholder copying its job's inputs within its turn, or
	// StagingLive, the live CLS's asynchronous staging (staging.go).
	Staging string
	// Capacity is what each placeholder holds when resources are
	// modelled (resources.go); the zero value is one core, the thesis's
	// one job at a time. A platform's Hosts size the hosts it lists.
	Capacity resource.Capacity
	// StarveAfter is the starvation reservation's bound, in virtual
	// seconds (0: the CLS's, packing.DefaultStarveAfter).
	StarveAfter float64
}

// The staging modes of Config.Staging.
const (
	StagingInline = "inline"
	StagingLive   = "live"
)

// StagingModes lists the modes, the default first.
var StagingModes = []string{StagingInline, StagingLive}

// Result is what one run measured.
type Result struct {
	Makespan     float64 // seconds from the first submission to the last completion recorded by the CLS
	DataAffinity float64 // share of tasks whose job ran where all its inputs already were
	MeanResponse float64 // mean over jobs of finish - submission, seconds
	BytesMoved   int64   // bytes copied between sites (inputs from outside included)
	Transfers    int     // files copied
	Requests     int     // placeholder requests for work
	Empty        int     // requests answered with no job
	Waits        int     // of those, DC decided to wait although jobs were ready
	Events       uint64  // events simulated
	// CoreUtil is, when resources are modelled, the cores busy running
	// jobs over all the placeholders' cores, over the makespan (0 when not
	// modelled).
	CoreUtil float64
	// Resources says the run modelled resources per job.
	Resources bool
}

type phState struct {
	host      int32
	job       int32 // the job it holds, or -1
	reporting bool  // its next request reports job instead of asking for one
	// Live staging: parked is a placeholder told "no job" whose next turn
	// has not started (its long poll, decided again when data lands or a
	// job ends); wakeSeen is m.live.wakes when the CLS told it so.
	parked   bool
	listed   bool // in m.live.parked
	wakeSeen uint64
	// Resources modelled: the jobs the CLS's reply carries, those running,
	// those ended and not yet reported, and whether a request is out.
	got     []int32
	running int
	ended   []int32
	asking  bool
}

type jobState struct {
	sub            int64 // submission order, from 1; 0 = not submitted yet
	submit, finish float64
	ready          float64 // when it became ready (live staging's DC queue time)
	pending        int     // dependencies not finished
	taken, done    bool
	inputs         []policy.Input
	// Live staging: mark is the host its inputs are being brought to
	// (noMark: none), xfers the transfers it waits for, stagedTo the
	// hosts a transfer was asked for on its behalf.
	mark     policy.Site
	xfers    int32
	stagedTo []policy.Site
	// Resources modelled: its placeholder and the cores it was granted.
	ph    int32
	cores int
}

type model struct {
	w      *Workload
	p      Platform
	cfg    Config
	oneWay float64
	c      clock

	hosts    [][]int32 // placeholders per host
	nextPh   []int     // round robin position per host
	phs      []phState
	fileHost []policy.Site
	fileSize []int64

	jobs   []jobState
	users  [][]int32 // jobs that depend on each job
	phases [][]int32 // jobs per phase, in order
	phase  int       // phases submitted so far
	left   int       // jobs of submitted phases not done
	done   int
	subs   []int32 // job index by submission order - 1

	// ready jobs: a heap for FCFS/SJF, a list in submission order for DC
	heap   *policy.Heap
	down   []float32 // with policy.NeedsBLevels: each job's dependents' largest b-level
	ready  []int64   // submission numbers, ascending; taken ones are skipped
	nTaken int
	dc     policy.DC
	expect policy.Expect
	arr    policy.Arrivals
	future []policy.Arrival

	clsBusy bool
	clsQ    []int32 // requests waiting for the CLS, from clsHead on
	clsHead int

	res       Result
	localTask int
	allTasks  int
	respSum   float64

	live liveState // Config.Staging == StagingLive
	rs   resState  // resources modelled

	// started, when not nil, records the jobs in the order they start
	// (tests compare it with the live CLS's order).
	started *[]int32
}

// Run simulates workload w on platform p. It is deterministic: the same
// inputs give the same Result.
func Run(w *Workload, p Platform, cfg Config) (Result, error) {
	return RunContext(context.Background(), w, p, cfg)
}

// RunContext is Run, stopping with ctx's error when ctx ends: a run of a
// long virtual time (idle placeholders ask every turn) can take minutes,
// and Ctrl-C must end it.
func RunContext(ctx context.Context, w *Workload, p Platform, cfg Config) (Result, error) {
	m, err := newModel(w, p, cfg)
	if err != nil {
		return Result{}, err
	}
	return m.simulate(ctx)
}

// simulate runs a model newModel set up to its end.
func (m *model) simulate(ctx context.Context) (Result, error) {
	w, cfg := m.w, m.cfg
	runnable := len(w.Jobs) - m.rs.nBlocked
	for m.done < runnable {
		e, ok := m.c.next()
		if !ok {
			return Result{}, fmt.Errorf("simulation stalled with %d of %d jobs done", m.done, len(w.Jobs))
		}
		if m.c.fired%(1<<16) == 0 {
			if err := ctx.Err(); err != nil {
				return Result{}, err
			}
		}
		if m.c.now > cfg.MaxTime {
			return Result{}, fmt.Errorf("simulation passed %g virtual seconds with %d of %d jobs done", cfg.MaxTime, m.done, len(w.Jobs))
		}
		m.handle(e)
	}
	m.res.Makespan = m.c.now
	m.res.DataAffinity = float64(m.localTask) / float64(m.allTasks)
	m.res.MeanResponse = m.respSum / float64(runnable)
	m.res.Events = m.c.fired
	m.res.Resources = m.rs.on
	if m.rs.on && m.res.Makespan > 0 {
		m.res.CoreUtil = m.rs.busy / (float64(m.rs.cores) * m.res.Makespan)
	}
	if m.rs.nBlocked > 0 {
		return m.res, fmt.Errorf("%d of %d %w: %s", m.rs.nBlocked, len(w.Jobs), ErrNeverRuns, m.rs.why)
	}
	return m.res, nil
}

// newModel checks a run's parameters and sets it up at time 0, the first
// phase submitted.
func newModel(w *Workload, p Platform, cfg Config) (*model, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if cfg.Placeholders < 1 {
		return nil, fmt.Errorf("placeholders must be >= 1")
	}
	if cfg.Inflation == 0 {
		cfg.Inflation = 1
	}
	if cfg.Inflation < 0 {
		return nil, fmt.Errorf("inflation must be > 0")
	}
	if cfg.MaxTime == 0 {
		cfg.MaxTime = 1e8
	}
	// A job longer than the horizon cannot end within it; refused now,
	// not after the billions of events the idle placeholders' turns take
	// to get there.
	for _, job := range w.Jobs {
		if job.Runtime > cfg.MaxTime {
			return nil, fmt.Errorf("job %q runs %g s, past the simulated horizon of %g s", job.Name, job.Runtime, cfg.MaxTime)
		}
	}
	for _, f := range w.Files {
		bytes := float64(f.Bytes)
		if f.producer >= 0 {
			bytes *= cfg.Inflation
		}
		if t := p.SCPLatency + bytes/p.SCPRate; t > cfg.MaxTime {
			return nil, fmt.Errorf("file %q (%g bytes) takes %g s to copy on platform %q, past the simulated horizon of %g s", f.Name, bytes, t, p.Name, cfg.MaxTime)
		}
	}
	switch cfg.Staging {
	case "", StagingInline, StagingLive:
	default:
		return nil, fmt.Errorf("unknown staging mode %q (known: %s)", cfg.Staging, strings.Join(StagingModes, ", "))
	}
	m := &model{w: w, p: p, cfg: cfg, oneWay: p.OneWay()}
	m.live.on = cfg.Staging == StagingLive
	m.rs.on = modelsResources(w, p, cfg)
	pol, err := policy.Lookup(cfg.Policy)
	if err != nil {
		return nil, err
	}
	if !Workflow(pol) {
		return nil, fmt.Errorf("policy %q runs in the grid model (mqsim grid), not the workflow model", cfg.Policy)
	}
	switch pol.Kind {
	case policy.Ordered:
		m.heap = policy.NewHeap(pol.Order)
	case policy.Choosing:
		m.dc = cfg.DC
		if m.dc == (policy.DC{}) {
			m.dc = pol.NewDC(m.oneWay)
		}
	default:
		return nil, fmt.Errorf("policy %q cannot be simulated yet", cfg.Policy)
	}
	if m.live.on {
		m.live.chooser, m.live.patience = m.dc, dispatch.Patience(pol)
	}
	if err := m.setup(); err != nil {
		return nil, err
	}
	if m.rs.on {
		if err := m.setupRes(); err != nil {
			return nil, err
		}
	}
	if pol.Needs&policy.NeedsBLevels != 0 {
		m.rankChains()
	}
	m.submitPhase()
	return m, nil
}

func (m *model) setup() error {
	per := max(m.p.PerHost, 1)
	nh := (m.cfg.Placeholders + per - 1) / per
	m.hosts = make([][]int32, nh)
	m.nextPh = make([]int, nh)
	m.phs = make([]phState, m.cfg.Placeholders)
	for i := range m.phs {
		h := i / per
		m.phs[i] = phState{host: int32(h), job: -1}
		m.hosts[h] = append(m.hosts[h], int32(i))
	}
	m.fileHost = make([]policy.Site, len(m.w.Files))
	m.fileSize = make([]int64, len(m.w.Files))
	for i, f := range m.w.Files {
		m.fileHost[i] = policy.Site(f.Host)
		if f.Host < 0 {
			m.fileHost[i] = external
		}
		if f.Host >= nh && f.producer < 0 {
			return fmt.Errorf("file %q is on host %d but there are only %d hosts", f.Name, f.Host, nh)
		}
		m.fileSize[i] = f.Bytes
		if f.producer >= 0 {
			m.fileSize[i] = int64(float64(f.Bytes) * m.cfg.Inflation)
		}
	}
	m.jobs = make([]jobState, len(m.w.Jobs))
	m.users = make([][]int32, len(m.w.Jobs))
	var phases []int // the phases jobs name, ascending: a workload may skip numbers
	for j, job := range m.w.Jobs {
		m.jobs[j].pending = len(job.deps)
		for _, d := range job.deps {
			m.users[d] = append(m.users[d], int32(j))
		}
		if i, found := slices.BinarySearch(phases, job.Phase); !found {
			phases = slices.Insert(phases, i, job.Phase)
		}
		m.allTasks += job.Tasks
	}
	m.phases = make([][]int32, len(phases))
	for j, job := range m.w.Jobs {
		i, _ := slices.BinarySearch(phases, job.Phase)
		m.phases[i] = append(m.phases[i], int32(j))
	}
	if m.live.on {
		m.setupLive(nh)
	}
	// Each host starts at a random point of its other user's job, so the
	// placeholders do not all ask in the same instant.
	rng := newRand(m.cfg.Seed)
	for h := range m.hosts {
		m.turn(int32(h), rng.Float64()*m.p.OtherJob)
	}
	return nil
}

// rankChains computes, for CP, the largest b-level among each job's
// dependents from declared estimates (unknown: policy.UnknownRuntime).
func (m *model) rankChains() {
	est := make([]float64, len(m.w.Jobs))
	prereqs := make([][]int32, len(m.w.Jobs))
	for j := range m.w.Jobs {
		est[j], prereqs[j] = m.w.Jobs[j].Estimate, m.w.Jobs[j].deps
	}
	b, _ := policy.BLevels(est, prereqs) // link checked there is no cycle
	m.down = make([]float32, len(m.w.Jobs))
	for j, us := range m.users {
		for _, u := range us {
			m.down[j] = max(m.down[j], float32(b[u]))
		}
	}
}

// external is the site of files outside the metacomputer.
const external policy.Site = -1

// submitPhase submits the next non-empty phase's jobs.
func (m *model) submitPhase() {
	for m.phase < len(m.phases) && len(m.phases[m.phase]) == 0 {
		m.phase++
	}
	if m.phase == len(m.phases) {
		return
	}
	for _, j := range m.phases[m.phase] {
		js := &m.jobs[j]
		m.subs = append(m.subs, j)
		js.sub = int64(len(m.subs))
		js.submit = m.c.now
		m.left++
		if m.rs.on {
			m.rs.pack.Job(js.sub, m.w.Jobs[j].Request, resource.Category{})
		}
		if js.pending == 0 {
			m.makeReady(j)
		}
	}
	m.phase++
}

func (m *model) makeReady(j int32) {
	js := &m.jobs[j]
	job := &m.w.Jobs[j]
	js.ready = m.c.now
	if m.heap != nil {
		est := m.expect.Estimate(job.Group, job.Estimate)
		r := policy.Ready{ID: js.sub, Est: float32(est)}
		if m.down != nil {
			// As the CLS does: the chain behind the job as ranked at
			// submission, plus its own runtime as expected now.
			r.Prio = float32(policy.Runtime(est)) + m.down[j]
		}
		m.heap.Push(r)
		return
	}
	m.insertReady(js.sub)
	if m.live.on {
		return // priced at each decision: replicas come and go
	}
	// DC prices data per site: add up the inputs by where they are now.
	js.inputs = js.inputs[:0]
	for _, f := range job.In {
		site := m.fileHost[f]
		i := slices.IndexFunc(js.inputs, func(in policy.Input) bool { return in.Site == site })
		if i < 0 {
			js.inputs = append(js.inputs, policy.Input{Site: site})
			i = len(js.inputs) - 1
		}
		js.inputs[i].Bytes += m.fileSize[f]
		js.inputs[i].Files++
	}
}

// insertReady adds submission number sub to DC's ready list, in order.
func (m *model) insertReady(sub int64) {
	if n := len(m.ready); n == 0 || m.ready[n-1] < sub {
		m.ready = append(m.ready, sub)
	} else {
		i, _ := slices.BinarySearch(m.ready, sub)
		m.ready = slices.Insert(m.ready, i, sub)
	}
}

// turn schedules host h's next turn at t. With live staging an earlier
// turn it replaces is ignored when it comes (the event's seq says which).
func (m *model) turn(h int32, t float64) {
	m.c.at(t, evHostTurn, h)
	if m.live.on {
		m.live.turnSeq[h] = m.c.seq
	}
}

func (m *model) handle(e event) {
	switch e.kind {
	case evHostTurn:
		h := e.who
		if m.live.on && !m.liveTurn(h, e.seq) {
			return // cancelled: a parked placeholder was given a job
		}
		ph := m.hosts[h][m.nextPh[h]]
		m.nextPh[h] = (m.nextPh[h] + 1) % len(m.hosts[h])
		m.phs[ph].reporting = false
		if m.rs.on {
			m.ask(ph)
			return
		}
		m.c.after(m.oneWay, evArrive, ph)
	case evArrive:
		ph := e.who
		if !m.phs[ph].reporting {
			m.arr.Observe(int64(ph), policy.Site(m.phs[ph].host), m.c.now)
		}
		if m.clsBusy {
			m.clsQ = append(m.clsQ, ph)
		} else {
			m.serve(ph)
		}
	case evServed:
		m.c.after(m.oneWay, evReply, e.who)
		m.clsBusy = false
		if m.clsHead < len(m.clsQ) {
			next := m.clsQ[m.clsHead]
			m.clsHead++
			if m.clsHead == len(m.clsQ) {
				m.clsQ, m.clsHead = m.clsQ[:0], 0
			}
			m.serve(next)
		}
	case evReply:
		if m.rs.on {
			m.replyRes(e.who)
			return
		}
		m.reply(e.who)
	case evStaged:
		m.staged(e.who)
	case evJobEnd:
		m.jobEnd(e.who)
	}
}

// serve is the CLS taking a request: it is busy for the queuing delay, and
// the state changes now.
func (m *model) serve(ph int32) {
	if m.rs.on {
		m.serveRes(ph)
		return
	}
	m.clsBusy = true
	m.c.after(m.p.QueuingDelay, evServed, ph)
	p := &m.phs[ph]
	if p.reporting {
		m.complete(p.job, p.host)
		p.job = -1
		return
	}
	m.res.Requests++
	if m.live.on {
		var waited bool
		p.job, waited = m.chooseLive(ph)
		if waited {
			m.res.Waits++
		}
		p.wakeSeen = m.live.wakes
	} else {
		p.job = m.choose(ph)
	}
	if p.job < 0 {
		m.res.Empty++
	}
}

// choose asks the policy for a job for placeholder ph, or returns -1.
func (m *model) choose(ph int32) int32 {
	if m.heap != nil {
		r, ok := m.heap.Pop()
		if !ok {
			return -1
		}
		j := m.subs[r.ID-1]
		m.jobs[j].taken = true
		return j
	}
	if len(m.ready)-m.nTaken == 0 {
		return -1
	}
	m.future = m.arr.Predict(m.c.now, int64(ph), m.future[:0])
	d := m.dc.Choose(policy.Snapshot{
		Current: policy.Site(m.phs[ph].host),
		Future:  m.future,
		Ready:   m.readySeq(),
		Net:     m.p,
	})
	if d.Wait {
		m.res.Waits++
		return -1
	}
	j := m.subs[d.Job.ID-1]
	m.takeReady(j)
	return j
}

// takeReady marks job j taken off DC's ready list, compacting the list
// when taken jobs make up most of it.
func (m *model) takeReady(j int32) {
	m.jobs[j].taken = true
	m.nTaken++
	if m.nTaken > 64 && 2*m.nTaken > len(m.ready) {
		m.ready = slices.DeleteFunc(m.ready, func(s int64) bool { return m.jobs[m.subs[s-1]].taken })
		m.nTaken = 0
	}
}

// readySeq yields the ready jobs oldest first, as DC sees them.
func (m *model) readySeq() iter.Seq[policy.Candidate] {
	return func(yield func(policy.Candidate) bool) {
		for _, s := range m.ready {
			j := m.subs[s-1]
			js := &m.jobs[j]
			if js.taken {
				continue
			}
			job := &m.w.Jobs[j]
			c := policy.Candidate{
				ID:        s,
				QueueTime: m.c.now - js.submit,
				Runtime:   m.expect.Estimate(job.Group, job.Estimate),
				Inputs:    js.inputs,
			}
			if !yield(c) {
				return
			}
		}
	}
}

// reply is the CLS's answer reaching placeholder ph.
func (m *model) reply(ph int32) {
	p := &m.phs[ph]
	if m.live.on && !p.reporting && p.job < 0 && m.parkOrRun(ph) {
		return
	}
	if p.reporting || p.job < 0 {
		// The placeholder's turn ends; the other user's job runs next.
		m.turn(p.host, m.c.now+m.p.OtherJob)
		return
	}
	m.run(ph)
}

// run starts placeholder ph's job: with inline staging it first fetches
// every input that is elsewhere, one scp per file; with live staging they
// are all there already.
func (m *model) run(ph int32) {
	p := &m.phs[ph]
	j := p.job
	job := &m.w.Jobs[j]
	t := m.fetchInputs(j, policy.Site(p.host))
	js := &m.jobs[j]
	if m.started != nil {
		*m.started = append(*m.started, j)
	}
	js.finish = m.c.now + t + job.Runtime
	m.respSum += js.finish - js.submit
	p.reporting = true
	m.c.at(js.finish+m.oneWay, evArrive, ph)
}

// fetchInputs returns how long job j copies its inputs before it runs at
// host here (inline staging; live staging brought them already), counts
// what is moved and whether the job ran with its data.
func (m *model) fetchInputs(j int32, here policy.Site) float64 {
	job := &m.w.Jobs[j]
	var t float64
	local := true
	if m.live.on {
		// With its data unless something was brought here for it.
		local = !slices.Contains(m.jobs[j].stagedTo, here)
	} else {
		for _, f := range job.In {
			if m.fileHost[f] == here {
				continue
			}
			local = false
			t += m.p.Transfer(m.fileHost[f], here, m.fileSize[f], 1)
			m.res.BytesMoved += m.fileSize[f]
			m.res.Transfers++
		}
	}
	if local {
		m.localTask += job.Tasks
	}
	return t
}

// complete records job j done on host h (the CLS processing its report).
func (m *model) complete(j, h int32) {
	js := &m.jobs[j]
	job := &m.w.Jobs[j]
	js.done = true
	m.done++
	m.left--
	m.expect.Observe(job.Group, job.Runtime)
	for _, f := range job.Out {
		m.fileHost[f] = policy.Site(h)
		if m.live.on {
			m.live.reps[f] = append(m.live.reps[f][:0], policy.Site(h)) // older copies are of older content
		}
	}
	for _, u := range m.users[j] {
		us := &m.jobs[u]
		if us.pending--; us.pending == 0 && us.sub != 0 {
			m.makeReady(u)
		}
	}
	if m.left == 0 {
		m.submitPhase()
	}
	if m.live.on {
		m.wake()
	}
}

// Workflow reports whether Run simulates the policy: the ordered ones and
// DC. Policies that replicate jobs or choose by another rule run in
// RunGrid.
func Workflow(p policy.Info) bool {
	return p.NewReplicator == nil && p.NewPlanner == nil && (p.Kind == policy.Ordered || p.NewDC != nil)
}

// WorkflowPolicies lists the policies Run simulates, in registry order.
func WorkflowPolicies() []string {
	var names []string
	for _, p := range policy.All() {
		if Workflow(p) {
			names = append(names, p.Name)
		}
	}
	return names
}
