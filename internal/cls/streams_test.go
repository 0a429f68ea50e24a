package cls

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/mq-hpc/mq/internal/outstream"
	"github.com/mq-hpc/mq/protocol"
)

// TestTailJobStreamed: a streamed output is served from its stream file,
// in frames no larger than a frame may be, from the offset asked; one
// whose chunks are not as recorded is refused whole, nothing sent.
func TestTailJobStreamed(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "7-0.mqs")
	w, err := outstream.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Repeat([]byte("0123456789abcdef"), 200000/16)
	o := w.Output(outstream.Tag{Job: 3, Attempt: 2, Stream: outstream.Stderr}, 0)
	o.Write(want)
	ext, err := o.Close()
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	d := protocol.JobDetail{JobInfo: protocol.JobInfo{ID: 3, Attempts: 2}, Stderr: "/nonexistent/3.2.err",
		StderrStream: &protocol.StreamExtent{Path: path, Attempt: 2, Last: ext.Last, Bytes: ext.Bytes}}
	for _, off := range []int64{0, 70000, int64(len(want))} {
		var got bytes.Buffer
		end, err := tailJob(d, "stderr", 2, off, make([]byte, protocol.MaxOutputFrame), func(f protocol.OutputFrame) error {
			if len(f.Data) > protocol.MaxOutputFrame || f.Attempt != 2 || f.Offset != off+int64(got.Len()) {
				t.Errorf("frame at %d, %d bytes, attempt %d", f.Offset, len(f.Data), f.Attempt)
			}
			got.Write(f.Data)
			return nil
		})
		if err != nil || end != int64(len(want)) || !bytes.Equal(got.Bytes(), want[off:]) {
			t.Errorf("from %d: reached %d, %v; got %d bytes, want %d", off, end, err, got.Len(), len(want)-int(off))
		}
	}
	d.StderrStream.Bytes-- // not as recorded
	sent := 0
	_, err = tailJob(d, "stderr", 2, 0, nil, func(f protocol.OutputFrame) error { sent++; return nil })
	if !errors.Is(err, outstream.ErrTorn) || sent != 0 {
		t.Errorf("damaged extent: %v, %d frames sent; want ErrTorn and none", err, sent)
	}
}

// TestLiveStream: a running attempt's output is read from its
// placeholder's stream files as its chunks are written, from any offset,
// only whole chunks and only its own (other jobs' and other placeholders'
// files are passed over); size says how much is written without sending.
func TestLiveStream(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// Placeholder 7's first file holds another job's output only; the
	// followed one is in its second. Placeholder 8's file has a chunk with
	// the same tag: not the running placeholder's, never read.
	other, err := outstream.Create(filepath.Join(dir, protocol.StreamFileName(8, 0)))
	if err != nil {
		t.Fatal(err)
	}
	tag := outstream.Tag{Job: 3, Attempt: 1, Stream: outstream.Stdout}
	o8 := other.Output(tag, 0)
	o8.Write([]byte("not this\n"))
	o8.Flush()
	w0, err := outstream.Create(filepath.Join(dir, protocol.StreamFileName(7, 0)))
	if err != nil {
		t.Fatal(err)
	}
	ox := w0.Output(outstream.Tag{Job: 4, Attempt: 1}, 0)
	ox.Write([]byte("job 4\n"))
	ox.Close()
	w1, err := outstream.Create(filepath.Join(dir, protocol.StreamFileName(7, 1)))
	if err != nil {
		t.Fatal(err)
	}
	o := w1.Output(tag, 0)

	l := newLiveStream(dir, 7, 3, 1, "stdout")
	var got bytes.Buffer
	send := func(f protocol.OutputFrame) error {
		if f.Attempt != 1 || f.Offset != int64(got.Len()) {
			t.Errorf("frame of attempt %d at %d after %d bytes", f.Attempt, f.Offset, got.Len())
		}
		got.Write(f.Data)
		return nil
	}
	off, err := l.tail(0, nil, send)
	if err != nil || off != 0 || got.Len() != 0 {
		t.Fatalf("before any chunk: %d, %v, %q", off, err, got.String())
	}
	o.Write([]byte("first\n"))
	if off, _ = l.tail(off, nil, send); off != 0 {
		t.Fatalf("bytes not yet a chunk were sent: %q", got.String())
	}
	o.Flush()
	if off, err = l.tail(off, nil, send); err != nil || got.String() != "first\n" || off != 6 {
		t.Fatalf("after a chunk: %d, %v, %q", off, err, got.String())
	}
	o.Write([]byte("second\n"))
	o.Close()
	if off, err = l.tail(off, nil, send); err != nil || got.String() != "first\nsecond\n" || off != 13 {
		t.Fatalf("after the last chunk: %d, %v, %q", off, err, got.String())
	}
	if n := newLiveStream(dir, 7, 3, 1, "stdout").size(); n != 13 {
		t.Errorf("size %d, want 13", n)
	}
	// A follower starting at an offset gets the rest only.
	got.Reset()
	from := int64(8)
	send2 := func(f protocol.OutputFrame) error {
		if f.Offset != from+int64(got.Len()) {
			t.Errorf("frame at %d, want %d", f.Offset, from+int64(got.Len()))
		}
		got.Write(f.Data)
		return nil
	}
	if off, err := newLiveStream(dir, 7, 3, 1, "stdout").tail(from, nil, send2); err != nil || off != 13 || got.String() != "cond\n" {
		t.Errorf("from 8: %d, %v, %q", off, err, got.String())
	}
	if n := newLiveStream(dir, 9, 3, 1, "stdout").size(); n != 0 {
		t.Errorf("a placeholder without files: size %d", n)
	}
	w0.Close()
	w1.Close()
	other.Close()
}
