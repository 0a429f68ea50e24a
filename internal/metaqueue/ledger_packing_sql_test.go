package metaqueue

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/mq-hpc/mq/internal/sqlfile"
)

// TestLedgerPackingQueriesPrepare prepares every named query of the
// ledger's and packing's .sql files against a new database: they run on
// the core's schema, which the modules' own tests do not have.
func TestLedgerPackingQueriesPrepare(t *testing.T) {
	ctx := context.Background()
	w, wdb, rdb, err := openDB(ctx, filepath.Join(t.TempDir(), "mq.db"), SyncNormal, true)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { w.Close(); wdb.Close(); rdb.Close() }()
	for _, path := range []string{"ledger/ledger.sql", "packing/packing.sql"} {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		q, err := sqlfile.Parse(path, string(text))
		if err != nil {
			t.Fatal(err)
		}
		if len(q.Names()) == 0 {
			t.Errorf("%s: no queries", path)
		}
		for _, name := range q.Names() {
			st, err := w.PrepareContext(ctx, q.Get(name))
			if err != nil {
				t.Errorf("%s %s: %v", path, name, err)
				continue
			}
			st.Close()
		}
	}
}
