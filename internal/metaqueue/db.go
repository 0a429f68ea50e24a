package metaqueue

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/mq-hpc/mq/internal/metaqueue/schema"
	"github.com/mq-hpc/mq/internal/sqlitedb"
)

// Sync is how hard a commit pushes data to disk.
type Sync string

const (
	// SyncFull fsyncs the WAL at every commit: an acknowledged change
	// survives power loss as well as a crash of the CLS.
	SyncFull Sync = "full"
	// SyncNormal leaves fsync to checkpoints: an acknowledged change
	// survives a crash (kill -9) of the CLS but may be lost with the machine.
	SyncNormal Sync = "normal"
	// SyncSubmit fsyncs the commits that accept or change users' work
	// (submit, delete, rerun, queue settings) and not those of placeholder
	// traffic (dispatch, reports, leases). After a power loss nothing
	// submitted is lost; jobs that ended in the last moments may run again,
	// which at-least-once dispatch allows anyway.
	SyncSubmit Sync = "submit"
)

// openDB opens the writer connection and the reader pool (package
// sqlitedb), bringing the schema up to date on the writer.
func openDB(ctx context.Context, path string, sync Sync, checks bool) (w *sql.Conn, wdb, rdb *sql.DB, err error) {
	if sync != SyncFull && sync != SyncNormal && sync != SyncSubmit {
		return nil, nil, nil, fmt.Errorf("unknown sync mode %q (want submit, full or normal)", sync)
	}
	first := sync
	if sync == SyncSubmit {
		first = SyncFull // until the first batch says otherwise
	}
	return sqlitedb.Open(ctx, sqlitedb.Config{Path: path, Synchronous: string(first), Checks: checks, Readers: 4, Init: schema.Migrate})
}
