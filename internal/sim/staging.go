package sim

import (
	"slices"

	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/internal/stage"
)

// Live staging (Config.Staging == StagingLive) models how the live CLS
// moves inputs (metaqueue/dispatch.go pickFrom and dataReady,
// metaqueue/data.go pickDC, metaqueue/catalog.go inputsAt), instead of the
// thesis's placeholder copying them within its turn:
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

	aside []policy.Ready
	cands []policy.Candidate
	ins   []policy.Input
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
// -1; waited says DC decided to wait with jobs ready.
func (m *model) chooseLive(ph int32) (int32, bool) {
	if m.heap != nil {
		return m.chooseOrderedLive(ph), false
	}
	return m.chooseDCLive(ph)
}

func (m *model) chooseOrderedLive(ph int32) int32 {
	here := policy.Site(m.phs[ph].host)
	aside := m.live.aside[:0]
	j := int32(-1)
	for range policy.Window {
		r, ok := m.heap.Pop()
		if !ok {
			break
		}
		c := m.subs[r.ID-1]
		if m.dataReady(c, here) {
			j = c
			break
		}
		aside = append(aside, r)
	}
	for _, r := range aside {
		m.heap.Push(r)
	}
	m.live.aside = aside[:0]
	if j >= 0 {
		m.jobs[j].taken = true
	}
	return j
}

// dataReady says whether job j has its inputs at here, asking for them
// when not, for no more jobs than the placeholder's free slots (one).
func (m *model) dataReady(j int32, here policy.Site) bool {
	if len(m.w.Jobs[j].In) == 0 {
		return true
	}
	if m.jobs[j].mark == noMark && m.live.marks[here] >= 1 && !m.inputsPresent(j, here) {
		return false
	}
	return m.inputsAt(j, here)
}

func (m *model) chooseDCLive(ph int32) (int32, bool) {
	here := policy.Site(m.phs[ph].host)
	l := &m.live
	cands, ins := l.cands[:0], l.ins[:0]
	examined := 0
	for _, s := range m.ready {
		if examined == policy.Window {
			break
		}
		j := m.subs[s-1]
		js := &m.jobs[j]
		if js.taken {
			continue
		}
		examined++
		if js.mark != noMark && js.mark != here {
			continue // another host is bringing its inputs
		}
		start := len(ins)
		ins = m.price(ins, j, here)
		job := &m.w.Jobs[j]
		cands = append(cands, policy.Candidate{
			ID: s,
			// From readiness, as the live CLS counts it (readyAt): a
			// dependent job does not arrive at DC with its wait for
			// its producers already on its clock.
			QueueTime: m.c.now - js.ready,
			Runtime:   m.expect.Estimate(job.Group, job.Estimate),
			Inputs:    ins[start:len(ins):len(ins)],
		})
	}
	defer func() {
		clear(cands)
		l.cands, l.ins = cands[:0], ins[:0]
	}()
	if len(cands) == 0 {
		return -1, false
	}
	m.future = m.arr.Predict(m.c.now, int64(ph), m.future[:0])
	// Placeholders parked now are asking now, whatever their history.
	for _, o := range l.parked {
		if o != ph && m.phs[o].parked {
			m.future = append(m.future, policy.Arrival{Site: policy.Site(m.phs[o].host)})
		}
	}
	snap := policy.Snapshot{Current: here, Future: m.future, Ready: slices.Values(cands), Net: m.p}
	d := m.dc.Choose(snap)
	if !d.Wait {
		chosen := m.subs[d.Job.ID-1]
		if !m.inputsAt(chosen, here) {
			// Its inputs are on their way here: meanwhile the
			// placeholder gets DC's choice among those already here.
			rest := slices.DeleteFunc(slices.Clone(cands), func(c policy.Candidate) bool {
				return c.ID == d.Job.ID || !m.inputsPresent(m.subs[c.ID-1], here)
			})
			d = policy.Decision{Wait: true}
			if len(rest) > 0 {
				snap.Ready = slices.Values(rest)
				d = m.dc.Choose(snap)
			}
		}
	}
	if d.Wait {
		return -1, true
	}
	j := m.subs[d.Job.ID-1]
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
	if p.wakeSeen != m.live.wakes {
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
		j, _ := m.chooseLive(ph)
		if j < 0 {
			kept = append(kept, ph)
			continue
		}
		p.parked, p.listed = false, false
		p.job = j
		l.turnSeq[p.host] = 0
		m.c.after(m.oneWay, evReply, ph)
	}
	l.parked, l.spare = kept, l.parked[:0]
}
