package sim

import (
	"slices"

	"github.com/mq-hpc/mq/internal/dispatch"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/internal/stage"
)

// Live staging (Config.Staging == StagingLive) models how the live CLS
// moves inputs, instead of the thesis's placeholder copying them within
// its turn. Which job a placeholder gets is decided by the live CLS's own
// code, package dispatch, over the model's replicas (liveAsk); moving
// files follows metaqueue/catalog.go inputsAt and the CLS's stager:
//
//   - A file has replicas at any number of hosts; a copy leaves the
//     original. The CLS makes the copies, stage.DefaultWorkers at a time, each
//     from the cheapest replica; two jobs wanting one file at one host
//     share one transfer. A finished transfer adds a replica and wakes
//     the parked placeholders.
//   - A job runs only where all its inputs are. An ordered queue gives
//     the asking placeholder the first job (policy order, policy.Window
//     looked at) whose inputs are all at its host; a job looked at whose
//     inputs are missing there gets them brought ("marked" to the host),
//     but only while fewer jobs are marked to that host than the
//     placeholder's free slots (one here); a marked job is skipped
//     everywhere else until its transfers end.
//   - DC prices every candidate not marked to another host, each input
//     at its origin (producer's host, or where it started) or at the
//     asking host if a replica is there. If it chooses a job whose inputs
//     are not here, they are brought here and the placeholder gets DC's
//     choice among the candidates whose inputs are all here, else waits.
//   - A placeholder told "no job" is parked until its next turn: a
//     transfer landing or a job ending decides its request again at once
//     (the live long poll, without the CLS's per-request service time).

// noMark is a job whose inputs are not being brought anywhere.
const noMark policy.Site = -2

type stageKey struct {
	file int32
	to   policy.Site
}

// transfer is one file being brought to one host and the jobs waiting.
type transfer struct {
	key  stageKey
	jobs []int32
}

type liveState struct {
	on       bool
	reps     [][]policy.Site // per file: hosts holding a copy (external: outside)
	marks    []int32         // per host: jobs marked to it
	turnSeq  []uint64        // per host: the seq of its next turn's event
	xfers    []transfer      // every transfer asked for, by index
	inflight map[stageKey]int32
	queue    []int32 // transfers waiting for a worker, from qHead on
	qHead    int
	running  int
	parked   []int32 // placeholders parked (and some whose turn came since: phState.listed)
	spare    []int32 // wake's next parked list
	wakes    uint64  // times the state changed for parked placeholders

	// The pick's scratch: the view of the world it asks, DC's list,
	// candidates and their inputs, and what decides among them.
	ask      liveAsk
	scratch  dispatch.Scratch
	list     readyList
	cands    []policy.Candidate
	ins      []policy.Input
	chooser  policy.Chooser
	patience float64 // dispatch.Patience of the policy
	// chain is the checks the picks ask: simulated, and FitsResources
	// when resources are modelled.
	chain dispatch.Chain
}

func (m *model) setupLive(hosts int) {
	l := &m.live
	l.reps = make([][]policy.Site, len(m.w.Files))
	for i, f := range m.w.Files {
		if f.producer < 0 {
			l.reps[i] = []policy.Site{m.fileHost[i]}
		}
	}
	l.marks = make([]int32, hosts)
	l.turnSeq = make([]uint64, hosts)
	l.inflight = map[stageKey]int32{}
	l.chain = simulated
	for j := range m.jobs {
		m.jobs[j].mark = noMark
	}
}

// liveTurn says whether the turn event seq of host h still stands; a
// placeholder of h parked until this turn stops waiting.
func (m *model) liveTurn(h int32, seq uint64) bool {
	if m.live.turnSeq[h] != seq {
		return false
	}
	for _, ph := range m.hosts[h] {
		m.phs[ph].parked = false
	}
	return true
}

// chooseLive picks a job for placeholder ph by the live rule, or returns
// -1; waited says DC decided to wait with jobs ready. The rule is package
// dispatch's, the one the live CLS runs; the model answers its checks
// (liveAsk).
func (m *model) chooseLive(ph int32) (int32, bool) {
	a := &m.live.ask
	*a = liveAsk{m: m, here: policy.Site(m.phs[ph].host), ph: ph, free: 1}
	if m.heap != nil {
		return m.chooseOrderedLive(a), false
	}
	return m.chooseDCLive(ph, a)
}

// liveAsk is the model's view of the world for one placeholder's pick
// with live staging (a dispatch.World and dispatch.Placement): jobs are
// named by their submission number, as on the ready heap and list.
type liveAsk struct {
	m    *model
	here policy.Site
	ph   int32 // the asking placeholder
	free int   // its free slots (cores, when resources are modelled)
}

// simulated is the checks the model answers (liveAsk.Allows); it allows
// every other one, so the picks ask it only these.
const simulated = dispatch.Chain(1 << dispatch.InputsHere)

var (
	_ dispatch.World     = (*liveAsk)(nil)
	_ dispatch.Placement = (*liveAsk)(nil)
)

func (a *liveAsk) job(sub int64) int32 { return a.m.subs[sub-1] }

// Current is always true: the ordered heap holds no taken job (a job
// leaves it when taken) and DC's readyList skips them.
func (a *liveAsk) Current(policy.Ready) bool { return true }

// Allows answers the checks the model simulates: whether a job's inputs
// are here (asking for them within dispatch.MayStage's bound: a
// placeholder runs one job per turn, one free slot, unless resources are
// modelled) and, when resources are modelled, whether its request fits
// what the placeholder has free, by the CLS's packing module. Arrays,
// deadlines, walltimes, plans and budgets are not simulated: they allow
// every job.
func (a *liveAsk) Allows(c dispatch.Check, r policy.Ready) (bool, error) {
	if c == dispatch.FitsResources {
		return a.m.rs.pack.FitsNow(r.ID, int64(a.ph)), nil
	}
	if c != dispatch.InputsHere {
		return true, nil
	}
	m, j := a.m, a.job(r.ID)
	if len(m.w.Jobs[j].In) == 0 {
		return true, nil
	}
	if !dispatch.MayStage(m.jobs[j].mark != noMark, int(m.live.marks[a.here]), a.free) && !m.inputsPresent(j, a.here) {
		return false, nil
	}
	return m.inputsAt(j, a.here), nil
}

func (a *liveAsk) InputsPresent(sub int64) bool     { return a.m.inputsPresent(a.job(sub), a.here) }
func (a *liveAsk) InputsAt(sub int64) (bool, error) { return a.m.inputsAt(a.job(sub), a.here), nil }

// chooseOrderedLive is an ordered queue's pick (dispatch.First).
func (m *model) chooseOrderedLive(a *liveAsk) int32 {
	r, ok, _ := dispatch.First(a, m.heap, dispatch.Ordered&m.live.chain, &m.live.scratch)
	if !ok {
		return -1
	}
	j := a.job(r.ID)
	m.jobs[j].taken = true
	return j
}

// readyList is DC's ready list as dispatch pops it: oldest first, the
// taken jobs still in the list skipped, nothing removed by a look.
type readyList struct {
	m    *model
	next int
}

func (l *readyList) Pop() (policy.Ready, bool) {
	for l.next < len(l.m.ready) {
		s := l.m.ready[l.next]
		l.next++
		if !l.m.jobs[l.m.subs[s-1]].taken {
			return policy.Ready{ID: s}, true
		}
	}
	return policy.Ready{}, false
}

func (l *readyList) Push(policy.Ready) {}

// chooseDCLive is a choosing queue's pick: the candidates dispatch.Examine
// lets go, priced where DC sees their inputs, and dispatch.Choose.
func (m *model) chooseDCLive(ph int32, a *liveAsk) (int32, bool) {
	here := a.here
	l := &m.live
	cands, ins := l.cands[:0], l.ins[:0]
	l.list = readyList{m: m}
	// Examine's popped list is not kept: a look removes nothing from the
	// list.
	_, _ = dispatch.Examine(a, &l.list, dispatch.Choosing&l.chain, nil, func(r policy.Ready) (bool, error) {
		j := a.job(r.ID)
		js := &m.jobs[j]
		if js.mark != noMark && js.mark != here {
			return false, nil // another host is bringing its inputs
		}
		start := len(ins)
		ins = m.price(ins, j, here)
		job := &m.w.Jobs[j]
		cands = append(cands, policy.Candidate{
			ID: r.ID,
			// From readiness, as the live CLS counts it (readyAt): a
			// dependent job does not arrive at DC with its wait for
			// its producers already on its clock.
			QueueTime: m.c.now - js.ready,
			Runtime:   m.expect.Estimate(job.Group, job.Estimate),
			Inputs:    ins[start:len(ins):len(ins)],
		})
		return false, nil
	})
	defer func() {
		clear(cands)
		l.cands, l.ins = cands[:0], ins[:0]
		l.list = readyList{}
	}()
	if len(cands) == 0 {
		return -1, false
	}
	m.future = m.arr.Predict(m.c.now, int64(ph), m.future[:0])
	// Placeholders parked now are asking now, whatever their history.
	for _, o := range l.parked {
		if o != ph && m.phs[o].parked {
			m.future = append(m.future, policy.Arrival{Site: policy.Site(m.phs[o].host), Placeholder: int64(o)})
		}
	}
	d, _ := dispatch.Choose(l.chooser, dispatch.Shaped(policy.Snapshot{Current: here, Future: m.future, Net: m.p}, m.shapes()), cands, a, l.patience)
	if d.Wait {
		return -1, true
	}
	j := a.job(d.Job.ID)
	m.takeReady(j)
	return j, false
}

// price adds up job j's inputs by where DC sees them, appending to dst:
// at their origin, or at here if a copy is there.
func (m *model) price(dst []policy.Input, j int32, here policy.Site) []policy.Input {
	start := len(dst)
	for _, f := range m.w.Jobs[j].In {
		site := m.fileHost[f]
		if site != here && m.present(f, here) {
			site = here
		}
		i := start
		for ; i < len(dst) && dst[i].Site != site; i++ {
		}
		if i == len(dst) {
			dst = append(dst, policy.Input{Site: site})
		}
		dst[i].Bytes += m.fileSize[f]
		dst[i].Files++
	}
	return dst
}

// present says whether file f has a copy at host to. A file with no copy
// anywhere is not held back for: nothing could bring it.
func (m *model) present(f int32, to policy.Site) bool {
	reps := m.live.reps[f]
	return len(reps) == 0 || slices.Contains(reps, to)
}

// inputsPresent says, asking for nothing, whether job j's inputs are all
// at to.
func (m *model) inputsPresent(j int32, to policy.Site) bool {
	for _, f := range m.w.Jobs[j].In {
		if !m.present(f, to) {
			return false
		}
	}
	return true
}

// inputsAt says whether job j's inputs are all at to; when not, it asks
// for the missing ones and marks j as staging to there. A job marked to
// another host is not ready here.
func (m *model) inputsAt(j int32, to policy.Site) bool {
	js := &m.jobs[j]
	if js.mark != noMark && js.mark != to {
		return false
	}
	missing := false
	for _, f := range m.w.Jobs[j].In {
		if m.present(f, to) {
			continue
		}
		missing = true
		m.requestStage(f, to, j)
	}
	if !missing {
		return true
	}
	if js.xfers > 0 && js.mark == noMark {
		js.mark = to
		m.live.marks[to]++
	}
	return false
}

// requestStage asks for file f at to on behalf of job j: one transfer per
// file and host at a time, whichever jobs want it.
func (m *model) requestStage(f int32, to policy.Site, j int32) {
	l := &m.live
	js := &m.jobs[j]
	if !slices.Contains(js.stagedTo, to) {
		js.stagedTo = append(js.stagedTo, to)
	}
	k := stageKey{f, to}
	if x, ok := l.inflight[k]; ok {
		if !slices.Contains(l.xfers[x].jobs, j) {
			l.xfers[x].jobs = append(l.xfers[x].jobs, j)
			js.xfers++
		}
		return
	}
	x := int32(len(l.xfers))
	l.xfers = append(l.xfers, transfer{key: k, jobs: []int32{j}})
	js.xfers++
	l.inflight[k] = x
	l.queue = append(l.queue, x)
	m.startTransfers()
}

// startTransfers gives waiting transfers to free workers, each from the
// copy that is cheapest to move (the first of equals: the origin).
func (m *model) startTransfers() {
	l := &m.live
	for l.running < stage.DefaultWorkers && l.qHead < len(l.queue) {
		x := l.queue[l.qHead]
		l.qHead++
		if l.qHead == len(l.queue) {
			l.queue, l.qHead = l.queue[:0], 0
		}
		k := l.xfers[x].key
		size := m.fileSize[k.file]
		var best float64
		for i, from := range l.reps[k.file] {
			if t := m.p.Transfer(from, k.to, size, 1); i == 0 || t < best {
				best = t
			}
		}
		l.running++
		m.res.BytesMoved += size
		m.res.Transfers++
		m.c.after(best, evStaged, x)
	}
}

// staged ends transfer x: its host has a copy now; jobs none of whose
// transfers is left may run anywhere again.
func (m *model) staged(x int32) {
	l := &m.live
	t := &l.xfers[x]
	l.running--
	delete(l.inflight, t.key)
	if !slices.Contains(l.reps[t.key.file], t.key.to) {
		l.reps[t.key.file] = append(l.reps[t.key.file], t.key.to)
	}
	for _, j := range t.jobs {
		js := &m.jobs[j]
		if js.xfers--; js.xfers == 0 && js.mark != noMark {
			l.marks[js.mark]--
			js.mark = noMark
		}
	}
	t.jobs = nil
	m.startTransfers()
	m.wake()
}

// parkOrRun handles an empty reply reaching placeholder ph with live
// staging: if something changed since the CLS decided, it decides again
// (the request would still have been parked there) and runs what it gets;
// else the placeholder parks until its next turn. It reports whether the
// reply is handled.
func (m *model) parkOrRun(ph int32) bool {
	p := &m.phs[ph]
	switch {
	case p.wakeSeen == m.live.wakes:
	case m.rs.on:
		if p.got, _ = m.pick(ph, p.got[:0]); len(p.got) > 0 {
			m.startAll(ph)
			return true
		}
	default:
		if j, _ := m.chooseLive(ph); j >= 0 {
			p.job = j
			m.run(ph)
			return true
		}
	}
	p.parked = true
	if !p.listed {
		p.listed = true
		m.live.parked = append(m.live.parked, ph)
	}
	return false // the turn ends as usual
}

// wake decides again, in the order they first parked, for every parked
// placeholder: a transfer landed or a job ended. One given a job gets the
// reply and its host's next turn is cancelled: it is still in its turn.
func (m *model) wake() {
	l := &m.live
	l.wakes++
	// A new list: DC's decisions below read l.parked for arrivals.
	kept := l.spare[:0]
	for _, ph := range l.parked {
		p := &m.phs[ph]
		if !p.parked {
			p.listed = false
			continue // its turn came
		}
		if m.rs.on {
			if p.got, _ = m.pick(ph, p.got[:0]); len(p.got) == 0 {
				kept = append(kept, ph)
				continue
			}
		} else {
			j, _ := m.chooseLive(ph)
			if j < 0 {
				kept = append(kept, ph)
				continue
			}
			p.job = j
		}
		p.parked, p.listed = false, false
		l.turnSeq[p.host] = 0
		m.c.after(m.oneWay, evReply, ph)
	}
	l.parked, l.spare = kept, l.parked[:0]
}
