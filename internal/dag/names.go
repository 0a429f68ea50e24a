package dag

import (
	"encoding/binary"
	"hash/maphash"
	"unsafe"
)

// Target names are kept in an append-only arena of 64 KiB chunks and found
// through an open-addressing table of ids, not a map[string]TargetID: a
// bulk submit may name a million targets, and a string header, a separate
// allocation and a map entry per name cost ~60 bytes more than the name's
// bytes and an 8-byte table slot.

const nameChunk = 1 << 16

// nameRef locates a name in the arena: its chunk in the high 16 bits, its
// offset in the low 16. Four bytes, not eight, in every target: the name's
// length is the arena's, a uvarint before its bytes. A name longer than a
// chunk (never valid: names are at most job.MaxNameBytes) has a chunk of
// its own. Ref 0 is the empty name the first chunk starts with (target 0's).
type nameRef uint32

// maxChunks is how many chunks refs reach: 4 GiB of names, hundreds of
// millions of targets, far past what the rest of a target costs in memory.
const maxChunks = 1 << 16

type nameArena struct {
	chunks [][]byte // every chunk but a long name's has capacity nameChunk
	cur    int      // 1 + the index of the chunk being filled; 0: none yet
}

func (a *nameArena) add(s string) nameRef {
	var pre [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(pre[:], uint64(len(s)))
	if k+len(s) > nameChunk {
		a.newChunk(k + len(s))
		c := a.chunks[len(a.chunks)-1]
		a.chunks[len(a.chunks)-1] = append(append(c, pre[:k]...), s...)
		return nameRef(uint32(len(a.chunks)-1) << 16)
	}
	if a.cur == 0 || len(a.chunks[a.cur-1])+k+len(s) > nameChunk {
		a.newChunk(nameChunk)
		if len(a.chunks) == 1 {
			a.chunks[0] = append(a.chunks[0], 0) // ref 0: the empty name
		}
		a.cur = len(a.chunks)
	}
	c := a.chunks[a.cur-1]
	off := len(c)
	// Appending within the capacity never moves the bytes names already
	// returned by get point to, nor changes them.
	a.chunks[a.cur-1] = append(append(c, pre[:k]...), s...)
	return nameRef(uint32(a.cur-1)<<16 | uint32(off))
}

// newChunk appends an empty chunk of capacity n.
func (a *nameArena) newChunk(n int) {
	if len(a.chunks) >= maxChunks {
		// Beyond any memory the targets themselves would leave.
		panic("dag: more than 4 GiB of target names")
	}
	a.chunks = append(a.chunks, make([]byte, 0, n))
}

// get returns the name without copying: arena bytes, once written, are
// never changed, so the string is immutable as Go requires.
func (a *nameArena) get(r nameRef) string {
	if int(r>>16) >= len(a.chunks) { // target 0's, before any name was added
		return ""
	}
	c := a.chunks[r>>16][r&0xffff:]
	n, k := binary.Uvarint(c)
	if n == 0 {
		return ""
	}
	return unsafe.String(&c[k], int(n))
}

// nameIndex maps names to target ids: linear probing over a power-of-two
// table, kept at most three-quarters full. A slot holds an id (low 32
// bits; 0 marks an empty slot, id 0 is unused) and the low 32 bits of its
// name's hash, so a probe compares names in the arena only when the hashes
// agree, and growing rehashes no name. A bulk submit of a million targets
// looks up each new name once and misses: with names compared at every
// probe a miss cost several cache misses into the targets and the arena.
type nameIndex struct {
	seed  maphash.Seed
	slots []uint64
	n     int
}

func (x *nameIndex) hash(name string) uint32 { return uint32(maphash.String(x.seed, name)) }

func (x *nameIndex) lookup(name string, g *Graph) (TargetID, bool) {
	if len(x.slots) == 0 {
		return 0, false
	}
	h := x.hash(name)
	mask := uint64(len(x.slots) - 1)
	for i := uint64(h) & mask; ; i = (i + 1) & mask {
		e := x.slots[i]
		if e == 0 {
			return 0, false
		}
		if uint32(e>>32) == h {
			if id := TargetID(uint32(e)); g.Name(id) == name {
				return id, true
			}
		}
	}
}

// insert adds a name known to be absent.
func (x *nameIndex) insert(name string, id TargetID) {
	if 4*(x.n+1) > 3*len(x.slots) {
		old := x.slots
		x.slots = make([]uint64, max(64, 2*len(old)))
		for _, e := range old {
			if e != 0 {
				x.place(e)
			}
		}
	}
	x.place(uint64(x.hash(name))<<32 | uint64(uint32(id)))
	x.n++
}

func (x *nameIndex) place(e uint64) {
	mask := uint64(len(x.slots) - 1)
	i := (e >> 32) & mask
	for x.slots[i] != 0 {
		i = (i + 1) & mask
	}
	x.slots[i] = e
}
