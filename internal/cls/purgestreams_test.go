package cls_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/internal/cls"
	"github.com/mq-hpc/mq/internal/placeholder"
	"github.com/mq-hpc/mq/protocol"
)

// TestPurgeFreesLiveAgentsStreams: a placeholder that lives on (the
// CLS's own do, as long as the CLS) lets go of a stream file once it has
// left it for a new one and the reports of the outputs in it were
// acknowledged, so cls purge of those jobs removes it and counts its
// bytes; the file it writes to now stays, and its jobs' output reads.
func TestPurgeFreesLiveAgentsStreams(t *testing.T) {
	t.Parallel()
	c := startCLS(t, cls.Config{Version: "test"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := filepath.Join(c.Home(), "output")
	// Every output after the first opens a new file: an hour in a test.
	a := placeholder.New(placeholder.Config{
		Dial: func(ctx context.Context) (io.ReadWriteCloser, error) { return client.DialSocket(ctx, c.Home()) },
		Site: "s", Host: "test", OutDir: out, Streams: true, StreamAge: time.Nanosecond,
	})
	agentCtx, stopAgent := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Run(agentCtx)
	}()
	defer func() {
		stopAgent()
		<-done
	}()
	cl, err := client.Dial(ctx, c.Home(), "", "cls-test")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	run := func(command string) int64 {
		t.Helper()
		sub, err := client.Do(ctx, cl, protocol.OpSubmit, protocol.Submit{Jobs: []protocol.JobSpec{{Target: "t", Command: command, Cwd: "/"}}})
		if err != nil {
			t.Fatal(err)
		}
		w, err := client.Do(ctx, cl, protocol.OpWait, protocol.Wait{IDs: sub.IDs, TimeoutMS: 100_000})
		if err != nil || len(w.Jobs) != 1 || w.Jobs[0].State != "D" {
			t.Fatalf("job %d: %+v, %v", sub.IDs[0], w, err)
		}
		return sub.IDs[0]
	}
	first := run("head -c 100000 /dev/zero")
	files := func() []string {
		m, err := filepath.Glob(filepath.Join(out, protocol.StreamDir, "*.mqs"))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	old := files()
	if len(old) != 1 {
		t.Fatalf("stream files after one job: %v", old)
	}
	second := run("echo second")
	// Purge the first job until the file goes: the agent lets go of it
	// once the CLS acknowledged the first job's report, which may come
	// after the second job's end. The grace a purge gives a file written
	// in the last minute is what the test skips, by its time.
	long := time.Now().Add(-time.Hour)
	var freed int64
	for deadline := time.Now().Add(time.Minute); ; {
		if err := os.Chtimes(old[0], long, long); err != nil {
			t.Fatal(err)
		}
		p, err := client.Do(ctx, cl, protocol.OpPurge, protocol.Purge{Select: protocol.Select{IDs: []int64{first}}})
		if err != nil {
			t.Fatal(err)
		}
		freed += p.Bytes
		if !slices.Contains(files(), old[0]) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s stays after the purge of job %d (replies freed %d bytes)", old[0], first, freed)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if freed < 100000 {
		t.Errorf("the purge freed %d bytes, want the file's 100000 and more", freed)
	}
	if left := files(); len(left) != 1 {
		t.Errorf("stream files after the purge: %v, want the one the agent writes", left)
	}
	var got []byte
	for fr, err := range c.Output(ctx, protocol.OutputQuery{ID: second}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fr.Data...)
	}
	if string(got) != "second\n" {
		t.Errorf("job %d's output after the purge: %q", second, got)
	}
}
