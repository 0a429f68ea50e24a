package placeholder

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/outstream"
	"github.com/mq-hpc/mq/protocol"
)

// shipTap records the output.ship pieces an agent sends, by file.
type shipTap struct {
	mu     sync.Mutex
	pieces map[string][][2]int64 // offset, length
	ops    map[string]int        // requests, by op
	wg     sync.WaitGroup        // a reader per connection, until it closes
}

// tap returns the write side of a connection, its requests read back.
func (s *shipTap) tap(rwc io.ReadWriteCloser) io.ReadWriteCloser {
	pr, pw := io.Pipe()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		sc := bufio.NewScanner(pr)
		sc.Buffer(nil, 8<<20)
		for sc.Scan() {
			var req protocol.Request
			if json.Unmarshal(sc.Bytes(), &req) != nil {
				continue
			}
			s.mu.Lock()
			s.ops[req.Op]++
			s.mu.Unlock()
			if req.Op != protocol.OpOutputShip.Name {
				continue
			}
			var p protocol.StreamPiece
			if json.Unmarshal(req.Body, &p) == nil {
				s.mu.Lock()
				s.pieces[p.File] = append(s.pieces[p.File], [2]int64{p.Offset, int64(len(p.Data))})
				s.mu.Unlock()
			}
		}
		io.Copy(io.Discard, pr)
	}()
	return tappedConn{rwc, pw}
}

type tappedConn struct {
	io.ReadWriteCloser
	copy *io.PipeWriter
}

func (t tappedConn) Write(p []byte) (int, error) {
	t.copy.Write(p)
	return t.ReadWriteCloser.Write(p)
}

func (t tappedConn) Close() error {
	t.copy.Close()
	return t.ReadWriteCloser.Close()
}

// TestAgentShipsStreams: a remote agent writing stream files ships them to
// the CLS in bulk: its jobs' outputs arrive in fewer output.ship requests
// than jobs, none of op output, each file's pieces contiguous from 0, the
// CLS's copy the very bytes of the agent's file, and every job's output
// readable there at its reported extent.
func TestAgentShipsStreams(t *testing.T) {
	t.Parallel()
	c := newCLS(t)
	c.srv.OutputDir = t.TempDir()
	const n = 120
	dir := t.TempDir()
	var specs []protocol.JobSpec
	for i := range n {
		specs = append(specs, protocol.JobSpec{Target: "t", Command: fmt.Sprintf("echo out-%d; echo err-%d >&2", i, i), Cwd: dir})
	}
	ids := c.submit(specs...)
	tap := &shipTap{pieces: map[string][][2]int64{}, ops: map[string]int{}}
	out := t.TempDir()
	cfg := Config{Site: "remote", Host: "h", Slots: 4, OutDir: out, Streams: true, StageOutput: true, prefetchWindow: 5 * time.Second,
		Dial: func(ctx context.Context) (io.ReadWriteCloser, error) {
			rwc, err := c.dial(ctx)
			if err != nil {
				return nil, err
			}
			return tap.tap(rwc), nil
		}}
	a := New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	ends := c.wait(ids...)
	// While the agent lives its files are there: each is the very bytes
	// of the CLS's copy.
	tap.mu.Lock()
	for file := range tap.pieces {
		site, err := os.ReadFile(filepath.Join(out, protocol.StreamDir, file))
		if err != nil {
			t.Fatal(err)
		}
		cp, err := os.ReadFile(filepath.Join(c.srv.OutputDir, protocol.StreamDir, file))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(site, cp) {
			t.Errorf("%s: the CLS's copy (%d bytes) is not the agent's file (%d bytes)", file, len(cp), len(site))
		}
	}
	tap.mu.Unlock()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Once it exits they are gone: the CLS has them whole, and every
	// report naming them was taken.
	if left, _ := filepath.Glob(filepath.Join(out, protocol.StreamDir, "*")); len(left) != 0 {
		t.Errorf("the agent left %v, which the CLS has copies of", left)
	}
	read := make(chan struct{})
	go func() { tap.wg.Wait(); close(read) }()
	select {
	case <-read:
	case <-time.After(time.Minute):
		t.Fatal("the agent's connections were not closed")
	}
	for id, e := range ends {
		if e.State != "D" {
			t.Errorf("job %d ended %+v, want D", id, e)
		}
	}
	tap.mu.Lock()
	ships, staged := tap.ops[protocol.OpOutputShip.Name], tap.ops[protocol.OpOutput.Name]
	tap.mu.Unlock()
	t.Logf("%d jobs: %d output.ship requests, %d output", n, ships, staged)
	if staged != 0 {
		t.Errorf("%d output requests; want none (streams ship in bulk)", staged)
	}
	if ships == 0 || ships >= n {
		t.Errorf("%d output.ship requests for %d jobs; want fewer than jobs", ships, n)
	}
	tap.mu.Lock()
	for file, ps := range tap.pieces {
		var next int64
		for _, p := range ps {
			if p[0] != next {
				t.Errorf("%s: piece at %d, want %d (pieces %v)", file, p[0], next, ps)
			}
			next = p[0] + p[1]
		}
	}
	tap.mu.Unlock()
	for i, id := range ids {
		d, err := c.store.Inspect().Job(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []struct {
			ext  *protocol.StreamExtent
			st   outstream.Stream
			want string
		}{{d.StdoutStream, outstream.Stdout, fmt.Sprintf("out-%d\n", i)}, {d.StderrStream, outstream.Stderr, fmt.Sprintf("err-%d\n", i)}} {
			if s.ext == nil {
				t.Fatalf("job %d: no %v extent (output lost: %q)", id, s.st, d.OutputLost)
			}
			var buf bytes.Buffer
			cp := filepath.Join(c.srv.OutputDir, protocol.StreamDir, filepath.Base(s.ext.Path))
			if _, err := outstream.ReadFile(&buf, cp, outstream.Tag{Job: id, Attempt: s.ext.Attempt, Stream: s.st}, outstream.Extent{Last: s.ext.Last, Bytes: s.ext.Bytes, Cut: s.ext.Cut}); err != nil || buf.String() != s.want {
				t.Errorf("job %d %v on the CLS: %q, %v; want %q", id, s.st, buf.String(), err, s.want)
			}
		}
	}
}

// runShipping starts a remote agent writing streams against c; stop ends
// it.
func runShipping(t *testing.T, c *cls, out string) (stop func()) {
	t.Helper()
	a := New(Config{Dial: c.dial, Site: "remote", Host: "h", Slots: 2, OutDir: out, Streams: true, StageOutput: true, prefetchWindow: 5 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// echoJobs submits n jobs echoing "tag-i" and waits for them to end.
func echoJobs(t *testing.T, c *cls, tag string, n int) []int64 {
	t.Helper()
	dir := t.TempDir()
	var specs []protocol.JobSpec
	for i := range n {
		specs = append(specs, protocol.JobSpec{Target: "t", Command: fmt.Sprintf("echo %s-%d", tag, i), Cwd: dir})
	}
	ids := c.submit(specs...)
	for id, e := range c.wait(ids...) {
		if e.State != "D" {
			t.Errorf("job %d ended %+v, want D", id, e)
		}
	}
	return ids
}

// TestAgentShipResumes: the CLS's copy is not where the agent left it (cut
// back, as a CLS restarting cuts a torn tail): the next piece is refused
// for its offset, the agent asks the copy's size and ships the rest from
// there, and every job's output, before and after, reads whole from the
// copy.
func TestAgentShipResumes(t *testing.T) {
	t.Parallel()
	c := newCLS(t)
	c.srv.OutputDir = t.TempDir()
	out := t.TempDir()
	stop := runShipping(t, c, out)
	first := echoJobs(t, c, "first", 10)
	copies, err := filepath.Glob(filepath.Join(c.srv.OutputDir, protocol.StreamDir, "*.mqs"))
	if err != nil || len(copies) != 1 {
		t.Fatalf("copies %v (%v), want one", copies, err)
	}
	if err := os.Truncate(copies[0], int64(len(outstream.Magic))); err != nil {
		t.Fatal(err)
	}
	second := echoJobs(t, c, "second", 10)
	site, err := os.ReadFile(filepath.Join(out, protocol.StreamDir, filepath.Base(copies[0])))
	if err != nil {
		t.Fatal(err)
	}
	cp, err := os.ReadFile(copies[0])
	if err != nil || !bytes.Equal(site, cp) {
		t.Fatalf("the copy (%d bytes, %v) is not the agent's file (%d bytes)", len(cp), err, len(site))
	}
	stop()
	for tag, ids := range map[string][]int64{"first": first, "second": second} {
		for i, id := range ids {
			got, err := copiedStdout(t, c, id)
			if want := fmt.Sprintf("%s-%d\n", tag, i); err != nil || got != want {
				t.Errorf("job %d from the copy: %q, %v; want %q", id, got, err, want)
			}
		}
	}
}

// TestAgentShipRefusedForRoom: a CLS whose disk is past its output reserve
// refuses the pieces; the jobs end as they ran, each report saying its
// output was not copied (and naming no extent), and the CLS goes on
// answering.
func TestAgentShipRefusedForRoom(t *testing.T) {
	t.Parallel()
	c := newCLS(t)
	c.srv.OutputDir = t.TempDir()
	c.srv.OutputReserve = 1 << 62 // more than any disk has free
	stop := runShipping(t, c, t.TempDir())
	ids := echoJobs(t, c, "full", 6)
	stop()
	for _, id := range ids {
		d, err := c.store.Inspect().Job(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if d.StdoutStream != nil || !strings.Contains(d.OutputLost, "stdout: not copied to the CLS") || !strings.Contains(d.OutputLost, "--output-reserve") {
			t.Errorf("job %d: extent %+v, output lost %q; want no extent and the reserve named", id, d.StdoutStream, d.OutputLost)
		}
	}
	if copies, _ := filepath.Glob(filepath.Join(c.srv.OutputDir, protocol.StreamDir, "*.mqs")); len(copies) != 0 {
		t.Errorf("refused pieces left copies %v", copies)
	}
}

// TestAgentStreamsReserve: with stream files the output reserve is
// measured on the output directory (no per-job directory is made), so a
// job whose output would leave less free is stopped, and, having written
// the reserve and more itself, fails. (The disk is one the files under
// the output directory fill, 128 KiB over the reserve: on a disk already
// below it the agent would take no job, and a job stopped having
// written less than the reserve runs again, TestAgentPausesForDisk.)
func TestAgentStreamsReserve(t *testing.T) {
	t.Parallel()
	c := newCLS(t)
	ids := c.submit(protocol.JobSpec{Target: "t", Command: "head -c 2000000 /dev/zero; sleep 600", Cwd: t.TempDir()})
	const reserve = 64 << 10
	out := t.TempDir()
	a := New(Config{Dial: c.dial, Site: "test", Host: "h", Slots: 1, OutDir: out, Streams: true, OutputReserve: reserve})
	a.statfs = filling(out, reserve+128<<10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	if e := c.wait(ids...)[ids[0]]; e.State != "F" || !strings.Contains(e.Reason, "nearly full") {
		t.Errorf("job ended %+v, want failed for the output reserve", e)
	}
}

// TestAgentShipRefusedForFiles: a stream file numbered past the files the
// CLS copies for one placeholder is refused for good: the agent asks once,
// not at every report naming it, and each report says its output was not
// copied. Nothing is made on the CLS.
func TestAgentShipRefusedForFiles(t *testing.T) {
	t.Parallel()
	c := newCLS(t)
	c.srv.OutputDir = t.TempDir()
	a := New(Config{Dial: c.dial, Site: "remote", Host: "h", Slots: 2, OutDir: t.TempDir(), Streams: true, StageOutput: true, prefetchWindow: 5 * time.Second})
	a.streams.firstSeq = protocol.MaxStreamFiles
	runAgent(t, a)
	var ids []int64
	for i := range 3 { // a report each, all in the one stream file
		ids = append(ids, echoJobs(t, c, fmt.Sprint("over", i), 1)...)
	}
	if n := c.count(protocol.OpOutputShip.Name, false); n != 1 {
		t.Errorf("the agent shipped the refused file %d times, want once", n)
	}
	for _, id := range ids {
		d, err := c.store.Inspect().Job(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if d.StdoutStream != nil || !strings.Contains(d.OutputLost, "stdout: not copied to the CLS") || !strings.Contains(d.OutputLost, "stream files 0 to") {
			t.Errorf("job %d: extent %+v, output lost %q; want no extent and the number of files named", id, d.StdoutStream, d.OutputLost)
		}
	}
	if copies, _ := filepath.Glob(filepath.Join(c.srv.OutputDir, protocol.StreamDir, "*.mqs")); len(copies) != 0 {
		t.Errorf("refused pieces left copies %v", copies)
	}
}

// TestAgentDropsShippedStreams: a remote agent removes a stream file it
// let go (left for a new one, every report naming it taken) once the
// CLS's copy holds all of it, and the rest at its exit; the jobs' output
// reads from the copies. An agent writing in the CLS's own output
// directory ships nothing (the CLS says its pieces were not copied) and
// removes nothing: its files are the ones the CLS reads.
func TestAgentDropsShippedStreams(t *testing.T) {
	t.Parallel()
	for _, own := range []bool{false, true} {
		c := newCLS(t)
		c.srv.OutputDir = t.TempDir()
		out := t.TempDir()
		if own {
			out = c.srv.OutputDir
		}
		a := New(Config{Dial: c.dial, Site: "remote", Host: "h", Slots: 1, OutDir: out, Streams: true, StageOutput: true, StreamAge: time.Nanosecond})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		first := echoJobs(t, c, "first", 1)
		second := echoJobs(t, c, "second", 1)
		firstFile := protocol.StreamFileName(1, 0)
		if !own {
			// Let go once job 1's report was taken, which may come after
			// job 2 ended.
			waitFor(t, "the first file removed", func() bool {
				_, err := os.Stat(filepath.Join(out, protocol.StreamDir, firstFile))
				return os.IsNotExist(err)
			})
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		left, _ := filepath.Glob(filepath.Join(out, protocol.StreamDir, "*.mqs"))
		switch {
		case own && len(left) != 2:
			t.Errorf("writing in the CLS's directory, the agent's files are %v, want both kept", left)
		case !own && len(left) != 0:
			t.Errorf("the agent left %v, which the CLS has copies of", left)
		}
		for tag, id := range map[string]int64{"first": first[0], "second": second[0]} {
			if got, err := copiedStdout(t, c, id); err != nil || got != tag+"-0\n" {
				t.Errorf("own %v: job %d from the CLS's copy: %q, %v", own, id, got, err)
			}
		}
	}
}

// copiedStdout reads job id's stdout where the CLS reads it: at its
// recorded extent in the CLS's copy of its stream file.
func copiedStdout(t *testing.T, c *cls, id int64) (string, error) {
	t.Helper()
	d, err := c.store.Inspect().Job(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	ext := d.StdoutStream
	if ext == nil {
		t.Fatalf("job %d: no stdout extent (lost: %q)", id, d.OutputLost)
	}
	var buf bytes.Buffer
	cp := filepath.Join(c.srv.OutputDir, protocol.StreamDir, filepath.Base(ext.Path))
	_, err = outstream.ReadFile(&buf, cp, outstream.Tag{Job: id, Attempt: ext.Attempt, Stream: outstream.Stdout}, outstream.Extent{Last: ext.Last, Bytes: ext.Bytes})
	return buf.String(), err
}
