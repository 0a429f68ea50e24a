package cls

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue"
	"github.com/mq-hpc/mq/internal/server"
)

// The CLS's protocol server serves every declared op: what the metaqueue
// does not serve itself, the site manager does.
func TestEveryOpServed(t *testing.T) {
	home := t.TempDir()
	store, err := metaqueue.Open(context.Background(), metaqueue.Options{Path: filepath.Join(home, "mq.db"), Sync: metaqueue.SyncNormal})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	log := slog.New(slog.DiscardHandler)
	st, err := newSites(home, store, log, time.Second, time.Second, "")
	if err != nil {
		t.Fatal(err)
	}
	srv := &server.Server{Store: store, Log: log}
	st.install(srv)
	(&files{store: newStoreFiles(store), places: st.place, home: home, log: log}).install(srv)
	(&outputs{store: jobWaiter{store.Inspect(), store}}).install(srv)
	(&plans{store: store, sites: st, log: log}).install(srv)
	if ops := srv.Unrouted(); len(ops) != 0 {
		t.Errorf("ops without a handler on the CLS: %v", ops)
	}
}
