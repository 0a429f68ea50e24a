package dag

import (
	"hash/maphash"
	"unsafe"
)

// EdgeSet collects target -> prerequisite edges of a submission, by name,
// with nothing for the garbage collector to trace: names once each in a
// byte arena, found through an open-addressing table of indexes, and each
// target's prerequisites a chain of indexes. A 10,000,000-job pipelines
// file gives 5,000,000 targets edges: as a map of strings and slices the
// set was scanned by every collection of the upload (a fifth of its CPU).
// A target's list is deduplicated by scanning while it is short and
// through a set once it is long, so a target that many pipelines feed (b
// after each of a0..a99999) costs linear time, not quadratic.
type EdgeSet struct {
	seed  maphash.Seed
	names []byte // the arena; bytes once written never change
	nodes []edgeNode
	slots []uint64 // hash<<32 | 1+node index; 0: empty
	links []edgeLink
	long  map[uint64]struct{} // target<<32 | prerequisite, of targets past edgeScanLimit prerequisites
}

var _ Edges = (*EdgeSet)(nil)

type edgeNode struct {
	off         int   // name in the arena
	n           int32 // name's length
	first, last int32 // 1+index in links of its first and last prerequisite; 0: none
	count       int32
}

type edgeLink struct {
	to   int32 // node index
	next int32 // 1+index of the next link; 0: end
}

// edgeScanLimit is how many prerequisites a target's list is scanned
// for a repeat before it gets a set.
const edgeScanLimit = 16

// NewEdgeSet returns an empty set.
func NewEdgeSet() *EdgeSet { return &EdgeSet{seed: maphash.MakeSeed()} }

// Add records a job's after-ok and after-any prerequisites alike: both
// order jobs, so both close cycles.
func (e *EdgeSet) Add(target string, prereqs, afterAny []string) {
	if len(prereqs)+len(afterAny) == 0 {
		return
	}
	t := e.node(target)
	for _, list := range [2][]string{prereqs, afterAny} {
		for _, p := range list {
			e.edge(t, e.node(p))
		}
	}
}

func (e *EdgeSet) name(i int32) string {
	nd := &e.nodes[i]
	if nd.n == 0 {
		return ""
	}
	return unsafe.String(&e.names[nd.off], int(nd.n))
}

func (e *EdgeSet) hash(name string) uint32 { return uint32(maphash.String(e.seed, name)) }

// lookup returns name's node index.
func (e *EdgeSet) lookup(name string) (int32, bool) {
	if len(e.slots) == 0 {
		return 0, false
	}
	h := e.hash(name)
	mask := uint64(len(e.slots) - 1)
	for i := uint64(h) & mask; ; i = (i + 1) & mask {
		s := e.slots[i]
		if s == 0 {
			return 0, false
		}
		if uint32(s>>32) == h {
			if n := int32(uint32(s) - 1); e.name(n) == name {
				return n, true
			}
		}
	}
}

// node returns name's node index, adding the node if new.
func (e *EdgeSet) node(name string) int32 {
	if n, ok := e.lookup(name); ok {
		return n
	}
	if 4*(len(e.nodes)+1) > 3*len(e.slots) {
		old := e.slots
		e.slots = make([]uint64, max(64, 2*len(old)))
		for _, s := range old {
			if s != 0 {
				e.place(s)
			}
		}
	}
	n := int32(len(e.nodes))
	e.nodes = append(e.nodes, edgeNode{off: len(e.names), n: int32(len(name))})
	e.names = append(e.names, name...)
	e.place(uint64(e.hash(name))<<32 | uint64(uint32(n)+1))
	return n
}

func (e *EdgeSet) place(s uint64) {
	mask := uint64(len(e.slots) - 1)
	i := (s >> 32) & mask
	for e.slots[i] != 0 {
		i = (i + 1) & mask
	}
	e.slots[i] = s
}

// edge adds t -> p unless t has it already.
func (e *EdgeSet) edge(t, p int32) {
	nd := &e.nodes[t]
	key := uint64(uint32(t))<<32 | uint64(uint32(p))
	if nd.count > edgeScanLimit {
		if _, dup := e.long[key]; dup {
			return
		}
		e.long[key] = struct{}{}
	} else {
		for l := nd.first; l != 0; l = e.links[l-1].next {
			if e.links[l-1].to == p {
				return
			}
		}
	}
	e.links = append(e.links, edgeLink{to: p})
	l := int32(len(e.links))
	if nd.last == 0 {
		nd.first = l
	} else {
		e.links[nd.last-1].next = l
	}
	nd.last = l
	nd.count++
	if nd.count == edgeScanLimit+1 {
		if e.long == nil {
			e.long = map[uint64]struct{}{}
		}
		for l := nd.first; l != 0; l = e.links[l-1].next {
			e.long[uint64(uint32(t))<<32|uint64(uint32(e.links[l-1].to))] = struct{}{}
		}
	}
}

// EachTarget calls f with every target given prerequisites.
func (e *EdgeSet) EachTarget(f func(string) bool) {
	for i := range e.nodes {
		if e.nodes[i].count > 0 && !f(e.name(int32(i))) {
			return
		}
	}
}

// Prereqs returns a target's prerequisites in the order first named.
func (e *EdgeSet) Prereqs(target string) []string {
	t, ok := e.lookup(target)
	if !ok || e.nodes[t].count == 0 {
		return nil
	}
	out := make([]string, 0, e.nodes[t].count)
	for l := e.nodes[t].first; l != 0; l = e.links[l-1].next {
		out = append(out, e.name(e.links[l-1].to))
	}
	return out
}
