// Package outstream keeps many jobs' stdout and stderr in a few append-only
// stream files instead of two files per job, as HyperQueue's --stream
// does: a placeholder running a million short jobs leaves a handful of
// files, not a million, which is what parallel filesystems' metadata
// servers and inode quotas need.
//
// A stream file is a header followed by chunks. Each chunk carries a piece
// of one job attempt's stdout or stderr, tagged with the job, the attempt
// and the stream, the offset of the previous chunk of the same output (so a
// reader walks one job's chunks without scanning the file) and a CRC-32C
// over the chunk. The metaqueue records, per attempt and stream, only the
// Extent of the output: the offset of its last chunk, its byte count and
// whether it was cut at a cap.
//
// A crash can leave only the file's tail torn (writes append under one
// lock, and the agent syncs the file before it reports the jobs whose last
// chunks it holds): Recover cuts such a tail, and a reader never returns a
// chunk whose CRC or tag does not match, so a torn output is reported as
// such, never shown half as whole.
package outstream

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Magic opens every stream file.
const Magic = "MQSTRM01"

// HeaderSize is the size of a chunk's header.
const HeaderSize = 36

// MaxChunk bounds a chunk's payload, so a damaged length can never make a
// reader allocate more.
const MaxChunk = 1 << 20

const chunkMagic uint32 = 0x4843514d // "MQCH"

// Stream says which of a job's outputs a chunk holds.
type Stream uint8

const (
	Stdout Stream = iota
	Stderr
)

func (s Stream) String() string {
	switch s {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	}
	return fmt.Sprintf("stream(%d)", uint8(s))
}

// Chunk flags.
const (
	// flagLast marks the last chunk of an output: the output is whole.
	flagLast uint8 = 1 << iota
	// flagCut marks an output cut at its cap: bytes past it were dropped.
	flagCut
)

// Tag names one output: a job attempt's stdout or stderr.
type Tag struct {
	Job     int64
	Attempt int
	Stream  Stream
}

func (t Tag) String() string {
	return fmt.Sprintf("job %d attempt %d %s", t.Job, t.Attempt, t.Stream)
}

// Extent is where one output lies in a stream file: what the metaqueue
// keeps per attempt and stream.
type Extent struct {
	// Last is the offset of the output's last chunk; -1 for no output.
	Last int64 `json:"last"`
	// Bytes is the output's length.
	Bytes int64 `json:"bytes"`
	// Cut says the output passed its cap and the rest was dropped.
	Cut bool `json:"cut,omitempty"`
}

// chunk is a decoded header.
type chunk struct {
	tag   Tag
	flags uint8
	prev  int64
	n     uint32
	crc   uint32
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func putHeader(b []byte, c chunk) {
	binary.LittleEndian.PutUint32(b[0:], chunkMagic)
	binary.LittleEndian.PutUint64(b[4:], uint64(c.tag.Job))
	binary.LittleEndian.PutUint32(b[12:], uint32(c.tag.Attempt))
	b[16] = uint8(c.tag.Stream)
	b[17] = c.flags
	b[18], b[19] = 0, 0
	binary.LittleEndian.PutUint64(b[20:], uint64(c.prev))
	binary.LittleEndian.PutUint32(b[28:], c.n)
}

// seal computes the CRC of a chunk (header without its CRC field, then the
// payload) and stores it.
func seal(b []byte) {
	crc := crc32.Update(crc32.Checksum(b[:32], castagnoli), castagnoli, b[HeaderSize:])
	binary.LittleEndian.PutUint32(b[32:], crc)
}

// ErrTorn is returned for a chunk that is cut short or whose CRC does not
// match: the tail of a file written when its writer died, or damage.
var ErrTorn = errors.New("torn chunk")

// parseHeader decodes b (HeaderSize bytes) at offset off.
func parseHeader(b []byte, off int64) (chunk, error) {
	if binary.LittleEndian.Uint32(b[0:]) != chunkMagic {
		return chunk{}, fmt.Errorf("offset %d: no chunk here: %w", off, ErrTorn)
	}
	c := chunk{
		tag: Tag{
			Job:     int64(binary.LittleEndian.Uint64(b[4:])),
			Attempt: int(binary.LittleEndian.Uint32(b[12:])),
			Stream:  Stream(b[16]),
		},
		flags: b[17],
		prev:  int64(binary.LittleEndian.Uint64(b[20:])),
		n:     binary.LittleEndian.Uint32(b[28:]),
		crc:   binary.LittleEndian.Uint32(b[32:]),
	}
	switch {
	case c.n > MaxChunk:
		return chunk{}, fmt.Errorf("offset %d: chunk of %d bytes: %w", off, c.n, ErrTorn)
	case c.tag.Stream > Stderr, c.flags&^(flagLast|flagCut) != 0, b[18] != 0 || b[19] != 0:
		return chunk{}, fmt.Errorf("offset %d: bad chunk header: %w", off, ErrTorn)
	case c.prev >= off || c.prev < -1 || (c.prev >= 0 && c.prev < int64(len(Magic))):
		// A chunk's previous chunk lies before it: walks end.
		return chunk{}, fmt.Errorf("offset %d: bad previous chunk %d: %w", off, c.prev, ErrTorn)
	}
	return c, nil
}
