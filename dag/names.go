package dag

import (
	"hash/maphash"
	"unsafe"
)

// Target names are kept in an append-only arena of 64 KiB chunks and found
// through an open-addressing table of ids, not a map[string]TargetID: a
// bulk submit may name a million targets, and a string header, a separate
// allocation and a map entry per name cost ~60 bytes more than the name's
// bytes and a 4-byte table slot (issue 21).

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
// table of ids, 0 marking an empty slot (id 0 is unused), kept at most
// three-quarters full. Names are compared against the arena.
type nameIndex struct {
	seed  maphash.Seed
	slots []TargetID
	n     int
}

func (x *nameIndex) lookup(name string, g *Graph) (TargetID, bool) {
	if len(x.slots) == 0 {
		return 0, false
	}
	mask := uint64(len(x.slots) - 1)
	for i := maphash.String(x.seed, name) & mask; ; i = (i + 1) & mask {
		id := x.slots[i]
		if id == 0 {
			return 0, false
		}
		if g.Name(id) == name {
			return id, true
		}
	}
}

// insert adds a name known to be absent.
func (x *nameIndex) insert(name string, id TargetID, g *Graph) {
	if 4*(x.n+1) > 3*len(x.slots) {
		old := x.slots
		x.slots = make([]TargetID, max(64, 2*len(old)))
		for _, o := range old {
			if o != 0 {
				x.place(g.Name(o), o)
			}
		}
	}
	x.place(name, id)
	x.n++
}

func (x *nameIndex) place(name string, id TargetID) {
	mask := uint64(len(x.slots) - 1)
	i := maphash.String(x.seed, name) & mask
	for x.slots[i] != 0 {
		i = (i + 1) & mask
	}
	x.slots[i] = id
}
