package dc

import (
	"slices"

	"github.com/mq-hpc/mq/internal/dispatch"
	"github.com/mq-hpc/mq/internal/policy"
)

// Jobs is what a pick asks the core about the ready jobs it examines and
// the placeholders asking now.
type Jobs interface {
	// BundleOf is the bundle ready job id belongs to (ok false: none).
	BundleOf(id int64) (bundle int64, ok bool)
	// BundleNow is the jobs of id's bundle that go with it now, in order
	// (none: the bundle is held back).
	BundleNow(id int64) []int64
	// LocalBytes is the bytes of job id's inputs at the asking
	// placeholder's place (cur, to), every replica counted.
	LocalBytes(id int64, cur policy.Site, to Place) int64
	// Estimate is the target and declared runtime of the job the world
	// last let go (dispatch.World.Current).
	Estimate() (target string, est float64)
	// Parked is where the other placeholders parked asking now run.
	Parked() ([]policy.Site, error)
}

// Catalog is what DC asks the file catalog, through the core: whether
// files have replicas at a place, and whether they are being brought.
type Catalog interface {
	// Present says whether path has a replica at place to; at a place
	// sharing the CLS host's filesystem, none is "present".
	Present(path string, to Place) bool
	// InputsPresent says whether the movable inputs of jobs ids are all at to.
	InputsPresent(ids []int64, to Place) bool
	// InputsAt says the same, asking for the missing ones.
	InputsAt(ids []int64, to Place) (bool, error)
	// StagingElsewhere says whether another place is bringing the inputs
	// of jobs ids.
	StagingElsewhere(ids []int64, to Place) bool
	// IsShared says whether a site sees the CLS host's filesystem.
	IsShared(site string) bool
	// ValidSHA says whether a checksum is well formed.
	ValidSHA(sha string) bool
}

// PickFor is Pick with the choosing chain for the placeholder a asks
// for, over the core's jobs and the catalog: a bundle is one candidate,
// answered by its members; with staging, a job whose inputs another
// place is bringing is passed over, and only the job chosen is staged
// here, not every job examined. a.Latency is its site's link's.
func (d *State) PickFor(w dispatch.World, q *policy.Heap, pol policy.Info, a Asking, jobs Jobs, cat Catalog) (Picked, error) {
	a.Latency = d.Link(a.Cur).Latency
	p := &d.pool
	*p = corePool{jobs: jobs, cat: cat, a: a, groups: p.groups, seen: p.seen[:0]}
	clear(p.groups)
	picked, err := d.Pick(w, q, dispatch.Choosing, pol, a, d.Network(), p)
	p.jobs, p.cat = nil, nil
	return picked, err
}

// corePool is the Pool of PickFor.
type corePool struct {
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

func (p *corePool) LocalBytes(id int64) int64 { return p.jobs.LocalBytes(id, p.a.Cur, p.a.To) }

func (p *corePool) Estimate() (string, float64) { return p.jobs.Estimate() }

func (p *corePool) Parked() ([]policy.Site, error) { return p.jobs.Parked() }

func (p *corePool) Present(path string) bool { return p.cat.Present(path, p.a.To) }

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

func (p presentAt) Present(path string) bool { return p.cat.Present(path, p.to) }
