package spool

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/mq-hpc/mq/protocol"
)

// File is a bulk submission's spool on disk: specs appended as they
// arrive, within a cap on the bytes spooled (and a check of the jobs'
// cap), read back in order at the commit.
type File struct {
	f        *os.File
	w        *bufio.Writer
	size     int64 // bytes spooled
	maxJobs  int
	maxBytes int64
	buf      []byte
}

// Create opens a spool in dir holding at most maxJobs jobs and maxBytes
// bytes. Its name is removed at once: the open file is all it needs, so
// nothing is left to clean up after a crash.
func Create(dir string, maxJobs int, maxBytes int64) (*File, error) {
	f, err := os.CreateTemp(dir, "bulk-*.spool")
	if err != nil {
		return nil, fmt.Errorf("bulk submit: %w", err)
	}
	os.Remove(f.Name())
	return &File{f: f, w: bufio.NewWriterSize(f, 1<<20), maxJobs: maxJobs, maxBytes: maxBytes}, nil
}

// Size is the number of bytes spooled so far.
func (f *File) Size() int64 { return f.size }

// Fits checks that n more jobs, the first from input line, fit beside
// the have spooled already.
func (f *File) Fits(line, have, n int) error {
	if n > f.maxJobs-have {
		return protocol.Errorf(protocol.CodeTooLarge, "line %d: a bulk submission holds at most %d jobs", line+max(0, f.maxJobs-have), f.maxJobs)
	}
	return nil
}

// Write spools js, from input line.
func (f *File) Write(line int, js *protocol.JobSpec) error {
	f.buf = Append(f.buf[:0], js)
	if f.size += int64(len(f.buf)); f.size > f.maxBytes {
		return protocol.Errorf(protocol.CodeTooLarge, "line %d: a bulk submission spools at most %d bytes on the CLS", line, f.maxBytes)
	}
	if f.w == nil {
		return errors.New("bulk submit: spool: written after its commit began")
	}
	if _, err := f.w.Write(f.buf); err != nil {
		return fmt.Errorf("bulk submit: spool: %w", err)
	}
	return nil
}

// Flush writes out what is buffered, before the commit reads it back,
// and ends the writing: the buffer (a megabyte) is garbage before the
// commit's collection (Store's bulk commit), not held until Close.
func (f *File) Flush() error {
	if f.w == nil {
		return nil
	}
	if err := f.w.Flush(); err != nil {
		return fmt.Errorf("bulk submit: spool: %w", err)
	}
	f.w = nil
	return nil
}

// Rewind returns a reader of the spool from its start (for Read).
func (f *File) Rewind() (*bufio.Reader, error) {
	if _, err := f.f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("bulk submit: spool: %w", err)
	}
	return bufio.NewReaderSize(f.f, 1<<20), nil
}

// Close discards the spool.
func (f *File) Close() { f.f.Close() }
