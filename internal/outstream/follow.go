package outstream

import (
	"bufio"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// A Follower reads one output's chunks from a stream file while they are
// written, for a follower of a running job (its Extent is known only when
// the job ends). Other outputs' chunks are skipped by their headers; the
// followed output's are checked whole (CRC, tag, chain of previous
// chunks) before they are given out, so a chunk still being written is
// never shown: the poll stops before it and the next one reads it whole.
type Follower struct {
	tag   Tag
	off   int64 // the next chunk's offset
	prev  int64 // the offset of the output's last chunk read, -1 none
	bytes int64 // the output's bytes read
	last  bool  // the output's last chunk was read
	buf   []byte
}

// NewFollower follows output t from the first chunk of a file.
func NewFollower(t Tag) *Follower {
	return &Follower{tag: t, off: int64(len(Magic)), prev: -1}
}

// Found says whether a chunk of the output was read: the output is in
// this file (an output never spans two).
func (f *Follower) Found() bool { return f.prev >= 0 }

// Done says whether the output's last chunk was read.
func (f *Follower) Done() bool { return f.last }

// Bytes is how much of the output was read.
func (f *Follower) Bytes() int64 { return f.bytes }

// Poll reads the chunks in r's first size bytes past those read before,
// calling fn with each payload of the followed output, in order (valid
// during the call). It stops before a chunk not whole yet, and returns an
// error wrapping ErrTorn only for a chunk of the output that is whole
// and does not follow the one before: the file is not as written.
func (f *Follower) Poll(r io.ReaderAt, size int64, fn func(p []byte) error) error {
	if f.off == int64(len(Magic)) {
		var m [len(Magic)]byte
		if size < int64(len(Magic)) {
			return nil
		}
		if _, err := r.ReadAt(m[:], 0); err != nil || string(m[:]) != Magic {
			return errors.New("not a stream file (no " + Magic + " header)")
		}
	}
	if f.last || size <= f.off {
		return nil
	}
	br := bufio.NewReaderSize(io.NewSectionReader(r, f.off, size-f.off), 64<<10)
	var h [HeaderSize]byte
	for !f.last && size-f.off >= HeaderSize {
		if _, err := io.ReadFull(br, h[:]); err != nil {
			return nil
		}
		c, err := parseHeader(h[:], f.off)
		if err != nil {
			return nil // being written, or a torn tail: not a chunk yet
		}
		end := f.off + HeaderSize + int64(c.n)
		if end > size {
			return nil
		}
		if c.tag != f.tag {
			if _, err := br.Discard(int(c.n)); err != nil {
				return nil
			}
			f.off = end
			continue
		}
		if f.buf == nil {
			f.buf = make([]byte, MaxChunk)
		}
		p := f.buf[:c.n]
		if _, err := io.ReadFull(br, p); err != nil {
			return nil
		}
		if crc32.Update(crc32.Checksum(h[:32], castagnoli), castagnoli, p) != c.crc {
			return nil // being written; a damaged chunk is never passed
		}
		if c.prev != f.prev {
			return fmt.Errorf("%s: chunk at %d follows %d, not %d: %w", f.tag, f.off, c.prev, f.prev, ErrTorn)
		}
		if err := fn(p); err != nil {
			return err
		}
		f.prev, f.off, f.bytes = f.off, end, f.bytes+int64(c.n)
		f.last = c.flags&flagLast != 0
	}
	return nil
}
