package catalog

import (
	"context"
	"slices"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// The catalog's recorded changes, each in the core's transaction: a
// user's file, a job's output, a replica added (files.add, a transfer)
// or dropped (files.rm, an agent that found it missing). A check that may
// refuse runs first and changes nothing, so the core begins its
// transaction only for a change.

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

// UserFile records a user's input that exists on the CLS host at submit
// (size and mtime as the submitting command saw them): a replica at the
// CLS host, the only one when the file changed since it was last
// recorded so. A file a job produced keeps its producer's record: then
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
	if f.mtime != 0 && (f.mtime != mtime || f.size != size) {
		// Edited since it was last submitted: the copies staged from it
		// are of the old content (one of the same size would pass the
		// agent's check, its checksum forgotten below).
		if _, err := c.st.dropCopies.Exec(path); err != nil {
			return false, err
		}
		f.reps = slices.DeleteFunc(f.reps, func(p Place) bool { return p != Shared })
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

// Made records that job made path at place p (Produced) and, when a plan
// keeps the file at another site (planned says which), asks for a copy
// there (KeepAt): a plan that put the file elsewhere, or a producer that
// ran elsewhere than planned, still has it where the plan's consumers
// run. A file without a checksum is not kept elsewhere. The jobs a copy
// that cannot be made fails are returned (nil: none).
func (c *Catalog) Made(path string, p Place, size int64, sha string, job int64, when time.Time, planned func(path string) (site string, ok bool)) (*Unstageable, error) {
	if err := c.Produced(path, p, size, sha, job, when); err != nil || sha == "" {
		return nil, err
	}
	if site, ok := planned(path); ok && site != p.Site {
		return c.KeepAt(path, site, job), nil
	}
	return nil, nil
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
				return protocol.Errorf(protocol.CodeBadState, "%s: that is the last replica, and job %d (not ended) reads it; cls files rm --force drops it anyway", path, id)
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
	// A set, not a scan of the job's inputs per path: both lists may
	// hold MaxFiles paths, and this runs in the core.
	movable := make(map[string]bool, len(w.in))
	for _, in := range w.in {
		if in.Movable {
			movable[in.Path] = true
		}
	}
	var out []string
	for _, p := range missing {
		if !movable[p] {
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

// DropMissing forgets the replicas at place to of the inputs of job id
// its agent did not find whole there (Stale, DropStale), and says whether
// any was: the job is then handed back unstarted, to wait for them,
// rather than failed.
func (c *Catalog) DropMissing(ctx context.Context, db Execer, id int64, to Place, missing []string) (bool, Change, error) {
	drop := c.Stale(id, to, missing)
	if len(drop) == 0 {
		return false, Change{}, nil
	}
	gone, err := c.DropStale(ctx, db, id, to, drop)
	return err == nil, Change{Moved: true, Gone: gone}, err
}
