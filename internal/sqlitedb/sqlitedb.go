// Package sqlitedb opens a SQLite database the way the metaqueue keeps
// one: a single writer connection, a pool of query-only readers, WAL mode
// checked, and the files this user's own (no symbolic link followed, mode
// 0600). What is stored and how is the caller's (Config.Init).
package sqlitedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver (pure Go)

	"github.com/mq-hpc/mq/internal/mqhome"
)

// Config says how to open a database.
type Config struct {
	Path string
	// Synchronous is the connections' "synchronous" pragma until the
	// caller sets it otherwise: "full" or "normal".
	Synchronous string
	// Checks keeps the writer's CHECK constraints (off, they cost every
	// insert).
	Checks bool
	// Readers is the most connections the read pool opens.
	Readers int
	// Init runs on the writer once WAL mode is checked, before the read
	// pool opens: the schema's migrations.
	Init func(ctx context.Context, w *sql.Conn) error
}

// busyTimeoutMS is how long a write waits for a write lock another
// process holds.
const busyTimeoutMS = 10000

var uriPath = strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")

// dsn is the driver's name for the database at path.
func dsn(path, synchronous string, readOnly, checks bool) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeoutMS))
	q.Add("_pragma", "journal_mode(wal)")
	q.Add("_pragma", "synchronous("+synchronous+")")
	q.Add("_pragma", "foreign_keys(off)")
	q.Add("_pragma", "temp_store(memory)")
	// A WAL that grew while another process's read transaction held
	// checkpoints back is cut back to 64 MiB once one finishes, instead
	// of keeping its size for good.
	q.Add("_pragma", "journal_size_limit(67108864)")
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

// Open opens the writer connection and the reader pool, running
// Config.Init on the writer and checking that WAL mode really took. On an
// error nothing is left open.
func Open(ctx context.Context, c Config) (w *sql.Conn, wdb, rdb *sql.DB, err error) {
	path := c.Path
	if err := PrepareFiles(path); err != nil {
		return nil, nil, nil, err
	}
	wdb, err = sql.Open("sqlite", dsn(path, c.Synchronous, false, c.Checks))
	if err != nil {
		return nil, nil, nil, openErr(path, err)
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
		return nil, nil, nil, openErr(path, err)
	}
	var mode string
	if err := w.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		cleanup()
		return nil, nil, nil, openErr(path, err)
	}
	if !strings.EqualFold(mode, "wal") {
		cleanup()
		return nil, nil, nil, fmt.Errorf("open %s: journal_mode is %q, not wal (is the file on a network file system?)", path, mode)
	}
	if c.Init != nil {
		if err := initNow(ctx, w, c.Init); err != nil {
			cleanup()
			return nil, nil, nil, openErr(path, err)
		}
	}
	rdb, err = sql.Open("sqlite", dsn(path, c.Synchronous, true, c.Checks))
	if err != nil {
		cleanup()
		return nil, nil, nil, openErr(path, err)
	}
	rdb.SetMaxOpenConns(c.Readers)
	return w, wdb, rdb, nil
}

// initNow runs init on w without waiting for a write lock another
// process holds: the schema is made or migrated only as the database
// opens, and a lock held then (an sqlite3 shell left in a transaction)
// is not let go within the busy timeout either, so the caller stops at
// once with what to do rather than after it.
func initNow(ctx context.Context, w *sql.Conn, init func(context.Context, *sql.Conn) error) error {
	if _, err := w.ExecContext(ctx, "PRAGMA busy_timeout = 0"); err != nil {
		return err
	}
	if err := init(ctx, w); err != nil {
		return err
	}
	_, err := w.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", busyTimeoutMS))
	return err
}

// openErr is err opening path; one that met another process's write
// lock (SQLITE_BUSY: setting WAL mode, making the schema) says so and
// what to do.
func openErr(path string, err error) error {
	var ce interface{ Code() int }
	if errors.As(err, &ce) && ce.Code()&0xff == 5 {
		return fmt.Errorf("open %s: %w: another process holds its write lock (an sqlite3 shell left in a transaction? fuser -v %s* names it): end its transaction and start again", path, err, path)
	}
	return fmt.Errorf("open %s: %w", path, err)
}

// PrepareFiles makes sure SQLite opens only this user's own files: SQLite
// follows symbolic links and cannot be told not to, so a link planted at
// the database or its -wal, -shm or -journal (which take the database's
// mode) is refused before it is opened. The database is created here,
// mode 0600, so that its companions are 0600 too whatever the umask. An
// older database that others could read is made 0600.
func PrepareFiles(path string) error {
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
	if err := checkOrphanWAL(path); err != nil {
		return err
	}
	f, err := mqhome.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	return f.Close()
}

// checkOrphanWAL refuses a database that is gone or empty while its WAL
// holds changes (a CLS killed before a checkpoint, then the database moved
// or lost): SQLite would make a new, empty database and throw the WAL
// away, and with it what it held. A database SQLite made is never empty
// once it has a WAL (the first page is written when WAL mode is set).
func checkOrphanWAL(path string) error {
	fi, err := os.Lstat(path)
	if err == nil && fi.Size() > 0 || err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil // what else is wrong with it, PrepareFiles says
	}
	wal, err := os.Lstat(path + "-wal")
	if err != nil || wal.Size() == 0 {
		return nil
	}
	return fmt.Errorf("open %s: it is missing or empty, but %s-wal holds %d bytes of changes to it: put back the database, or move %s-wal away to start an empty one", path, path, wal.Size(), path)
}

// WriteLockFree says whether the database's write lock can be taken at
// once (nil), or the error taking it without waiting gave (SQLITE_BUSY:
// another process holds it). It takes the lock and lets it go, writing
// nothing.
func WriteLockFree(ctx context.Context, path string) error {
	return WithConn(ctx, path, 0, func(c *sql.Conn) error {
		if _, err := c.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
			return err
		}
		_, err := c.ExecContext(ctx, "ROLLBACK")
		return err
	})
}

// WithConn runs fn on a connection of its own to the existing database
// at path, beside the one Open keeps, waiting at most busy for its write
// lock.
func WithConn(ctx context.Context, path string, busy time.Duration, fn func(*sql.Conn) error) error {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	db, err := sql.Open("sqlite", "file:"+uriPath.Replace(path)+"?mode=rw&"+q.Encode())
	if err != nil {
		return err
	}
	defer db.Close()
	c, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(c)
}
