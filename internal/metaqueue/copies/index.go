package copies

import (
	"fmt"
	"slices"

	"github.com/mq-hpc/mq/internal/policy"
)

// The copy candidates: a copy decision used to walk every running job on
// every look by an idle placeholder, 2-3 ms at 10,000 running jobs. The
// index keeps apart the running jobs a copy may start beside, those whose
// row's attempt runs apart, by queue and by how many attempts of each run
// (1 + its copies): WQR and Storage Affinity copy from the
// fewest-attempts bucket first, so a look walks that bucket only, in a
// tight loop, and asks the core's other conditions (Ask.Copyable) only
// for a job that would beat the best so far. Storage Affinity's local
// bytes of each job are cached per asking site while the core's data
// generation does not move; when it moves, Moved says which files did,
// and only the candidates reading those forget theirs; any other move
// (Fresh) forgets all.
//
// Sync keeps it: the core calls it (or SetApart, Started, Left, AllLeft,
// which sync) for a job whenever its row's attempt, that attempt's
// apartness or its copies change, and for every running job after a
// load.

// index is the candidates of every queue.
type index struct {
	at     map[int64]entryAt // job -> its entry
	queues map[int32]*buckets
	keys   map[Where]uint32 // asking sites seen, numbered for the local bytes cache
	// readers: the candidates reading each input file, whose local bytes
	// a move of the file makes stale.
	readers map[string]map[int64]struct{}
	// epoch numbers the local bytes valid now; untold is the data
	// generation's moves that said nothing of what moved, when epoch was
	// last moved on.
	epoch  uint64
	untold uint64
}

// entryAt places a job's entry: its queue, attempts running and index in
// the bucket.
type entryAt struct {
	q    int32
	n, i int
}

// buckets is one queue's candidates: by[n-1] holds the jobs with n
// attempts running, in no order (entries move by swapping).
type buckets struct {
	by [][]cand
}

// localSlots is how many asking sites a candidate remembers its local
// bytes for.
const localSlots = 4

// cand is a candidate job and its local bytes at recent asking sites.
type cand struct {
	id    int64
	in    []string // its inputs (readers), once its local bytes were asked
	known bool     // in was asked
	local [localSlots]localBytesAt
}

// localBytesAt is a job's local bytes at site key (numbered in
// index.keys), valid while the index's epoch is epoch and none of the
// job's inputs moved.
type localBytesAt struct {
	key   uint32 // 0: none
	epoch uint64
	bytes int64
}

// Where is what a job's local bytes depend on of the asking placeholder:
// its site and, with staging, the storage place it reads from.
type Where struct {
	Site                 policy.Site
	StoreSite, StoreHost string
}

func (x *index) reset() {
	*x = index{at: map[int64]entryAt{}, queues: map[int32]*buckets{}, keys: map[Where]uint32{},
		readers: map[string]map[int64]struct{}{}, epoch: 1}
}

// Job is what the index needs of a job whose attempts changed.
type Job struct {
	ID int64
	// Row is the attempt the job row describes, running; 0 if none runs
	// (or the core no longer knows the job).
	Row   int
	Queue int32
	Runs  int // attempts running: the row's and its copies
}

// Sync makes job j's entry agree with the core: present while its row's
// attempt runs apart, in the bucket of its attempts running.
func (c *Copies) Sync(j Job) {
	x := &c.idx
	if j.Row == 0 {
		delete(c.apart, j.ID) // the attempt it described stopped
	}
	a, ok := c.apart[j.ID]
	in := ok && j.Row != 0 && a == j.Row
	at, had := x.at[j.ID]
	switch {
	case !in && had:
		x.read(x.remove(j.ID, at), false)
	case in && !had:
		x.insert(j.Queue, j.Runs, cand{id: j.ID})
	case in && (at.n != j.Runs || at.q != j.Queue):
		x.insert(j.Queue, j.Runs, x.remove(j.ID, at))
	}
}

// Rebuild empties the index, for the core to Sync every running job
// (after a load).
func (c *Copies) Rebuild() { c.idx.reset() }

// Moved forgets the local bytes of the candidates reading path: an output
// was made there, or a replica added.
func (c *Copies) Moved(path string) {
	x := &c.idx
	for id := range x.readers[path] {
		if at, ok := x.at[id]; ok {
			x.queues[at.q].by[at.n-1][at.i].local = [localSlots]localBytesAt{}
		}
	}
}

// read notes that candidate e reads its inputs, or (in false) forgets it.
func (x *index) read(e cand, in bool) {
	for _, path := range e.in {
		r := x.readers[path]
		if in {
			if r == nil {
				r = map[int64]struct{}{}
				x.readers[path] = r
			}
			r[e.id] = struct{}{}
			continue
		}
		delete(r, e.id)
		if len(r) == 0 {
			delete(x.readers, path)
		}
	}
}

// remove takes job id's entry out of its bucket.
func (x *index) remove(id int64, at entryAt) cand {
	bk := x.queues[at.q].by[at.n-1]
	e := bk[at.i]
	last := len(bk) - 1
	if at.i != last {
		bk[at.i] = bk[last]
		x.at[bk[at.i].id] = entryAt{q: at.q, n: at.n, i: at.i}
	}
	x.queues[at.q].by[at.n-1] = bk[:last]
	delete(x.at, id)
	return e
}

// insert adds e to queue q's bucket of n attempts.
func (x *index) insert(q int32, n int, e cand) {
	b := x.queues[q]
	if b == nil {
		b = &buckets{}
		x.queues[q] = b
	}
	for len(b.by) < n {
		b.by = append(b.by, nil)
	}
	b.by[n-1] = append(b.by[n-1], e)
	x.at[e.id] = entryAt{q: q, n: n, i: len(b.by[n-1]) - 1}
}

// Has says whether queue q has a job a copy may start beside.
func (c *Copies) Has(q int32) bool { return c.idx.queues[q] != nil }

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

// Asked is what one asker last looked at: it looks again once running
// attempts or data locations changed.
type Asked struct {
	looked       bool
	gen, dataGen uint64
}

// Again says whether the asker that last looked as a says must look
// again at data generation dataGen, and notes this look in a.
func (c *Copies) Again(a *Asked, dataGen uint64) bool {
	if a.looked && a.gen == c.gen && a.dataGen == dataGen {
		return false // nothing changed since the last look
	}
	*a = Asked{looked: true, gen: c.gen, dataGen: dataGen}
	return true
}

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

// Entry is where the index holds a job: its queue and attempts running.
type Entry struct {
	Queue int32
	Runs  int
}

// Check says how the index disagrees with want, the entries a full scan
// of the core's running jobs finds, or with itself; nil if it does not.
// The core's tests hold the index to a scan with it.
func (c *Copies) Check(want map[int64]Entry) error {
	x := &c.idx
	if len(want) != len(x.at) {
		return fmt.Errorf("index holds %d jobs, a scan finds %d", len(x.at), len(want))
	}
	total := 0
	for q, b := range x.queues {
		for n, bk := range b.by {
			total += len(bk)
			for i, e := range bk {
				if at := x.at[e.id]; at != (entryAt{q: q, n: n + 1, i: i}) {
					return fmt.Errorf("job %d in queue %d bucket %d at %d, its entry says %+v", e.id, q, n+1, i, at)
				}
			}
		}
	}
	if total != len(x.at) {
		return fmt.Errorf("buckets hold %d entries, the index %d jobs", total, len(x.at))
	}
	for id, w := range want {
		at, ok := x.at[id]
		if !ok || at.q != w.Queue || at.n != w.Runs {
			return fmt.Errorf("job %d: index %+v (present %v), scan queue %d with %d attempts", id, at, ok, w.Queue, w.Runs)
		}
	}
	return nil
}

// Reverse reverses every bucket's order, keeping the index whole: for
// tests that a choice does not depend on the order candidates came in.
func (c *Copies) Reverse() {
	x := &c.idx
	for _, b := range x.queues {
		for _, bk := range b.by {
			slices.Reverse(bk)
			for i, e := range bk {
				at := x.at[e.id]
				at.i = i
				x.at[e.id] = at
			}
		}
	}
}
