package placeholder

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mq-hpc/mq/internal/placeholder/hung"

	"github.com/mq-hpc/mq/protocol"
)

// shipResumes bounds how often one shipTo resumes from the CLS's size
// after a refused offset: each resume is the CLS's copy moving under it
// (a reply lost on a broken connection, a CLS restart cutting a torn
// piece), not something to retry forever.
const shipResumes = 3

// shipTo copies stream file f to the CLS's copy of it (op output.ship) up
// to at least end: whatever the file grew by since the last piece, in
// pieces of up to protocol.MaxStreamPiece, many jobs' outputs each. It
// runs before the reports whose extents lie in those bytes leave, so a
// reported extent is readable on the CLS host when the report lands; the
// reports of one batch share the pieces. The file's size is read under
// the writer's lock, so only whole chunks ship (a piece may still end in
// the middle of a large chunk: the next piece completes it).
func (a *Agent) shipTo(ctx context.Context, f *streamFile, end int64) error {
	f.shipMu.Lock()
	defer f.shipMu.Unlock()
	if f.shipped >= end {
		return nil
	}
	if f.refused != nil {
		return f.refused
	}
	if f.closed {
		// Let go once every report naming it was acknowledged: no
		// report waits for its bytes.
		return fmt.Errorf("%s is closed, short of %d", f.name, end)
	}
	if f.rd == nil {
		// Each read has a deadline (hangs.go): shipMu is held, and the
		// reports wait for it.
		rd, err := hung.Open(a.fsWait, "open", func() (*os.File, error) { return os.Open(filepath.Join(a.streams.dir, f.name)) })
		if err != nil {
			return err
		}
		f.rd = rd
	}
	size := f.w.Size()
	buf := make([]byte, min(size-f.shipped, protocol.MaxStreamPiece))
	resumes := 0
	for f.shipped < size {
		off := f.shipped
		part := buf[:min(size-off, int64(len(buf)))]
		n, err := hung.Value(a.fsWait, "read", func() (int, error) { return f.rd.ReadAt(part, off) })
		if err != nil {
			return fmt.Errorf("read %s: %w", f.name, err)
		}
		var rep protocol.StreamPieceReply
		err = call(ctx, a, protocol.OpOutputShip, func(int64) protocol.StreamPiece {
			// The file's own placeholder id: one the agent registered
			// anew under cannot ship it.
			return protocol.StreamPiece{Placeholder: f.owner, File: f.name, Offset: off, Data: buf[:n]}
		}, &rep)
		if err == nil {
			f.shipped = rep.Size
			f.copied = f.copied || rep.Copied
			f.kept = f.kept || !rep.Copied
			continue
		}
		if protocol.IsCode(err, protocol.CodeForbidden) {
			// Final for this file (past the number of files the CLS
			// copies, or not this placeholder's): its outputs stay here,
			// and every report naming it says so without asking again.
			f.refused = err
			return err
		}
		if !protocol.IsCode(err, protocol.CodeBadState) || resumes == shipResumes {
			return err
		}
		// The CLS's copy is not where this agent thought: resume from
		// its size (the bytes are the same on both sides).
		resumes++
		if err := call(ctx, a, protocol.OpOutputShip, func(int64) protocol.StreamPiece {
			return protocol.StreamPiece{Placeholder: f.owner, File: f.name}
		}, &rep); err != nil {
			return err
		}
		if rep.Size > size {
			return fmt.Errorf("the CLS's copy of %s is %d bytes, longer than the file's %d", f.name, rep.Size, size)
		}
		f.shipped = rep.Size
	}
	if f.shipped < end {
		return fmt.Errorf("%s is %d bytes, short of the reported output's end at %d", f.name, f.shipped, end)
	}
	return nil
}
