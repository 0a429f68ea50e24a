package cls

import (
	"github.com/mq-hpc/mq/internal/outstream"
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
// output is known once its attempt ended (its extent comes with the
// report), so a follower sees it whole then, not as it is written.
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
