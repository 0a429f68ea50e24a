package outstream

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
)

// ChunkSize is how much of one output an Output gathers before it writes
// a chunk: large enough that a chatty job costs few headers, small enough
// that a follower sees output as it comes.
const ChunkSize = 64 << 10

// ErrCut is returned by Output.Write when the output passed its cap: the
// bytes past it were dropped. What follows (stop the job, let it run) is
// the caller's choice.
var ErrCut = errors.New("output passed its cap")

// A Writer appends chunks to one stream file. Its methods are safe for
// concurrent use: the outputs of every job a placeholder runs share it.
//
// A write or sync on a hung filesystem may never return: only writes wait
// for each other (mu); Size, Err and Sync never wait for a write, so the
// reports and new outputs of other jobs are not held by one that hangs.
type Writer struct {
	mu   sync.Mutex // held by put, across its write
	f    *os.File
	size atomic.Int64
	// err is the first write error: the file is not trusted past size
	// after it, and every later write fails with it.
	err atomic.Pointer[error]
}

// fsync commits f (tests hold it, as a hung filesystem does).
var fsync = (*os.File).Sync

// Create makes a new stream file at path (mode 0600: outputs are the
// user's alone); it fails if path exists.
func Create(path string) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if _, err := f.WriteAt([]byte(Magic), 0); err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	w := &Writer{f: f}
	w.size.Store(int64(len(Magic)))
	return w, nil
}

// Append opens the stream file at path to write more after a restart: a
// torn tail is cut first (Recover). torn says whether one was.
func Append(path string) (w *Writer, torn bool, err error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, false, err
	}
	size, torn, err := recoverFile(f)
	if err != nil {
		f.Close()
		return nil, false, fmt.Errorf("%s: %w", path, err)
	}
	w = &Writer{f: f}
	w.size.Store(size)
	return w, torn, nil
}

// Name is the file's name as given to Create or Append.
func (w *Writer) Name() string { return w.f.Name() }

// Size is the file's length: where the next chunk goes.
func (w *Writer) Size() int64 { return w.size.Load() }

// Err is the first write error (a full disk, a file-size limit): every
// later write fails with it. Nil while the file is whole.
func (w *Writer) Err() error {
	if p := w.err.Load(); p != nil {
		return *p
	}
	return nil
}

// Sync commits the file's chunks to stable storage. The agent calls it
// before it reports the attempts whose outputs it holds, so a reported
// Extent is never lost to a crash. It covers every chunk whose write
// returned before it was called.
func (w *Writer) Sync() error {
	if err := w.Err(); err != nil {
		return err
	}
	return fsync(w.f)
}

// Close syncs and closes the file.
func (w *Writer) Close() error {
	err := w.Sync()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// put appends one chunk and returns its offset.
func (w *Writer) put(c chunk, payload []byte) (int64, error) {
	buf := make([]byte, HeaderSize+len(payload))
	c.n = uint32(len(payload))
	copy(buf[HeaderSize:], payload)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.Err(); err != nil {
		return 0, err
	}
	off := w.size.Load()
	putHeader(buf, c)
	seal(buf)
	if _, err := w.f.WriteAt(buf, off); err != nil {
		err = fmt.Errorf("write %s: %w", w.f.Name(), err)
		w.err.Store(&err)
		return 0, err
	}
	w.size.Add(int64(len(buf)))
	return off, nil
}

// Output returns the writer of one output, holding at most max bytes
// (0: no cap).
func (w *Writer) Output(t Tag, max int64) *Output {
	return &Output{w: w, tag: t, max: max, last: -1}
}

// An Output gathers one job attempt's stdout or stderr into chunks of its
// Writer. It is not safe for concurrent use (one goroutine copies a job's
// pipe into it).
type Output struct {
	w     *Writer
	tag   Tag
	max   int64
	buf   []byte
	last  int64 // offset of the last chunk written, -1 none
	bytes int64 // bytes kept (written and buffered)
	cut   bool
	done  bool
}

// Write keeps p, writing a chunk each ChunkSize bytes. Past the cap it
// keeps what fits and returns ErrCut (with len(p), so an io.Copy into it
// stops at once).
func (o *Output) Write(p []byte) (int, error) {
	if o.done {
		return 0, errors.New("outstream: write after Close")
	}
	n := len(p)
	if o.max > 0 && o.bytes+int64(len(p)) > o.max {
		p = p[:max(0, o.max-o.bytes)]
		o.cut = true
	}
	for len(p) > 0 {
		k := min(len(p), ChunkSize-len(o.buf))
		o.buf = append(o.buf, p[:k]...)
		o.bytes += int64(k)
		p = p[k:]
		if len(o.buf) == ChunkSize {
			if err := o.Flush(); err != nil {
				return 0, err
			}
		}
	}
	if o.cut {
		return n, ErrCut
	}
	return n, nil
}

// MarkCut marks the output cut at its cap as if Write had passed it: for
// a writer that keeps a cap of its own (the agent's, on an attempt's
// stdout and stderr together) and dropped this output's bytes past it.
// Close's chunk and Extent say so.
func (o *Output) MarkCut() { o.cut = true }

// Flush writes what is gathered as a chunk now (nothing if nothing is), so
// a follower sees it.
func (o *Output) Flush() error {
	if len(o.buf) == 0 || o.done {
		return nil
	}
	return o.write(0)
}

func (o *Output) write(flags uint8) error {
	off, err := o.w.put(chunk{tag: o.tag, flags: flags, prev: o.last}, o.buf)
	if err != nil {
		return err
	}
	o.last = off
	o.buf = o.buf[:0]
	return nil
}

// Close writes the output's last chunk and returns its Extent. An output
// that never held a byte writes nothing: Extent{Last: -1}.
func (o *Output) Close() (Extent, error) {
	if o.done {
		return Extent{}, errors.New("outstream: Close twice")
	}
	if o.bytes > 0 {
		flags := flagLast
		if o.cut {
			flags |= flagCut
		}
		if err := o.write(flags); err != nil {
			return Extent{}, err
		}
	}
	o.done = true
	return Extent{Last: o.last, Bytes: o.bytes, Cut: o.cut}, nil
}

var _ io.Writer = (*Output)(nil)

// Buffered is how many bytes Write gathered that no chunk holds yet.
func (o *Output) Buffered() int { return len(o.buf) }
