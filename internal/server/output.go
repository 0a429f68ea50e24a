package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/mq-hpc/mq/internal/diskroom"
	"github.com/mq-hpc/mq/internal/outstream"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// readOutput serves output.read: a piece of one attempt's stdout or
// stderr, read where mqstat --cat reads it (the CLS's staged copy of a
// remote placeholder's output, else the placeholder's own file, which is
// on this host for a local placeholder).
func readOutput(ctx context.Context, c *conn, b protocol.OutputRead) (protocol.OutputData, error) {
	var out protocol.OutputData
	if b.Stream != "stdout" && b.Stream != "stderr" {
		return out, protocol.Errorf(protocol.CodeBadRequest, "stream must be stdout or stderr, not %q", b.Stream)
	}
	if b.Offset < 0 || b.Attempt < 0 || b.Max < 0 {
		return out, protocol.Errorf(protocol.CodeBadRequest, "offset, attempt and max must not be negative")
	}
	max := b.Max
	if max == 0 || max > protocol.MaxOutputRead {
		max = protocol.MaxOutputRead
	}
	d, err := c.s.Store.Inspect().JobOutput(ctx, b.ID)
	if err != nil {
		return out, err
	}
	attempt, path, cp, lost, ext := d.Attempts, d.Stdout, d.StdoutCopy, d.OutputLost, d.StdoutStream
	if b.Stream == "stderr" {
		path, cp, ext = d.Stderr, d.StderrCopy, d.StderrStream
	}
	if b.Attempt != 0 && b.Attempt != d.Attempts {
		found := false
		for _, a := range d.History {
			if a.Attempt == b.Attempt {
				attempt, path, cp, lost, ext, found = a.Attempt, a.Stdout, a.StdoutCopy, a.OutputLost, a.StdoutStream, true
				if b.Stream == "stderr" {
					path, cp, ext = a.Stderr, a.StderrCopy, a.StderrStream
				}
			}
		}
		if !found {
			return out, protocol.Errorf(protocol.CodeNotFound, "job %d has no attempt %d", b.ID, b.Attempt)
		}
	}
	out.Attempt = attempt
	if path == "" {
		if len(d.State) == 1 && job.State(d.State[0]).Terminal() {
			return out, protocol.Errorf(protocol.CodeBadState, "job %d never ran: it has no output (state %s)", b.ID, d.State)
		}
		return out, protocol.Errorf(protocol.CodeBadState, "job %d has no output yet (state %s)", b.ID, d.State)
	}
	out.Lost = protocol.LostFor(lost, b.Stream)
	if ext != nil {
		return readStreamed(out, b, ext, max)
	}
	running := d.State == string(job.Executing) && attempt == d.Attempts
	if cp != "" {
		if _, err := os.Lstat(cp); errors.Is(err, os.ErrNotExist) && running {
			return out, protocol.Errorf(protocol.CodeBadState, "job %d is running on host %s; its output is copied to the CLS when it ends", b.ID, d.Host)
		}
		path = cp
	}
	// O_NOFOLLOW: the name is the CLS's own layout; a link there was not
	// made by a placeholder writing output.
	f, fi, err := outstream.OpenFile(path)
	if errors.Is(err, os.ErrNotExist) {
		out.EOF = true // output files are made at the first byte: none means no output
		return out, nil
	}
	if errors.Is(err, outstream.ErrNotRegular) {
		return out, protocol.Errorf(protocol.CodeBadState, "job %d's %s is not a regular file", b.ID, b.Stream)
	}
	if err != nil {
		return out, fmt.Errorf("job %d's %s: %w", b.ID, b.Stream, err)
	}
	defer f.Close()
	out.Size = fi.Size()
	if out.Size > protocol.MaxOutput {
		return out, protocol.Errorf(protocol.CodeTooLarge, "job %d's %s is %d bytes, more than the %d output.read serves; read it with mqstat -j %d's paths", b.ID, b.Stream, out.Size, int64(protocol.MaxOutput), b.ID)
	}
	if b.Offset >= out.Size {
		out.EOF = true
		return out, nil
	}
	buf := make([]byte, min(int64(max), out.Size-b.Offset))
	n, err := f.ReadAt(buf, b.Offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return out, fmt.Errorf("job %d's %s: %w", b.ID, b.Stream, err)
	}
	out.Data = buf[:n]
	out.EOF = b.Offset+int64(n) >= out.Size
	return out, nil
}

// stage writes a chunk of a job's output. A placeholder may stage only
// attempts it holds, and only within MaxStaged (plus room for the note).
func (c *conn) stage(ctx context.Context, b protocol.OutputChunk) error {
	if c.s.OutputDir == "" {
		return protocol.Errorf(protocol.CodeUnsupported, "this CLS does not keep staged output")
	}
	if b.Stream != "stdout" && b.Stream != "stderr" {
		return protocol.Errorf(protocol.CodeBadRequest, "stream must be stdout or stderr, not %q", b.Stream)
	}
	if b.Offset < 0 {
		return protocol.Errorf(protocol.CodeBadRequest, "output offset %d is negative", b.Offset)
	}
	if b.Offset > protocol.MaxStaged+64<<10-int64(len(b.Data)) {
		return protocol.Errorf(protocol.CodeBadRequest, "output beyond %d bytes is not staged", protocol.MaxStaged)
	}
	ok, err := c.s.Store.Holds(ctx, b.Placeholder, b.ID, b.Attempt)
	if err != nil {
		return err
	}
	if !ok {
		c.refused("output", "refused output for an attempt the placeholder does not hold", "placeholder", b.Placeholder, "job", b.ID, "attempt", b.Attempt)
		return protocol.Errorf(protocol.CodeForbidden, "placeholder %d does not hold job %d attempt %d", b.Placeholder, b.ID, b.Attempt)
	}
	out, errPath := job.OutputPaths(c.s.OutputDir, b.ID, b.Attempt)
	path := out
	if b.Stream == "stderr" {
		path = errPath
	}
	err = c.s.roomFor(int64(len(b.Data)))
	if err == nil {
		err = writeAt(path, b.Data, b.Offset)
	}
	if err != nil {
		// The job's outcome is its own; that its output is not whole here
		// is recorded beside it, for mqstat to say.
		why := fmt.Sprintf("%s not copied to the CLS: %v", b.Stream, err)
		if rerr := c.s.Store.OutputLost(ctx, b.Placeholder, b.ID, b.Attempt, why); rerr != nil {
			c.log.Error("could not record lost output", "job", b.ID, "err", rerr)
		}
		return fmt.Errorf("staging output: %w", err)
	}
	if c.s.OnOutput != nil {
		c.s.OnOutput(b.ID)
	}
	return nil
}

// noteDiskFull logs the jobs placeholder ph stopped because others filled
// its output disk (protocol.DiskFull): they run again, and it takes no
// work until it has room (its own log says when). Through the limiter:
// the first batch of a placeholder in a window, then a count.
func (c *conn) noteDiskFull(ph int64, reps []protocol.Report) {
	n, first := 0, int64(0)
	for _, r := range reps {
		if protocol.DiskFull(r.Reason) {
			if n == 0 {
				first = r.ID
			}
			n++
		}
	}
	if n > 0 {
		c.limiter().Warn(fmt.Sprintf("%s\x00diskfull\x00%d", c.identity, ph),
			"a placeholder's output disk is nearly full (cls serve --output-reserve): it stopped jobs, which run again, and takes no work until there is room",
			"peer", c.identity, "placeholder", ph, "jobs", n, "first_job", first)
	}
}

// roomFor refuses n bytes of output that would leave less than
// OutputReserve free on OutputDir's filesystem, or fewer than
// diskroom.InodeReserve free inodes (each new file takes one, and tiny ones run
// out of inodes long before bytes): both are kept for the database.
func (s *Server) roomFor(n int64) error {
	if s.OutputReserve <= 0 {
		return nil
	}
	statfs := s.statfs
	if statfs == nil {
		statfs = syscall.Statfs
	}
	var st syscall.Statfs_t
	if err := statfs(s.OutputDir, &st); err != nil {
		return err
	}
	free := diskroom.Of(&st)
	if free.Bytes-n < s.OutputReserve {
		return fmt.Errorf("the disk is nearly full (%d bytes free; %d are kept for the CLS, cls serve --output-reserve)", free.Bytes, s.OutputReserve)
	}
	if free.InodesShort() {
		return fmt.Errorf("the disk is nearly out of inodes (%d files free; %d are kept for the CLS)", free.Inodes, free.Keep)
	}
	return nil
}

// writeAt writes data at off in the file path, creating it (and its
// directory); offset 0 starts the file anew.
func writeAt(path string, data []byte, off int64) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	flags := os.O_WRONLY | os.O_CREATE | syscall.O_NOFOLLOW // never write through a link
	if off == 0 {
		flags |= os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(data, off)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
