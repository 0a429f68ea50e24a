package placeholder

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/outstream"
	"github.com/mq-hpc/mq/protocol"
)

// held says whether some open file description holds path's flock, as
// a purge asks it (removeStream): without waiting.
func held(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	switch {
	case err == nil:
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return false
	case errors.Is(err, syscall.EWOULDBLOCK):
		return true
	}
	t.Fatal(err)
	return false
}

// writeOutput writes data as output tag of placeholder 7 and closes it,
// returning its extent as a report names it.
func writeOutput(t *testing.T, s *streamSet, job int64, data string) protocol.Streamed {
	t.Helper()
	so, err := s.output(7, outstream.Tag{Job: job, Attempt: 1, Stream: outstream.Stdout})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := so.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	if err := so.Close(); err != nil {
		t.Fatal(err)
	}
	return protocol.Streamed{Stream: "stdout", File: so.f.name, Last: so.ext.Last, Bytes: so.ext.Bytes}
}

// TestStreamsLetGo: a stream file left for a new one (past its age, or
// its size) stays locked while an output in it is open or a report
// naming one of its outputs is unacknowledged, and is let go (closed, its
// lock freed, so a purge may remove it) once neither is; the current file
// is never let go, however its reports went.
func TestStreamsLetGo(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	s := newStreamSet(out, 0, nil)
	defer s.close()
	gone := make(chan string, 4)
	s.onLetGo = func(name string) { gone <- name }
	waitGone := func(want string) {
		t.Helper()
		select {
		case name := <-gone:
			if name != want {
				t.Fatalf("let go of %s, want %s", name, want)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s not let go", want)
		}
	}
	path := func(name string) string { return filepath.Join(out, protocol.StreamDir, name) }

	first := writeOutput(t, s, 1, "one\n")
	s.acked([]protocol.Report{{ID: 1, Attempt: 1, Streamed: []protocol.Streamed{first}}})
	if !held(t, path(first.File)) {
		t.Fatal("the current file is not held after its only report was acknowledged")
	}

	// Aged: the next output opens a new file, while an output of job 2
	// is still being written in the first.
	open, err := s.output(7, outstream.Tag{Job: 2, Attempt: 1, Stream: outstream.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	s.age = 0
	third := writeOutput(t, s, 3, "three\n")
	if third.File == first.File {
		t.Fatalf("an aged file was not left: %s", third.File)
	}
	open.Write([]byte("two\n"))
	if err := open.Close(); err != nil {
		t.Fatal(err)
	}
	second := protocol.Streamed{Stream: "stderr", File: open.f.name, Last: open.ext.Last, Bytes: open.ext.Bytes}
	if second.File != first.File {
		t.Fatalf("job 2's output went to %s, want %s", second.File, first.File)
	}
	if !held(t, path(first.File)) {
		t.Fatal("a left file is not held while a report naming it is unacknowledged")
	}
	// Another extent's acknowledgement, and a report of a file never
	// written, leave it held.
	s.acked([]protocol.Report{{ID: 3, Attempt: 1, Streamed: []protocol.Streamed{third, {Stream: "stdout", File: "7-99.mqs", Last: 8}}}})
	select {
	case name := <-gone:
		t.Fatalf("let go of %s with an output in it unacknowledged", name)
	default:
	}
	s.acked([]protocol.Report{{ID: 2, Attempt: 1, Streamed: []protocol.Streamed{second}}})
	waitGone(first.File)
	if held(t, path(first.File)) {
		t.Fatal("a file let go is still locked")
	}
	if !held(t, path(third.File)) {
		t.Fatal("the current file is not held")
	}
	// Its outputs still read back.
	f, err := os.Open(path(first.File))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b bytes.Buffer
	if _, err := outstream.Read(&b, f, outstream.Tag{Job: 2, Attempt: 1, Stream: outstream.Stderr}, outstream.Extent{Last: second.Last, Bytes: second.Bytes}); err != nil || b.String() != "two\n" {
		t.Errorf("job 2's output reads %q, %v", b.String(), err)
	}

	// A file left with nothing outstanding is let go as it is left; the
	// next file's number follows the last one made, not the files held.
	fourth := writeOutput(t, s, 4, "four\n")
	waitGone(third.File)
	if want := protocol.StreamFileName(7, 2); fourth.File != want {
		t.Errorf("the third file is %s, want %s", fourth.File, want)
	}
}
