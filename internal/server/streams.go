package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/mq-hpc/mq/internal/filelock"
	"github.com/mq-hpc/mq/internal/outstream"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// shipStream serves output.ship: the next bytes of a remote placeholder's
// stream file, appended to the CLS's copy of it under the same name in
// OutputDir/streams, where mqstat --cat reads what the placeholder's
// reports say lies there. A piece is written whole or not at all, only at
// the copy's end, only for the placeholder's own files.
func shipStream(ctx context.Context, c *conn, b protocol.StreamPiece) (protocol.StreamPieceReply, error) {
	var out protocol.StreamPieceReply
	if err := c.owns(b.Placeholder); err != nil {
		return out, err
	}
	if c.s.OutputDir == "" {
		return out, protocol.Errorf(protocol.CodeUnsupported, "this CLS does not keep staged output")
	}
	if err := protocol.CheckStreamPiece(b.Placeholder, b); err != nil {
		c.refused("output", "refused a stream piece", "placeholder", b.Placeholder, "err", err)
		code := protocol.CodeBadRequest
		if owner, ok := protocol.StreamFileOwner(b.File); ok && owner != b.Placeholder {
			code = protocol.CodeForbidden
		}
		return out, protocol.Errorf(code, "%v", err)
	}
	c.phMu.Lock()
	reg := c.phs[b.Placeholder]
	c.phMu.Unlock()
	dir := filepath.Join(c.s.OutputDir, protocol.StreamDir)
	if reg.OutDir == "" || filepath.Clean(reg.OutDir) == filepath.Clean(c.s.OutputDir) {
		// It writes the very file the CLS reads (an agent on the CLS's
		// host left with --out $MQ_HOME/output): appended, the piece
		// would be its own bytes twice. Bytes already there are shipped.
		if size, ok := holds(filepath.Join(dir, b.File), b); ok {
			out.Size = size
			return out, nil
		}
		return out, protocol.Errorf(protocol.CodeBadRequest, "placeholder %d writes its stream files in the CLS's own output directory: nothing to ship", b.Placeholder)
	}
	if seq, _ := protocol.StreamFileSeq(b.File); seq >= protocol.MaxStreamFiles {
		// Its copies are bounded by number too, not only by the output
		// reserve: tiny ones would use up the inodes it keeps for everyone.
		if c.s.shipped.capped(b.Placeholder) {
			c.log.Warn("a placeholder shipped more stream files than the CLS copies for one; their outputs stay on its host",
				"peer", c.identity, "placeholder", b.Placeholder, "file", b.File, "max", protocol.MaxStreamFiles)
		}
		return out, protocol.Errorf(protocol.CodeForbidden, "stream file %s is not copied: the CLS copies placeholder %d's stream files 0 to %d only", b.File, b.Placeholder, protocol.MaxStreamFiles-1)
	}
	size, err := c.s.appendCopy(dir, b)
	out.Size, out.Copied = size, err == nil
	return out, err
}

// holds says whether the file at path already holds p's bytes at p's
// offset (for a piece without data: whether it exists), and its size then.
func holds(path string, p protocol.StreamPiece) (int64, bool) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return 0, false
	}
	if len(p.Data) == 0 {
		return fi.Size(), true
	}
	got := make([]byte, len(p.Data))
	if _, err := f.ReadAt(got, p.Offset); err != nil || !bytes.Equal(got, p.Data) {
		return 0, false
	}
	return p.Offset + int64(len(p.Data)), true
}

// appendCopy appends p.Data to the copy of p.File in dir if p.Offset is
// its size, and returns the size after. The copy is flock'ed while it is
// written: a local agent cutting dead stream files' torn tails in the same
// directory (streams.go in package placeholder) leaves it alone then.
func (s *Server) appendCopy(dir string, p protocol.StreamPiece) (int64, error) {
	path := filepath.Join(dir, p.File)
	flags := os.O_RDWR | syscall.O_NOFOLLOW // never write through a link
	if len(p.Data) > 0 {
		// Before anything is made: a CLS short of room writes nothing.
		if err := s.roomFor(int64(len(p.Data))); err != nil {
			return 0, protocol.Errorf(protocol.CodeTooLarge, "stream piece of %s refused: %v", p.File, err)
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return 0, fmt.Errorf("stream copy: %w", err)
		}
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil // asked its size: nothing shipped yet
	}
	if err != nil {
		return 0, fmt.Errorf("stream copy: %w", err)
	}
	defer filelock.Close(f)
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return 0, fmt.Errorf("stream copy: lock %s: %w", p.File, err)
	}
	if s.shipped.first(p.Placeholder, p.File) {
		// The first piece since this CLS started: a copy it was writing
		// when it stopped may end in a torn piece. Cut it to its last
		// whole chunk; the placeholder ships the rest again from there.
		if err := recoverCopy(path, f); err != nil {
			s.shipped.forget(p.Placeholder, p.File)
			return 0, err
		}
	}
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("stream copy: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return 0, protocol.Errorf(protocol.CodeBadState, "the CLS's copy of %s is not a regular file", p.File)
	}
	size := fi.Size()
	if len(p.Data) == 0 {
		return size, nil
	}
	if p.Offset != size {
		return size, protocol.Errorf(protocol.CodeBadState, "stream piece at %d of %s: the CLS's copy is %d bytes", p.Offset, p.File, size)
	}
	if _, err := f.WriteAt(p.Data, size); err != nil {
		// A piece is in whole or not at all: the offsets stay the
		// placeholder's.
		f.Truncate(size)
		return size, fmt.Errorf("stream copy %s: %w", p.File, err)
	}
	if s.SyncStreams {
		// Before the reports naming these bytes are committed (they
		// come after the piece's reply).
		if err := f.Sync(); err != nil {
			f.Truncate(size)
			return size, fmt.Errorf("stream copy %s: %w", p.File, err)
		}
	}
	return size + int64(len(p.Data)), nil
}

// recoverCopy cuts the copy open as f at path to its last whole chunk;
// one too short to hold even the format's magic is emptied.
func recoverCopy(path string, f *os.File) error {
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return err
	}
	w, _, err := outstream.Append(path)
	if err != nil {
		// Not even the magic whole: ship it all again.
		if terr := f.Truncate(0); terr != nil {
			return fmt.Errorf("stream copy: %w", terr)
		}
		return nil
	}
	return w.Close()
}

// readStreamed serves output.read of an output in a stream file (the
// CLS's copy, for a remote placeholder's), checked chunk by chunk as
// mqstat --cat reads it: a torn one is an error, never served half.
func readStreamed(out protocol.OutputData, b protocol.OutputRead, ext *protocol.StreamExtent, max int) (protocol.OutputData, error) {
	out.Size = ext.Bytes
	if out.Size > protocol.MaxOutput {
		return out, protocol.Errorf(protocol.CodeTooLarge, "job %d's %s is %d bytes, more than the %d output.read serves; read it with mqstat --cat %d", b.ID, b.Stream, out.Size, int64(protocol.MaxOutput), b.ID)
	}
	if b.Offset >= out.Size {
		out.EOF = true
		return out, nil
	}
	st := outstream.Stdout
	if b.Stream == "stderr" {
		st = outstream.Stderr
	}
	w := &window{skip: b.Offset, max: max}
	_, err := outstream.ReadFile(w, ext.Path, outstream.Tag{Job: b.ID, Attempt: ext.Attempt, Stream: st}, outstream.Extent{Last: ext.Last, Bytes: ext.Bytes, Cut: ext.Cut})
	if err != nil && !errors.Is(err, errWindowFull) {
		return out, fmt.Errorf("job %d's %s: %w", b.ID, b.Stream, err)
	}
	out.Data = w.buf
	out.EOF = b.Offset+int64(len(w.buf)) >= out.Size
	return out, nil
}

// errWindowFull stops a read once a window holds what was asked.
var errWindowFull = errors.New("window full")

// window keeps up to max bytes of what is written to it past its first
// skip.
type window struct {
	skip, pos int64
	max       int
	buf       []byte
}

func (w *window) Write(p []byte) (int, error) {
	n := len(p)
	if d := w.skip - w.pos; d > 0 {
		k := min(d, int64(len(p)))
		p, w.pos = p[k:], w.pos+k
	}
	k := min(len(p), w.max-len(w.buf))
	w.buf = append(w.buf, p[:k]...)
	w.pos += int64(k)
	if len(w.buf) == w.max {
		return n, errWindowFull
	}
	return n, nil
}

// outputFiles says whether a placeholder of site writes a file per
// output (RegisterReply.OutputFiles): its site's choice, else the CLS's.
func (s *Server) outputFiles(site string) bool {
	if s.SiteOutputFiles != nil {
		if files, ok := s.SiteOutputFiles(site); ok {
			return files
		}
	}
	return s.OutputFiles
}

// streaming says whether job d's current attempt, not ended, writes its
// output into its placeholder's stream files (JobDetail.Streaming): no
// file per output was asked of its placeholder (outputFiles) nor of its
// job's queue.
func (s *Server) streaming(ctx context.Context, d protocol.JobDetail) (bool, error) {
	running := d.State == string(job.Executing) || d.State == string(job.Prefetched)
	if !running || d.Finished != "" || d.Site == "" || d.StdoutStream != nil || d.StderrStream != nil || s.outputFiles(d.Site) {
		return false, nil
	}
	qs, err := s.Store.Queues(ctx)
	if err != nil {
		return false, err
	}
	for _, q := range qs {
		if q.Name == d.Queue {
			return q.Output != protocol.OutputModeFiles, nil
		}
	}
	return true, nil
}
