package placeholder

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/placeholder/fence"
	"github.com/mq-hpc/mq/internal/placeholder/userstdio"
	"github.com/mq-hpc/mq/protocol"
)

// A job's write to its -o file after the agent was frozen does not wait
// for the CLS's word on the attempt: it is kept, and written once the
// word comes (at the file's close at the latest). Waiting held the job's
// output sink past the 2 s a report waits for it, and mq's own copy of
// the output was cut and reported lost.
func TestUserFileKeepsAfterFreeze(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	now := time.Unix(0, 0)
	w := fence.New(func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	w.SetLease(time.Hour)
	asg := protocol.Assignment{ID: 1, Attempt: 2, Env: []string{protocol.EnvStdout + "=o.txt"}}
	u, err := userstdio.Open(asg, dir, w)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(time.Hour) // frozen
	mu.Unlock()
	wrote := make(chan struct{})
	go func() {
		u.Out.Write([]byte("line\n"))
		close(wrote)
	}()
	select {
	case <-wrote:
	case <-time.After(5 * time.Second):
		t.Fatal("the write waited for the CLS's word")
	}
	w.Settle(w.Look(), nil) // the attempt is still this agent's
	if lost := u.Close(); lost != "" {
		t.Fatalf("lost: %s", lost)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "o.txt")); err != nil || string(b) != "line\n" {
		t.Errorf("o.txt holds %q (%v), want the line", b, err)
	}
}
