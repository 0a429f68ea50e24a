package dc

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/mq-hpc/mq/internal/dispatch"
	"github.com/mq-hpc/mq/internal/policy"
)

// Presence says whether a file has a replica at the asking placeholder's
// place (the catalog's answer, with staging).
type Presence interface {
	Present(path string) bool
}

// Pool is the core's side of one pick: what it knows of the ready jobs
// the pick examines, and where their inputs are (dispatch.Placement: a
// job id stands for its bundle).
type Pool interface {
	dispatch.Placement
	Presence
	// Members is the jobs ready job id stands for (itself, or its
	// bundle), when it is a candidate (take); when not, back says
	// whether it goes back on the queue after the pick.
	Members(id int64) (members []int64, take, back bool)
	// LocalBytes is the bytes of job id's inputs at the asking
	// placeholder's place, every replica counted.
	LocalBytes(id int64) int64
	// Estimate is the target and declared runtime of the job the world
	// last let go (dispatch.World.Current).
	Estimate() (target string, est float64)
	// Parked is the other placeholders parked asking now, where they
	// run (Site, Placeholder): whatever their history, they arrive now.
	// Asked only when there is a candidate to decide about.
	Parked() ([]policy.Arrival, error)
}

// Asking is the placeholder a pick is for.
type Asking struct {
	Placeholder int64
	Cur         policy.Site // where it runs
	Latency     float64     // its site's link latency (DC's placeholder latency)
	Now         time.Time
	// Staging: inputs with a replica at the placeholder's place are
	// priced there (Pool.Present).
	Staging bool
	To      Place // the placeholder's place for files, with staging
	// Log is told of a choice whose inputs are asked for (nil: nothing
	// is).
	Log *slog.Logger
	// Shapes: arrivals are priced only for the jobs their placeholders
	// could hold (dispatch.Shaped; nil: every one holds every job).
	Shapes dispatch.Shapes
	// Skip is the checks of the choosing chain that cannot refuse any
	// job of this pick (the world says so): PickFor does not ask them.
	Skip dispatch.Chain
}

// Picked is what Pick decided.
type Picked struct {
	ID     int64 // the job chosen; 0: none
	Waited bool  // the chooser said the placeholder should wait
	// Staged: the chooser's first choice (Staging) was not at the
	// placeholder's place and its inputs were asked for.
	Staged  bool
	Staging policy.Decision
	To      Place // where Staging's inputs are asked for (PickFor)
}

// Pick asks the queue's chooser (pol: DC, SA, XSufferage) which of its
// oldest ready jobs (q) the asking placeholder should get. Up to
// policy.Window jobs that chain lets go (dispatch.Examine over w) become
// candidates, a bundle as one, priced by where their inputs are (net);
// the chooser decides given the placeholders expected to ask soon
// (dispatch.Choose): a choice whose inputs are not here yet is staged and
// the placeholder gets one whose inputs are, or waits. The jobs examined
// go back on q, but the one chosen.
func (d *State) Pick(w dispatch.World, q *policy.Heap, chain dispatch.Chain, pol policy.Info, a Asking, net policy.Network, pool Pool) (Picked, error) {
	popped, cands, ins := d.popped[:0], d.cands[:0], d.inBuf[:0]
	var here Presence
	if a.Staging {
		here = pool
	}
	popped, err := dispatch.Examine(w, q, chain, popped, func(r policy.Ready) (bool, error) {
		members, take, back := pool.Members(r.ID)
		if !take {
			return back, nil
		}
		start := len(ins)
		if pol.Needs&policy.NeedsBytesHere != 0 {
			var b int64
			for _, m := range members {
				b += pool.LocalBytes(m)
			}
			if b > 0 {
				ins = append(ins, policy.Input{Site: a.Cur, Bytes: b})
			}
		} else {
			ins = d.Inputs(ins, members, a.Cur, here)
		}
		target, est := pool.Estimate()
		cands = append(cands, policy.Candidate{
			ID:        r.ID,
			QueueTime: d.QueueTime(r.ID, a.Now),
			Runtime:   d.expect.Estimate(target, est),
			Inputs:    ins[start:len(ins):len(ins)],
		})
		return true, nil
	})
	var c dispatch.Choice
	if err == nil {
		if len(cands) > 0 {
			c, err = d.decide(pol, a, net, cands, pool)
		} else {
			c.Wait = true
		}
	}
	var chosen int64
	if err == nil && !c.Wait {
		chosen = c.Job.ID
	}
	dispatch.Restore(q, popped, chosen)
	n := len(cands)
	clear(cands) // drop references to input slices
	d.popped, d.cands, d.inBuf = popped[:0], cands[:0], ins[:0]
	if err != nil {
		return Picked{}, err
	}
	p := Picked{Staged: c.Staged, Staging: c.Staging}
	switch {
	case !c.Wait:
		p.ID = chosen
		d.Changed() // the ready set, not where files are
	case n > 0:
		d.waits++
		p.Waited = true
	}
	return p, nil
}

// decide asks pol's chooser for one of cands (at least one).
func (d *State) decide(pol policy.Info, a Asking, net policy.Network, cands []policy.Candidate, pool Pool) (dispatch.Choice, error) {
	parked, err := pool.Parked()
	if err != nil {
		return dispatch.Choice{}, err
	}
	fut := append(d.arr.Predict(d.secs(a.Now), a.Placeholder, d.fut[:0]), parked...)
	snap := dispatch.Shaped(policy.Snapshot{Current: a.Cur, Future: fut, Net: net}, a.Shapes)
	d.fut = fut
	var ch policy.Chooser
	if pol.NewDC != nil {
		ch = pol.NewDC(a.Latency)
	} else {
		ch = pol.NewChooser()
	}
	return dispatch.Choose(ch, snap, cands, pool, dispatch.Patience(pol))
}

// Wait is a placeholder's request's standing "wait": it stands, and the
// request's choosing queues are passed over, until a decision may differ
// (Gen moves on) or for at most Redecide (queue time alone moves it on
// slowly). The zero value stands for nothing.
type Wait struct {
	waited bool
	gen    uint64
	at     time.Time
}

// Stands says whether w still stands at now.
func (d *State) Stands(w *Wait, now time.Time) bool {
	return w.waited && w.gen == d.gen && now.Before(w.at.Add(Redecide))
}

// Decided records a request's dispatch at now: waited, a chooser told it
// to wait and it got nothing; skipped, w stood through it (Stands).
func (d *State) Decided(w *Wait, waited, skipped bool, now time.Time) {
	switch {
	case waited:
		*w = Wait{waited: true, gen: d.gen, at: now}
	case !skipped:
		w.waited = false
	}
}

// Arrivals says, per place, the soonest placeholder arrival the last
// Pick expected, in seconds ("none expected" when none).
func (d *State) Arrivals() string {
	soonest := map[string]float64{}
	for _, a := range d.fut {
		name := d.places[a.Site].String()
		if old, ok := soonest[name]; !ok || a.In < old {
			soonest[name] = a.In
		}
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(soonest)) {
		fmt.Fprintf(&b, "%s in %.1fs; ", k, soonest[k])
	}
	if arr := strings.TrimSuffix(b.String(), "; "); arr != "" {
		return arr
	}
	return "none expected"
}

// Jobs is what a pick asks the core about the ready jobs it examines and
// the placeholders asking now.
type Jobs interface {
	// BundleOf is the bundle ready job id belongs to (ok false: none).
	BundleOf(id int64) (bundle int64, ok bool)
	// BundleNow is the jobs of id's bundle that go with it now, in order
	// (none: the bundle is held back).
	BundleNow(id int64) []int64
	// Estimate is the target and declared runtime of the job the world
	// last let go (dispatch.World.Current).
	Estimate() (target string, est float64)
	// Parked and Running are the placeholders at work: those parked
	// asking now (the asking one among them) arrive now.
	Busy
}

// Catalog is what DC asks the file catalog, through the core: whether
// files have replicas at a place, and whether they are being brought.
type Catalog interface {
	// Present says whether path has a replica at place to (never
	// Shared).
	Present(path string, to Place) bool
	// InputsPresent says whether the movable inputs of jobs ids are all at to.
	InputsPresent(ids []int64, to Place) bool
	// InputsAt says the same, asking for the missing ones.
	InputsAt(ids []int64, to Place) (bool, error)
	// StagingElsewhere says whether another place is bringing the inputs
	// of jobs ids.
	StagingElsewhere(ids []int64, to Place) bool
	// ValidSHA says whether a checksum is well formed.
	ValidSHA(sha string) bool
	Sizes
}

// PickFor is Pick with the choosing chain for placeholder a.Placeholder,
// over the core's jobs and the catalog: a bundle is one candidate,
// answered by its members; with staging, a job whose inputs another
// place is bringing is passed over, and only the job chosen is staged
// here, not every job examined. Where the placeholders run (a.Cur, and
// the others parked) is read with db for those that registered before
// this run; a.Latency is its site's link's, a.To where its jobs find
// their files (StorePlace). A staged choice is logged to a.Log.
func (d *State) PickFor(ctx context.Context, db Querier, w dispatch.World, q *policy.Heap, pol policy.Info, a Asking, jobs Jobs, cat Catalog) (Picked, error) {
	cur, err := d.PlaceholderAt(ctx, db, a.Placeholder)
	if err != nil {
		return Picked{}, err
	}
	a.Cur, a.Latency = cur, d.Link(cur).Latency
	if a.Staging {
		a.To = d.storeAt(cur)
	}
	p := &d.pool
	*p = corePool{d: d, ctx: ctx, db: db, jobs: jobs, cat: cat, a: a, groups: p.groups, seen: p.seen[:0], phs: p.phs[:0], sites: p.sites[:0]}
	clear(p.groups)
	picked, err := d.Pick(w, q, dispatch.Choosing&^a.Skip, pol, a, d.Network(), p)
	picked.To = a.To
	p.ctx, p.db, p.jobs, p.cat = nil, nil, nil, nil
	if err == nil && picked.Staged && a.Log != nil {
		c := picked.Staging
		a.Log.Info("dc: staging the chosen job's inputs to the asking placeholder", "job", c.Job.ID, "to", a.To.String(),
			"priority", c.Priority, "queue_s", c.Job.QueueTime, "arrivals", d.Arrivals())
	}
	return picked, err
}

// corePool is the Pool of PickFor.
type corePool struct {
	d      *State
	ctx    context.Context
	db     Querier
	phs    []int64          // Parked's scratch
	sites  []policy.Arrival // Parked's answer
	jobs   Jobs
	cat    Catalog
	a      Asking
	one    [1]int64          // Members' answer for a job on its own
	seen   []int64           // bundles already among the candidates
	groups map[int64][]int64 // bundles among the candidates: their members
}

var _ Pool = (*corePool)(nil)

// membersOf is the jobs candidate id stands for: its bundle, or itself.
func (p *corePool) membersOf(id int64) []int64 {
	if m, ok := p.groups[id]; ok {
		return m
	}
	return []int64{id}
}

func (p *corePool) Members(id int64) (members []int64, take, back bool) {
	p.one[0] = id
	members = p.one[:]
	if bid, inBundle := p.jobs.BundleOf(id); inBundle {
		if slices.Contains(p.seen, bid) {
			return nil, false, true
		}
		if members = p.jobs.BundleNow(id); len(members) == 0 {
			return nil, false, false // held back; pushed again when its state changes
		}
		p.seen = append(p.seen, bid)
	}
	if p.a.Staging {
		// The chooser prices the inputs that are elsewhere: only the job
		// it chooses is staged here, not every job examined.
		if p.cat.StagingElsewhere(members, p.a.To) {
			return nil, false, true // another place is bringing its inputs
		}
		if len(members) > 1 {
			if p.groups == nil {
				p.groups = map[int64][]int64{}
			}
			p.groups[id] = members
		}
	}
	return members, true, true
}

func (p *corePool) LocalBytes(id int64) int64 {
	return p.d.LocalBytes(id, p.a.Cur, p.a.To, p.a.Staging, p.cat)
}

func (p *corePool) Estimate() (string, float64) { return p.jobs.Estimate() }

func (p *corePool) Parked() ([]policy.Arrival, error) {
	p.phs = p.jobs.Parked(p.phs[:0])
	sites := p.sites[:0]
	for _, ph := range p.phs {
		if ph == p.a.Placeholder {
			continue // the asking one is here, not arriving
		}
		at, err := p.d.PlaceholderAt(p.ctx, p.db, ph)
		if err != nil {
			return nil, err
		}
		sites = append(sites, policy.Arrival{Site: at, Placeholder: ph})
	}
	p.sites = sites
	return sites, nil
}

func (p *corePool) Present(path string) bool { return replicaAt(p.cat, path, p.a.To) }

func (p *corePool) InputsPresent(id int64) bool {
	return !p.a.Staging || p.cat.InputsPresent(p.membersOf(id), p.a.To)
}

func (p *corePool) InputsAt(id int64) (bool, error) {
	if !p.a.Staging {
		return true, nil
	}
	return p.cat.InputsAt(p.membersOf(id), p.a.To)
}

// PresentAt is the catalog's answer whether a file has a replica at
// place to (a Presence, for Inputs).
func PresentAt(cat Catalog, to Place) Presence { return presentAt{cat, to} }

type presentAt struct {
	cat Catalog
	to  Place
}

func (p presentAt) Present(path string) bool { return replicaAt(p.cat, path, p.to) }

// replicaAt says whether path has a replica at place to; where the CLS
// host's filesystem is seen, none is "present" (nothing is staged there).
func replicaAt(cat Catalog, path string, to Place) bool {
	return to != Shared && cat.Present(path, to)
}
