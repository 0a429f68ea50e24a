// Package catalog is the metaqueue's data-staging catalog: which places
// hold a replica of each declared file, what the store asks of the stager,
// the transfers made and measured, and which queued jobs fail when their
// inputs cannot be staged (docs/design/staging.md).
//
// The catalog is a module of the metaqueue's core: the core creates it,
// owns it on its one goroutine, calls it where an event happens (a job
// added or ended, a job's outputs produced, a stage request ended, a
// placeholder asking for work) and gives it the facts it needs as
// arguments. Its writes go through the core's writer connection inside the
// core's open transaction. It returns what it changed (a file moved, jobs
// to fail) and the core tells the rest of the store.
package catalog

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"

	"github.com/mq-hpc/mq/internal/sqlfile"
	"github.com/mq-hpc/mq/protocol"
)

//go:embed catalog.sql
var catalogSQL string

var queries = sqlfile.MustParse("catalog.sql", catalogSQL)

// LocalSite is the site of the CLS's own placeholders, on the CLS host.
const LocalSite = protocol.LocalSite

// Place is where a file can be: a site, and a host at sites whose nodes
// share no filesystem ("" otherwise). The CLS host is Place{Site: LocalSite}.
type Place struct{ Site, Host string }

// Shared is where files live for every place that shares the CLS host's
// filesystem: the local site and sites added with --shared-fs.
var Shared = Place{Site: LocalSite}

func (p Place) String() string {
	if p.Host == "" {
		return p.Site
	}
	return p.Site + ":" + p.Host
}

// Preparer prepares the catalog's statements once, on the writer.
type Preparer interface {
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

// Querier reads (the reader pool, or the writer in the core's batch).
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Execer writes and reads in the core's open transaction: the writer
// connection (*sql.Conn) or a *sql.Tx.
type Execer interface {
	Querier
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// The writer connection, a transaction and the reader pool serve.
var (
	_ Preparer = (*sql.Conn)(nil)
	_ Execer   = (*sql.Conn)(nil)
	_ Execer   = (*sql.Tx)(nil)
	_ Querier  = (*sql.DB)(nil)
)

// file is the catalog's memory of one file.
type file struct {
	size     int64  // -1 = unknown
	sha      string // hex; "" = unknown
	producer int64
	mtime    int64 // a user's file: its mtime (ns) on the CLS host at submit
	reps     []Place
}

// Input is one declared input of a job.
type Input struct {
	Path string
	// Movable says the input was declared relative: staging brings it
	// to the place the job runs at.
	Movable bool
}

// wants is a live job's declared inputs.
type wants struct {
	in []Input
	// staleReturns counts the times the job was handed back for inputs
	// its agent found missing where the catalog had them (DropStale).
	staleReturns int
}

// stmts are the statements the catalog runs for every job or transfer,
// prepared once on the writer.
type stmts struct {
	userFile, dropCopies, userReplica, produced, dropReplicas, putReplica, insTransfer *sql.Stmt
}

// Catalog is the catalog's state: the files, their replicas, the live
// jobs' inputs, the transfers in flight and their totals.
type Catalog struct {
	stager Stager
	st     stmts
	all    []*sql.Stmt

	files map[string]*file
	// rooted are the configured sites with a data root of their own (not
	// SharedFS, not local); perHost those whose nodes share no
	// filesystem: places per host.
	rooted, perHost map[string]bool
	jobs            map[int64]*wants
	stg             staging // memory only: kept across Reset
	moved           protocol.MovedTotals
}

// New prepares the catalog's statements on db. stager may be nil: then
// nothing is staged and every place has every file.
func New(ctx context.Context, db Preparer, stager Stager) (*Catalog, error) {
	c := &Catalog{stager: stager, stg: newStaging()}
	c.Reset()
	for _, p := range []struct {
		s    **sql.Stmt
		name string
	}{
		{&c.st.userFile, "UserFile"},
		{&c.st.dropCopies, "DropCopies"},
		{&c.st.userReplica, "UserReplica"},
		{&c.st.produced, "Produced"},
		{&c.st.dropReplicas, "DropReplicas"},
		{&c.st.putReplica, "PutReplica"},
		{&c.st.insTransfer, "InsTransfer"},
	} {
		s, err := db.PrepareContext(ctx, queries.Get(p.name))
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("catalog: prepare %s: %w", p.name, err)
		}
		*p.s = s
		c.all = append(c.all, s)
	}
	return c, nil
}

// Close closes the prepared statements.
func (c *Catalog) Close() {
	for _, s := range c.all {
		s.Close()
	}
	c.all = nil
}

// Staging says whether a stager moves files (else every place has them).
func (c *Catalog) Staging() bool { return c.stager != nil }

// Reset forgets everything but the transfers in flight, before a load:
// after a reload jobs simply ask again for what they wait for.
func (c *Catalog) Reset() {
	c.files = map[string]*file{}
	c.rooted, c.perHost = map[string]bool{}, map[string]bool{}
	c.jobs = map[int64]*wants{}
	c.moved = protocol.MovedTotals{}
}

// Located is a file's producing place as the catalog stored it, for the
// core's data-conscious pricing (Load).
type Located struct {
	Path, Site, Host string
	// Size is the measured size, else the producer's declared one (a
	// hint for pricing, never checked against); -1 = unknown.
	Size     int64
	Producer int64
}

// Load reads the catalog and the transfer totals, calling located for
// every file stored with a place. Reset first.
func (c *Catalog) Load(ctx context.Context, db Querier, located func(Located)) error {
	rows, err := db.QueryContext(ctx, queries.Get("LoadFiles"))
	if err != nil {
		return err
	}
	for rows.Next() {
		var path, sha, site, host string
		var size, mtime, declared sql.NullInt64
		var producer int64
		if err := rows.Scan(&path, &size, &sha, &producer, &site, &host, &mtime, &declared); err != nil {
			rows.Close()
			return err
		}
		f := &file{size: -1, sha: sha, producer: producer, mtime: mtime.Int64}
		if size.Valid {
			f.size = size.Int64
		}
		c.files[path] = f
		if site != "" {
			l := Located{Path: path, Site: site, Host: host, Size: f.size, Producer: producer}
			if l.Size < 0 && declared.Valid {
				l.Size = declared.Int64
			}
			located(l)
		}
	}
	if err := closeRows(rows); err != nil {
		return err
	}
	rows, err = db.QueryContext(ctx, queries.Get("LoadReplicas"))
	if err != nil {
		return err
	}
	for rows.Next() {
		var path string
		var p Place
		if err := rows.Scan(&path, &p.Site, &p.Host); err != nil {
			rows.Close()
			return err
		}
		f := c.files[path]
		if f == nil {
			f = &file{size: -1}
			c.files[path] = f
		}
		f.reps = append(f.reps, p)
	}
	if err := closeRows(rows); err != nil {
		return err
	}
	var m protocol.MovedTotals
	if err := db.QueryRowContext(ctx, queries.Get("LoadMoved")).Scan(&m.Transfers, &m.Failed, &m.Bytes, &m.Seconds); err != nil {
		return err
	}
	c.moved = m
	return nil
}

// SetInputs records a live job's declared inputs (a job added, or loaded),
// replacing what was known of it.
func (c *Catalog) SetInputs(id int64, in []Input) {
	if len(in) == 0 {
		delete(c.jobs, id)
		return
	}
	c.jobs[id] = &wants{in: in}
}

// JobEnded forgets a job that reached a terminal state.
func (c *Catalog) JobEnded(id int64) {
	c.stg.forget(id)
	delete(c.jobs, id)
}

func closeRows(rows *sql.Rows) error {
	err := rows.Err()
	return errors.Join(err, rows.Close())
}
