package placeholder

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/outstream"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// streamAgent is an agent writing to stream files, registered as
// placeholder 7, that runs jobs with run (no CLS).
func streamAgent(t *testing.T, rotate int64) (*Agent, string) {
	t.Helper()
	out := t.TempDir()
	a := New(Config{Site: "test", Host: "h", Slots: 1, OutDir: out, Streams: true, StreamRotate: rotate})
	a.id.Store(7)
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	a.devNull = f
	t.Cleanup(func() {
		a.streams.close()
		f.Close()
	})
	return a, out
}

// readStreamed reads one output of a report from its stream file.
func readStreamed(t *testing.T, out string, rep protocol.Report, stream string) (string, bool) {
	t.Helper()
	for _, s := range rep.Streamed {
		if s.Stream != stream {
			continue
		}
		f, err := os.Open(filepath.Join(out, protocol.StreamDir, s.File))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		st := outstream.Stdout
		if stream == "stderr" {
			st = outstream.Stderr
		}
		var b bytes.Buffer
		if _, err := outstream.Read(&b, f, outstream.Tag{Job: rep.ID, Attempt: rep.Attempt, Stream: st}, outstream.Extent{Last: s.Last, Bytes: s.Bytes, Cut: s.Cut}); err != nil {
			t.Fatalf("job %d %s: %v", rep.ID, stream, err)
		}
		return b.String(), true
	}
	return "", false
}

// TestAgentStreams: outputs land in the placeholder's stream file, which
// the report names with each non-empty output's extent; an empty output
// writes and reports nothing, and no per-job file is made. The file is
// synced past an output's last chunk as its report leaves.
func TestAgentStreams(t *testing.T) {
	t.Parallel()
	a, out := streamAgent(t, 0)
	var mu sync.Mutex
	var synced int64
	a.streams.sync = func(w *outstream.Writer) error {
		mu.Lock()
		synced = max(synced, w.Size())
		mu.Unlock()
		return w.Sync()
	}
	cases := []struct {
		cmd            string
		stdout, stderr string
		hasOut, hasErr bool
	}{
		{cmd: "echo hi", stdout: "hi\n", hasOut: true},
		{cmd: "true"},
		{cmd: "echo out; echo err >&2", stdout: "out\n", stderr: "err\n", hasOut: true, hasErr: true},
		{cmd: "echo only >&2; exit 3", stderr: "only\n", hasErr: true},
		{cmd: "head -c 200000 /dev/zero", stdout: strings.Repeat("\x00", 200000), hasOut: true},
	}
	for i, c := range cases {
		rep := a.run(context.Background(), protocol.Assignment{ID: int64(i + 1), Attempt: 1, Command: c.cmd, Target: "t"})
		if rep.Reason != "" || rep.OutputLost != "" {
			t.Fatalf("%q: reason %q, lost %q", c.cmd, rep.Reason, rep.OutputLost)
		}
		got, ok := readStreamed(t, out, rep, "stdout")
		if ok != c.hasOut || got != c.stdout {
			t.Errorf("%q: stdout %q (streamed %v), want %q (%v)", c.cmd, protocol.ClipText(got, 40), ok, protocol.ClipText(c.stdout, 40), c.hasOut)
		}
		got, ok = readStreamed(t, out, rep, "stderr")
		if ok != c.hasErr || got != c.stderr {
			t.Errorf("%q: stderr %q (streamed %v), want %q (%v)", c.cmd, got, ok, c.stderr, c.hasErr)
		}
		a.syncReports(context.Background(), []protocol.Report{rep})
		for _, s := range rep.Streamed {
			if err := protocol.CheckStreamed(s); err != nil {
				t.Errorf("%q: %v", c.cmd, err)
			}
			if owner, _ := protocol.StreamFileOwner(s.File); owner != 7 {
				t.Errorf("%q: file %s is not placeholder 7's", c.cmd, s.File)
			}
			mu.Lock()
			if synced < s.Last+outstream.HeaderSize {
				t.Errorf("%q: report leaves before the stream was synced past its last chunk (%d < %d)", c.cmd, synced, s.Last+outstream.HeaderSize)
			}
			mu.Unlock()
		}
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != protocol.StreamDir {
		t.Errorf("output area holds %v, want only %s", entries, protocol.StreamDir)
	}
	files, _ := os.ReadDir(filepath.Join(out, protocol.StreamDir))
	if len(files) != 1 || files[0].Name() != protocol.StreamFileName(7, 0) {
		t.Errorf("stream files %v, want one", files)
	}
}

// TestAgentStreamsRotate: past its size a stream file is left for the
// next, and a placeholder registered anew writes files of its new id.
func TestAgentStreamsRotate(t *testing.T) {
	t.Parallel()
	a, out := streamAgent(t, 100)
	var reps []protocol.Report
	for i := 1; i <= 4; i++ {
		if i == 4 {
			a.id.Store(9)
		}
		reps = append(reps, a.run(context.Background(), protocol.Assignment{ID: int64(i), Attempt: 1, Command: "echo line of job $MQ_JOB_ID, long enough to pass a hundred bytes with its header"}))
	}
	want := []string{"7-0.mqs", "7-1.mqs", "7-2.mqs", "9-3.mqs"}
	for i, rep := range reps {
		if len(rep.Streamed) != 1 || rep.Streamed[0].File != want[i] {
			t.Errorf("job %d streamed %+v, want in %s", rep.ID, rep.Streamed, want[i])
			continue
		}
		if got, _ := readStreamed(t, out, rep, "stdout"); !strings.HasPrefix(got, "line of job ") {
			t.Errorf("job %d stdout %q", rep.ID, got)
		}
	}
}

// TestStreamsRecoverDead: a stream file whose writer died mid-chunk (no
// agent holds its lock) has its torn tail cut by the next agent writing
// to the directory; what was reported from it reads whole, a file a live
// agent holds is left alone.
func TestStreamsRecoverDead(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	dir := filepath.Join(out, protocol.StreamDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(dir, protocol.StreamFileName(3, 0))
	w, err := outstream.Create(dead)
	if err != nil {
		t.Fatal(err)
	}
	o := w.Output(outstream.Tag{Job: 1, Attempt: 1}, 0)
	o.Write([]byte("whole\n"))
	ext, err := o.Close()
	if err != nil {
		t.Fatal(err)
	}
	whole := w.Size()
	o = w.Output(outstream.Tag{Job: 2, Attempt: 1}, 0)
	o.Write([]byte("half written"))
	o.Close()
	w.Close()
	// The second chunk torn: its last bytes never reached the disk.
	if err := os.Truncate(dead, whole+outstream.HeaderSize+4); err != nil {
		t.Fatal(err)
	}

	live := newStreamSet(out, 0, nil)
	if _, err := live.output(5, outstream.Tag{Job: 9, Attempt: 1}); err != nil {
		t.Fatal(err)
	}
	defer live.close()
	liveName := filepath.Join(dir, protocol.StreamFileName(5, 0))
	liveSize := fileSize(t, liveName)

	s := newStreamSet(out, 0, nil)
	if _, err := s.output(6, outstream.Tag{Job: 10, Attempt: 1}); err != nil {
		t.Fatal(err)
	}
	defer s.close()
	if got := fileSize(t, dead); got != whole {
		t.Errorf("dead stream file is %d bytes after recovery, want %d (its torn tail cut)", got, whole)
	}
	if got := fileSize(t, liveName); got != liveSize {
		t.Errorf("live agent's file changed from %d to %d bytes", liveSize, got)
	}
	f, err := os.Open(dead)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b bytes.Buffer
	if _, err := outstream.Read(&b, f, outstream.Tag{Job: 1, Attempt: 1}, ext); err != nil || b.String() != "whole\n" {
		t.Errorf("reported output reads %q, %v", b.String(), err)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestAgentStreamsReported: through a CLS, the extents reach the job's
// detail and read back; a stream that cannot be synced is not reported
// (the report carries the loss instead): the sync is on the report's way.
func TestAgentStreamsReported(t *testing.T) {
	t.Parallel()
	c := newCLS(t)
	out := t.TempDir()
	a := New(Config{Dial: c.dial, Site: "test", Host: "h", Slots: 2, OutDir: out, Streams: true})
	var mu sync.Mutex
	fail := false
	a.streams.sync = func(w *outstream.Writer) error {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			return errors.New("disk gone")
		}
		return w.Sync()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	var specs []protocol.JobSpec
	for i := 0; i < 20; i++ {
		specs = append(specs, protocol.JobSpec{Target: "t", Command: "echo hi-$MQ_JOB_ID", Cwd: t.TempDir()})
	}
	ids := c.submit(specs...)
	c.wait(ids...)
	for _, id := range ids {
		d, err := c.store.Inspect().Job(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		e := d.StdoutStream
		if e == nil {
			t.Errorf("job %d: no stdout stream in %+v", id, d)
			continue
		}
		var b bytes.Buffer
		if _, err := outstream.ReadFile(&b, e.Path, outstream.Tag{Job: id, Attempt: e.Attempt}, outstream.Extent{Last: e.Last, Bytes: e.Bytes}); err != nil || b.String() != fmt.Sprintf("hi-%d\n", id) {
			t.Errorf("job %d: stdout %q, %v", id, b.String(), err)
		}
	}
	mu.Lock()
	fail = true
	mu.Unlock()
	id := c.submit(protocol.JobSpec{Target: "t", Command: "echo lost", Cwd: t.TempDir()})[0]
	c.wait(id)
	d, err := c.store.Inspect().Job(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if d.StdoutStream != nil || !strings.Contains(d.OutputLost, "disk gone") {
		t.Errorf("unsynced output: stream %+v, output_lost %q; want none, and the loss", d.StdoutStream, d.OutputLost)
	}
}

// TestAgentStreamsQueueFiles: an attempt whose queue asks for files
// (Assignment.OutputFiles) writes a file per output though the agent
// writes streams, and its report names no stream; the next attempt
// without it streams again.
func TestAgentStreamsQueueFiles(t *testing.T) {
	t.Parallel()
	a, out := streamAgent(t, 0)
	rep := a.run(context.Background(), protocol.Assignment{ID: 1, Attempt: 1, Command: "echo to-a-file; echo err >&2", Target: "t", OutputFiles: true})
	if rep.Reason != "" || rep.OutputLost != "" || len(rep.Streamed) != 0 {
		t.Fatalf("reason %q, lost %q, streamed %+v; want a file each", rep.Reason, rep.OutputLost, rep.Streamed)
	}
	outPath, errPath := job.OutputPaths(out, 1, 1)
	for path, want := range map[string]string{outPath: "to-a-file\n", errPath: "err\n"} {
		if b, err := os.ReadFile(path); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", path, b, err, want)
		}
	}
	if names, _ := filepath.Glob(filepath.Join(out, protocol.StreamDir, "*.mqs")); len(names) != 0 {
		t.Errorf("stream files %v after a files attempt alone", names)
	}
	rep = a.run(context.Background(), protocol.Assignment{ID: 2, Attempt: 1, Command: "echo streamed", Target: "t"})
	if got, ok := readStreamed(t, out, rep, "stdout"); !ok || got != "streamed\n" {
		t.Errorf("the next attempt's stdout %q (streamed %v), want it streamed", got, ok)
	}
}

// TestStreamsAfterFailedWrite: once a stream file fails a write (a full
// disk, a file-size limit; here its descriptor closed under it), the next
// output goes to a new file and reads whole, instead of every later output
// being lost; a file that fails in turn is left no sooner than streamRetry
// after the last new one.
func TestStreamsAfterFailedWrite(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	s := newStreamSet(out, 0, nil)
	defer s.close()
	write := func(job int64) (*streamOut, error) {
		t.Helper()
		so, err := s.output(7, outstream.Tag{Job: job, Attempt: 1})
		if err != nil {
			t.Fatal(err)
		}
		so.Write([]byte(fmt.Sprintf("job %d\n", job)))
		return so, so.Close()
	}
	reads := func(so *streamOut, job int64) {
		t.Helper()
		f, err := os.Open(filepath.Join(out, protocol.StreamDir, so.f.name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var b bytes.Buffer
		if _, err := outstream.Read(&b, f, outstream.Tag{Job: job, Attempt: 1}, so.ext); err != nil || b.String() != fmt.Sprintf("job %d\n", job) {
			t.Errorf("job %d's output reads %q, %v", job, b.String(), err)
		}
	}
	first, err := write(1)
	if err != nil {
		t.Fatal(err)
	}
	first.f.w.Close() // every later write to the file fails
	if _, err := write(2); err == nil {
		t.Fatal("an output written into the broken file was kept")
	}
	second, err := write(3)
	if err != nil {
		t.Fatalf("the output after a failed write: %v", err)
	}
	if second.f == first.f {
		t.Fatal("the output after a failed write went to the failed file")
	}
	reads(first, 1)
	reads(second, 3)

	second.f.w.Close()
	if _, err := write(4); err == nil {
		t.Fatal("an output written into the second broken file was kept")
	}
	if so, err := write(5); err == nil || so.f != second.f {
		t.Fatalf("a new file within streamRetry of the last: %v, file %s", err, so.f.name)
	}
	s.retryAt = time.Time{} // as if streamRetry passed
	third, err := write(6)
	if err != nil || third.f == second.f {
		t.Fatalf("after streamRetry: %v, file %s (the failed one %s)", err, third.f.name, second.f.name)
	}
	reads(third, 6)
}

// TestAgentStreamsOutputCap: a streamed output the attempt's cap stopped
// is reported cut (mqstat -j says so), its bytes up to the cap kept; one
// under the cap is not.
func TestAgentStreamsOutputCap(t *testing.T) {
	t.Parallel()
	a, out := streamAgent(t, 0)
	for i, c := range []struct {
		cmd   string
		bytes int64
		cut   bool
	}{
		{cmd: "head -c 100000 /dev/zero; sleep 600", bytes: 60000, cut: true},
		{cmd: "head -c 1000 /dev/zero", bytes: 1000},
	} {
		rep := a.run(context.Background(), protocol.Assignment{ID: int64(i + 1), Attempt: 1, Command: c.cmd, Target: "t", Queue: "capped", MaxOutput: 60000})
		if c.cut != strings.Contains(rep.Reason, "cap of 60000 bytes") {
			t.Errorf("%q: reason %q", c.cmd, rep.Reason)
		}
		if len(rep.Streamed) != 1 || rep.Streamed[0].Bytes != c.bytes || rep.Streamed[0].Cut != c.cut {
			t.Fatalf("%q: streamed %+v; want stdout's %d bytes, cut %v", c.cmd, rep.Streamed, c.bytes, c.cut)
		}
		if got, _ := readStreamed(t, out, rep, "stdout"); got != strings.Repeat("\x00", int(c.bytes)) {
			t.Errorf("%q: stdout of %d bytes, want %d zeros", c.cmd, len(got), c.bytes)
		}
	}
}
