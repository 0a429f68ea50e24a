package metaqueue

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"time"

	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// The data-staging catalog (DESIGN.md, "Data staging"): which places hold
// a replica of each declared file (transfers.go: the transfers made
// between them).

// Place is where a file can be: a site, and a host at sites whose nodes
// share no filesystem ("" otherwise). The CLS host is Place{Site: LocalSite}.
type Place struct{ Site, Host string }

// shared is where files live for every place that shares the CLS host's
// filesystem: the local site and sites added with --shared-fs.
var shared = Place{Site: LocalSite}

func (p Place) String() string {
	if p.Host == "" {
		return p.Site
	}
	return p.Site + ":" + p.Host
}

// catFile is the catalog's memory of one file.
type catFile struct {
	size     int64  // -1 = unknown
	sha      string // hex; "" = unknown
	producer int64
	mtime    int64 // a user's file: its mtime (ns) on the CLS host at submit
	reps     []Place
}

func validSHA(h string) bool {
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

// loadCatalog reads the catalog, the sites sharing the CLS host's
// filesystem and the transfer totals.
func (s *Store) loadCatalog(ctx context.Context) error {
	d := &s.data
	if err := s.eachSiteSpec(ctx, func(name string, spec protocol.SiteSpec) {
		if hasDataRoot(spec) {
			d.rooted[name] = true
			d.perHost[name] = spec.NodeLocal
		}
	}); err != nil {
		return err
	}
	rows, err := s.w.QueryContext(ctx, "SELECT path, size, sha256, producer, site, host, cls_mtime_ns FROM files")
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
		c := &catFile{size: -1, sha: sha, producer: producer, mtime: mtime.Int64}
		if size.Valid {
			c.size = size.Int64
		}
		d.cat[path] = c
		if site != "" {
			d.where[path] = fileLoc{at: d.site(d.placeOf(site, host)), size: c.size, job: producer}
		}
	}
	if err := closeRows(rows); err != nil {
		return err
	}
	rows, err = s.w.QueryContext(ctx, "SELECT path, site, host FROM replicas ORDER BY path, made")
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
		c := d.cat[path]
		if c == nil {
			c = &catFile{size: -1}
			d.cat[path] = c
		}
		c.reps = append(c.reps, p)
	}
	if err := closeRows(rows); err != nil {
		return err
	}
	var m protocol.MovedTotals
	if err := s.w.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(error <> ''), 0), coalesce(sum(bytes), 0), coalesce(sum(seconds), 0)
		FROM transfers`).Scan(&m.Transfers, &m.Failed, &m.Bytes, &m.Seconds); err != nil {
		return err
	}
	s.moved = m
	if s.stg.inflight == nil {
		s.stg = newStaging()
	}
	return nil
}

// userFile records a user's input that exists on the CLS host at submit
// (size and mtime as the submitting command saw them): a replica at the
// CLS host. A file a job produced keeps its producer's record.
func (s *Store) userFile(path string, size, mtime int64) error {
	c := s.data.cat[path]
	if c != nil && c.producer != 0 {
		return nil
	}
	if _, err := s.stmts.userFile.Exec(path, size, mtime); err != nil {
		return fatalError{err}
	}
	if _, err := s.stmts.userReplica.Exec(path, size, micros(s.now())); err != nil {
		return fatalError{err}
	}
	if c == nil {
		c = &catFile{}
		s.data.cat[path] = c
	}
	if c.mtime != mtime || c.size != size {
		c.sha = ""
	}
	c.size, c.mtime = size, mtime
	if !slices.Contains(c.reps, shared) {
		c.reps = append(c.reps, shared)
	}
	if _, ok := s.data.where[path]; !ok {
		s.data.where[path] = fileLoc{at: s.data.site(s.data.placeOf(LocalSite, "")), size: size}
	}
	s.repl.Moved(path) // running jobs reading it see its new size
	return nil
}

// produced records that job made path at a place: the file's one replica
// now (older copies are of an older content). at is the DC place.
func (s *Store) produced(path string, p Place, at policy.Site, size int64, sha string, job int64, when time.Time) error {
	var sizeArg any
	if size >= 0 {
		sizeArg = size
	}
	if _, err := s.stmts.produced.Exec(path, sizeArg, sha, job, p.Site, p.Host); err != nil {
		return fatalError{err}
	}
	if _, err := s.stmts.dropReplicas.Exec(path); err != nil {
		return fatalError{err}
	}
	if _, err := s.stmts.putReplica.Exec(path, p.Site, p.Host, sizeArg, sha, micros(when)); err != nil {
		return fatalError{err}
	}
	s.data.cat[path] = &catFile{size: size, sha: sha, producer: job, reps: []Place{p}}
	s.data.where[path] = fileLoc{at: at, size: size, job: job}
	return nil
}

// isShared says whether a site sees the CLS host's filesystem: every site
// but a configured one with a data root of its own. Placeholders of a site
// the CLS does not know (agents started by hand with --site NAME) are
// taken to share it, as every placeholder was before data staging.
func (s *Store) isShared(site string) bool { return !s.data.rooted[site] }

// hasDataRoot says whether a configured site keeps files under a data
// root of its own (DESIGN.md, "Data staging").
func hasDataRoot(spec protocol.SiteSpec) bool { return !spec.SharedFS && spec.Type != LocalSite }

// storePlace is where a placeholder's jobs find their files: the CLS
// host's filesystem for sites sharing it, else the site's data root, on
// the placeholder's own host at a site whose nodes share no filesystem.
func (s *Store) storePlace(ph int64) (Place, error) {
	at, err := s.phSite(ph)
	if err != nil {
		return Place{}, err
	}
	pl := s.data.places[at]
	if s.isShared(pl.site) {
		return shared, nil
	}
	return Place{Site: pl.site, Host: pl.host}, nil // host is "" but per host
}

// present says whether a file has a replica at place to (a storePlace).
func (s *Store) present(c *catFile, to Place) bool {
	for _, r := range c.reps {
		if to == shared && s.isShared(r.Site) || to != shared && r == to {
			return true
		}
	}
	return false
}

// sources lists the places a file can be copied from, best first: the CLS
// host's filesystem, then the others, places that failed before last.
func (s *Store) sources(c *catFile, tried []Place) []Place {
	var out []Place
	for _, r := range c.reps {
		if s.isShared(r.Site) {
			r = shared
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
		case a == shared:
			return -1
		case b == shared:
			return 1
		}
		return 0
	})
	return out
}

// inputsAt says whether jobs ids (one, or a bundle's) have every movable
// input at place to. When not, it asks the stager for the missing ones and
// marks the jobs as staging to there. Inputs the catalog has no replica
// of are not held back for: nothing could bring them (the agent checks
// for them before the command starts). Without a stager everything is
// everywhere.
func (s *Store) inputsAt(ids []int64, to Place) (bool, error) {
	if s.opt.Stager == nil {
		return true, nil
	}
	now := s.now()
	if s.stg.isDown(to, now) {
		return false, nil // unreachable for now: other places may run them
	}
	for _, id := range ids {
		if p, ok := s.stg.to[id]; ok && p != to {
			return false, nil // another place is bringing its inputs
		}
	}
	missing := false
	for _, id := range ids {
		jf := s.data.files[id]
		if jf == nil {
			continue
		}
		for _, f := range jf.in {
			c := s.data.cat[f.path]
			if !f.rel || c == nil || len(c.reps) == 0 || s.present(c, to) {
				continue
			}
			missing = true
			if s.allDown(c, now) {
				continue // wait until a replica's place is back
			}
			if err := s.requestStage(f.path, to, id); err != nil {
				return false, err
			}
		}
	}
	if !missing {
		return true, nil
	}
	for _, id := range ids {
		if j, ok := s.g.Node(id); ok && j.State == job.Queued && s.stg.pending[id] > 0 {
			s.stg.to[id] = to
		}
	}
	return false, nil
}

// inputsPresent says, asking for nothing, whether jobs ids have every
// movable input at to.
func (s *Store) inputsPresent(ids []int64, to Place) bool {
	for _, id := range ids {
		jf := s.data.files[id]
		if jf == nil {
			continue
		}
		for _, f := range jf.in {
			c := s.data.cat[f.path]
			if f.rel && c != nil && len(c.reps) > 0 && !s.present(c, to) {
				return false
			}
		}
	}
	return true
}

// addReplica records a copy of path at p, in the batch's transaction.
func (s *Store) addReplica(path string, p Place, size int64, sha string) error {
	if err := s.begin(); err != nil {
		return err
	}
	c := s.data.cat[path]
	if c == nil {
		c = &catFile{size: -1}
		if _, err := s.w.ExecContext(context.Background(), "INSERT INTO files (path, site, host) VALUES (?, ?, ?)", path, p.Site, p.Host); err != nil {
			return fatalError{err}
		}
		s.data.cat[path] = c
		if _, ok := s.data.where[path]; !ok {
			s.data.where[path] = fileLoc{at: s.data.site(s.data.placeOf(p.Site, p.Host)), size: size}
		}
	}
	if c.sha == "" && sha != "" || c.size < 0 && size >= 0 {
		if c.sha == "" {
			c.sha = sha
		}
		if c.size < 0 {
			c.size = size
		}
		if _, err := s.w.ExecContext(context.Background(), "UPDATE files SET size = ?, sha256 = ? WHERE path = ?", c.size, c.sha, path); err != nil {
			return fatalError{err}
		}
	}
	var sizeArg any
	if size >= 0 {
		sizeArg = size
	}
	if _, err := s.stmts.putReplica.Exec(path, p.Site, p.Host, sizeArg, sha, micros(s.now())); err != nil {
		return fatalError{err}
	}
	if !slices.Contains(c.reps, p) {
		c.reps = append(c.reps, p)
	}
	s.dataMoved1(path)
	return nil
}

// Files pages through the catalog.
func (s *Store) Files(ctx context.Context, q protocol.FilesQuery) (protocol.FilesReply, error) {
	var reply protocol.FilesReply
	limit := q.Limit
	if limit <= 0 || limit > 10_000 {
		limit = 1000
	}
	from := max(q.After, q.Prefix)
	rows, err := s.rdb.QueryContext(ctx, `SELECT path, size, sha256, producer FROM files
		WHERE path >= ? AND path > ? AND substr(path, 1, ?) = ? ORDER BY path LIMIT ?`,
		from, q.After, len(q.Prefix), q.Prefix, limit+1)
	if err != nil {
		return reply, err
	}
	for rows.Next() {
		var f protocol.CatalogFile
		var size sql.NullInt64
		if err := rows.Scan(&f.Path, &size, &f.SHA256, &f.Producer); err != nil {
			rows.Close()
			return reply, err
		}
		if size.Valid {
			n := size.Int64
			f.Size = &n
		}
		f.Replicas = []protocol.Replica{}
		reply.Files = append(reply.Files, f)
	}
	if err := closeRows(rows); err != nil {
		return reply, err
	}
	if len(reply.Files) > limit {
		reply.Files, reply.More = reply.Files[:limit], true
	}
	if len(reply.Files) == 0 {
		return reply, nil
	}
	byPath := make(map[string]*protocol.CatalogFile, len(reply.Files))
	for i := range reply.Files {
		byPath[reply.Files[i].Path] = &reply.Files[i]
	}
	rows, err = s.rdb.QueryContext(ctx, `SELECT path, site, host, size, sha256, made FROM replicas
		WHERE path >= ? AND path <= ? ORDER BY path, site = 'local' DESC, made`, reply.Files[0].Path, reply.Files[len(reply.Files)-1].Path)
	if err != nil {
		return reply, err
	}
	for rows.Next() {
		path, r, err := scanReplica(rows)
		if err != nil {
			rows.Close()
			return reply, err
		}
		if f := byPath[path]; f != nil {
			f.Replicas = append(f.Replicas, r)
		}
	}
	return reply, closeRows(rows)
}

func scanReplica(rows *sql.Rows) (string, protocol.Replica, error) {
	var path string
	var r protocol.Replica
	var size sql.NullInt64
	var made int64
	if err := rows.Scan(&path, &r.Site, &r.Host, &size, &r.SHA256, &made); err != nil {
		return "", r, err
	}
	r.Size = -1
	if size.Valid {
		r.Size = size.Int64
	}
	r.Made = time.UnixMicro(made).UTC().Format(time.RFC3339)
	return path, r, nil
}

// replicasOf reads path's replicas, best first: the CLS host's, then by age.
func replicasOf(ctx context.Context, db interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, path string) ([]protocol.Replica, error) {
	rows, err := db.QueryContext(ctx, `SELECT path, site, host, size, sha256, made FROM replicas
		WHERE path = ? ORDER BY site = 'local' DESC, made, site, host`, path)
	if err != nil {
		return nil, err
	}
	var out []protocol.Replica
	for rows.Next() {
		_, r, err := scanReplica(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, r)
	}
	return out, closeRows(rows)
}

// Replicas returns the places holding path, best first, with the
// catalog's size and checksum of the file.
func (s *Store) Replicas(ctx context.Context, path string) ([]protocol.Replica, error) {
	out, err := replicasOf(ctx, s.rdb, path)
	if err == nil && len(out) == 0 {
		err = protocol.Errorf(protocol.CodeNotFound, "no replica of %s is known", path)
	}
	return out, err
}

// catalogFile reads one file of the catalog on the writer (in the batch).
func (s *Store) catalogFile(path string) (protocol.CatalogFile, error) {
	f := protocol.CatalogFile{Path: path, Replicas: []protocol.Replica{}}
	var size sql.NullInt64
	err := s.w.QueryRowContext(context.Background(), "SELECT size, sha256, producer FROM files WHERE path = ?", path).Scan(&size, &f.SHA256, &f.Producer)
	if err != nil && err != sql.ErrNoRows {
		return f, fatalError{err}
	}
	if size.Valid {
		n := size.Int64
		f.Size = &n
	}
	reps, err := replicasOf(context.Background(), s.w, path)
	if err != nil {
		return f, fatalError{err}
	}
	if reps != nil {
		f.Replicas = reps
	}
	return f, nil
}

// AddReplica records that path exists at a place with this size and
// checksum (files.add, after the CLS measured it there). A copy whose
// checksum differs from the catalog's is another file: refused.
func (s *Store) AddReplica(ctx context.Context, path string, at Place, size int64, sha256 string) (protocol.CatalogFile, error) {
	var out protocol.CatalogFile
	if at.Site == "" || path == "" || !strings.HasPrefix(path, "/") {
		return out, protocol.Errorf(protocol.CodeBadRequest, "a replica needs an absolute path and a site")
	}
	if sha256 != "" && !validSHA(sha256) {
		return out, protocol.Errorf(protocol.CodeBadRequest, "%q is not a SHA-256 in lower-case hex", sha256)
	}
	err := s.doDurable(ctx, func() error {
		if c := s.data.cat[path]; c != nil && c.sha != "" && sha256 != "" && c.sha != sha256 {
			return protocol.Errorf(protocol.CodeBadState, "%s at %s differs from the catalog's copy (SHA-256 %s, not %s)", path, at, sha256, c.sha)
		}
		if s.isShared(at.Site) && at.Site != LocalSite {
			at = shared // the CLS host's filesystem, seen from there
		}
		switch {
		case s.data.perHost[at.Site] && at.Host == "":
			return protocol.Errorf(protocol.CodeBadRequest, "site %s keeps files per host (--node-local): say which host holds %s", at.Site, path)
		case !s.data.perHost[at.Site] && at.Site != LocalSite:
			at.Host = "" // one place per site
		}
		if err := s.addReplica(path, at, size, sha256); err != nil {
			return err
		}
		var err error
		out, err = s.catalogFile(path)
		return err
	})
	return out, err
}

// RemoveReplicas drops path's replicas at site ("" = every place) and
// returns what is left and the places dropped (for the CLS to delete the
// files there). The last replica of a file that live jobs read goes only
// with force.
func (s *Store) RemoveReplicas(ctx context.Context, path, site string, force bool) (left protocol.CatalogFile, dropped []Place, err error) {
	err = s.doDurable(ctx, func() error {
		c := s.data.cat[path]
		if c == nil {
			return protocol.Errorf(protocol.CodeNotFound, "%s is not in the catalog", path)
		}
		var keep []Place
		for _, p := range c.reps {
			if site == "" || p.Site == site {
				dropped = append(dropped, p)
			} else {
				keep = append(keep, p)
			}
		}
		if len(dropped) == 0 {
			return protocol.Errorf(protocol.CodeNotFound, "%s has no replica at %s", path, site)
		}
		if len(keep) == 0 && !force {
			for id, jf := range s.data.files {
				if slices.ContainsFunc(jf.in, func(f fileDecl) bool { return f.path == path }) {
					return protocol.Errorf(protocol.CodeBadState, "%s: that is the last replica, and job %d (not ended) reads it; force drops it anyway", path, id)
				}
			}
		}
		if err := s.begin(); err != nil {
			return err
		}
		for _, p := range dropped {
			if _, err := s.w.ExecContext(context.Background(), "DELETE FROM replicas WHERE path = ? AND site = ? AND host = ?", path, p.Site, p.Host); err != nil {
				return fatalError{err}
			}
		}
		c.reps = keep
		if len(keep) == 0 {
			delete(s.data.where, path)
		}
		s.data.gen++
		var err error
		left, err = s.catalogFile(path)
		return err
	})
	if err != nil {
		dropped = nil
	}
	return left, dropped, err
}

// dropStale forgets the replicas at placeholder ph's place of the inputs
// of job id its agent did not find whole there (Report.Missing: deleted
// or damaged behind the CLS's back), so that they are staged again, and
// says whether any was: the job is then handed back unstarted, to wait
// for them, rather than failed. Paths that are not the job's movable
// inputs, places sharing the CLS host's filesystem (the user's own files,
// which staging never writes) and replicas the catalog did not have there
// change nothing; neither does a job handed back for this
// protocol.MaxStaleReturns times already (the CLS and the agent would
// disagree about the data root forever): it fails as the agent said.
func (s *Store) dropStale(id, ph int64, paths []string) (bool, error) {
	jf := s.data.files[id]
	if s.opt.Stager == nil || jf == nil || len(paths) == 0 || jf.staleReturns >= protocol.MaxStaleReturns {
		return false, nil
	}
	to, err := s.storePlace(ph)
	if err != nil || to == shared {
		return false, err
	}
	dropped := false
	for _, p := range paths {
		if !slices.ContainsFunc(jf.in, func(f fileDecl) bool { return f.path == p && f.rel }) {
			continue
		}
		c := s.data.cat[p]
		i := -1
		if c != nil {
			i = slices.Index(c.reps, to)
		}
		if i < 0 {
			continue
		}
		if err := s.begin(); err != nil {
			return false, err
		}
		if _, err := s.w.ExecContext(context.Background(), "DELETE FROM replicas WHERE path = ? AND site = ? AND host = ?", p, to.Site, to.Host); err != nil {
			return false, fatalError{err}
		}
		c.reps = slices.Delete(c.reps, i, i+1)
		if len(c.reps) == 0 {
			delete(s.data.where, p)
		}
		s.data.gen++
		dropped = true
	}
	if dropped {
		jf.staleReturns++
	}
	return dropped, nil
}

// assigned is how an assignment carries a job's declared files.
func (s *Store) assigned(files []fileDecl, inputs bool) []protocol.AssignedFile {
	if len(files) == 0 {
		return nil
	}
	out := make([]protocol.AssignedFile, len(files))
	for i, f := range files {
		a := protocol.AssignedFile{Path: f.path, Size: f.size, Local: !f.rel}
		if c := s.data.cat[f.path]; inputs && c != nil {
			if c.size >= 0 {
				a.Size = c.size
			}
			a.SHA256 = c.sha
		}
		out[i] = a
	}
	return out
}
