package cls

import (
	"math"
	"os"
	"path/filepath"

	"github.com/mq-hpc/mq/internal/outstream"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// streamOf is where stream of d's current attempt lies in a stream file,
// when the CLS reads it there: a local placeholder's own file, or the
// CLS's copy of a remote one's (a streamed output names no per-job copy),
// as outputPath reads a per-job file. nil: not streamed.
func streamOf(d protocol.JobDetail, stream string) *protocol.StreamExtent {
	if stream == "stderr" {
		if d.StderrCopy == "" {
			return d.StderrStream
		}
		return nil
	}
	if d.StdoutCopy == "" {
		return d.StdoutStream
	}
	return nil
}

// tailJob is tail for stream of job d's attempt: from its stream file
// when the attempt reported it there, else from its file. A streamed
// output's extent comes with the attempt's report; while the attempt
// runs, a follower reads its chunks as they are written (liveStream).
func tailJob(d protocol.JobDetail, stream string, attempt int, off int64, buf []byte, send func(protocol.OutputFrame) error) (int64, error) {
	ext := streamOf(d, stream)
	if ext == nil || ext.Attempt != attempt {
		return tail(outputPath(d, stream), attempt, off, buf, send)
	}
	if off >= ext.Bytes {
		return off, nil
	}
	st := outstream.Stdout
	if stream == "stderr" {
		st = outstream.Stderr
	}
	fw := &frameWriter{skip: off, attempt: attempt, send: send}
	_, err := outstream.ReadFile(fw, ext.Path, outstream.Tag{Job: d.ID, Attempt: attempt, Stream: st}, outstream.Extent{Last: ext.Last, Bytes: ext.Bytes, Cut: ext.Cut})
	return off + fw.sent, err
}

// frameWriter sends what is written to it past its first skip bytes as
// frames of at most protocol.MaxOutputFrame.
type frameWriter struct {
	skip    int64
	pos     int64 // bytes written so far
	sent    int64
	attempt int
	send    func(protocol.OutputFrame) error
}

func (fw *frameWriter) Write(p []byte) (int, error) {
	n := len(p)
	if d := fw.skip - fw.pos; d > 0 {
		k := min(d, int64(len(p)))
		p, fw.pos = p[k:], fw.pos+k
	}
	for len(p) > 0 {
		k := min(len(p), protocol.MaxOutputFrame)
		data := make([]byte, k) // the receiver may keep it
		copy(data, p[:k])
		if err := fw.send(protocol.OutputFrame{Attempt: fw.attempt, Offset: fw.pos, Data: data}); err != nil {
			return n - len(p), err
		}
		p, fw.pos, fw.sent = p[k:], fw.pos+int64(k), fw.sent+int64(k)
	}
	return n, nil
}

// liveStream follows a running attempt's output in its placeholder's
// stream files, in the CLS's output area (where a local placeholder
// writes them), before the attempt's report says where the output lies.
// Until the output's first chunk it looks at every file of the
// placeholder, each from where it stopped; an output lies in one file,
// so once found only that one. Chunks are passed only whole and checked
// (outstream.Follower); the bytes they hold are the same the extent
// reads at the end, so a follower goes on from the same offset then.
type liveStream struct {
	dir string // the CLS's output/streams
	ph  int64
	tag outstream.Tag

	files map[string]*outstream.Follower
	in    string // the file holding the output, once found
}

func newLiveStream(dir string, ph int64, id int64, attempt int, stream string) *liveStream {
	st := outstream.Stdout
	if stream == "stderr" {
		st = outstream.Stderr
	}
	return &liveStream{dir: dir, ph: ph, tag: outstream.Tag{Job: id, Attempt: attempt, Stream: st}, files: map[string]*outstream.Follower{}}
}

// tail sends what the output holds past off, as tail does for a file.
// Files it cannot read are passed over: the report's extent says at the
// end what the output is, and reading it then fails if it is not there.
func (l *liveStream) tail(off int64, buf []byte, send func(protocol.OutputFrame) error) (int64, error) {
	names := []string{l.in}
	if l.in == "" {
		entries, err := os.ReadDir(l.dir)
		if err != nil {
			return off, nil // no stream file yet
		}
		names = names[:0]
		for _, e := range entries {
			if ph, ok := protocol.StreamFileOwner(e.Name()); ok && ph == l.ph {
				names = append(names, e.Name())
			}
		}
	}
	for _, name := range names {
		f := l.files[name]
		if f == nil {
			f = outstream.NewFollower(l.tag)
			l.files[name] = f
		}
		fw := &frameWriter{skip: off, pos: f.Bytes(), attempt: l.tag.Attempt, send: send}
		if err := pollStream(filepath.Join(l.dir, name), f, fw); err != nil {
			return off + fw.sent, err
		}
		off += fw.sent
		if f.Found() {
			l.in = name
			break
		}
	}
	return off, nil
}

// size is how much of the output is written so far (what a follower
// starting now would be sent): nothing is sent.
func (l *liveStream) size() int64 {
	l.tail(math.MaxInt64, nil, nil) // skips everything: send is never called
	if f := l.files[l.in]; f != nil {
		return f.Bytes()
	}
	return 0
}

// pollStream reads the followed output's new chunks in the stream file
// at path into fw. A file that is not a readable regular file is no
// output yet; a send that fails is the error.
func pollStream(path string, f *outstream.Follower, fw *frameWriter) error {
	file, fi, err := outstream.OpenFile(path)
	if err != nil {
		return nil
	}
	defer file.Close()
	var sendErr error
	f.Poll(file, fi.Size(), func(p []byte) error { // fw skips what was sent before
		_, sendErr = fw.Write(p)
		return sendErr
	})
	// Any other error is a file not as written: the extent's read says
	// so at the end.
	return sendErr
}

// live returns the follower of d's running attempt's streamed output,
// reusing l while it follows the same attempt; nil when d's attempt is
// not running on a placeholder or the CLS keeps no output area.
func (o *outputs) live(l *liveStream, d protocol.JobDetail, stream string, attempt int) *liveStream {
	if o.streamDir == "" || d.State != string(job.Executing) || d.Placeholder <= 0 || attempt != d.Attempts {
		return nil
	}
	if l != nil && l.ph == d.Placeholder && l.tag.Attempt == attempt {
		return l
	}
	return newLiveStream(o.streamDir, d.Placeholder, d.ID, attempt, stream)
}
