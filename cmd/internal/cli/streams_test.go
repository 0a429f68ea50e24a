package cli

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/cmd/internal/joboutput"
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
		if err := joboutput.Print(&b, d, c.stderr); err != nil || b.String() != c.want {
			t.Errorf("stderr %v: printed %q, %v; want %q", c.stderr, b.String(), err, c.want)
		}
	}
	d.StdoutStream.Last = ext[1].Last // the other output's chunk
	var b bytes.Buffer
	if err := joboutput.Print(&b, d, false); !errors.Is(err, outstream.ErrTorn) || b.Len() != 0 {
		t.Errorf("wrong extent: printed %q, %v; want nothing and a torn output", b.String(), err)
	}
}

// TestPrintOutputFileKinds: mqstat --cat opens an output file as every
// reader of output does: a FIFO a job left where its output was is
// refused at once (mqstat may run inside the CLS, over SSH, and would
// wait for a writer), and so is a symbolic link; a regular file, or none,
// prints what there is.
func TestPrintOutputFileKinds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "7.1.out")
	if err := os.WriteFile(file, []byte("out\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.out")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.out")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		path, copy string
		want       string
		err        error
	}{
		{"a file", file, "", "out\n", nil},
		{"none yet", filepath.Join(dir, "none.out"), "", "", nil},
		{"a FIFO", fifo, "", "", outstream.ErrNotRegular},
		{"a link", link, "", "", syscall.ELOOP},
		{"a remote job's copy", "/elsewhere/7.1.out", file, "out\n", nil},
		{"a FIFO as its copy", "/elsewhere/7.1.out", fifo, "", outstream.ErrNotRegular},
	} {
		d := protocol.JobDetail{JobInfo: protocol.JobInfo{ID: 7, Attempts: 1, State: "D"}, Stdout: tc.path, StdoutCopy: tc.copy}
		var b bytes.Buffer
		done := make(chan error, 1)
		go func() { done <- joboutput.Print(&b, d, false) }()
		var err error
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: mqstat --cat still waits after 30s", tc.name)
		}
		if !errors.Is(err, tc.err) || tc.err == nil && err != nil || b.String() != tc.want {
			t.Errorf("%s: printed %q, %v; want %q, %v", tc.name, b.String(), err, tc.want, tc.err)
		}
	}
}
