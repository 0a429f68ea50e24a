package metaqueue

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"strings"

	_ "modernc.org/sqlite" // registers the "sqlite" driver (pure Go)

	"github.com/mq-hpc/mq/internal/metaqueue/schema"
	"github.com/mq-hpc/mq/internal/mqhome"
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

var uriPath = strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")

func dsn(path string, sync Sync, readOnly, checks bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(wal)")
	if sync == SyncSubmit {
		sync = SyncFull // until the first batch says otherwise
	}
	q.Add("_pragma", "synchronous("+string(sync)+")")
	q.Add("_pragma", "foreign_keys(off)")
	q.Add("_pragma", "temp_store(memory)")
	// 8 MB of page cache per connection. Listings scan in id order and gain
	// nothing from more; with 64 MB per reader a full listing of 1,000,000
	// jobs took the CLS from 157 to 319 MB (233 MB now, as fast).
	q.Add("_pragma", "cache_size(-8000)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		if !checks {
			q.Add("_pragma", "ignore_check_constraints(1)")
		}
	}
	// The path is part of a URI: '#' would start a fragment and '?' the
	// query, silently opening another file.
	return "file:" + uriPath.Replace(path) + "?" + q.Encode()
}

// openDB opens the writer connection and the reader pool, creating the
// schema on first use and checking that WAL mode really took.
func openDB(ctx context.Context, path string, sync Sync, checks bool) (w *sql.Conn, wdb, rdb *sql.DB, err error) {
	if sync != SyncFull && sync != SyncNormal && sync != SyncSubmit {
		return nil, nil, nil, fmt.Errorf("unknown sync mode %q (want submit, full or normal)", sync)
	}
	if err := prepareFiles(path); err != nil {
		return nil, nil, nil, err
	}
	wdb, err = sql.Open("sqlite", dsn(path, sync, false, checks))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("open %s: %w", path, err)
	}
	wdb.SetMaxOpenConns(1)
	cleanup := func() {
		if w != nil {
			w.Close()
		}
		wdb.Close()
		if rdb != nil {
			rdb.Close()
		}
	}
	w, err = wdb.Conn(ctx)
	if err != nil {
		cleanup()
		return nil, nil, nil, fmt.Errorf("open %s: %w", path, err)
	}
	var mode string
	if err := w.QueryRowContext(ctx, connSQL.Get("JournalMode")).Scan(&mode); err != nil {
		cleanup()
		return nil, nil, nil, fmt.Errorf("open %s: %w", path, err)
	}
	if !strings.EqualFold(mode, "wal") {
		cleanup()
		return nil, nil, nil, fmt.Errorf("open %s: journal_mode is %q, not wal (is the file on a network file system?)", path, mode)
	}
	if err := schema.Migrate(ctx, w); err != nil {
		cleanup()
		return nil, nil, nil, fmt.Errorf("open %s: %w", path, err)
	}
	rdb, err = sql.Open("sqlite", dsn(path, sync, true, checks))
	if err != nil {
		cleanup()
		return nil, nil, nil, fmt.Errorf("open %s: %w", path, err)
	}
	rdb.SetMaxOpenConns(4)
	return w, wdb, rdb, nil
}

// prepareFiles makes sure SQLite opens only this user's own files: SQLite
// follows symbolic links and cannot be told not to, so a link planted at
// mq.db or its -wal, -shm or -journal (which take the database's mode)
// is refused before it is opened. The database is created here, mode
// 0600, so that its companions are 0600 too whatever the umask. An older
// database that others could read is made 0600.
func prepareFiles(path string) error {
	for _, p := range []string{path, path + "-wal", path + "-shm", path + "-journal"} {
		if err := mqhome.CheckEntry(p, 0); err != nil {
			return fmt.Errorf("open %s: %w", path, err)
		}
		if fi, err := os.Lstat(p); err == nil && fi.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(p, 0o600); err != nil {
				return fmt.Errorf("open %s: %w", path, err)
			}
		}
	}
	f, err := mqhome.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	return f.Close()
}
