package sqlfile

import (
	"context"
	"database/sql"
	"fmt"
)

// Preparer is the connection statements are prepared on (*sql.Conn,
// *sql.DB).
type Preparer interface {
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

// Stmts are one connection's prepared statements, closed together: some
// prepared up front (Prepare), some on first use by a key (Keyed).
type Stmts struct {
	all []*sql.Stmt
	by  map[int]*sql.Stmt
}

// Prepare prepares query, named name in its error, and keeps it to close.
func (st *Stmts) Prepare(ctx context.Context, c Preparer, name, query string) (*sql.Stmt, error) {
	s, err := c.PrepareContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("prepare %s: %w", name, err)
	}
	st.all = append(st.all, s)
	return s, nil
}

// Keyed returns the statement kept under key, preparing query(n) on
// first use: a family of statements that differ by a count (a claim of
// n jobs) is prepared one member at a time, as each is needed.
func (st *Stmts) Keyed(ctx context.Context, c Preparer, key int, query func(n int) string, n int) (*sql.Stmt, error) {
	if s := st.by[key]; s != nil {
		return s, nil
	}
	s, err := c.PrepareContext(ctx, query(n))
	if err != nil {
		return nil, err
	}
	if st.by == nil {
		st.by = map[int]*sql.Stmt{}
	}
	st.by[key] = s
	st.all = append(st.all, s)
	return s, nil
}

// Close closes every statement kept.
func (st *Stmts) Close() {
	for _, s := range st.all {
		s.Close()
	}
	st.all, st.by = nil, nil
}
