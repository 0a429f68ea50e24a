package outstream

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
)

// readChunk reads the chunk at off: its header and, if payload is not nil,
// its payload into payload[:n] (payload must hold MaxChunk bytes).
func readChunk(r io.ReaderAt, off int64, payload []byte) (chunk, []byte, error) {
	var h [HeaderSize]byte
	if _, err := r.ReadAt(h[:], off); err != nil {
		return chunk{}, nil, fmt.Errorf("offset %d: %w", off, ErrTorn)
	}
	c, err := parseHeader(h[:], off)
	if err != nil {
		return chunk{}, nil, err
	}
	if payload == nil {
		return c, nil, nil
	}
	if int(c.n) > len(payload) { // more than the output holds: buffers are sized to it
		return chunk{}, nil, fmt.Errorf("offset %d: chunk of %d bytes, more than its output's %d: %w", off, c.n, len(payload), ErrTorn)
	}
	p := payload[:c.n]
	if _, err := r.ReadAt(p, off+HeaderSize); err != nil {
		return chunk{}, nil, fmt.Errorf("offset %d: payload: %w", off, ErrTorn)
	}
	if crc32.Update(crc32.Checksum(h[:32], castagnoli), castagnoli, p) != c.crc {
		return chunk{}, nil, fmt.Errorf("offset %d: checksum: %w", off, ErrTorn)
	}
	return c, p, nil
}

// Read writes the output t whose Extent is ext, from stream file r, to dst.
// It checks every chunk (its tag, its CRC, the last one marked last, the
// byte count) and returns an error wrapping ErrTorn, having written
// nothing, if one is not as recorded.
func Read(dst io.Writer, r io.ReaderAt, t Tag, ext Extent) (int64, error) {
	if ext.Last < 0 {
		if ext.Bytes != 0 {
			return 0, fmt.Errorf("%s: %d bytes and no chunk: %w", t, ext.Bytes, ErrTorn)
		}
		return 0, nil
	}
	buf := payloadBuf(ext)
	offs, total, first, err := chunksBack(r, t, ext, buf, -1)
	if err != nil {
		return 0, err
	}
	if total != ext.Bytes {
		return 0, fmt.Errorf("%s: %d bytes in chunks, %d recorded: %w", t, total, ext.Bytes, ErrTorn)
	}
	return writeChunks(dst, r, t, offs, first, buf, 0)
}

// payloadBuf holds any chunk of the output ext: no chunk holds more than
// the output's bytes. Sized so, reading a short output (most are) costs
// no MaxChunk allocation.
func payloadBuf(ext Extent) []byte {
	return make([]byte, min(max(ext.Bytes, 0), MaxChunk))
}

// ReadTail is Read of the last limit bytes at most of the output (a
// page shows a tail): it checks the chunks it reads, as Read does, and
// says whether it left bytes before them out.
func ReadTail(dst io.Writer, r io.ReaderAt, t Tag, ext Extent, limit int64) (truncated bool, err error) {
	if ext.Last < 0 || limit <= 0 {
		return ext.Bytes > 0, nil
	}
	buf := payloadBuf(ext)
	offs, total, first, err := chunksBack(r, t, ext, buf, limit)
	if err != nil {
		return false, err
	}
	if whole := total < limit; total > ext.Bytes || whole && total != ext.Bytes {
		return false, fmt.Errorf("%s: %d bytes in chunks, %d recorded: %w", t, total, ext.Bytes, ErrTorn)
	}
	_, err = writeChunks(dst, r, t, offs, first, buf, max(total-limit, 0))
	return total > limit || total < ext.Bytes, err
}

// chunksBack walks output t's chunks back from its last one (ext.Last),
// checking each (tag, CRC, only the last one marked last, none empty but
// the last), until its start or, with atLeast >= 0, until it holds that
// many bytes: their offsets, last first, their bytes, and the payload
// read last (the first chunk's, when it is the only one) in buf. Every
// chunk but the last holds a byte at least, so an output has at most
// Bytes+1 chunks.
func chunksBack(r io.ReaderAt, t Tag, ext Extent, buf []byte, atLeast int64) (offs []int64, total int64, first []byte, err error) {
	for off := ext.Last; off >= 0 && (atLeast < 0 || total < atLeast); {
		if int64(len(offs)) > ext.Bytes {
			return nil, 0, nil, fmt.Errorf("%s: more chunks than bytes: %w", t, ErrTorn)
		}
		c, p, err := readChunk(r, off, buf)
		first = p
		if err != nil {
			return nil, 0, nil, fmt.Errorf("%s: %w", t, err)
		}
		switch {
		case c.tag != t:
			return nil, 0, nil, fmt.Errorf("%s: chunk at %d is %s's: %w", t, off, c.tag, ErrTorn)
		case (off == ext.Last) != (c.flags&flagLast != 0):
			return nil, 0, nil, fmt.Errorf("%s: chunk at %d not where the output ends: %w", t, off, ErrTorn)
		case off != ext.Last && c.n == 0:
			return nil, 0, nil, fmt.Errorf("%s: empty chunk at %d: %w", t, off, ErrTorn)
		}
		offs = append(offs, off)
		total += int64(c.n)
		off = c.prev
	}
	return offs, total, first, nil
}

// writeChunks writes the payloads of the chunks at offs (last first) to
// dst in order, without the first skip bytes; first is the payload read
// last, written as it is when it is the only chunk.
func writeChunks(dst io.Writer, r io.ReaderAt, t Tag, offs []int64, first, buf []byte, skip int64) (int64, error) {
	if len(offs) == 1 {
		k, err := dst.Write(first[min(skip, int64(len(first))):])
		return int64(k), err
	}
	var n int64
	for i := len(offs) - 1; i >= 0; i-- {
		_, p, err := readChunk(r, offs[i], buf)
		if err != nil {
			return n, fmt.Errorf("%s: %w", t, err)
		}
		cut := min(skip, int64(len(p)))
		skip -= cut
		k, err := dst.Write(p[cut:])
		n += int64(k)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// A Piece is one chunk as a Scanner finds it.
type Piece struct {
	Tag    Tag
	Offset int64
	Data   []byte // valid until the next call of Next
	Last   bool   // the output's last chunk
	Cut    bool   // the output passed its cap
}

// A Scanner reads a stream file's chunks in file order: for a follower
// reading outputs as they are written, for a summary, for Recover.
type Scanner struct {
	r   io.ReaderAt
	off int64
	end int64
	buf []byte
	err error
}

// NewScanner scans the size bytes of r, from its first chunk.
func NewScanner(r io.ReaderAt, size int64) *Scanner {
	s := &Scanner{r: r, off: int64(len(Magic)), end: size}
	var m [len(Magic)]byte
	if size < int64(len(Magic)) {
		s.err = fmt.Errorf("not a stream file (%d bytes, short of its header)", size)
	} else if _, err := r.ReadAt(m[:], 0); err != nil || string(m[:]) != Magic {
		s.err = errors.New("not a stream file (no " + Magic + " header)")
	}
	return s
}

// Resume makes the next chunk scanned the one at off, an offset a chunk
// began at (a follower resumes where it stopped).
func (s *Scanner) Resume(off int64) { s.off = off }

// Offset is where the scan stands: the end of the last whole chunk read.
func (s *Scanner) Offset() int64 { return s.off }

// Next returns the next chunk; io.EOF at the end of the scanned bytes, an
// error wrapping ErrTorn at a chunk cut short or damaged (the offset then
// stays before it, where a writer that died left its tail).
func (s *Scanner) Next() (Piece, error) {
	if s.err != nil {
		return Piece{}, s.err
	}
	if s.off >= s.end {
		return Piece{}, io.EOF
	}
	if s.end-s.off < HeaderSize {
		return Piece{}, fmt.Errorf("offset %d: %d bytes, short of a header: %w", s.off, s.end-s.off, ErrTorn)
	}
	if s.buf == nil {
		s.buf = make([]byte, MaxChunk)
	}
	c, p, err := readChunk(s.r, s.off, s.buf)
	if err != nil {
		return Piece{}, err
	}
	if s.off+HeaderSize+int64(c.n) > s.end {
		return Piece{}, fmt.Errorf("offset %d: chunk runs past the end: %w", s.off, ErrTorn)
	}
	pc := Piece{Tag: c.tag, Offset: s.off, Data: p, Last: c.flags&flagLast != 0, Cut: c.flags&flagCut != 0}
	s.off += HeaderSize + int64(c.n)
	return pc, nil
}

// recoverFile finds the end of f's last whole chunk and cuts anything
// after it.
func recoverFile(f *os.File) (size int64, torn bool, err error) {
	st, err := f.Stat()
	if err != nil {
		return 0, false, err
	}
	s := NewScanner(f, st.Size())
	for {
		_, err := s.Next()
		if err == io.EOF {
			return s.Offset(), false, nil
		}
		if errors.Is(err, ErrTorn) && s.Offset() >= int64(len(Magic)) {
			if err := f.Truncate(s.Offset()); err != nil {
				return 0, false, err
			}
			return s.Offset(), true, f.Sync()
		}
		if err != nil {
			return 0, false, err
		}
	}
}
