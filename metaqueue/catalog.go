package metaqueue

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/policy"
	"github.com/mq-hpc/mq/protocol"
)

// The data-staging catalog (DESIGN.md, "Data staging"): which places hold
// a replica of each declared file, and the transfers made between them.
// This file declares the store's side of the contract with the stager
// (package cls drives a stage.Mover with it).

// Place is where a file can be: a site, and a host at sites whose nodes
// share no filesystem ("" otherwise). The CLS host is Place{Site: LocalSite}.
type Place struct{ Site, Host string }

// StageRequest asks the stager to copy Path to To from one of From (best
// first). The stager calls Store.Staged when the copy ended, whichever way.
type StageRequest struct {
	Path   string
	To     Place
	From   []Place
	Size   int64  // -1 = unknown
	SHA256 string // hex; "" = unknown: the stager computes it
	// ModTime is a user's file's modification time on the CLS host at
	// submit (zero otherwise): the stager refuses a file that changed
	// since (size or time), rather than stage its new form.
	ModTime time.Time
	Job     int64 // the job that first wanted it, for accounting
}

// StageResult is how a StageRequest ended.
type StageResult struct {
	Path     string
	To, From Place
	Bytes    int64
	Started  time.Time
	Duration time.Duration
	SHA256   string
	Job      int64
	// Err is nil when the replica at To exists now. Permanent says that
	// retrying from another replica cannot help (the file changed since
	// submit, or is missing everywhere): the jobs that need it fail.
	Err       error
	Permanent bool
	// Unreachable lists the places that could not be reached at all (a
	// site whose login host is down): nothing is known to be wrong with
	// the file. When To is among them, or every place tried is, the
	// failure does not count against the file: the places are left alone
	// for a while (placeDownFor) and the jobs wait, or run elsewhere.
	Unreachable []Place
	// Via is the path taken at each end, "SRC>DST" (fs, sftp or agent),
	// recorded with the transfer.
	Via string
}

// Stager moves files for the store. Stage must not block: it queues the
// request and reports through Store.Staged.
type Stager interface {
	Stage(StageRequest)
}

// maxStageTries is how many failed transfers of one file to one place
// fail the jobs waiting for it.
const maxStageTries = 3

// placeDownFor is how long a place that could not be reached is not
// staged to or from: its jobs wait, or run at other places, meanwhile.
const placeDownFor = 5 * time.Second

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

// stageKey is one file wanted at one place: one transfer at a time.
type stageKey struct {
	path string
	to   Place
}

// stagingFile is a transfer in flight and the jobs waiting for it.
type stagingFile struct {
	jobs  map[int64]bool
	tried []Place // places a transfer failed from, oldest first
	fails int
}

// staging is the transfers in flight and the jobs whose inputs they
// bring. It is memory only: after a restart jobs simply ask again.
type staging struct {
	inflight map[stageKey]*stagingFile
	// to marks jobs whose inputs are being brought to a place: other
	// places skip them while a transfer for them runs. A mark clears when
	// the last of the job's transfers ended (pending counts them).
	to      map[int64]Place
	pending map[int64]int
	// down holds places that could not be reached, until when they are
	// left alone.
	down map[Place]time.Time
}

func newStaging() staging {
	return staging{inflight: map[stageKey]*stagingFile{}, to: map[int64]Place{}, pending: map[int64]int{}, down: map[Place]time.Time{}}
}

// wait adds job to the jobs waiting for st.
func (g *staging) wait(st *stagingFile, job int64) {
	if !st.jobs[job] {
		st.jobs[job] = true
		g.pending[job]++
	}
}

// end forgets the transfer k: a job none of whose transfers is left in
// flight may be placed anywhere again.
func (g *staging) end(k stageKey) {
	st := g.inflight[k]
	delete(g.inflight, k)
	if st == nil {
		return
	}
	for id := range st.jobs {
		n, ok := g.pending[id]
		if !ok {
			continue // ended meanwhile
		}
		if n <= 1 {
			delete(g.pending, id)
			delete(g.to, id)
		} else {
			g.pending[id] = n - 1
		}
	}
}

// forget drops a job that ended.
func (g *staging) forget(id int64) {
	delete(g.to, id)
	delete(g.pending, id)
}

// isDown says whether p is left alone at now.
func (g *staging) isDown(p Place, now time.Time) bool {
	until, ok := g.down[p]
	if ok && !now.Before(until) {
		delete(g.down, p)
		return false
	}
	return ok
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
	s.repl.idx.moved(path) // running jobs reading it see its new size
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

// stagingTo counts the jobs whose inputs are being brought to place to.
// Marks are few (bounded per place by the free slots asking there), so a
// count is cheap.
func (s *Store) stagingTo(to Place) int {
	n := 0
	for _, p := range s.stg.to {
		if p == to {
			n++
		}
	}
	return n
}

// stagingElsewhere says whether another place than to is bringing the
// inputs of any of jobs ids.
func (s *Store) stagingElsewhere(ids []int64, to Place) bool {
	for _, id := range ids {
		if p, ok := s.stg.to[id]; ok && p != to {
			return true
		}
	}
	return false
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

// requestStage asks for path at to on behalf of job, once per file and
// place while a transfer is in flight.
func (s *Store) requestStage(path string, to Place, job int64) error {
	k := stageKey{path, to}
	if st := s.stg.inflight[k]; st != nil {
		s.stg.wait(st, job)
		return nil
	}
	st := &stagingFile{jobs: map[int64]bool{}}
	s.stg.wait(st, job)
	s.stg.inflight[k] = st
	return s.sendStage(k, st, job)
}

// allDown says whether every replica of c is at a place left alone now.
func (s *Store) allDown(c *catFile, now time.Time) bool {
	for _, r := range c.reps {
		if s.isShared(r.Site) {
			r = shared
		}
		if !s.stg.isDown(r, now) {
			return false
		}
	}
	return true
}

func (s *Store) sendStage(k stageKey, st *stagingFile, job int64) error {
	c := s.data.cat[k.path]
	var from []Place
	if c != nil {
		from = s.sources(c, st.tried)
	}
	if len(from) == 0 {
		return s.failStaging(k, st, fmt.Errorf("no replica of it is left"))
	}
	req := StageRequest{Path: k.path, To: k.to, From: from, Size: c.size, SHA256: c.sha, Job: job}
	if c.mtime != 0 && c.producer == 0 {
		req.ModTime = time.Unix(0, c.mtime)
	}
	s.opt.Stager.Stage(req)
	return nil
}

// failStaging fails the queued jobs that waited for a file no transfer
// could bring.
func (s *Store) failStaging(k stageKey, st *stagingFile, cause error) error {
	reason := protocol.ClipText(fmt.Sprintf("input %s could not be staged to %s: %v", k.path, k.to, cause), protocol.MaxReasonBytes)
	s.stg.end(k)
	for _, id := range slices.Sorted(maps.Keys(st.jobs)) {
		if err := s.failUnstageable(id, reason); err != nil {
			return err
		}
	}
	return nil
}

// record stores a transfer and adds it to the totals.
func (s *Store) record(job int64, path string, from, to Place, bytes int64, started time.Time, d time.Duration, errText, via string) error {
	// A transfer's error can carry a site's words (an SFTP server's status
	// message): bounded and escaped before it is stored and shown.
	errText = protocol.ClipText(errText, protocol.MaxReasonBytes)
	if err := s.begin(); err != nil {
		return err
	}
	if _, err := s.stmts.insTransfer.Exec(job, path, from.Site, from.Host, to.Site, to.Host, bytes, d.Seconds(), micros(started), errText, protocol.ClipText(via, 64)); err != nil {
		return fatalError{err}
	}
	s.moved.Transfers++
	if errText != "" {
		s.moved.Failed++
	}
	s.moved.Bytes += bytes
	s.moved.Seconds += d.Seconds()
	return nil
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

// Staged records how a stage request ended: the transfer for accounting,
// and on success the new replica, waking placeholders whose jobs waited
// for it. A failed transfer is tried again from another replica (the
// failed ones last); after maxStageTries failures, or one that cannot be
// helped (Permanent), the jobs waiting for the file there fail.
func (s *Store) Staged(ctx context.Context, r StageResult) error {
	return s.do(ctx, func() error {
		errText := ""
		if r.Err != nil {
			errText = r.Err.Error()
		}
		if err := s.record(r.Job, r.Path, r.From, r.To, r.Bytes, r.Started, r.Duration, errText, r.Via); err != nil {
			return err
		}
		k := stageKey{r.Path, r.To}
		st := s.stg.inflight[k]
		if r.Err == nil {
			s.stg.end(k)
			return s.addReplica(r.Path, r.To, r.Bytes, r.SHA256)
		}
		s.log.Warn("staging failed", "path", r.Path, "to", r.To.String(), "from", r.From.String(), "err", r.Err, "permanent", r.Permanent)
		if len(r.Unreachable) > 0 {
			until := s.now().Add(placeDownFor)
			for _, p := range r.Unreachable {
				s.stg.down[p] = until
			}
			if slices.Contains(r.Unreachable, r.To) || !r.Permanent && s.data.cat[r.Path] != nil && s.allDown(s.data.cat[r.Path], s.now()) {
				// Nothing wrong with the file: its jobs wait, or run
				// where it can be brought.
				s.stg.end(k)
				s.data.gen++
				return nil
			}
		}
		if st == nil {
			return nil // not asked in this run: jobs ask again
		}
		st.fails++
		st.tried = append(slices.DeleteFunc(st.tried, func(p Place) bool { return p == r.From }), r.From)
		s.data.gen++
		if !r.Permanent && st.fails < maxStageTries {
			return s.sendStage(k, st, r.Job)
		}
		return s.failStaging(k, st, r.Err)
	})
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

// RecordTransfer accounts a copy made outside a job (files.get).
func (s *Store) RecordTransfer(ctx context.Context, t protocol.TransferInfo) error {
	started, err := time.Parse(time.RFC3339Nano, t.Started)
	if err != nil {
		started = s.now()
	}
	if t.Bytes < 0 || t.Seconds < 0 {
		return protocol.Errorf(protocol.CodeBadRequest, "a transfer has no negative bytes or seconds")
	}
	d := time.Duration(t.Seconds * float64(time.Second))
	return s.do(ctx, func() error {
		return s.record(t.Job, t.Path, parsePlace(t.From), parsePlace(t.To), t.Bytes, started, d, t.Error, t.Via)
	})
}

func parsePlace(s string) Place {
	site, host, _ := strings.Cut(s, ":")
	return Place{site, host}
}

// MeasuredLink replaces a site's configured link (--site-net) with one
// measured from real transfers, for DC's pricing.
func (s *Store) MeasuredLink(site string, l Link) {
	if !l.valid() {
		return
	}
	s.measuredMu.Lock()
	defer s.measuredMu.Unlock()
	m := map[string]Link{}
	if old := s.measured.Load(); old != nil {
		m = maps.Clone(*old)
	}
	m[site] = l
	s.measured.Store(&m)
	var best *Link
	for name, l := range m {
		if name == LocalSite {
			continue
		}
		if best == nil {
			b := l
			best = &b
			continue
		}
		best.Latency = min(best.Latency, l.Latency)
		best.Bandwidth = max(best.Bandwidth, l.Bandwidth)
	}
	s.bestMeasured.Store(best)
}

// Moved totals the transfers made (nil when none were).
func (s *Store) Moved(ctx context.Context) (*protocol.MovedTotals, error) {
	var m protocol.MovedTotals
	err := s.do(ctx, func() error { m = s.moved; return nil })
	if err != nil || m.Transfers == 0 {
		return nil, err
	}
	return &m, nil
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
