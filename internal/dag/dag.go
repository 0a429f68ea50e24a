// Package dag decides when jobs may run: it keeps targets, the prerequisite
// edges between them, and the derived state (Waiting, Queued, Blocked) of
// every job that has not started. It is pure logic over data the metaqueue
// hands it; it never touches the database.
//
// A target is complete when it has at least one job and all its jobs are
// Done. It is bad while any of its jobs is Failed, Deleted or Blocked. It
// has ended when it has at least one job and every job is Done or bad: a
// Blocked job counts as ended, since it cannot run until someone acts and a
// cleanup job behind it must not wait for ever.
//
// A job names two kinds of prerequisite targets: after-ok ones (Prereqs)
// must be complete, after-any ones (AfterAny) must have ended. A job that
// has not started is Blocked if an after-ok prerequisite is bad, else
// Waiting if an after-ok one is incomplete or an after-any one has not
// ended, else Queued. An after-any prerequisite never blocks.
package dag

import (
	"fmt"
	"hash/maphash"
	"slices"
	"strings"

	"github.com/mq-hpc/mq/job"
)

// TargetID identifies a target; ids are dense from 1.
type TargetID int32

// Node is what the graph keeps of a live (not terminal) job: the job's
// target, its state and the targets it needs. Queue and Est are carried for
// the metaqueue, which has no other in-memory copy.
type Node struct {
	Target  TargetID
	Queue   int32
	Est     float32
	State   job.State
	Prereqs []TargetID
	// AfterAny are targets whose jobs must all have ended, in any state.
	AfterAny []TargetID
}

// Change is one job state change the graph made or accepted.
type Change struct {
	ID       int64
	Queue    int32
	Target   TargetID
	Est      float32
	From, To job.State // From is 0 for a new job
}

// target is kept small and pointer-free (a million targets):
// its name is in the arena, and a dependent or prerequisite list of one
// is inline, a longer one in the Graph's side lists.
type target struct {
	name        nameRef
	total, done int32
	bad         int32 // jobs Failed, Deleted or Blocked
	// Pending jobs naming this target (lazily pruned): none if depList is
	// 0, dep[0] if -1, else Graph.depLists[depList].
	dep     [1]int64
	depList int32
	// The union of its jobs' prerequisites (for cycle checks): none if
	// preList is 0, pre if -1, else Graph.preLists[preList]. pre keeps the
	// first one once set, a list then or not: pre[:] is the one-element
	// list of the jobs needing just it (a pipeline stage's), shared.
	pre     [1]TargetID
	preList int32
	status  uint8 // last status seen by dependents: statusComplete|statusBad|statusEnded
	// queue is 1 + the queue of its first job (0: none seen, or a queue
	// id past 65534): how the metaqueue tells which queues feed which (LP
	// stages). 16 bits and a 4-byte name keep a target in 40 bytes.
	queue uint16
}

// A target's status bits, as its dependents last saw them.
const (
	statusComplete uint8 = 1 << iota
	statusBad
	statusEnded
)

// statusOf derives a target's status from its counters.
func (tg *target) statusOf() uint8 {
	var s uint8
	if tg.total > 0 && tg.done == tg.total {
		s |= statusComplete
	}
	if tg.bad > 0 {
		s |= statusBad
	}
	if tg.total > 0 && tg.done+tg.bad == tg.total {
		s |= statusEnded
	}
	return s
}

// Graph is the dependency state of a metaqueue. Not safe for concurrent
// use: the metaqueue's single writer owns it.
type Graph struct {
	targets  targetTable // id 0 unused
	names    nameArena
	byName   nameIndex
	depLists [][]int64    // index 0 unused
	preLists [][]TargetID // index 0 unused
	jobs     jobTable
	// longEdges indexes the prerequisites of targets with many (AddEdges).
	longEdges map[TargetID]map[TargetID]struct{}

	changes []Change
	work    []TargetID
}

// New returns an empty graph.
func New() *Graph {
	g := &Graph{byName: nameIndex{seed: maphash.MakeSeed()}, depLists: make([][]int64, 1), preLists: make([][]TargetID, 1)}
	g.targets.add() // id 0
	return g
}

// targetTable keeps targets in pages of 1<<targetPageBits: a bulk submit may
// add a million targets, and growing one slice would copy (and fault in)
// the earlier ones again and again; pages never move.
type targetTable struct {
	pages []*[1 << targetPageBits]target
	n     int
}

const targetPageBits = 10

func (tt *targetTable) at(t TargetID) *target {
	return &tt.pages[t>>targetPageBits][t&(1<<targetPageBits-1)]
}

func (tt *targetTable) len() int { return tt.n }

// add appends a zero target and returns its id.
func (tt *targetTable) add() TargetID {
	if tt.n>>targetPageBits == len(tt.pages) {
		tt.pages = append(tt.pages, new([1 << targetPageBits]target))
	}
	id := TargetID(tt.n)
	tt.n++
	return id
}

// Lookup returns the id of a named target.
func (g *Graph) Lookup(name string) (TargetID, bool) {
	return g.byName.lookup(name, g)
}

// Name returns a target's name.
func (g *Graph) Name(t TargetID) string { return g.names.get(g.targets.at(t).name) }

// NextTargetID is the id AddTarget will assign next.
func (g *Graph) NextTargetID() TargetID { return TargetID(g.targets.len()) }

// AddTarget creates a target with the next id. The caller has checked the
// name is new.
func (g *Graph) AddTarget(name string) TargetID {
	id := g.targets.add()
	g.targets.at(id).name = g.names.add(name)
	g.byName.insert(name, id)
	return id
}

// LoadTarget creates a target with a given id while loading from storage.
func (g *Graph) LoadTarget(id TargetID, name string) {
	for TargetID(g.targets.len()) <= id {
		g.targets.add()
	}
	g.targets.at(id).name = g.names.add(name)
	g.byName.insert(name, id)
}

// AddEdges records that target t's jobs need prereqs (after-ok or
// after-any alike: both order jobs, so both count for cycles). Edges are never
// removed: a deleted job may be rerun, so cycle checks stay conservative.
// A short list is deduplicated by scanning; past longEdges prerequisites a
// set takes over, so a target fed by 100,000 pipelines costs linear time.
func (g *Graph) AddEdges(t TargetID, prereqs []TargetID) {
	tg := g.targets.at(t)
	set := g.longEdges[t]
outer:
	for _, p := range prereqs {
		if set != nil {
			if _, dup := set[p]; dup {
				continue
			}
			set[p] = struct{}{}
		} else {
			for _, q := range g.prereqsOf(tg) {
				if q == p {
					continue outer
				}
			}
		}
		switch tg.preList {
		case 0:
			tg.pre[0], tg.preList = p, -1
			continue
		case -1:
			g.preLists = append(g.preLists, []TargetID{tg.pre[0], p})
			tg.preList = int32(len(g.preLists) - 1) // pre stays: see target
			continue
		}
		have := append(g.preLists[tg.preList], p)
		g.preLists[tg.preList] = have
		if set == nil && len(have) > longEdges {
			if g.longEdges == nil {
				g.longEdges = map[TargetID]map[TargetID]struct{}{}
			}
			set = make(map[TargetID]struct{}, 2*len(have))
			for _, q := range have {
				set[q] = struct{}{}
			}
			g.longEdges[t] = set
		}
	}
}

// prereqsOf returns a target's prerequisites; shared, not to be modified.
// One is the target's own pre[:].
func (g *Graph) prereqsOf(tg *target) []TargetID {
	switch tg.preList {
	case 0:
		return nil
	case -1:
		return tg.pre[:]
	}
	return g.preLists[tg.preList]
}

// depsOf returns the pending jobs naming a target (some may have started
// or ended since).
func (g *Graph) depsOf(tg *target) []int64 {
	switch tg.depList {
	case 0:
		return nil
	case -1:
		return tg.dep[:]
	}
	return g.depLists[tg.depList]
}

// longEdges is how many prerequisites a target lists before AddEdges
// keeps a set of them.
const longEdges = 16

// Edges are the target -> prerequisite edges a submission would add, by
// target name.
type Edges interface {
	// EachTarget calls f with every target given new edges, until f
	// returns false.
	EachTarget(f func(target string) bool)
	// Prereqs returns a target's new prerequisites, nil if none.
	Prereqs(target string) []string
}

// EdgeMap is Edges in a map.
type EdgeMap map[string][]string

func (m EdgeMap) EachTarget(f func(string) bool) {
	for n := range m {
		if !f(n) {
			return
		}
	}
}

func (m EdgeMap) Prereqs(target string) []string { return m[target] }

// FindCycle reports whether adding edges (target name -> prerequisite
// names) to the graph would make a cycle, and returns one as a readable
// path ("a -> b -> a"), or "" if none. A long cycle is shortened in the
// middle, so an error naming it stays one readable line.
func (g *Graph) FindCycle(edges map[string][]string) string { return g.FindCycleIn(EdgeMap(edges)) }

// FindCycleIn is FindCycle over any Edges.
//
// The walk is iterative: a submission may be one chain of a million
// targets, deeper than a recursive walk should go.
func (g *Graph) FindCycleIn(edges Edges) string {
	const (
		white = 0
		grey  = 1
		black = 2
	)
	// Not sized for every target: most of a big submission's are never
	// coloured (see sink), and a map of millions was most of its peak.
	color := map[string]uint8{}
	// A frame holds a target's prerequisites, looked up once: first the new
	// edges, then the graph's.
	type frame struct {
		name string
		next int // index of the next prerequisite to visit
		add  []string
		have []TargetID
	}
	frameWith := func(n string, add []string) frame {
		f := frame{name: n, add: add}
		if id, ok := g.Lookup(n); ok {
			f.have = g.prereqsOf(g.targets.at(id))
		}
		return f
	}
	frameOf := func(n string) frame { return frameWith(n, edges.Prereqs(n)) }
	sink := func(n string) bool {
		f := frameOf(n)
		return len(f.add) == 0 && len(f.have) == 0
	}
	var stack []frame
	walk := func(root string) string {
		if color[root] != white {
			return ""
		}
		f := frameWith(root, edges.Prereqs(root))
		// A target whose prerequisites all need nothing is on no cycle
		// (nor is anything through it): most of a pipeline submit's
		// targets are, and need no colouring.
		if !slices.ContainsFunc(f.add, func(p string) bool { return !sink(p) }) &&
			!slices.ContainsFunc(f.have, func(p TargetID) bool { return !sink(g.Name(p)) }) {
			return ""
		}
		color[root] = grey
		stack = append(stack[:0], f)
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			var p string
			switch i := top.next; {
			case i < len(top.add):
				p = top.add[i]
			case i-len(top.add) < len(top.have):
				p = g.Name(top.have[i-len(top.add)])
			default:
				color[top.name] = black
				stack = stack[:len(stack)-1]
				continue
			}
			top.next++
			f := frameOf(p)
			if len(f.add) == 0 && len(f.have) == 0 {
				// A target needing nothing is on no cycle: it need not be
				// coloured (most prerequisites of a pipeline submit are).
				continue
			}
			switch color[p] {
			case grey:
				i := len(stack) - 1
				for i > 0 && stack[i].name != p {
					i--
				}
				path := make([]string, 0, len(stack)-i+1)
				for _, f := range stack[i:] {
					path = append(path, f.name)
				}
				return cyclePath(append(path, p))
			case white:
				color[p] = grey
				stack = append(stack, f)
			}
		}
		return ""
	}
	found := ""
	edges.EachTarget(func(root string) bool {
		found = walk(root)
		return found == ""
	})
	return found
}

// cyclePath joins a cycle's targets with arrows, keeping the first and last
// ten of a long one.
func cyclePath(path []string) string {
	const keep = 10
	if len(path) <= 2*keep+1 {
		return strings.Join(path, " -> ")
	}
	return strings.Join(path[:keep], " -> ") + fmt.Sprintf(" -> ... (%d more) -> ", len(path)-2*keep) +
		strings.Join(path[len(path)-keep:], " -> ")
}

// Node returns a live job's node. Its Prereqs are shared: do not modify them.
func (g *Graph) Node(id int64) (Node, bool) {
	n := g.jobs.get(id)
	if n == nil {
		return Node{}, false
	}
	return g.jobs.node(n, &g.targets), true
}

// State returns a live job's state, or 0 if it is not live.
func (g *Graph) State(id int64) job.State {
	if n := g.jobs.get(id); n != nil {
		return n.state
	}
	return 0
}

// Live is the number of live jobs.
func (g *Graph) Live() int { return g.jobs.live }

// Complete reports whether target t is complete.
func (g *Graph) Complete(t TargetID) bool {
	tg := g.targets.at(t)
	return tg.total > 0 && tg.done == tg.total
}

// Ended reports whether every job of target t has ended, in any state
// (Blocked included): what an after-any prerequisite waits for.
func (g *Graph) Ended(t TargetID) bool {
	return g.targets.at(t).statusOf()&statusEnded != 0
}

// Counts returns target t's job total, Done and bad counts.
func (g *Graph) Counts(t TargetID) (total, done, bad int) {
	tg := g.targets.at(t)
	return int(tg.total), int(tg.done), int(tg.bad)
}

// AddJob adds a new job and returns every state change that follows, the
// new job's own first (From 0). Its State is derived, unless it is Held:
// a job submitted held stays so until Release.
func (g *Graph) AddJob(id int64, j Node) []Change {
	g.changes = g.changes[:0]
	if j.State != job.Held {
		j.State = g.eval(j.Prereqs, j.AfterAny)
	}
	g.jobs.put(id, j, &g.targets)
	if j.State != job.Held {
		g.listDeps(id, j.Prereqs)
		g.listDeps(id, j.AfterAny)
	}
	tg := g.targets.at(j.Target)
	tg.total++
	tg.noteQueue(j.Queue)
	g.count(tg, 0, j.State)
	g.changes = append(g.changes, Change{ID: id, Queue: j.Queue, Target: j.Target, Est: j.Est, To: j.State})
	g.touch(j.Target)
	g.settle()
	return g.changes
}

// Set moves a live job to a new state: Executing (dispatched), or an end
// state (Done, Failed, Deleted). Pending states are derived; use Requeue,
// Hold and Release.
// It returns the change and every change that follows.
func (g *Graph) Set(id int64, to job.State) ([]Change, error) {
	j, ok := g.Node(id)
	if !ok {
		return nil, fmt.Errorf("job %d is not live", id)
	}
	if to.Pending() {
		return nil, fmt.Errorf("job %d: state %s is derived, not set", id, to)
	}
	if to == job.Held {
		return nil, fmt.Errorf("job %d: use Hold to hold it", id)
	}
	g.changes = g.changes[:0]
	g.move(id, j, to)
	g.settle()
	return g.changes, nil
}

// Requeue returns an executing job to the pending states (its lease expired
// or it will be retried); it becomes Queued unless a prerequisite changed
// meanwhile.
func (g *Graph) Requeue(id int64) ([]Change, error) {
	j, ok := g.Node(id)
	if !ok || j.State != job.Executing {
		return nil, fmt.Errorf("job %d is not executing", id)
	}
	return g.toPending(id, j), nil
}

// toPending moves job id (node j) to the state its prerequisites give it
// (Queued, Waiting or Blocked) and returns the changes.
func (g *Graph) toPending(id int64, j Node) []Change {
	g.changes = g.changes[:0]
	g.listDeps(id, j.Prereqs)
	g.listDeps(id, j.AfterAny)
	g.move(id, j, g.eval(j.Prereqs, j.AfterAny))
	g.settle()
	return g.changes
}

// SetEst changes a live job's estimate (mqalter). The changes it brings
// to the job's ready entry are the caller's: the graph's own never read
// it.
func (g *Graph) SetEst(id int64, est float32) error {
	n := g.jobs.get(id)
	if n == nil {
		return fmt.Errorf("job %d is not live", id)
	}
	n.est = est
	return nil
}

// Hold keeps a Waiting or Queued job from running until Release. Its
// target stays incomplete, so its dependents keep waiting.
func (g *Graph) Hold(id int64) ([]Change, error) {
	j, ok := g.Node(id)
	if !ok || (j.State != job.Waiting && j.State != job.Queued) {
		return nil, fmt.Errorf("job %d is not waiting or queued", id)
	}
	g.changes = g.changes[:0]
	g.move(id, j, job.Held)
	g.settle()
	return g.changes, nil
}

// Release returns a held job to the state its prerequisites give it
// (Queued, Waiting, or Blocked if one failed meanwhile).
func (g *Graph) Release(id int64) ([]Change, error) {
	j, ok := g.Node(id)
	if !ok || j.State != job.Held {
		return nil, fmt.Errorf("job %d is not held", id)
	}
	return g.toPending(id, j), nil
}

// Revive brings a terminal job (from = Done, Failed or Deleted) back as
// pending, for a rerun. j carries its target, queue, estimate and prereqs.
func (g *Graph) Revive(id int64, j Node, from job.State) ([]Change, error) {
	if g.jobs.get(id) != nil {
		return nil, fmt.Errorf("job %d is live", id)
	}
	if !from.Terminal() {
		return nil, fmt.Errorf("job %d: %s is not an end state", id, from.Name())
	}
	g.changes = g.changes[:0]
	j.State = from
	g.jobs.put(id, j, &g.targets)
	j, _ = g.Node(id) // Prereqs now the interned copy
	g.listDeps(id, j.Prereqs)
	g.listDeps(id, j.AfterAny)
	g.move(id, j, g.eval(j.Prereqs, j.AfterAny))
	g.settle()
	return g.changes, nil
}

// LoadJob adds a job as stored, with its stored state and no cascade, while
// loading. Terminal jobs only count toward their target.
func (g *Graph) LoadJob(id int64, j Node) {
	tg := g.targets.at(j.Target)
	tg.total++
	tg.noteQueue(j.Queue)
	g.count(tg, 0, j.State)
	if j.State.Terminal() {
		return
	}
	g.jobs.put(id, j, &g.targets)
	if j.State.Pending() {
		g.listDeps(id, j.Prereqs)
		g.listDeps(id, j.AfterAny)
	}
}

// LoadCounts adds n terminal jobs in state s to target t while loading, for
// jobs not loaded one by one.
func (g *Graph) LoadCounts(t TargetID, s job.State, n int) {
	tg := g.targets.at(t)
	tg.total += int32(n)
	if s == job.Done {
		tg.done += int32(n)
	}
	if s.Bad() {
		tg.bad += int32(n)
	}
}

// Reconcile re-derives every pending job's state after loading and returns
// the changes needed to make storage agree (none if it already did).
func (g *Graph) Reconcile() []Change {
	g.changes = g.changes[:0]
	for t := 1; t < g.targets.len(); t++ {
		tg := g.targets.at(TargetID(t))
		tg.status = tg.statusOf()
	}
	var stale []int64
	g.jobs.each(func(id int64, n *slot) {
		if n.state.Pending() {
			ok, after := g.jobs.prereqs(n, &g.targets)
			if g.eval(ok, after) != n.state {
				stale = append(stale, id)
			}
		}
	})
	for _, id := range stale {
		if j, ok := g.Node(id); ok && j.State.Pending() {
			if s := g.eval(j.Prereqs, j.AfterAny); s != j.State {
				g.move(id, j, s)
			}
		}
	}
	g.settle()
	return g.changes
}

// eval derives a pending job's state from its after-ok prerequisites
// (prereqs) and its after-any ones (afterAny).
func (g *Graph) eval(prereqs, afterAny []TargetID) job.State {
	s := job.Queued
	for _, p := range prereqs {
		tg := g.targets.at(p)
		if tg.bad > 0 {
			return job.Blocked
		}
		if tg.total == 0 || tg.done != tg.total {
			s = job.Waiting
		}
	}
	for _, p := range afterAny {
		if tg := g.targets.at(p); tg.total == 0 || tg.done+tg.bad != tg.total {
			s = job.Waiting
		}
	}
	return s
}

func (g *Graph) listDeps(id int64, prereqs []TargetID) {
	for _, p := range prereqs {
		tg := g.targets.at(p)
		switch tg.depList {
		case 0:
			tg.dep[0], tg.depList = id, -1
		case -1:
			g.depLists = append(g.depLists, []int64{tg.dep[0], id})
			tg.dep[0], tg.depList = 0, int32(len(g.depLists)-1)
		default:
			g.depLists[tg.depList] = append(g.depLists[tg.depList], id)
		}
	}
}

func (g *Graph) count(tg *target, from, to job.State) {
	if from == job.Done {
		tg.done--
	}
	if to == job.Done {
		tg.done++
	}
	if from.Bad() {
		tg.bad--
	}
	if to.Bad() {
		tg.bad++
	}
}

// move changes a live job's state, updates its target's counters and
// schedules its dependents for re-evaluation if the target's status flips.
func (g *Graph) move(id int64, j Node, to job.State) {
	from := j.State
	if from == to {
		return
	}
	g.count(g.targets.at(j.Target), from, to)
	if to.Terminal() {
		g.jobs.remove(id)
	} else {
		g.jobs.get(id).state = to
	}
	g.changes = append(g.changes, Change{ID: id, Queue: j.Queue, Target: j.Target, Est: j.Est, From: from, To: to})
	g.touch(j.Target)
}

func (g *Graph) touch(t TargetID) {
	tg := g.targets.at(t)
	if s := tg.statusOf(); s != tg.status {
		tg.status = s
		g.work = append(g.work, t)
	}
}

// settle re-evaluates dependents of targets whose status flipped, until
// nothing changes. It terminates because the target graph is acyclic.
func (g *Graph) settle() {
	for len(g.work) > 0 {
		t := g.work[len(g.work)-1]
		g.work = g.work[:len(g.work)-1]
		tg := g.targets.at(t)
		deps := g.depsOf(tg)
		kept := deps[:0]
		for _, id := range deps {
			j, ok := g.Node(id)
			if !ok || !j.State.Pending() {
				continue // started or ended: listed again if it ever returns
			}
			kept = append(kept, id)
			if s := g.eval(j.Prereqs, j.AfterAny); s != j.State {
				g.move(id, j, s)
			}
		}
		// clear the tail so pruned ids do not pin memory
		clear(deps[len(kept):])
		switch {
		case tg.depList > 0:
			g.depLists[tg.depList] = kept
		case len(kept) == 0:
			tg.depList = 0
		}
	}
}
