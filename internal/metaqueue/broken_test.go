package metaqueue

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// TestNoteBrokenNoRoom: a broken placeholder's record that the disk has
// no room for fails with the full disk's answer, the next is answered at
// once without a commit, and the core goes on answering the heartbeats
// of a placeholder running a job; with room back it is stored and listed.
func TestNoteBrokenNoRoom(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	if err := e.s.AddSite(ctx, protocol.SiteSpec{Name: "s"}); err != nil {
		t.Fatal(err)
	}
	e.submit(spec("t", "true"))
	ph := e.register("s")
	got := e.next(ph, 1)
	if len(got) != 1 {
		t.Fatalf("got %d jobs", len(got))
	}
	at := time.Now()
	b := func(id int64) protocol.BrokenPlaceholder {
		return protocol.BrokenPlaceholder{ID: id, Host: "h", Why: "stuck", At: at}
	}
	full, commits := true, 0
	onCore := diskFull(t, e, &full, &commits)
	for i, id := range []int64{ph, ph + 1} {
		if err := e.s.NoteBroken(ctx, "s", b(id), false); err == nil || !strings.Contains(err.Error(), "free space on the filesystem of") {
			t.Fatalf("record %d on a full disk: %v, want the full disk's answer", i, err)
		}
		var tried int
		onCore(func() { tried = commits })
		if tried != 1 {
			t.Fatalf("%d commits tried after record %d; want 1: the first", tried, i)
		}
	}
	running := []protocol.JobRef{{ID: got[0].ID, Attempt: got[0].Attempt}}
	if r, err := e.s.Heartbeat(ctx, protocol.Heartbeat{Placeholder: ph, Running: running}); err != nil || len(r.Kill) != 0 {
		t.Fatalf("a heartbeat on a full disk = %+v, %v; want the lease renewed", r, err)
	}
	onCore(func() { full = false })
	e.advance(time.Second) // a probe finds room
	if err := e.s.NoteBroken(ctx, "s", b(ph), false); err != nil {
		t.Fatal(err)
	}
	listed, err := e.s.BrokenPlaceholders(ctx, at.Add(-time.Second))
	if err != nil || len(listed["s"]) != 1 || listed["s"][0].ID != ph {
		t.Fatalf("listed %+v, %v; want placeholder %d", listed, err, ph)
	}
}
