package cls_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/internal/cls"
	"github.com/mq-hpc/mq/protocol"
)

// TestQueueMaxOutput: a job of a queue capped at 1 MiB that writes
// without end (yes) is stopped and fails with the queue's cap as its
// reason, its output cut at the cap, while the CLS goes on answering and
// its database stays small; a job of the default queue writing past the
// queue's cap (under the placeholder's own) runs to its end, whole.
func TestQueueMaxOutput(t *testing.T) {
	t.Parallel()
	c := startCLS(t, cls.Config{Version: "test"})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl, err := client.Dial(ctx, c.Home(), "", "cls-test")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const capped = 1 << 20
	limit := int64(capped)
	qi, err := client.Do(ctx, cl, protocol.OpQueueSet, protocol.QueueSet{Name: "capped", MaxOutput: &limit})
	if err != nil || qi.MaxOutput != capped {
		t.Fatalf("queue set: %+v, %v", qi, err)
	}
	bad := int64(protocol.MaxQueueOutput + 1)
	if _, err := client.Do(ctx, cl, protocol.OpQueueSet, protocol.QueueSet{Name: "capped", MaxOutput: &bad}); err == nil {
		t.Error("a cap past MaxQueueOutput was taken")
	}
	neighbour := 3 * capped
	sub, err := client.Do(ctx, cl, protocol.OpSubmit, protocol.Submit{Jobs: []protocol.JobSpec{
		{Target: "big", Queue: "capped", Command: "yes", Cwd: "/"},
		{Target: "next", Command: "head -c 3145728 /dev/zero", Cwd: "/"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	big, next := sub.IDs[0], sub.IDs[1]
	startAgent(t, c, streamsAgent)

	// The CLS answers all along: a summary at least every few seconds
	// until both jobs ended.
	var d protocol.JobDetail
	summaries := 0
	for {
		sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := client.Do(sctx, cl, protocol.OpSummary, protocol.Empty{})
		scancel()
		if err != nil {
			t.Fatalf("summary while the capped job ran: %v", err)
		}
		summaries++
		if d, err = client.Do(ctx, cl, protocol.OpJob, protocol.JobQuery{ID: big}); err != nil {
			t.Fatal(err)
		}
		n, err := client.Do(ctx, cl, protocol.OpJob, protocol.JobQuery{ID: next})
		if err != nil {
			t.Fatal(err)
		}
		if strings.ContainsAny(d.State, "DFX") && strings.ContainsAny(n.State, "DFX") {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("jobs not ended: %s %s", d.State, n.State)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if d.State != "F" || !strings.Contains(d.Reason, "cap of 1048576 bytes") || !strings.Contains(d.Reason, "queue capped's --max-output") {
		t.Errorf("capped job: state %s, reason %q; want failed at the queue's cap", d.State, d.Reason)
	}
	var out bytes.Buffer
	for fr, err := range c.Output(ctx, protocol.OutputQuery{ID: big}) {
		if err != nil {
			t.Fatal(err)
		}
		out.Write(fr.Data)
	}
	if out.Len() != capped || !strings.HasPrefix(out.String(), "y\ny\n") {
		t.Errorf("capped job's output: %d bytes, want %d", out.Len(), capped)
	}
	n, err := client.Do(ctx, cl, protocol.OpJob, protocol.JobQuery{ID: next})
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	for fr, err := range c.Output(ctx, protocol.OutputQuery{ID: next}) {
		if err != nil {
			t.Fatal(err)
		}
		out.Write(fr.Data)
	}
	if n.State != "D" || out.Len() != neighbour {
		t.Errorf("the default queue's job: state %s (%s), %d bytes of output; want done with %d", n.State, n.Reason, out.Len(), neighbour)
	}
	var db int64
	for _, f := range []string{"mq.db", "mq.db-wal"} {
		if fi, err := os.Stat(filepath.Join(c.Home(), f)); err == nil {
			db += fi.Size()
		}
	}
	if db > 16<<20 {
		t.Errorf("the database holds %d bytes after the capped job", db)
	}
	t.Logf("%d summaries answered while the jobs ran; database %d bytes", summaries, db)
}
