package copies

import (
	"slices"

	"github.com/mq-hpc/mq/internal/policy"
)

// Ask is the core's side of one look for a copy, for one asking
// placeholder: the conditions the index does not keep.
type Ask interface {
	// Copyable says whether job id, a candidate of queue q, may be
	// copied for the asker now: it executes in q, may run as several
	// attempts, runs apart and not at the asker, fits the asker's
	// walltime and is affordable at its site.
	Copyable(q int32, id int64) bool
	// LocalBytes is how many bytes of job id's inputs are at the asker's
	// site.
	LocalBytes(id int64) int64
	// Inputs lists the files job id reads, whose moves make its local
	// bytes stale: asked once, when they are first computed.
	Inputs(id int64) []string
	// Est is job id's expected runtime in seconds (0: unknown).
	Est(id int64) float32
	// Here says whether job id's inputs are at the asker's place (always,
	// without staging): a job whose inputs are on their way may be copied
	// once they land.
	Here(id int64) (bool, error)
	// Ready says whether queue q has a ready job: it then runs that
	// rather than a copy.
	Ready(q int32) bool
}

// Look is one look for a copy by one asking placeholder.
type Look struct {
	key  uint32 // its Where, numbered
	site string // its site's name, as a Replicator sees it
	skip []int64
}

// Look starts a look for a copy at w (site named site). untold counts the
// core's data generation moves that said nothing of what moved: when it
// changed since the last look, every local bytes figure is forgotten.
func (c *Copies) Look(w Where, site string, untold uint64) Look {
	x := &c.idx
	if untold != x.untold {
		x.untold = untold
		x.epoch++
	}
	key, ok := x.keys[w]
	if !ok {
		key = uint32(len(x.keys) + 1)
		x.keys[w] = key
	}
	return Look{key: key, site: site}
}

// Unskip forgets the jobs skipped: the look moves on to another queue.
func (l *Look) Unskip() { l.skip = l.skip[:0] }

// Skip leaves job id out of the rest of the look (its inputs are not at
// the asker's place yet).
func (l *Look) Skip(id int64) { l.skip = append(l.skip, id) }

// Queue is what a choice needs of the queue looked at.
type Queue struct {
	ID         int32
	Rep        policy.Replicator
	Most       int  // the bound on attempts running at once (0: none)
	NeedsFiles bool // its policy reads local bytes
}

// MaxTries bounds the jobs one look tries, per queue, whose inputs turn
// out not to be at the asker's place.
const MaxTries = 8

// Pick chooses a running job to copy for look l: from the first of qs
// (the queues that copy and have no ready job, in the core's order)
// whose Replicator chooses one whose inputs are Here, trying at most
// MaxTries per queue. It returns the job and the index of its queue in
// qs, or 0 for none.
func (c *Copies) Pick(l *Look, qs []Queue, a Ask) (id int64, q int, err error) {
	for i, cq := range qs {
		// Only beside an attempt kept apart in scratch that has not won
		// (the index holds those): one run in the working directory
		// (dispatched before its queue copied) would write its outputs
		// over the winner's.
		if !c.Has(cq.ID) {
			continue
		}
		l.Unskip()
		for try := 0; try < MaxTries; try++ {
			id := c.Choose(l, cq, a)
			if id == 0 {
				break
			}
			here, err := a.Here(id)
			if err != nil {
				return 0, 0, err
			}
			if here {
				return id, i, nil
			}
			// Its inputs are on their way: it may be copied once they
			// land (the data generation moves on then).
			l.Skip(id)
		}
	}
	return 0, 0, nil
}

// Choose is what q's Replicator would choose among q's candidates for
// look l (less those skipped), or 0 for none. WQR and Storage Affinity
// walk the fewest-attempts bucket that has a candidate; another
// Replicator is shown every candidate.
func (c *Copies) Choose(l *Look, q Queue, a Ask) int64 {
	b := c.idx.queues[q.ID]
	if b == nil {
		return 0
	}
	var affinity bool
	var maxRep int
	switch r := q.Rep.(type) {
	case policy.WQR:
		maxRep = r.MaxReplicas
	case policy.StorageAffinity:
		affinity, maxRep = true, r.MaxReplicas
	default:
		return c.chooseAny(l, q, b, a)
	}
	if affinity && !q.NeedsFiles {
		return 0 // no job has local bytes as the policy sees them
	}
	for n := 1; n <= len(b.by); n++ {
		if q.Most > 0 && n >= q.Most || maxRep > 0 && n >= maxRep {
			break
		}
		bk := b.by[n-1]
		var best, bestLocal int64
		for i := range bk {
			e := &bk[i]
			if best > 0 && !affinity && e.id > best {
				continue
			}
			var local int64
			if affinity {
				if local = c.localAt(e, l, a); local <= 0 {
					continue
				}
				if best > 0 && (local < bestLocal || local == bestLocal && e.id > best) {
					continue
				}
			}
			if slices.Contains(l.skip, e.id) || !a.Copyable(q.ID, e.id) {
				continue
			}
			best, bestLocal = e.id, local
		}
		if best > 0 {
			return best
		}
	}
	return 0
}

// chooseAny shows q's Replicator every candidate of q.
func (c *Copies) chooseAny(l *Look, q Queue, b *buckets, a Ask) int64 {
	var runs []policy.Running
	for n, bk := range b.by {
		n++
		if q.Most > 0 && n >= q.Most {
			break
		}
		for i := range bk {
			e := &bk[i]
			if slices.Contains(l.skip, e.id) || !a.Copyable(q.ID, e.id) {
				continue
			}
			var local int64
			if q.NeedsFiles {
				local = c.localAt(e, l, a)
			}
			runs = append(runs, policy.Running{ID: e.id, Replicas: n, LocalBytes: local, Est: a.Est(e.id)})
		}
	}
	if len(runs) == 0 {
		return 0
	}
	id, ok := q.Rep.Replicate(l.site, runs)
	if !ok {
		return 0
	}
	return id
}

// localAt is candidate e's local bytes at l's site, cached while neither
// the epoch nor its inputs moved.
func (c *Copies) localAt(e *cand, l *Look, a Ask) int64 {
	epoch := c.idx.epoch
	slot := -1
	for i := range e.local {
		lb := &e.local[i]
		if lb.key == l.key {
			if lb.epoch == epoch {
				return lb.bytes
			}
			slot = i
			break
		}
	}
	if slot < 0 { // an empty slot, else the one computed longest ago
		slot = 0
		for i := range e.local {
			if lb, o := &e.local[i], &e.local[slot]; o.key != 0 && (lb.key == 0 || lb.epoch < o.epoch) {
				slot = i
			}
		}
	}
	if !e.known {
		e.in, e.known = a.Inputs(e.id), true
		c.idx.read(*e, true)
	}
	bytes := a.LocalBytes(e.id)
	e.local[slot] = localBytesAt{key: l.key, epoch: epoch, bytes: bytes}
	return bytes
}

// Setting is a queue's replication settings, as the core keeps them.
type Setting struct {
	ID         int32
	NewRep     func() policy.Replicator // its policy's Replicator, nil if none
	MaxCopies  int
	NeedsFiles bool // its policy reads local bytes
}

// SetQueues records every queue's settings, in the core's order: those
// that copy (Limit) are the ones a look for a copy walks.
func (c *Copies) SetQueues(qs []Setting) {
	c.copying = c.copying[:0]
	for _, q := range qs {
		if on, most := Limit(q.NewRep != nil, q.MaxCopies); on {
			c.copying = append(c.copying, copying{Setting: q, most: most})
		}
	}
}

// Copying says whether queue q copies running jobs.
func (c *Copies) Copying(q int32) bool {
	for i := range c.copying {
		if c.copying[i].ID == q {
			return true
		}
	}
	return false
}

// PickFor is Pick over the queues that copy, have no ready job
// (Ask.Ready) and have candidates, in the core's order. It returns the
// job and its queue, or 0 for none.
func (c *Copies) PickFor(l *Look, a Ask) (id int64, q int32, err error) {
	qs := c.looked[:0]
	for _, cq := range c.copying {
		if !a.Ready(cq.ID) && c.Has(cq.ID) {
			qs = append(qs, Queue{ID: cq.ID, Rep: Replicator(cq.NewRep), Most: cq.most, NeedsFiles: cq.NeedsFiles})
		}
	}
	c.looked = qs // kept so a look allocates nothing
	id, i, err := c.Pick(l, qs, a)
	if err != nil || id == 0 {
		return 0, 0, err
	}
	return id, qs[i].ID, nil
}
