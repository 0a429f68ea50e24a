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
	"slices"
	"time"

	"github.com/mq-hpc/mq/internal/sqlfile"
	"github.com/mq-hpc/mq/protocol"
)

//go:embed catalog.sql
var catalogSQL string

var queries = sqlfile.MustParse("catalog.sql", catalogSQL)

// LocalSite is the site of the CLS's own placeholders, on the CLS host.
const LocalSite = "local"

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
	userFile, userReplica, produced, dropReplicas, putReplica, insTransfer *sql.Stmt
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

// HasDataRoot says whether a configured site keeps files under a data
// root of its own (docs/design/staging.md).
func HasDataRoot(spec protocol.SiteSpec) bool { return !spec.SharedFS && spec.Type != LocalSite }

// AddSite learns a configured site (name is its stored name) and says
// whether it keeps files under a data root of its own.
func (c *Catalog) AddSite(name string, spec protocol.SiteSpec) bool {
	if !HasDataRoot(spec) {
		return false
	}
	c.rooted[name] = true
	c.perHost[name] = spec.NodeLocal
	return true
}

// RemoveSite forgets a removed site.
func (c *Catalog) RemoveSite(name string) {
	delete(c.rooted, name)
	delete(c.perHost, name)
}

// IsShared says whether a site sees the CLS host's filesystem: every site
// but a configured one with a data root of its own. Placeholders of a site
// the CLS does not know (agents started by hand with --site NAME) are
// taken to share it, as every placeholder was before data staging.
func (c *Catalog) IsShared(site string) bool { return !c.rooted[site] }

// StorePlace is where the jobs of a placeholder at site and host find
// their files: the CLS host's filesystem for sites sharing it, else the
// site's data root, on the placeholder's own host at a site whose nodes
// share no filesystem (host is the core's place of the placeholder: ""
// unless the site keeps files per host).
func (c *Catalog) StorePlace(site, host string) Place {
	if c.IsShared(site) {
		return Shared
	}
	return Place{Site: site, Host: host}
}

// Located is a file's producing place as the catalog stored it, for the
// core's data-conscious pricing (Load).
type Located struct {
	Path, Site, Host string
	Size             int64 // -1 = unknown
	Producer         int64
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
		var size, mtime sql.NullInt64
		var producer int64
		if err := rows.Scan(&path, &size, &sha, &producer, &site, &host, &mtime); err != nil {
			rows.Close()
			return err
		}
		f := &file{size: -1, sha: sha, producer: producer, mtime: mtime.Int64}
		if size.Valid {
			f.size = size.Int64
		}
		c.files[path] = f
		if site != "" {
			located(Located{Path: path, Site: site, Host: host, Size: f.size, Producer: producer})
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

// ValidSHA says whether h is a SHA-256 in lower-case hex.
func ValidSHA(h string) bool {
	if len(h) != protocol.MaxSHA256Bytes {
		return false
	}
	for _, c := range h {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Known says whether the catalog has a record of path.
func (c *Catalog) Known(path string) bool { return c.files[path] != nil }

// Present says whether path has a replica at place to (a StorePlace).
func (c *Catalog) Present(path string, to Place) bool {
	f := c.files[path]
	return f != nil && c.present(f, to)
}

// SizeAt is path's size when it has a replica at to (-1 = unknown), and
// whether it has.
func (c *Catalog) SizeAt(path string, to Place) (int64, bool) {
	f := c.files[path]
	if f == nil || !c.present(f, to) {
		return -1, false
	}
	return f.size, true
}

// Sum is the catalog's size (-1 = unknown) and checksum ("" = unknown)
// of path, for an assignment to carry.
func (c *Catalog) Sum(path string) (size int64, sha string, ok bool) {
	f := c.files[path]
	if f == nil {
		return -1, "", false
	}
	return f.size, f.sha, true
}

func (c *Catalog) present(f *file, to Place) bool {
	for _, r := range f.reps {
		if to == Shared && c.IsShared(r.Site) || to != Shared && r == to {
			return true
		}
	}
	return false
}

// sources lists the places a file can be copied from, best first: the CLS
// host's filesystem, then the others, places that failed before last.
func (c *Catalog) sources(f *file, tried []Place) []Place {
	var out []Place
	for _, r := range f.reps {
		if c.IsShared(r.Site) {
			r = Shared
		}
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, func(a, b Place) int {
		ta, tb := slices.Index(tried, a), slices.Index(tried, b)
		switch {
		case ta != tb:
			return ta - tb // -1 (never failed) first, then the oldest failure
		case a == Shared:
			return -1
		case b == Shared:
			return 1
		}
		return 0
	})
	return out
}

// UserFile records a user's input that exists on the CLS host at submit
// (size and mtime as the submitting command saw them): a replica at the
// CLS host. A file a job produced keeps its producer's record: then
// UserFile changes nothing and says so (false). When it says true, running
// jobs reading path should see its new size. In the core's transaction.
func (c *Catalog) UserFile(path string, size, mtime int64, now time.Time) (bool, error) {
	f := c.files[path]
	if f != nil && f.producer != 0 {
		return false, nil
	}
	if _, err := c.st.userFile.Exec(path, size, mtime); err != nil {
		return false, err
	}
	if _, err := c.st.userReplica.Exec(path, size, now.UnixMicro()); err != nil {
		return false, err
	}
	if f == nil {
		f = &file{}
		c.files[path] = f
	}
	if f.mtime != mtime || f.size != size {
		f.sha = ""
	}
	f.size, f.mtime = size, mtime
	if !slices.Contains(f.reps, Shared) {
		f.reps = append(f.reps, Shared)
	}
	return true, nil
}

// Produced records that job made path at place p, with size (-1 =
// unknown) and checksum ("" = unknown): the file's one replica now (older
// copies are of an older content). In the core's transaction.
func (c *Catalog) Produced(path string, p Place, size int64, sha string, job int64, when time.Time) error {
	var sizeArg any
	if size >= 0 {
		sizeArg = size
	}
	if _, err := c.st.produced.Exec(path, sizeArg, sha, job, p.Site, p.Host); err != nil {
		return err
	}
	if _, err := c.st.dropReplicas.Exec(path); err != nil {
		return err
	}
	if _, err := c.st.putReplica.Exec(path, p.Site, p.Host, sizeArg, sha, when.UnixMicro()); err != nil {
		return err
	}
	c.files[path] = &file{size: size, sha: sha, producer: job, reps: []Place{p}}
	return nil
}

// addReplica records a copy of path at p, in the core's transaction, and
// says whether the catalog knew nothing of path before.
func (c *Catalog) addReplica(ctx context.Context, db Execer, path string, p Place, size int64, sha string, now time.Time) (bool, error) {
	f := c.files[path]
	isNew := f == nil
	if isNew {
		f = &file{size: -1}
		if _, err := db.ExecContext(ctx, queries.Get("NewFile"), path, p.Site, p.Host); err != nil {
			return false, err
		}
		c.files[path] = f
	}
	if f.sha == "" && sha != "" || f.size < 0 && size >= 0 {
		if f.sha == "" {
			f.sha = sha
		}
		if f.size < 0 {
			f.size = size
		}
		if _, err := db.ExecContext(ctx, queries.Get("SetFileSum"), f.size, f.sha, path); err != nil {
			return false, err
		}
	}
	var sizeArg any
	if size >= 0 {
		sizeArg = size
	}
	if _, err := c.st.putReplica.Exec(path, p.Site, p.Host, sizeArg, sha, now.UnixMicro()); err != nil {
		return false, err
	}
	if !slices.Contains(f.reps, p) {
		f.reps = append(f.reps, p)
	}
	return isNew, nil
}

// CheckReplica refuses a replica that cannot be recorded, before the core
// starts a batch for it.
func CheckReplica(path string, at Place, sha string) error {
	if at.Site == "" || path == "" || path[0] != '/' {
		return protocol.Errorf(protocol.CodeBadRequest, "a replica needs an absolute path and a site")
	}
	if sha != "" && !ValidSHA(sha) {
		return protocol.Errorf(protocol.CodeBadRequest, "%q is not a SHA-256 in lower-case hex", sha)
	}
	return nil
}

// ReplicaPlace checks a replica of path at place at with checksum sha
// before AddReplica records it, and returns the place to record: a place
// sharing the CLS host's filesystem is Shared, and a site that does not
// keep files per host has one place. A copy whose checksum differs from
// the catalog's is another file: refused with a *protocol.Error, as is a
// place that does not say its host at a site keeping files per host. It
// changes nothing.
func (c *Catalog) ReplicaPlace(path string, at Place, sha string) (Place, error) {
	if f := c.files[path]; f != nil && f.sha != "" && sha != "" && f.sha != sha {
		return at, protocol.Errorf(protocol.CodeBadState, "%s at %s differs from the catalog's copy (SHA-256 %s, not %s)", path, at, sha, f.sha)
	}
	if c.IsShared(at.Site) && at.Site != LocalSite {
		at = Shared // the CLS host's filesystem, seen from there
	}
	switch {
	case c.perHost[at.Site] && at.Host == "":
		return at, protocol.Errorf(protocol.CodeBadRequest, "site %s keeps files per host (--node-local): say which host holds %s", at.Site, path)
	case !c.perHost[at.Site] && at.Site != LocalSite:
		at.Host = "" // one place per site
	}
	return at, nil
}

// AddReplica records that path exists at place p (a ReplicaPlace, or a
// transfer's destination) with this size and checksum, in the core's
// transaction, and says whether the catalog knew nothing of path before
// (the file is now at p).
func (c *Catalog) AddReplica(ctx context.Context, db Execer, path string, p Place, size int64, sha string, now time.Time) (bool, error) {
	return c.addReplica(ctx, db, path, p, size, sha, now)
}

// Removed is what RemoveReplicas changed.
type Removed struct {
	Dropped []Place // the places dropped, for the CLS to delete the files there
	Gone    bool    // no replica is left
}

// CheckRemove refuses to drop path's replicas at site ("" = every
// place): the file or the replica is unknown, or it is the last replica
// of a file a live job reads and force is not given. It changes nothing.
func (c *Catalog) CheckRemove(path, site string, force bool) error {
	f := c.files[path]
	if f == nil {
		return protocol.Errorf(protocol.CodeNotFound, "%s is not in the catalog", path)
	}
	keep := 0
	for _, p := range f.reps {
		if site != "" && p.Site != site {
			keep++
		}
	}
	if keep == len(f.reps) {
		return protocol.Errorf(protocol.CodeNotFound, "%s has no replica at %s", path, site)
	}
	if keep == 0 && !force {
		for id, w := range c.jobs {
			if slices.ContainsFunc(w.in, func(in Input) bool { return in.Path == path }) {
				return protocol.Errorf(protocol.CodeBadState, "%s: that is the last replica, and job %d (not ended) reads it; force drops it anyway", path, id)
			}
		}
	}
	return nil
}

// RemoveReplicas drops path's replicas at site ("" = every place), in the
// core's transaction, after CheckRemove allowed it.
func (c *Catalog) RemoveReplicas(ctx context.Context, db Execer, path, site string) (Removed, error) {
	var out Removed
	f := c.files[path]
	if f == nil {
		return out, nil
	}
	var keep []Place
	for _, p := range f.reps {
		if site == "" || p.Site == site {
			out.Dropped = append(out.Dropped, p)
		} else {
			keep = append(keep, p)
		}
	}
	for _, p := range out.Dropped {
		if _, err := db.ExecContext(ctx, queries.Get("DeleteReplica"), path, p.Site, p.Host); err != nil {
			return Removed{}, err
		}
	}
	f.reps = keep
	out.Gone = len(keep) == 0
	return out, nil
}

// Stale lists the inputs of job id whose replicas at place to (the store
// place of the placeholder that ran it) DropStale would forget: those its
// agent did not find whole there (a report's Missing: deleted or damaged
// behind the CLS's back). Paths that are not the job's movable inputs,
// places sharing the CLS host's filesystem (the user's own files, which
// staging never writes) and replicas the catalog did not have there are
// not; neither is any of a job handed back for this
// protocol.MaxStaleReturns times already (the CLS and the agent would
// disagree about the data root forever): it fails as the agent said. It
// changes nothing: the core opens its transaction only when there is
// something to drop.
func (c *Catalog) Stale(id int64, to Place, missing []string) []string {
	w := c.jobs[id]
	if c.stager == nil || w == nil || len(missing) == 0 || w.staleReturns >= protocol.MaxStaleReturns || to == Shared {
		return nil
	}
	var out []string
	for _, p := range missing {
		if !slices.ContainsFunc(w.in, func(in Input) bool { return in.Path == p && in.Movable }) {
			continue
		}
		if f := c.files[p]; f != nil && slices.Contains(f.reps, to) {
			out = append(out, p)
		}
	}
	return out
}

// DropStale forgets the replicas at to of paths (Stale's list for job
// id), in the core's transaction, so that they are staged again: the job
// is handed back unstarted, to wait for them, rather than failed. It
// returns the paths no replica is left of.
func (c *Catalog) DropStale(ctx context.Context, db Execer, id int64, to Place, paths []string) (gone []string, err error) {
	dropped := false
	for _, p := range paths {
		f := c.files[p]
		i := -1
		if f != nil {
			i = slices.Index(f.reps, to)
		}
		if i < 0 {
			continue // listed twice
		}
		if _, err := db.ExecContext(ctx, queries.Get("DeleteReplica"), p, to.Site, to.Host); err != nil {
			return nil, err
		}
		f.reps = slices.Delete(f.reps, i, i+1)
		if len(f.reps) == 0 {
			gone = append(gone, p)
		}
		dropped = true
	}
	if w := c.jobs[id]; dropped && w != nil {
		w.staleReturns++
	}
	return gone, nil
}

func closeRows(rows *sql.Rows) error {
	err := rows.Err()
	return errors.Join(err, rows.Close())
}
