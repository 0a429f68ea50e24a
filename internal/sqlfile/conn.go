package sqlfile

import (
	"context"
	"database/sql"
	"strings"
	"sync"
)

// MaxCached is how many query texts a Conn keeps prepared, and
// maxCachedText the longest it keeps: a longer one is a list of many
// values (sqlfile.InList), whose varying lengths would fill the cache
// with large statements, and whose preparing is a small part of its
// work.
const (
	MaxCached     = 512
	maxCachedText = 2048
)

// Conn is a connection that prepares each query text it is given once and
// keeps the statement: modernc.org/sqlite prepares a text at every call,
// which was most of the cost of the one-row statements a loop over jobs
// runs (a rerun of half a million jobs spent 14 of its 20 s preparing).
//
// A text holding more than one statement, or longer than 2 KiB, runs as
// given, uncached. A text whose rows are still open is run unprepared
// rather than reset under them; a row from QueryRowContext is to be
// scanned before its text runs again (as every caller chains Scan). Past
// MaxCached texts, one not in use is closed to make room.
type Conn struct {
	*sql.Conn
	mu    sync.Mutex
	cache map[string]*cached
	max   int // texts kept at most
}

type cached struct {
	stmt *sql.Stmt
	rows *sql.Rows // the last rows QueryContext returned of it, maybe open
}

// NewConn is c with a statement cache. Close closes both.
func NewConn(c *sql.Conn) *Conn { return &Conn{Conn: c, cache: map[string]*cached{}, max: MaxCached} }

// ExecContext runs query with args, prepared once.
func (c *Conn) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	switch st, err := c.stmt(ctx, query); {
	case err != nil:
		return nil, err
	case st == nil:
		return c.Conn.ExecContext(ctx, query, args...)
	default:
		return st.stmt.ExecContext(ctx, args...)
	}
}

// QueryRowContext runs query with args, prepared once; scan its row
// before running query again.
func (c *Conn) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	st, err := c.stmt(ctx, query)
	if st == nil || err != nil {
		return c.Conn.QueryRowContext(ctx, query, args...) // an error comes again, with the row
	}
	return st.stmt.QueryRowContext(ctx, args...)
}

// QueryContext runs query with args, prepared once.
func (c *Conn) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := c.stmt(ctx, query)
	switch {
	case err != nil:
		return nil, err
	case st == nil:
		return c.Conn.QueryContext(ctx, query, args...)
	}
	rows, err := st.stmt.QueryContext(ctx, args...)
	c.mu.Lock()
	st.rows = rows
	c.mu.Unlock()
	return rows, err
}

// Close closes the statements kept and the connection.
func (c *Conn) Close() error {
	c.mu.Lock()
	for q, st := range c.cache {
		st.stmt.Close()
		delete(c.cache, q)
	}
	c.mu.Unlock()
	return c.Conn.Close()
}

// stmt is query's statement, prepared now if it is new; nil when query
// is to run as given: long, more than one statement, its rows open, or no
// room.
func (c *Conn) stmt(ctx context.Context, query string) (*cached, error) {
	if len(query) > maxCachedText || strings.Contains(strings.TrimRight(query, "; \t\n"), ";") {
		return nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.cache[query]; ok {
		if open(st.rows) {
			return nil, nil
		}
		st.rows = nil
		return st, nil
	}
	if len(c.cache) >= c.max && !c.evict() {
		return nil, nil
	}
	s, err := c.Conn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	st := &cached{stmt: s}
	c.cache[query] = st
	return st, nil
}

// evict closes one statement kept whose rows are closed.
func (c *Conn) evict() bool {
	for q, st := range c.cache {
		if !open(st.rows) {
			st.stmt.Close()
			delete(c.cache, q)
			return true
		}
	}
	return false
}

// open reports whether rows are still open: Columns fails on closed rows,
// and rows close once Next has read the last.
func open(rows *sql.Rows) bool {
	if rows == nil {
		return false
	}
	_, err := rows.Columns()
	return err == nil
}
