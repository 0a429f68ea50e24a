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
// Sync keeps it: Apply, SetApart and Started sync the job they change,
// and the core calls it for a job whenever its row's attempt stops
// otherwise, and for every running job after a load.

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
		delete(c.failed, j.ID)
	}
	a, ok := c.apart[j.ID]
	in := ok && j.Row != 0 && a == j.Row && !c.failed[j.ID]
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
