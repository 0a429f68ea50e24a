package metaqueue

import (
	"path/filepath"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// TestStreamedExtentsRemote: a remote placeholder's extents are read in
// the CLS's copy of its stream file (shipped under the same name), a local
// one's in its own file, and a streamed output names no per-job copy.
func TestStreamedExtentsRemote(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	e := newEnvWith(t, func(o *Options) { o.OutputDir = out })
	id := e.submit(protocol.JobSpec{Target: "t", Command: "echo hi", Cwd: "/work"})[0]
	ph := e.register("s1") // its output directory is elsewhere: remote
	a := e.next(ph, 1)[0]
	own := protocol.StreamFileName(ph, 0)
	e.report(ph, protocol.Report{ID: id, Attempt: a.Attempt, Streamed: []protocol.Streamed{{Stream: "stdout", File: own, Last: 8, Bytes: 3}}})
	d := e.job(id)
	if want := filepath.Join(out, protocol.StreamDir, own); d.StdoutStream == nil || d.StdoutStream.Path != want {
		t.Fatalf("stdout stream %+v, want it read at %s", d.StdoutStream, want)
	}
	if d.StdoutCopy != "" {
		t.Errorf("a streamed output names a per-job copy %s", d.StdoutCopy)
	}
	if d.StderrCopy == "" {
		t.Errorf("stderr, not streamed, lost its copy's path")
	}
	e.check()
}
