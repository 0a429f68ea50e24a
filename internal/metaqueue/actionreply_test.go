package metaqueue

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// TestDeleteManyReplyFits: deleting an array of more members than
// protocol.MaxActionIDs answers with a count and the first ids, in a reply
// that fits in a frame (a million members once replied with 8 MB).
func TestDeleteManyReplyFits(t *testing.T) {
	if testing.Short() {
		t.Skip("150,000 jobs: a few seconds")
	}
	t.Parallel()
	e := newEnv(t)
	n := protocol.MaxActionIDs + 50_000
	b, err := e.s.NewBulk()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i += 10_000 {
		specs := make([]protocol.JobSpec, min(10_000, n-i))
		for k := range specs {
			specs[k] = spec("arr", "m "+strconv.Itoa(i+k))
		}
		if err := b.Add(i+1, specs); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Array("1-"+strconv.Itoa(n), 0); err != nil {
		t.Fatal(err)
	}
	first, err := b.Commit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	reply, err := e.s.Delete(context.Background(), protocol.Select{First: first, Last: first + int64(n) - 1, Atomic: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("deleted %d in %v", reply.Acted(), time.Since(t0))
	if reply.Acted() != n || len(reply.IDs) != protocol.MaxActionIDs || reply.IDs[0] != first {
		t.Fatalf("reply: count %d, %d ids from %d; want count %d, %d ids from %d", reply.Count, len(reply.IDs), reply.IDs[0], n, protocol.MaxActionIDs, first)
	}
	if _, err := protocol.AppendFrame(nil, protocol.Response{ID: 1, Body: mustJSON(t, reply)}); err != nil {
		t.Fatalf("the reply does not fit in a frame: %v", err)
	}
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
