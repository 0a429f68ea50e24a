package metaqueue

import (
	"context"
	"database/sql"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// syncBuf is a log the core writes while the test reads it.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestLockedByAnotherProcess: another connection holding the database's
// write lock (an sqlite3 shell left in BEGIN IMMEDIATE) fails the write
// that meets it with an answer and a log line that say so; the writes
// after it are answered so at once, not after the busy timeout each with
// the core stopped; reads go on; once the lock is let go, writes go
// through again without a restart.
func TestLockedByAnotherProcess(t *testing.T) {
	var logs syncBuf
	e := newEnvWith(t, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	e.submit1("a", "true")
	db, err := sql.Open("sqlite", "file:"+e.opt.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	shell, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer shell.Close()
	if _, err := shell.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	const why = "another process holds the write lock of the database"
	if _, err := e.s.Submit(ctx, []protocol.JobSpec{spec("b", "true")}); err == nil || !strings.Contains(err.Error(), why) {
		t.Fatalf("submit under the lock: %v, want %q", err, why)
	}
	if got := strings.Count(logs.String(), why); got != 1 {
		t.Errorf("%d log lines say why, want 1:\n%s", got, logs.String())
	}
	start := time.Now()
	_, err = e.s.Submit(ctx, []protocol.JobSpec{spec("b", "true")})
	if err == nil || !strings.Contains(err.Error(), why) {
		t.Errorf("second submit under the lock: %v, want %q", err, why)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("second submit answered after %v: it waited for the lock again; log:\n%s", d, logs.String())
	}
	if jobs := e.stat(protocol.Stat{}); len(jobs) != 1 {
		t.Errorf("mqstat under the lock: %d jobs, want 1", len(jobs))
	}
	if _, err := shell.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		e.clock.Advance(time.Second) // the core looks at the lock again when due
		_, err := e.s.Submit(ctx, []protocol.JobSpec{spec("b", "true")})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the lock went: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.check()
}
