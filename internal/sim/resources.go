package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/mq-hpc/mq/internal/dispatch"
	"github.com/mq-hpc/mq/internal/metaqueue/packing"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/internal/resource"
	"github.com/mq-hpc/mq/internal/wfformat"
)

// Resources per job. When a run models them (a placeholder capacity from
// Config.Capacity or Platform.Hosts, or a job with a Request), each
// placeholder holds a capacity and runs as many jobs at once as fit it.
// What fits is decided by the live CLS's own packing module
// (metaqueue/packing: resource.Pool's Fits, Take and Give, and the
// starvation reservation, resource.Starving and Admits) asked through
// package dispatch's FitsResources check, so the simulator cannot drift
// from the CLS's rule:
//
//   - A request is the CLS's: the placeholder asks for as many jobs as it
//     has free cores; the CLS gives, in the policy's order, every job that
//     fits what is free (packing.Begin, then dispatch's pick with
//     FitsResources, then packing.Start, until nothing fits).
//   - The placeholder starts them all at once. When one ends it reports
//     it, asking again in the same request (the agent's next with its
//     reports); the CLS gives the grant back (packing.Stop) as it records
//     the report. A placeholder with jobs running does not end its turn
//     and asks again only when one ends; one with none ends its turn (or,
//     with live staging, parks) as before.
//   - A job no placeholder can hold (resource.Capacity.Holds), and the
//     jobs that wait for it, never start: the run ends when the rest are
//     done and Run says which job and why (ErrNeverRuns).
//
// Without any of this a placeholder is one core and every job asks for
// one: the thesis's model, one job per turn, unchanged (the code paths
// above are not taken).

// ErrNeverRuns is wrapped by Run's error when jobs could never start: no
// placeholder holds what one asks for.
var ErrNeverRuns = errors.New("jobs never ran")

// HostSize is what each placeholder of one host holds, as a platform
// file writes it: "cpus", "mem" as Slurm writes it ("64G"), "gpus".
type HostSize struct {
	CPUs int    `json:"cpus"`
	Mem  string `json:"mem,omitempty"`
	GPUs int    `json:"gpus,omitempty"`
}

// Capacity returns s as a placeholder capacity, or a one-line error.
func (s HostSize) Capacity() (resource.Capacity, error) {
	var mem int64
	if s.Mem != "" {
		var err error
		if mem, err = resource.ParseMem(s.Mem); err != nil {
			return resource.Capacity{}, err
		}
	}
	return NewCapacity(s.CPUs, mem, s.GPUs)
}

// NewCapacity returns a placeholder capacity of cpus cores, mem bytes (0:
// memory not counted) and gpus GPUs named 0..gpus-1, or a one-line error.
func NewCapacity(cpus int, mem int64, gpus int) (resource.Capacity, error) {
	c := resource.Capacity{CPUs: cpus, Mem: mem}
	if gpus < 0 {
		return c, fmt.Errorf("capacity: %d GPUs; want 0 or more", gpus)
	}
	for i := range min(gpus, resource.MaxGPUs+1) {
		c.GPUIDs = append(c.GPUIDs, fmt.Sprint(i))
	}
	return c, c.Validate()
}

// resState is the run's resources, when modelled (on).
type resState struct {
	on    bool
	pack  *packing.Packing
	chain dispatch.Chain // the checks the picks ask: FitsResources, and InputsHere with live staging
	cores int            // all placeholders' cores
	busy  float64        // core-seconds of the jobs run

	blocked  []bool // per job: it never starts (nothing holds it, or it waits for such a job)
	nBlocked int
	why      string // the first job nothing holds, and why
}

// modelsResources says whether a run of w on p with cfg models resources.
func modelsResources(w *Workload, p Platform, cfg Config) bool {
	if cfg.Capacity.CPUs > 0 || len(p.Hosts) > 0 {
		return true
	}
	return slices.ContainsFunc(w.Jobs, func(j WorkloadJob) bool { return asks(j.Request) })
}

// asks says whether r asks for more than one core of a placeholder whose
// size nobody gave. Memory alone does not: such a placeholder does not
// know its memory, so none is counted (resource.Pool), and a trace whose
// tasks carry their measured memory simulates as it did before traces
// were read for it, unless a size is given (--ph-mem).
func asks(r resource.Request) bool {
	return r.CPUs > 1 || r.GPUs != 0 || len(r.Named) > 0 || r.AutoCPUs || r.AutoMem
}

// capacity is what host h's placeholders hold: the platform's size for
// it, else Config.Capacity, else one core.
func (m *model) capacity(h int) (resource.Capacity, error) {
	if h < len(m.p.Hosts) {
		c, err := m.p.Hosts[h].Capacity()
		if err != nil {
			return c, fmt.Errorf("platform %q: host %d: %w", m.p.Name, h, err)
		}
		return c, nil
	}
	if m.cfg.Capacity.CPUs > 0 {
		return m.cfg.Capacity, nil
	}
	return resource.Capacity{CPUs: 1}, nil
}

// setupRes gives every placeholder its pool and finds the jobs that never
// start.
func (m *model) setupRes() error {
	r := &m.rs
	r.pack = packing.New()
	if m.cfg.StarveAfter > 0 {
		r.pack.StarveAfter = time.Duration(m.cfg.StarveAfter * float64(time.Second))
	}
	for i := range m.phs {
		c, err := m.capacity(int(m.phs[i].host))
		if err != nil {
			return err
		}
		if err := r.pack.Placeholder(int64(i), c); err != nil {
			return err
		}
		r.cores += c.CPUs
	}
	r.chain = 1 << dispatch.FitsResources
	if m.live.on {
		r.chain |= simulated
	}
	m.live.chain = r.chain

	r.blocked = make([]bool, len(m.w.Jobs))
	var stack []int32
	phase := -1 // the first phase with a job that never starts: no later one is submitted
	block := func(j int32) {
		if !r.blocked[j] {
			r.blocked[j] = true
			stack = append(stack, j)
			if ph := m.w.Jobs[j].Phase; phase < 0 || ph < phase {
				phase = ph
			}
		}
	}
	for j := range m.w.Jobs {
		job := &m.w.Jobs[j]
		if err := checkRequest(job.Request); err != nil {
			return fmt.Errorf("job %q: %w", job.Name, err)
		}
		if why := r.pack.Unholdable(job.Request); why != "" {
			if r.why == "" {
				r.why = fmt.Sprintf("job %q %s", job.Name, why)
			}
			block(int32(j))
		}
	}
	for len(stack) > 0 {
		j := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, u := range m.users[j] {
			block(u)
		}
	}
	if phase >= 0 {
		for j := range m.w.Jobs {
			if m.w.Jobs[j].Phase > phase {
				block(int32(j))
			}
		}
	}
	for _, b := range r.blocked {
		if b {
			r.nBlocked++
		}
	}
	return nil
}

// checkRequest refuses what the CLS would (auto sizes are learned from
// measured usage, which the simulator has none of).
func checkRequest(r resource.Request) error {
	switch {
	case r.CPUs < 0 || r.Mem < 0 || r.GPUs < 0:
		return fmt.Errorf("negative request %s", r)
	case r.AutoCPUs || r.AutoMem:
		return fmt.Errorf("auto sizes are not simulated")
	}
	return nil
}

// simTime is virtual time t as the packing module's clock.
func simTime(t float64) time.Time {
	return time.Unix(0, 0).Add(time.Duration(t * float64(time.Second)))
}

// ask sends placeholder ph's request: its reports and a request for work.
func (m *model) ask(ph int32) {
	m.phs[ph].asking = true
	m.c.after(m.oneWay, evArrive, ph)
}

// serveRes is the CLS taking placeholder ph's request: its reports
// recorded (grants given back), then as many jobs as fit what it has free.
func (m *model) serveRes(ph int32) {
	m.clsBusy = true
	m.c.after(m.p.QueuingDelay, evServed, ph)
	p := &m.phs[ph]
	for _, j := range p.ended {
		m.rs.pack.Ran(time.Duration(m.w.Jobs[j].Runtime * float64(time.Second)))
		m.rs.pack.Stop(packing.Run{Job: m.jobs[j].sub})
		m.complete(j, p.host)
	}
	p.ended = p.ended[:0]
	m.res.Requests++
	var waited bool
	p.got, waited = m.pick(ph, p.got[:0])
	if waited {
		m.res.Waits++
	}
	p.wakeSeen = m.live.wakes
	if len(p.got) == 0 {
		m.res.Empty++
	}
}

// pick appends to got the jobs placeholder ph gets now, each taking its
// grant, until nothing more fits; waited says DC decided to wait.
func (m *model) pick(ph int32, got []int32) ([]int32, bool) {
	pk := m.rs.pack
	for {
		free, _ := pk.Free(int64(ph))
		if free.CPUs == 0 {
			return got, false
		}
		// Asking for as many jobs as it has free cores, as the agent
		// does: not fetching ahead, so every job must fit.
		pk.Begin(simTime(m.c.now), int64(ph), free.CPUs)
		j, waited := m.pickOne(ph, free.CPUs)
		if j < 0 {
			return got, waited
		}
		js := &m.jobs[j]
		g, ok := pk.Start(packing.Run{Job: js.sub}, int64(ph))
		if !ok {
			panic("sim: a job the packing module let go did not fit") // Fits and Take disagree: a bug
		}
		js.cores = g.CPUs
		got = append(got, j)
	}
}

// pickOne is one pick for placeholder ph, which has free cores free: by
// package dispatch, asking FitsResources (and InputsHere with live
// staging).
func (m *model) pickOne(ph int32, free int) (int32, bool) {
	a := &m.live.ask
	*a = liveAsk{m: m, here: policy.Site(m.phs[ph].host), ph: ph, free: free}
	switch {
	case m.heap != nil:
		return m.chooseOrderedLive(a), false
	case m.live.on:
		return m.chooseDCLive(ph, a)
	}
	return m.chooseDCRes(ph, a)
}

// chooseDCRes is DC's pick with inline staging: the candidates that fit,
// priced where their inputs are, and DC's choice among them.
func (m *model) chooseDCRes(ph int32, a *liveAsk) (int32, bool) {
	l := &m.live
	cands := l.cands[:0]
	l.list = readyList{m: m}
	_, _ = dispatch.Examine(a, &l.list, dispatch.Choosing&m.rs.chain, nil, func(r policy.Ready) (bool, error) {
		j := a.job(r.ID)
		job := &m.w.Jobs[j]
		cands = append(cands, policy.Candidate{
			ID:        r.ID,
			QueueTime: m.c.now - m.jobs[j].submit,
			Runtime:   m.expect.Estimate(job.Group, job.Estimate),
			Inputs:    m.jobs[j].inputs,
		})
		return false, nil
	})
	defer func() {
		clear(cands)
		l.cands = cands[:0]
		l.list = readyList{}
	}()
	if len(cands) == 0 {
		return -1, false
	}
	m.future = m.arr.Predict(m.c.now, int64(ph), m.future[:0])
	d := m.dc.Choose(dispatch.Shaped(policy.Snapshot{Current: a.here, Future: m.future, Ready: slices.Values(cands), Net: m.p}, m.shapes()))
	if d.Wait {
		return -1, true
	}
	j := a.job(d.Job.ID)
	m.takeReady(j)
	return j, false
}

// shapes is which placeholders hold which jobs, for the choosers, as the
// CLS tells them (dispatch.Shaped): the packing module's, when resources
// are modelled. Placeholders and candidates are numbered as it numbers
// them.
func (m *model) shapes() dispatch.Shapes {
	if !m.rs.on {
		return nil
	}
	return m.rs.pack
}

// replyRes is the CLS's answer reaching placeholder ph: it starts the jobs
// it got; then it reports jobs that ended meanwhile, waits for its running
// ones, or, with none, ends its turn (parks, with live staging).
func (m *model) replyRes(ph int32) {
	p := &m.phs[ph]
	p.asking = false
	got := len(p.got)
	m.startAll(ph)
	switch {
	case len(p.ended) > 0:
		m.ask(ph)
	case p.running > 0:
		// It asks again when one of its jobs ends.
	default:
		if m.live.on && got == 0 && m.parkOrRun(ph) {
			return
		}
		m.turn(p.host, m.c.now+m.p.OtherJob)
	}
}

// startAll starts the jobs placeholder ph got.
func (m *model) startAll(ph int32) {
	p := &m.phs[ph]
	for _, j := range p.got {
		job := &m.w.Jobs[j]
		js := &m.jobs[j]
		t := m.fetchInputs(j, policy.Site(p.host))
		js.finish = m.c.now + t + job.Runtime
		m.respSum += js.finish - js.submit
		js.ph = ph
		p.running++
		m.rs.busy += float64(js.cores) * job.Runtime
		m.c.at(js.finish, evJobEnd, j)
	}
	p.got = p.got[:0]
}

// jobEnd is job j ending on its placeholder, which reports it at once
// unless a request of its is out (the reply then sends it).
func (m *model) jobEnd(j int32) {
	ph := m.jobs[j].ph
	p := &m.phs[ph]
	p.running--
	p.ended = append(p.ended, j)
	if !p.asking {
		m.ask(ph)
	}
}

// MixedBag is a bag of n independent jobs, each asking for 1, 2, 4 or 8
// cores (uniformly drawn) and running 10-100 s (uniform), seeded, with
// exact estimates and no files: a workload to pack.
func MixedBag(seed uint64, n int) *Workload {
	rng := rand.New(rand.NewPCG(seed, 0x5eed_0030))
	w := &Workload{}
	for i := range max(n, 1) {
		rt := 10 + 90*rng.Float64()
		cores := 1 << rng.IntN(4)
		w.Jobs = append(w.Jobs, WorkloadJob{
			Name: fmt.Sprintf("job-%d", i+1), Group: fmt.Sprintf("c%d", cores),
			Runtime: rt, Estimate: rt, Tasks: 1, Request: resource.Request{CPUs: cores},
		})
	}
	if err := w.link(); err != nil {
		panic("sim: mixed bag: " + err.Error()) // a bug here, not bad input
	}
	return w
}

// TraceWorkload is a WfFormat trace as a workload: one job per task, in
// one phase, running its measured runtime (its estimate), asking for its
// cores (wfformat's Task.Cores: "cores", "coreCount") and its measured
// memory (Task.Mem: "memoryInBytes", "memory"), after its parents.
// A file a task writes appears where it ran; the others are outside.
// Each job is its own group, as the live replay (internal/wfreplay) makes
// a target per task and the CLS learns runtimes by target: a task
// without a runtime is not given the mean of earlier tasks of its name,
// which the live CLS would not know.
func TraceWorkload(tr *wfformat.Workflow) (*Workload, error) {
	w := &Workload{}
	files := map[string]int32{}
	file := func(name string) int32 {
		if f, ok := files[name]; ok {
			return f
		}
		f := int32(len(w.Files))
		files[name] = f
		w.Files = append(w.Files, File{Name: name, Bytes: tr.FileSizes[name], Host: -1})
		return f
	}
	index := make(map[string]int32, len(tr.Tasks))
	for i, t := range tr.Tasks {
		index[t.ID] = int32(i)
	}
	for _, t := range tr.Tasks {
		job := WorkloadJob{Name: t.ID, Group: t.ID, Runtime: t.Runtime, Estimate: t.Runtime, Tasks: 1}
		if t.Cores > 1 {
			job.Request.CPUs = t.Cores
		}
		job.Request.Mem = t.Mem
		for _, p := range t.Parents {
			if d, ok := index[p]; ok && !slices.Contains(job.deps, d) {
				job.deps = append(job.deps, d)
			}
		}
		w.Jobs = append(w.Jobs, job)
	}
	// Outputs first, so that an input a later task lists is known as
	// written, whatever the order of the lists.
	for i, t := range tr.Tasks {
		for _, name := range t.Outputs {
			f := file(name)
			if slices.Contains(w.Jobs[i].Out, f) {
				continue
			}
			w.Jobs[i].Out = append(w.Jobs[i].Out, f)
		}
	}
	for i, t := range tr.Tasks {
		for _, name := range t.Inputs {
			if f := file(name); !slices.Contains(w.Jobs[i].In, f) && !slices.Contains(w.Jobs[i].Out, f) {
				w.Jobs[i].In = append(w.Jobs[i].In, f)
			}
		}
	}
	if err := w.link(); err != nil {
		return nil, fmt.Errorf("trace %q: %w", tr.Name, err)
	}
	return w, nil
}
