package metaqueue

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// TestPurgeRemovesStreams: purging the jobs whose outputs a stream file
// held deletes the file (its bytes count in the reply); a file another
// job's extent still names stays, and so does every file on a dry run.
func TestPurgeRemovesStreams(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	e := newEnvWith(t, func(o *Options) { o.OutputDir = out })
	ids := e.submit(spec("a", "x"), spec("b", "y"))
	ph := e.register("s")
	as := e.next(ph, 2)
	if len(as) != 2 {
		t.Fatalf("%d jobs handed out, want 2", len(as))
	}
	dir := filepath.Join(out, protocol.StreamDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	data := "MQSTRM01" + string(make([]byte, 92))
	old := time.Now().Add(-time.Hour)
	files := map[int64]string{}
	var reps []protocol.Report
	for i, a := range as {
		name := protocol.StreamFileName(ph, i)
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(p, old, old)
		files[a.ID] = p
		r := ok(a)
		r.Streamed = []protocol.Streamed{{Stream: "stdout", File: name, Last: 8, Bytes: 3}}
		reps = append(reps, r)
	}
	e.report(ph, reps...)
	e.advance(2 * time.Hour)

	dry := e.purge(protocol.Purge{EndedBefore: 3600, DryRun: true, Select: protocol.Select{IDs: []int64{ids[0]}}})
	if dry.Purged != 1 {
		t.Fatalf("dry run = %+v", dry)
	}
	for _, p := range files {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("after a dry run: %v", err)
		}
	}
	r := e.purge(protocol.Purge{EndedBefore: 3600, Select: protocol.Select{IDs: []int64{ids[0]}}})
	if r.Purged != 1 || r.Bytes != int64(len(data)) {
		t.Errorf("purge = %+v, want 1 job and its stream file's %d bytes", r, len(data))
	}
	if _, err := os.Stat(files[ids[0]]); !os.IsNotExist(err) {
		t.Errorf("the purged job's stream file: %v, want it gone", err)
	}
	if _, err := os.Stat(files[ids[1]]); err != nil {
		t.Errorf("the stream file of a job not purged: %v", err)
	}
	e.purge(protocol.Purge{EndedBefore: 3600, Select: protocol.Select{All: true}})
	if _, err := os.Stat(files[ids[1]]); !os.IsNotExist(err) {
		t.Errorf("the last job's stream file after it was purged: %v", err)
	}
}
