package inspect

import (
	"context"
	"database/sql"
	"sync"
)

// A read prepares its query once: SQLite parsing and planning a query
// anew was most of the CPU of reading one job (mqstat -j, each job of an
// export, a dashboard page), ahead of running it.

// maxStmts bounds the queries kept prepared; listings build theirs from
// their filters, so past this many a query runs unprepared, as before.
const maxStmts = 256

// preparer is a DB that can prepare statements (*sql.DB, *sql.Conn).
type preparer interface {
	DB
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

// stmtCache is a DB whose queries run as statements prepared at their
// first use and kept. Transactions (BeginTx) are the pool's, unprepared.
type stmtCache struct {
	preparer
	mu    sync.Mutex
	stmts map[string]*sql.Stmt
}

// cached wraps db in a stmtCache when it can prepare statements.
func cached(db DB) DB {
	if p, ok := db.(preparer); ok {
		return &stmtCache{preparer: p, stmts: map[string]*sql.Stmt{}}
	}
	return db
}

// stmt is query's prepared statement, prepared now if it is not yet;
// nil when the cache is full or preparing failed (the query then runs
// unprepared, to fail or not as it would have).
func (c *stmtCache) stmt(ctx context.Context, query string) *sql.Stmt {
	c.mu.Lock()
	s, ok := c.stmts[query]
	full := len(c.stmts) >= maxStmts
	c.mu.Unlock()
	if ok || full {
		return s
	}
	// Prepared without the lock: it may wait for a connection of the pool.
	s, err := c.preparer.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if had, ok := c.stmts[query]; ok { // another read prepared it meanwhile
		s.Close()
		return had
	}
	if len(c.stmts) >= maxStmts {
		s.Close()
		return nil
	}
	c.stmts[query] = s
	return s
}

func (c *stmtCache) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if s := c.stmt(ctx, query); s != nil {
		return s.QueryContext(ctx, args...)
	}
	return c.preparer.QueryContext(ctx, query, args...)
}

func (c *stmtCache) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if s := c.stmt(ctx, query); s != nil {
		return s.QueryRowContext(ctx, args...)
	}
	return c.preparer.QueryRowContext(ctx, query, args...)
}
