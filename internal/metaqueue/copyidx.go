package metaqueue

import (
	"slices"

	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/job"
)

// The copy candidates: a copy decision used to walk every
// running job (s.running) on every look by an idle placeholder, 2-3 ms at
// 10,000 running jobs. copyIndex keeps apart the running jobs a copy may
// start beside, those whose row's attempt runs apart (run.apart), by
// queue and by how many attempts of each run (1 + its copies): WQR and
// Storage Affinity copy from the fewest-attempts bucket first, so a look
// walks that bucket only, in a tight loop, and checks the other
// conditions (copyable, not at the asking placeholder, walltime, budget)
// only for a job that would beat the best so far. Storage Affinity's
// local bytes of each job are cached per asking site while data.gen does
// not move; when it moves, dataMoved (an output made, a replica added)
// says which files did, and only the candidates reading those forget
// theirs; any other bump of data.gen (dataChanged excepted) forgets all.
//
// syncCopy keeps it: every change of s.running, of a run's apart or of
// s.repl.copies calls it for the job (setApart, setCopies, stopRun,
// dispatchCopy, stopCopies, win, dropRun); a load rebuilds it.

// copyIndex is the candidates of every queue.
type copyIndex struct {
	at     map[int64]copyAt // job -> its entry
	queues map[int32]*copyBuckets
	keys   map[siteKey]uint32 // asking sites seen, numbered for the local bytes cache
	// readers: the candidates reading each input file, whose local bytes
	// a move of the file makes stale.
	readers map[string]map[int64]struct{}
	// epoch numbers the local bytes valid now; untold is data.gen's
	// bumps that said nothing of what moved, when epoch was last moved on.
	epoch  uint64
	untold uint64
}

// copyAt places a job's entry: its queue, attempts running and index in
// the bucket.
type copyAt struct {
	q    int32
	n, i int
}

// copyBuckets is one queue's candidates: by[n-1] holds the jobs with n
// attempts running, in no order (entries move by swapping).
type copyBuckets struct {
	by [][]copyCand
}

// localSlots is how many asking sites a candidate remembers its local
// bytes for.
const localSlots = 4

// copyCand is a candidate job and its local bytes at recent asking sites.
type copyCand struct {
	id    int64
	in    []fileDecl // its inputs (readers), as when it came in
	local [localSlots]localBytesAt
}

// localBytesAt is a job's local bytes at site key (numbered in
// copyIndex.keys), valid while the index's epoch is epoch and none of the
// job's inputs moved.
type localBytesAt struct {
	key   uint32 // 0: none
	epoch uint64
	bytes int64
}

// siteKey is what localBytes depends on of the asking placeholder.
type siteKey struct {
	cur policy.Site
	to  Place
}

func (x *copyIndex) reset() {
	*x = copyIndex{at: map[int64]copyAt{}, queues: map[int32]*copyBuckets{}, keys: map[siteKey]uint32{},
		readers: map[string]map[int64]struct{}{}, epoch: 1}
}

// dataMoved bumps data.gen for outputs made or replicas added at the
// files of fs: the copy candidates reading them forget their local bytes.
func (s *Store) dataMoved(fs []fileDecl) {
	for _, f := range fs {
		s.repl.idx.moved(f.Path)
	}
	s.data.Changed()
}

// dataMoved1 is dataMoved for one path.
func (s *Store) dataMoved1(path string) {
	s.repl.idx.moved(path)
	s.data.Changed()
}

// dataChanged bumps data.gen for a change that moved no file (the ready
// set, the placeholders predicted).
func (s *Store) dataChanged() {
	s.data.Changed()
}

// moved forgets the local bytes of the candidates reading path.
func (x *copyIndex) moved(path string) {
	for id := range x.readers[path] {
		if at, ok := x.at[id]; ok {
			x.queues[at.q].by[at.n-1][at.i].local = [localSlots]localBytesAt{}
		}
	}
}

// fresh forgets every candidate's local bytes if data.gen moved on for a
// reason not told (a replica dropped, a site's filesystem changed...).
func (x *copyIndex) fresh(s *Store) {
	if untold := s.data.Untold(); untold != x.untold {
		x.untold = untold
		x.epoch++
	}
}

// read notes that candidate c reads its inputs, or (in false) forgets it.
func (x *copyIndex) read(c copyCand, in bool) {
	for _, f := range c.in {
		r := x.readers[f.Path]
		if in {
			if r == nil {
				r = map[int64]struct{}{}
				x.readers[f.Path] = r
			}
			r[c.id] = struct{}{}
			continue
		}
		delete(r, c.id)
		if len(r) == 0 {
			delete(x.readers, f.Path)
		}
	}
}

// syncCopy makes job id's entry agree with s.running and s.repl.copies:
// present while its row's attempt runs apart, in the bucket of its
// attempts running.
func (s *Store) syncCopy(id int64) {
	x := &s.repl.idx
	ru := s.running[id]
	var q int32
	in := ru != nil && ru.apart
	if in {
		j, ok := s.g.Node(id)
		in, q = ok, j.Queue
	}
	at, had := x.at[id]
	n := 1 + len(s.repl.copies[id])
	switch {
	case !in && had:
		x.read(x.remove(id, at), false)
	case in && !had:
		c := copyCand{id: id}
		if jf := s.data.Job(id); jf != nil {
			c.in = jf.In
		}
		x.insert(q, n, c)
		x.read(c, true)
	case in && (at.n != n || at.q != q):
		x.insert(q, n, x.remove(id, at))
	}
}

// remove takes job id's entry out of its bucket.
func (x *copyIndex) remove(id int64, at copyAt) copyCand {
	bk := x.queues[at.q].by[at.n-1]
	c := bk[at.i]
	last := len(bk) - 1
	if at.i != last {
		bk[at.i] = bk[last]
		x.at[bk[at.i].id] = copyAt{q: at.q, n: at.n, i: at.i}
	}
	x.queues[at.q].by[at.n-1] = bk[:last]
	delete(x.at, id)
	return c
}

// insert adds c to queue q's bucket of n attempts.
func (x *copyIndex) insert(q int32, n int, c copyCand) {
	b := x.queues[q]
	if b == nil {
		b = &copyBuckets{}
		x.queues[q] = b
	}
	for len(b.by) < n {
		b.by = append(b.by, nil)
	}
	b.by[n-1] = append(b.by[n-1], c)
	x.at[c.id] = copyAt{q: q, n: n, i: len(b.by[n-1]) - 1}
}

// rebuildCopies makes the index afresh from s.running (after a load).
func (s *Store) rebuildCopies() {
	s.repl.idx.reset()
	for id := range s.running {
		s.syncCopy(id)
	}
}

// copyAsk is one look for a copy: the asking placeholder and its site.
type copyAsk struct {
	p    *parkedNext
	ph   int64
	cur  policy.Site
	to   Place
	key  uint32 // siteKey{cur, to} numbered
	skip []int64
}

// candidate says whether job id, in q's index, may be copied for a: the
// conditions of the whole scan pickCopy once made.
func (s *Store) candidate(id int64, q *queue, a *copyAsk) bool {
	j, ok := s.g.Node(id)
	if !ok || j.State != job.Executing || s.queueIDs[j.Queue] != q {
		return false
	}
	if ru := s.running[id]; ru == nil || !ru.apart || !s.copyable(id, q) || s.runsOn(id, a.ph) {
		return false
	}
	// A copy spends as a first run does: the same budget and deadline
	// gate (and the planner's cap at the asking site).
	return fits(j.Est, q, a.p.req.WalltimeLeft) && s.affordable(q, j, a.p.site)
}

// localAt is candidate c's local bytes at a's site, cached while neither
// the epoch nor its inputs moved.
func (s *Store) localAt(c *copyCand, a *copyAsk) int64 {
	epoch := s.repl.idx.epoch
	slot := -1
	for i := range c.local {
		l := &c.local[i]
		if l.key == a.key {
			if l.epoch == epoch {
				return l.bytes
			}
			slot = i
			break
		}
	}
	if slot < 0 { // an empty slot, else the one computed longest ago
		slot = 0
		for i := range c.local {
			if l, o := &c.local[i], &c.local[slot]; o.key != 0 && (l.key == 0 || l.epoch < o.epoch) {
				slot = i
			}
		}
	}
	b := s.localBytes(c.id, a.cur, a.to)
	c.local[slot] = localBytesAt{key: a.key, epoch: epoch, bytes: b}
	return b
}

// chooseCopy is what rep would choose among q's candidates for a (less
// those in a.skip), or 0 for none. WQR and Storage Affinity walk the
// fewest-attempts bucket that has a candidate; another Replicator is
// shown every candidate, as pickCopy did.
func (s *Store) chooseCopy(q *queue, rep policy.Replicator, a *copyAsk) int64 {
	b := s.repl.idx.queues[q.id]
	if b == nil {
		return 0
	}
	_, most := q.copying()
	needsFiles := q.pol.Needs&policy.NeedsFiles != 0
	var affinity bool
	var maxRep int
	switch r := rep.(type) {
	case policy.WQR:
		maxRep = r.MaxReplicas
	case policy.StorageAffinity:
		affinity, maxRep = true, r.MaxReplicas
	default:
		return s.chooseCopyAny(q, rep, b, most, needsFiles, a)
	}
	if affinity && !needsFiles {
		return 0 // no job has local bytes as the policy sees them
	}
	for n := 1; n <= len(b.by); n++ {
		if most > 0 && n >= most || maxRep > 0 && n >= maxRep {
			break
		}
		bk := b.by[n-1]
		var best, bestLocal int64
		for i := range bk {
			c := &bk[i]
			if best > 0 && !affinity && c.id > best {
				continue
			}
			var local int64
			if affinity {
				if local = s.localAt(c, a); local <= 0 {
					continue
				}
				if best > 0 && (local < bestLocal || local == bestLocal && c.id > best) {
					continue
				}
			}
			if slices.Contains(a.skip, c.id) || !s.candidate(c.id, q, a) {
				continue
			}
			best, bestLocal = c.id, local
		}
		if best > 0 {
			return best
		}
	}
	return 0
}

// chooseCopyAny shows rep every candidate of q.
func (s *Store) chooseCopyAny(q *queue, rep policy.Replicator, b *copyBuckets, most int, needsFiles bool, a *copyAsk) int64 {
	var runs []policy.Running
	for n, bk := range b.by {
		n++
		if most > 0 && n >= most {
			break
		}
		for i := range bk {
			c := &bk[i]
			if slices.Contains(a.skip, c.id) || !s.candidate(c.id, q, a) {
				continue
			}
			var local int64
			if needsFiles {
				local = s.localAt(c, a)
			}
			j, _ := s.g.Node(c.id)
			runs = append(runs, policy.Running{ID: c.id, Replicas: n, LocalBytes: local, Est: j.Est})
		}
	}
	if len(runs) == 0 {
		return 0
	}
	id, ok := rep.Replicate(s.data.SiteAt(a.cur).Site, runs)
	if !ok {
		return 0
	}
	return id
}
