package sim

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/mq-hpc/mq/internal/policy"
)

// The grid model of seed 000 (Santos-Neto 2004, chapter 4): a bag of tasks
// run several times over the same inputs on sites of heterogeneous hosts,
// every input first at the user's home machine behind one shared link,
// with job replication (the first copy to finish wins, the others are
// killed). docs/policies/bag-of-tasks.md compares its results with the seed's and lists
// how each ambiguity of the seed was resolved.

// GridConfig is one simulation: a platform and an application drawn from
// Seed, scheduled by Policy.
type GridConfig struct {
	Policy string // sa, wqr, xsufferage, or an ordered policy (no replication)
	Seed   uint64
	// Granularity is the mean input bytes of a task (seed: 3, 15 or 75 MB).
	Granularity int64
	// TotalBytes is the application's input (seed: 2 GB); 0 means 2 GiB.
	TotalBytes int64
	// GridHet is the speed heterogeneity, 1, 2, 4 or 8 (seed table 4.1);
	// 0 draws one from Seed.
	GridHet float64
	// AppHet is the task size heterogeneity H_a in [0, 1]; below 0 draws
	// one of 0, .25, .5, .75, 1 from Seed.
	AppHet float64
	// App is "vis" (cost set by the input size) or "search" (cost U(1,
	// that)); "" draws one from Seed.
	App string
	// Runs is the executions over the same inputs (seed: 6); 0 means 6.
	Runs int
	// Power is the sum of the hosts' speeds (seed: 1,000); 0 means 1000.
	Power float64
	// LinkBits is the shared home link in bits a second (seed: 1 Mbit/s);
	// 0 means 1e6.
	LinkBits float64
	// Sites is how many sites; 0 draws U(2, 12) (at most 30).
	Sites int
	// MaxCopies bounds the copies of one task running at once (0: none).
	MaxCopies int
	// Load stands in for the seed's NWS traces of shared hosts: each copy
	// computes at its host's speed times an availability drawn U(1-Load,
	// 1) when it starts. Policies see the mean availability only. 0 is
	// dedicated hosts.
	Load float64
	// Speeds, if set, are the hosts (one each, dealt to the sites round
	// robin) instead of hosts drawn up to Power: a live platform of known
	// placeholders (scripts/bench/seed000-live.sh).
	Speeds []float64
	// Tasks replaces the generated application (a level of a traced
	// workflow); Granularity, TotalBytes, AppHet and App are then unused.
	Tasks []GridTask
}

// GridTask is one task of an application: its cost in seconds on a
// reference host of speed 1 and the files it reads.
type GridTask struct {
	Cost   float64
	Inputs []GridFile
}

// GridFile is an input file; tasks naming the same file share it.
type GridFile struct {
	Name  string
	Bytes int64
}

// GridResult is what one simulation measured.
type GridResult struct {
	Policy       string
	Seed         uint64
	Sites, Hosts int
	Tasks        int
	GridHet      float64
	AppHet       float64
	App          string
	Makespans    []float64 // per execution, seconds
	Makespan     float64   // mean over executions
	// CPUWaste is the work of killed copies (seconds of computing times
	// the host's speed) over the application's work, all executions.
	CPUWaste float64
	// NetWaste is the bytes moved for copies that were killed (partial
	// transfers included) over the application's input bytes, all
	// executions.
	NetWaste   float64
	BytesMoved int64 // over the home link, all executions
	Copies     int   // copies started beyond one per task
	Waits      int   // requests a policy answered with wait
}

// SeedCostPerByte converts input bytes to reference seconds as the seed's
// prose does (3 MB of input costs about 5,000 s: 0.001602171 s a byte-KB
// ratio read as 1.602171 s per KiB; docs/policies/bag-of-tasks.md).
const SeedCostPerByte = 1.602171 / 1024

// GridPolicies lists the policies RunGrid simulates, in registry order.
func GridPolicies() []string {
	var names []string
	for _, p := range policy.All() {
		if p.Kind == policy.Ordered || p.NewChooser != nil {
			names = append(names, p.Name)
		}
	}
	return names
}

// GridDefault lists the policies made for bags of tasks, those with a
// chooser of their own or replication (the seed's three heuristics), in
// registry order.
func GridDefault() []string {
	var names []string
	for _, p := range policy.All() {
		if p.NewChooser != nil || p.NewReplicator != nil {
			names = append(names, p.Name)
		}
	}
	return names
}

const (
	evGridDone eventKind = 100 + iota // a copy finished computing (who: copy)
	evGridLink                        // the next transfer on the link ends (who: link version)
)

type gridHost struct {
	site  int
	speed float64
	copy  int32 // running copy, -1 idle
}

type gridCopy struct {
	task, host int32
	computing  bool
	dead       bool
	start      float64 // compute start
	rate       float64 // reference seconds of work a second
	missing    int     // transfers it waits for
	moved      int64   // bytes of finished transfers it owned
}

type gridTaskState struct {
	cost   float64
	inputs []int32 // file indexes
	copies []int32 // alive copies
	done   bool
}

type gridXfer struct {
	site    int
	file    int32
	target  float64 // link service at which it ends
	bytes   int64
	waiters []int32 // copies waiting; waiters[0] owns it
}

type gridModel struct {
	cfg   GridConfig
	c     clock
	hosts []gridHost
	order []int32 // hosts in the order they ask
	tasks []gridTaskState
	files []int64  // sizes
	at    []uint64 // sites holding each file, a bit per site
	sites int

	copies  []gridCopy
	pending []int32 // tasks not started, in queue order
	left    int     // tasks of this execution not done

	// the link: every transfer gets bw/n; service is what each got so far
	bw      float64 // bytes a second
	service float64
	lastT   float64
	xfers   []*gridXfer
	version int32

	// aware policies (NeedsFiles) use inputs already at a site; the others
	// stage every copy's inputs from home, as the seed's WQR does
	aware bool
	// a policy that predicts completions (NeedsArrivals) sees the other
	// hosts' next asks, and hosts ask fastest first
	arrivals bool
	// a policy that counts the bytes here (NeedsBytesHere) sees each copy
	// of an input; the others see each file once with the sites holding it
	bytesHere  bool
	qorder     policy.Ordering // queue order of an Ordered policy (nil: a chooser's)
	chooser    policy.Chooser
	replicator policy.Replicator
	buf        []policy.Input
	future     []policy.Arrival
	running    []policy.Running

	load             *rand.Rand // availability draws
	res              GridResult
	work, wasteWork  float64
	inBytes, wasteNB int64
}

// RunGrid simulates one configuration. It is deterministic.
func RunGrid(cfg GridConfig) (GridResult, error) {
	pol, err := policy.Lookup(cfg.Policy)
	if err != nil {
		return GridResult{}, err
	}
	if pol.Kind != policy.Ordered && pol.NewChooser == nil {
		return GridResult{}, fmt.Errorf("policy %s does not run in the grid model", cfg.Policy)
	}
	if cfg.Runs == 0 {
		cfg.Runs = 6
	}
	if cfg.Power == 0 {
		cfg.Power = 1000
	}
	if cfg.LinkBits == 0 {
		cfg.LinkBits = 1e6
	}
	if cfg.TotalBytes == 0 {
		cfg.TotalBytes = 2 << 30
	}
	switch {
	case cfg.Load < 0 || cfg.Load >= 1:
		return GridResult{}, fmt.Errorf("grid: load must be in [0, 1)")
	case cfg.Runs < 1 || cfg.Power <= 0 || cfg.LinkBits <= 0 || cfg.Sites < 0 || cfg.Sites > 30 || cfg.MaxCopies < 0:
		return GridResult{}, fmt.Errorf("grid: bad configuration (runs, power, link, sites 0-30, max copies)")
	case slices.ContainsFunc(cfg.Speeds, func(v float64) bool { return !(v > 0) || math.IsInf(v, 0) }) || len(cfg.Speeds) > 0 && cfg.Sites == 0:
		return GridResult{}, fmt.Errorf("grid: speeds must be > 0, with a number of sites")
	case cfg.Tasks == nil && (cfg.Granularity <= 0 || cfg.TotalBytes < cfg.Granularity):
		return GridResult{}, fmt.Errorf("grid: granularity must be > 0 and at most the total input")
	}
	m := &gridModel{cfg: cfg, bw: cfg.LinkBits / 8, aware: pol.Needs&policy.NeedsFiles != 0,
		arrivals: pol.Needs&policy.NeedsArrivals != 0, bytesHere: pol.Needs&policy.NeedsBytesHere != 0, load: newRand(cfg.Seed ^ 0x10ad)}
	if pol.Kind == policy.Ordered {
		m.qorder = pol.Order
	}
	if pol.NewChooser != nil {
		m.chooser = pol.NewChooser()
		if u, ok := m.chooser.(policy.Unbounder); ok {
			m.chooser = u.Unbounded() // every ready task, as the seed
		}
	}
	if pol.NewReplicator != nil {
		m.replicator = pol.NewReplicator()
		if l, ok := m.replicator.(policy.ReplicaLimiter); ok {
			m.replicator = l.LimitReplicas(cfg.MaxCopies)
		}
	}
	m.generate()
	m.res.Policy = cfg.Policy
	for range cfg.Runs {
		if err := m.execute(); err != nil {
			return m.res, err
		}
	}
	m.res.Makespan = mean(m.res.Makespans)
	if m.work > 0 {
		m.res.CPUWaste = m.wasteWork / m.work
	}
	if m.inBytes > 0 {
		m.res.NetWaste = float64(m.wasteNB) / float64(m.inBytes)
	}
	return m.res, nil
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(max(len(xs), 1))
}

// generate draws the platform and, unless given, the application.
func (m *gridModel) generate() {
	cfg := m.cfg
	rng := newRand(cfg.Seed)
	m.sites = cfg.Sites
	if m.sites == 0 {
		m.sites = 2 + rng.IntN(11)
	}
	het := cfg.GridHet
	if het == 0 {
		het = []float64{1, 2, 4, 8}[rng.IntN(4)]
	}
	// seed table 4.1 (the prose's figures: mean 10, fastest het x slowest)
	lo, hi := 10.0, 10.0
	switch {
	case het >= 8:
		lo, hi = 2.2, 17.6
	case het >= 4:
		lo, hi = 4, 16
	case het >= 2:
		lo, hi = 6.7, 13.4
	}
	var power float64
	for power < cfg.Power && len(cfg.Speeds) == 0 {
		s := lo + rng.Float64()*(hi-lo)
		m.hosts = append(m.hosts, gridHost{site: len(m.hosts) % m.sites, speed: s, copy: -1})
		power += s
	}
	for _, s := range cfg.Speeds {
		m.hosts = append(m.hosts, gridHost{site: len(m.hosts) % m.sites, speed: s, copy: -1})
	}
	m.order = make([]int32, len(m.hosts))
	for i := range m.order {
		m.order[i] = int32(i)
	}
	rng.Shuffle(len(m.order), func(i, j int) { m.order[i], m.order[j] = m.order[j], m.order[i] })
	if m.arrivals {
		// fastest first: a slower idle host at a site where a faster one
		// waited would wait too, so schedule skips it
		slices.SortStableFunc(m.order, func(a, b int32) int { return cmp.Compare(m.hosts[b].speed, m.hosts[a].speed) })
	}

	ha, app := cfg.AppHet, cfg.App
	if ha < 0 {
		ha = []float64{0, .25, .5, .75, 1}[rng.IntN(5)]
	}
	if app == "" {
		app = []string{"vis", "search"}[rng.IntN(2)]
	}
	m.res.Seed, m.res.Sites, m.res.Hosts, m.res.GridHet = cfg.Seed, m.sites, len(m.hosts), het
	if cfg.Tasks != nil {
		names := map[string]int32{}
		for _, t := range cfg.Tasks {
			st := gridTaskState{cost: t.Cost}
			for _, f := range t.Inputs {
				i, ok := names[f.Name]
				if !ok {
					i = int32(len(m.files))
					names[f.Name] = i
					m.files = append(m.files, f.Bytes)
				}
				st.inputs = append(st.inputs, i)
			}
			m.tasks = append(m.tasks, st)
		}
		m.res.App = "trace"
	} else {
		g := float64(cfg.Granularity)
		var total int64
		for total < cfg.TotalBytes {
			size := int64(g * (1 - ha/2 + rng.Float64()*ha))
			size = max(min(size, cfg.TotalBytes-total), 1)
			cost := float64(size) * SeedCostPerByte
			if app == "search" {
				cost = 1 + rng.Float64()*(cost-1)
			}
			m.tasks = append(m.tasks, gridTaskState{cost: cost, inputs: []int32{int32(len(m.files))}})
			m.files = append(m.files, size)
			total += size
		}
		m.res.AppHet, m.res.App = ha, app
	}
	m.at = make([]uint64, len(m.files))
	m.res.Tasks = len(m.tasks)
}

// execute runs the application once, from the data left by earlier runs.
func (m *gridModel) execute() error {
	start := m.c.now
	m.pending = m.pending[:0]
	for i := range m.tasks {
		m.tasks[i].done = false
		m.pending = append(m.pending, int32(i))
		m.work += m.tasks[i].cost
		for _, f := range m.tasks[i].inputs {
			m.inBytes += m.files[f]
		}
	}
	if m.qorder != nil {
		// The queue order of an ordered policy (sjf: shortest first; cp:
		// in a bag each task's b-level is its own cost, so longest first),
		// with the task's cost on a speed-1 host as its estimate.
		slices.SortStableFunc(m.pending, func(a, b int32) int {
			ra := policy.Ready{ID: int64(a), Est: float32(m.tasks[a].cost), Prio: float32(m.tasks[a].cost)}
			rb := policy.Ready{ID: int64(b), Est: float32(m.tasks[b].cost), Prio: float32(m.tasks[b].cost)}
			switch {
			case m.qorder.Less(ra, rb):
				return -1
			case m.qorder.Less(rb, ra):
				return 1
			}
			return 0
		})
	}
	m.left = len(m.tasks)
	m.schedule()
	for m.left > 0 {
		e, ok := m.c.next()
		if !ok {
			return fmt.Errorf("grid: stalled with %d of %d tasks left", m.left, len(m.tasks))
		}
		if m.c.now > 1e12 {
			return fmt.Errorf("grid: passed 1e12 virtual seconds")
		}
		switch e.kind {
		case evGridDone:
			cp := &m.copies[e.who]
			if cp.dead {
				continue
			}
			m.finish(e.who)
		case evGridLink:
			if e.who != m.version {
				continue
			}
			m.linkDone()
		}
		m.schedule()
	}
	m.res.Makespans = append(m.res.Makespans, m.c.now-start)
	return nil
}

// finish ends a task with its winning copy and kills the others.
func (m *gridModel) finish(win int32) {
	t := &m.tasks[m.copies[win].task]
	t.done = true
	m.left--
	for _, ci := range t.copies {
		if ci != win {
			m.kill(ci)
		}
	}
	m.free(win)
	t.copies = t.copies[:0]
}

func (m *gridModel) free(ci int32) {
	cp := &m.copies[ci]
	cp.dead = true
	m.hosts[cp.host].copy = -1
}

// kill stops a losing copy: its computing is wasted work, the bytes moved
// for it are wasted bandwidth, and a transfer no other copy waits for is
// cancelled.
func (m *gridModel) kill(ci int32) {
	cp := &m.copies[ci]
	if cp.computing {
		m.wasteWork += (m.c.now - cp.start) * cp.rate
	}
	m.wasteNB += cp.moved
	if cp.missing > 0 {
		m.advance()
		changed := false
		m.xfers = slices.DeleteFunc(m.xfers, func(x *gridXfer) bool {
			i := slices.Index(x.waiters, ci)
			if i < 0 {
				return false
			}
			x.waiters = slices.Delete(x.waiters, i, i+1)
			if len(x.waiters) > 0 {
				return false
			}
			moved := x.bytes - int64(x.target-m.service)
			m.wasteNB += moved
			m.res.BytesMoved += moved
			changed = true
			return true
		})
		if changed {
			m.relink()
		}
	}
	m.free(ci)
}

// advance brings the link's service up to now.
func (m *gridModel) advance() {
	if n := len(m.xfers); n > 0 {
		m.service += (m.c.now - m.lastT) * m.bw / float64(n)
	}
	m.lastT = m.c.now
}

// relink schedules the next transfer end after the set changed.
func (m *gridModel) relink() {
	m.version++
	if len(m.xfers) == 0 {
		return
	}
	next := math.Inf(1)
	for _, x := range m.xfers {
		next = min(next, x.target)
	}
	m.c.at(m.c.now+max(next-m.service, 0)*float64(len(m.xfers))/m.bw, evGridLink, m.version)
}

// linkDone lands every transfer that has got all its bytes.
func (m *gridModel) linkDone() {
	m.advance()
	var done []*gridXfer
	m.xfers = slices.DeleteFunc(m.xfers, func(x *gridXfer) bool {
		if x.target <= m.service+1e-6*(1+m.service) {
			done = append(done, x)
			return true
		}
		return false
	})
	for _, x := range done {
		m.at[x.file] |= 1 << x.site
		m.res.BytesMoved += x.bytes
		m.copies[x.waiters[0]].moved += x.bytes
		for _, ci := range x.waiters {
			cp := &m.copies[ci]
			if cp.missing--; cp.missing == 0 {
				m.compute(ci)
			}
		}
	}
	m.relink()
}

func (m *gridModel) compute(ci int32) {
	cp := &m.copies[ci]
	cp.computing, cp.start = true, m.c.now
	cp.rate = m.hosts[cp.host].speed * (1 - m.cfg.Load*m.load.Float64())
	m.c.at(m.c.now+m.tasks[cp.task].cost/cp.rate, evGridDone, ci)
}

// startCopy puts a copy of task on host: it computes at once if the inputs
// are at the host's site, or after the missing ones arrive (joining a
// transfer already on its way there). A data-unaware policy's copy always
// stages its inputs itself.
func (m *gridModel) startCopy(task, host int32) {
	ci := int32(len(m.copies))
	m.copies = append(m.copies, gridCopy{task: task, host: host})
	m.hosts[host].copy = ci
	t := &m.tasks[task]
	if len(t.copies) > 0 {
		m.res.Copies++
	}
	t.copies = append(t.copies, ci)
	site := m.hosts[host].site
	added := false
	for _, f := range t.inputs {
		if m.aware && m.at[f]&(1<<site) != 0 {
			continue
		}
		m.copies[ci].missing++
		i := -1
		if m.aware {
			i = slices.IndexFunc(m.xfers, func(x *gridXfer) bool { return x.site == site && x.file == f })
		}
		if i >= 0 {
			m.xfers[i].waiters = append(m.xfers[i].waiters, ci)
			continue
		}
		if !added {
			m.advance()
			added = true
		}
		m.xfers = append(m.xfers, &gridXfer{site: site, file: f, bytes: m.files[f], target: m.service + float64(m.files[f]), waiters: []int32{ci}})
	}
	if added {
		m.relink()
	}
	if m.copies[ci].missing == 0 {
		m.compute(ci)
	}
}

// schedule offers every idle host to the policy, in the hosts' order.
// Once a host is told to wait, the site's other idle hosts are not asked
// until something happens: SA never waits while tasks are pending, and
// XSufferage, asked fastest first, would tell a slower idle host at the
// same site to wait too.
func (m *gridModel) schedule() {
	var waiting uint64
	for _, h := range m.order {
		host := &m.hosts[h]
		if host.copy >= 0 {
			continue
		}
		if len(m.pending) > 0 {
			if waiting&(1<<host.site) != 0 {
				continue
			}
			i, ok := m.choose(h)
			if !ok {
				m.res.Waits++
				waiting |= 1 << host.site
				continue
			}
			task := m.pending[i]
			m.pending = slices.Delete(m.pending, i, i+1)
			m.startCopy(task, h)
			continue
		}
		if m.replicator == nil {
			continue
		}
		if task, ok := m.replicate(h); ok {
			m.startCopy(task, h)
		}
	}
}

// choose returns the index in pending of the task for host h.
func (m *gridModel) choose(h int32) (int, bool) {
	if m.chooser == nil {
		return 0, true // ordered: queue order
	}
	site := m.hosts[h].site
	avail := 1 - m.cfg.Load/2
	s := policy.Snapshot{Current: policy.Site(site), CurrentSpeed: m.hosts[h].speed * avail, Net: gridNet{m}}
	if m.arrivals {
		m.future = m.future[:0]
		for i := range m.hosts {
			if int32(i) != h {
				m.future = append(m.future, policy.Arrival{Site: policy.Site(m.hosts[i].site), In: m.freeIn(int32(i)), Speed: m.hosts[i].speed * avail})
			}
		}
		s.Future = m.future
	}
	s.Ready = func(yield func(policy.Candidate) bool) {
		for i, task := range m.pending {
			t := &m.tasks[task]
			m.buf = m.buf[:0]
			for _, f := range t.inputs {
				if !m.bytesHere {
					// one input per file: the set of sites holding it
					m.buf = append(m.buf, policy.Input{Site: policy.Site(-1 - int64(m.at[f])), Bytes: m.files[f], Files: 1})
					continue
				}
				for st := range m.sites {
					if m.at[f]&(1<<st) != 0 {
						m.buf = append(m.buf, policy.Input{Site: policy.Site(st), Bytes: m.files[f], Files: 1})
					}
				}
			}
			if !yield(policy.Candidate{ID: int64(i), Runtime: t.cost, Inputs: m.buf}) {
				return
			}
		}
	}
	d := m.chooser.Choose(s)
	if d.Wait {
		return 0, false
	}
	return int(d.Job.ID), true
}

// freeIn is when host h is predicted to be free, seconds from now: what
// XSufferage's perfect information knows.
func (m *gridModel) freeIn(h int32) float64 {
	ci := m.hosts[h].copy
	if ci < 0 {
		return 0
	}
	cp := &m.copies[ci]
	if cp.computing {
		return max(cp.start+m.tasks[cp.task].cost/cp.rate-m.c.now, 0)
	}
	run := m.tasks[cp.task].cost / (m.hosts[h].speed * (1 - m.cfg.Load/2))
	n := float64(max(len(m.xfers), 1))
	var rest float64
	for _, x := range m.xfers {
		if slices.Contains(x.waiters, ci) {
			rest = max(rest, x.target-m.service)
		}
	}
	return rest*n/m.bw + run
}

// replicate asks the Replicator which running task to copy onto host h.
func (m *gridModel) replicate(h int32) (int32, bool) {
	site := m.hosts[h].site
	m.running = m.running[:0]
	for i := range m.tasks {
		t := &m.tasks[i]
		if t.done || len(t.copies) == 0 {
			continue
		}
		var local int64
		for _, f := range t.inputs {
			if m.at[f]&(1<<site) != 0 {
				local += m.files[f]
			}
		}
		m.running = append(m.running, policy.Running{ID: int64(i), Replicas: len(t.copies), LocalBytes: local, Est: float32(t.cost)})
	}
	id, ok := m.replicator.Replicate(fmt.Sprint(site), m.running)
	return int32(id), ok
}

// gridNet prices a transfer for XSufferage: from is the set of sites
// holding the file (Site -1-mask), moved from home at the share of the
// link a new transfer would get.
type gridNet struct{ m *gridModel }

func (n gridNet) Transfer(from, to policy.Site, bytes int64, files int) float64 {
	mask := uint64(-1 - int64(from))
	if to >= 0 && mask&(1<<uint(to)) != 0 {
		return 0
	}
	return float64(bytes) * float64(len(n.m.xfers)+1) / n.m.bw
}
