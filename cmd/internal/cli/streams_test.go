package cli

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/mq-hpc/mq/internal/outstream"
	"github.com/mq-hpc/mq/protocol"
)

// TestPrintOutputStreamed: mqstat --cat reads a streamed output from its
// stream file by its extent; one not as recorded prints nothing and says
// it is torn.
func TestPrintOutputStreamed(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "4-0.mqs")
	w, err := outstream.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	var ext [2]outstream.Extent
	for i, text := range []string{"out\n", "err\n"} {
		o := w.Output(outstream.Tag{Job: 12, Attempt: 3, Stream: outstream.Stream(i)}, 0)
		o.Write([]byte(text))
		if ext[i], err = o.Close(); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	d := protocol.JobDetail{JobInfo: protocol.JobInfo{ID: 12, Attempts: 3, State: "D"}, Stdout: "/nowhere/12.3.out", Stderr: "/nowhere/12.3.err",
		StdoutStream: &protocol.StreamExtent{Path: path, Attempt: 3, Last: ext[0].Last, Bytes: ext[0].Bytes},
		StderrStream: &protocol.StreamExtent{Path: path, Attempt: 3, Last: ext[1].Last, Bytes: ext[1].Bytes}}
	for _, c := range []struct {
		stderr bool
		want   string
	}{{false, "out\n"}, {true, "err\n"}} {
		var b bytes.Buffer
		if err := printOutput(&b, d, c.stderr); err != nil || b.String() != c.want {
			t.Errorf("stderr %v: printed %q, %v; want %q", c.stderr, b.String(), err, c.want)
		}
	}
	d.StdoutStream.Last = ext[1].Last // the other output's chunk
	var b bytes.Buffer
	if err := printOutput(&b, d, false); !errors.Is(err, outstream.ErrTorn) || b.Len() != 0 {
		t.Errorf("wrong extent: printed %q, %v; want nothing and a torn output", b.String(), err)
	}
}
