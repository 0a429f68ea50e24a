package dag

import (
	"hash/maphash"
	"unsafe"
)

// Target names are kept in an append-only arena of 64 KiB chunks and found
// through an open-addressing table of ids, not a map[string]TargetID: a
// bulk submit may name a million targets, and a string header, a separate
// allocation and a map entry per name cost ~60 bytes more than the name's
// bytes and an 8-byte table slot.

const nameChunk = 1 << 16

// nameRef locates a name in the arena: chunk, offset and length. A name
// longer than a chunk (never valid: names are at most job.MaxNameBytes)
// has a chunk of its own, at offset 0, and n = 0xffff; its length is the
// chunk's.
type nameRef struct {
	chunk  uint32
	off, n uint16
}

type nameArena struct {
	chunks [][]byte // every chunk but a long name's has capacity nameChunk
	cur    int      // 1 + the index of the chunk being filled; 0: none yet
}

func (a *nameArena) add(s string) nameRef {
	if len(s) >= 0xffff {
		a.chunks = append(a.chunks, []byte(s))
		return nameRef{chunk: uint32(len(a.chunks) - 1), n: 0xffff}
	}
	if a.cur == 0 || len(a.chunks[a.cur-1])+len(s) > nameChunk {
		a.chunks = append(a.chunks, make([]byte, 0, nameChunk))
		a.cur = len(a.chunks)
	}
	c := a.chunks[a.cur-1]
	off := len(c)
	// Appending within the capacity never moves the bytes names already
	// returned by get point to, nor changes them.
	a.chunks[a.cur-1] = append(c, s...)
	return nameRef{chunk: uint32(a.cur - 1), off: uint16(off), n: uint16(len(s))}
}

// get returns the name without copying: arena bytes, once written, are
// never changed, so the string is immutable as Go requires.
func (a *nameArena) get(r nameRef) string {
	if r.n == 0 { // also target 0's, before any name was added
		return ""
	}
	c := a.chunks[r.chunk]
	if r.n == 0xffff {
		return unsafe.String(unsafe.SliceData(c), len(c))
	}
	return unsafe.String(&c[r.off], int(r.n))
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
