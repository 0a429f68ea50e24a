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
