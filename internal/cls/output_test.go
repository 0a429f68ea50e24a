package cls_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/internal/cls"
	"github.com/mq-hpc/mq/internal/placeholder"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// follower collects what CLS.Output yields, on its own goroutine.
type follower struct {
	frames chan protocol.OutputFrame
	errs   chan error
}

func follow(ctx context.Context, c *cls.CLS, q protocol.OutputQuery) *follower {
	f := &follower{frames: make(chan protocol.OutputFrame, 1024), errs: make(chan error, 1)}
	go func() {
		defer close(f.frames)
		for fr, err := range c.Output(ctx, q) {
			if err != nil {
				f.errs <- err
				return
			}
			f.frames <- fr
		}
	}()
	return f
}

// until reads frames until the data read so far satisfies done, or the
// stream ends; it returns the data and the end frame, if any.
func (f *follower) until(t *testing.T, data *bytes.Buffer, done func(string) bool) *protocol.OutputFrame {
	t.Helper()
	deadline := time.After(2 * time.Minute)
	for !done(data.String()) {
		select {
		case fr, ok := <-f.frames:
			if !ok {
				select {
				case err := <-f.errs:
					t.Fatalf("following: %v (after %q)", err, clipped(data.String()))
				default:
				}
				t.Fatalf("the stream ended after %q", clipped(data.String()))
			}
			if fr.End != nil {
				return &fr
			}
			if fr.Offset != int64(data.Len()) {
				t.Fatalf("frame at offset %d after %d bytes", fr.Offset, data.Len())
			}
			data.Write(fr.Data)
		case <-deadline:
			t.Fatalf("no more output after %q", clipped(data.String()))
		}
	}
	return nil
}

func clipped(s string) string {
	if len(s) > 200 {
		return s[:100] + "..." + s[len(s)-100:]
	}
	return s
}

// Kinds of placeholders startAgent starts.
const (
	localAgent   = "local"   // writes a file per output into the CLS's output directory
	remoteAgent  = "remote"  // stages its output like an agent on another host
	streamsAgent = "streams" // local, writing stream files (cls serve --output streams)
)

// startAgent runs a placeholder of kind in-process against c's socket
// until the test ends.
func startAgent(t *testing.T, c *cls.CLS, kind string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := filepath.Join(c.Home(), "output")
	if kind == remoteAgent {
		out = t.TempDir()
	}
	a := placeholder.New(placeholder.Config{
		Dial: func(ctx context.Context) (io.ReadWriteCloser, error) { return client.DialSocket(ctx, c.Home()) },
		Site: "s", Host: "test", OutDir: out, StageOutput: kind == remoteAgent, Streams: kind == streamsAgent,
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

func submit(t *testing.T, c *cls.CLS, command string) int64 {
	t.Helper()
	ctx := context.Background()
	cl, err := client.Dial(ctx, c.Home(), "", "cls-test")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	sub, err := client.Do(ctx, cl, protocol.OpSubmit, protocol.Submit{Jobs: []protocol.JobSpec{{Target: "t", Command: command, Cwd: "/"}}})
	if err != nil {
		t.Fatal(err)
	}
	return sub.IDs[0]
}

// Following a running job's output yields what it writes before it ends
// (the job waits for a file the test makes only after seeing its first
// line), then the rest and how it ended; for a remote placeholder's job
// too, whose output reaches the CLS only by live shipping while it waits,
// and for a local placeholder writing stream files, whose chunks the CLS
// reads as they are written. The CLS's copy of a remote job's output is
// whole and exact: what was shipped live is not sent again, nor lost.
func TestOutputFollow(t *testing.T) {
	for _, kind := range []string{localAgent, remoteAgent, streamsAgent} {
		t.Run(kind, func(t *testing.T) {
			remote := kind == remoteAgent
			t.Parallel()
			c := startCLS(t, cls.Config{Version: "test"})
			gate := filepath.Join(t.TempDir(), "go")
			// 300 KB before the gate: more than one tick of live shipping.
			id := submit(t, c, fmt.Sprintf(`echo first; head -c 300000 /dev/zero | tr '\0' a; echo; echo err >&2
while [ ! -e %s ]; do sleep 0.02; done; echo second; exit 3`, gate))
			startAgent(t, c, kind)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			f := follow(ctx, c, protocol.OutputQuery{ID: id, Follow: true})
			var got bytes.Buffer
			before := "first\n" + strings.Repeat("a", 300000) + "\n"
			if end := f.until(t, &got, func(s string) bool { return len(s) >= len(before) }); end != nil {
				t.Fatalf("the job ended (%+v) before the test let it", end.End)
			}
			if got.String() != before {
				t.Fatalf("before the gate: %q, want %q", clipped(got.String()), clipped(before))
			}
			if err := os.WriteFile(gate, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			end := f.until(t, &got, func(string) bool { return false })
			if got.String() != before+"second\n" {
				t.Errorf("followed %q, want %q", clipped(got.String()), clipped(before+"second\n"))
			}
			if end.End.State != "F" || end.End.Exit == nil || *end.End.Exit != 3 || end.Attempt != 1 || end.Lost != "" {
				t.Errorf("end frame %+v (end %+v); want attempt 1 failed with exit 3, nothing lost", end, end.End)
			}
			if _, ok := <-f.frames; ok {
				t.Error("a frame after the end")
			}
			out, _ := job.OutputPaths(filepath.Join(c.Home(), "output"), id, 1)
			if remote {
				if b, err := os.ReadFile(out); err != nil || string(b) != before+"second\n" {
					t.Errorf("the CLS's copy: %q, %v", clipped(string(b)), err)
				}
			}
			if kind == streamsAgent {
				if _, err := os.Lstat(out); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("a streamed job has an output file: %v", err)
				}
				if m, _ := filepath.Glob(filepath.Join(c.Home(), "output", protocol.StreamDir, "*.mqs")); len(m) == 0 {
					t.Error("no stream file written")
				}
			}

			// An ended job's output is replayed whole, then its end;
			// without follow too.
			for _, follow := range []bool{true, false} {
				var all bytes.Buffer
				var end *protocol.OutputFrame
				for fr, err := range c.Output(ctx, protocol.OutputQuery{ID: id, Stream: "stderr", Follow: follow}) {
					if err != nil {
						t.Fatal(err)
					}
					if fr.End != nil {
						end = &fr
						continue
					}
					all.Write(fr.Data)
				}
				if all.String() != "err\n" || end == nil || end.End.State != "F" {
					t.Errorf("stderr (follow %v): %q, end %+v", follow, all.String(), end)
				}
			}
		})
	}
}

// Refusals come as the iteration's error: an unknown job, a bad stream.
func TestOutputRefusals(t *testing.T) {
	t.Parallel()
	c := startCLS(t, cls.Config{Version: "test"})
	id := submit(t, c, "true")
	for _, q := range []protocol.OutputQuery{{ID: id + 1, Follow: true}, {ID: id, Stream: "stdin"}} {
		n := 0
		for _, err := range c.Output(context.Background(), q) {
			n++
			if err == nil {
				t.Errorf("%+v: a frame, want an error", q)
			}
		}
		if n != 1 {
			t.Errorf("%+v: %d items, want one error", q, n)
		}
	}
	// A job that has not run follows until it does: the caller's context
	// ends it.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	for _, err := range c.Output(ctx, protocol.OutputQuery{ID: id, Follow: true}) {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("following a queued job: %v, want the context's end", err)
		}
	}
}
