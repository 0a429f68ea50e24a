package protocol

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxStreamed bounds Report.Streamed: an attempt has two outputs.
const MaxStreamed = 2

// Streamed says where one of an attempt's outputs lies in a stream file of
// the placeholder that ran it (package internal/outstream): the file's
// name in the placeholder's stream directory, the offset of the output's
// last chunk, its length, and whether it was cut at its cap. An output
// that held no byte is not listed.
type Streamed struct {
	Stream string `json:"stream"` // "stdout" or "stderr"
	File   string `json:"file"`   // a StreamFileName of the placeholder's
	Last   int64  `json:"last"`
	Bytes  int64  `json:"bytes"`
	Cut    bool   `json:"cut,omitempty"`
}

// StreamExtent is where a job attempt's stdout or stderr lies, as JobDetail
// gives it: the stream file on the host the job ran on and the output's
// extent in it.
type StreamExtent struct {
	Path    string `json:"path"`
	Attempt int    `json:"attempt"` // the output's tag is (job, Attempt, stream)
	Last    int64  `json:"last"`
	Bytes   int64  `json:"bytes"`
	Cut     bool   `json:"cut,omitempty"`
}

// StreamDir is the directory, under a placeholder's output directory, of
// its stream files.
const StreamDir = "streams"

// StreamFileName names the seq'th stream file of placeholder ph. The
// placeholder's id in the name is what lets the CLS check that a report
// names one of the reporting placeholder's own files.
func StreamFileName(ph int64, seq int) string {
	return fmt.Sprintf("%d-%d.mqs", ph, seq)
}

// MaxStreamFiles bounds the stream files of one placeholder the CLS
// copies (output.ship): their numbers run from 0 to MaxStreamFiles-1, so
// one placeholder key cannot fill the CLS's filesystem with tiny copies
// down to its inode reserve. A placeholder opens a file only past
// the rotation size (256 MiB by default: most jobs open none, one whose
// two outputs straddle a rotation two), its age (an hour, once it holds
// output) or, at most once a second, after a write failed: 65,536 files
// is 16 TiB of output, or seven years, under one id.
const MaxStreamFiles = 1 << 16

// StreamFileOwner returns the placeholder whose stream file name is, or
// false if name is not a StreamFileName (no path elements, no other
// spelling).
func StreamFileOwner(name string) (int64, bool) {
	ph, _, ok := parseStreamFile(name)
	return ph, ok
}

// StreamFileSeq returns the number of stream file name (its seq in
// StreamFileName), or false if name is not one.
func StreamFileSeq(name string) (int, bool) {
	_, seq, ok := parseStreamFile(name)
	return seq, ok
}

func parseStreamFile(name string) (int64, int, bool) {
	base, ok := strings.CutSuffix(name, ".mqs")
	if !ok {
		return 0, 0, false
	}
	a, b, ok := strings.Cut(base, "-")
	if !ok {
		return 0, 0, false
	}
	ph, err1 := strconv.ParseInt(a, 10, 64)
	seq, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || ph <= 0 || seq < 0 || StreamFileName(ph, seq) != name {
		return 0, 0, false
	}
	return ph, seq, true
}

// CheckStreamed checks one entry of Report.Streamed as a placeholder sent
// it, whatever placeholder it names.
func CheckStreamed(s Streamed) error {
	switch {
	case s.Stream != "stdout" && s.Stream != "stderr":
		return fmt.Errorf("streamed output: stream must be stdout or stderr, not %q", ClipText(s.Stream, 64))
	case s.Bytes <= 0 || s.Last < 0:
		return fmt.Errorf("streamed output: bad extent (last %d, %d bytes)", s.Last, s.Bytes)
	}
	if _, ok := StreamFileOwner(s.File); !ok {
		return fmt.Errorf("streamed output: %q is not a stream file name", ClipText(s.File, 64))
	}
	return nil
}

// MaxStreamPiece bounds StreamPiece.Data: well under the frame limit once
// base64 grows it by a third.
const MaxStreamPiece = 1 << 20

// MaxStreamCopy bounds the CLS's copy of one stream file: a placeholder
// leaves a stream file for a new one long before (its rotation size).
const MaxStreamCopy = 4 << 30

// StreamPiece ships the next bytes of one of a remote placeholder's
// stream files to the CLS's copy of it, in the CLS's own stream directory
// under the same name (op output.ship): a piece holds whatever bytes the
// file grew by, many jobs' outputs, and goes before the reports whose
// extents lie in it, so a reported extent is readable on the CLS host.
// Offset must be the copy's size; a piece without data writes nothing and
// asks it (how an agent resumes after a reconnect or a refused offset).
type StreamPiece struct {
	Placeholder int64  `json:"placeholder"`
	File        string `json:"file"` // a StreamFileName of the placeholder's
	Offset      int64  `json:"offset"`
	Data        []byte `json:"data,omitempty"` // base64 in JSON
}

// StreamPieceReply is the size of the CLS's copy once the piece is in it.
// Copied says the piece's bytes are in a copy of the CLS's own, not in
// the placeholder's very file (an agent writing in the CLS's output
// directory): an agent may remove its file once the copy holds all of it
// and every report naming it was taken.
type StreamPieceReply struct {
	Size   int64 `json:"size"`
	Copied bool  `json:"copied,omitempty"`
}

// CheckStreamPiece checks a piece as placeholder ph sent it: one of its
// own file names, a piece within the bounds.
func CheckStreamPiece(ph int64, p StreamPiece) error {
	if len(p.File) > 64 {
		return fmt.Errorf("stream piece: file name of %d bytes is not a stream file name", len(p.File))
	}
	owner, ok := StreamFileOwner(p.File)
	switch {
	case !ok:
		return fmt.Errorf("stream piece: %q is not a stream file name", ClipText(p.File, 64))
	case owner != ph:
		return fmt.Errorf("stream piece: %s is placeholder %d's file, not %d's", p.File, owner, ph)
	case len(p.Data) > MaxStreamPiece:
		return fmt.Errorf("stream piece: %d bytes, more than %d", len(p.Data), MaxStreamPiece)
	case p.Offset < 0 || p.Offset > MaxStreamCopy-int64(len(p.Data)):
		return fmt.Errorf("stream piece: offset %d with %d bytes is outside 0..%d", p.Offset, len(p.Data), int64(MaxStreamCopy))
	}
	return nil
}
