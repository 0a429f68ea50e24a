package catalog

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/mq-hpc/mq/internal/batchfail"
	"github.com/mq-hpc/mq/internal/dispatch"

	"github.com/mq-hpc/mq/protocol"
)

// Places and what to bring to them: which sites keep files of their own,
// whether a file has a replica at a place, and the stage requests for the
// inputs a job lacks where it is asked to run, with the transfers in
// flight (memory only: after a restart jobs simply ask again).

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

// RemoveSite forgets a removed site, in the core's transaction, and the
// replicas at a site with a data root of its own: the CLS reaches them no
// more, and its name, configured no more, would pass for a site sharing
// the CLS host's filesystem (IsShared): files only copied there would
// seem present on the CLS host. A shared site's replicas are the CLS
// host's files: they stay.
func (c *Catalog) RemoveSite(ctx context.Context, db Execer, name string) error {
	if c.rooted[name] {
		if _, err := db.ExecContext(ctx, queries.Get("DeleteSiteReplicas"), name); err != nil {
			return batchfail.Store{Err: err}
		}
		for _, f := range c.files {
			f.reps = slices.DeleteFunc(f.reps, func(p Place) bool { return p.Site == name })
		}
	}
	delete(c.rooted, name)
	delete(c.perHost, name)
	return nil
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

// MaxStageTries is how many failed transfers of one file to one place
// fail the jobs waiting for it.
const MaxStageTries = 3

// PlaceDownFor is how long a place that could not be reached is not
// staged to or from: its jobs wait, or run at other places, meanwhile.
const PlaceDownFor = 5 * time.Second

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
	mtime int64 // of the user's file when last asked for (0: not one)
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
	// full holds places that had no room for a file, until when they
	// take none (StageResult.Full); they still serve as sources.
	full map[Place]time.Time
}

func newStaging() staging {
	return staging{inflight: map[stageKey]*stagingFile{}, to: map[int64]Place{}, pending: map[int64]int{}, down: map[Place]time.Time{}, full: map[Place]time.Time{}}
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
func (g *staging) isDown(p Place, now time.Time) bool { return until(g.down, p, now) }

// isFull says whether p takes no file at now: it had no room.
func (g *staging) isFull(p Place, now time.Time) bool { return until(g.full, p, now) }

// until says whether m holds p until after now, forgetting it if not.
func until(m map[Place]time.Time, p Place, now time.Time) bool {
	t, ok := m[p]
	if ok && !now.Before(t) {
		delete(m, p)
		return false
	}
	return ok
}

// Unstageable is a file no transfer could bring to a place: the queued
// jobs among Jobs (the core checks which still are) fail with Reason.
type Unstageable struct {
	Jobs   []int64 // ascending
	Reason string
}

// StagingTo counts the jobs whose inputs are being brought to place to.
// Marks are few (bounded per place by the free slots asking there), so a
// count is cheap.
func (c *Catalog) StagingTo(to Place) int {
	n := 0
	for _, p := range c.stg.to {
		if p == to {
			n++
		}
	}
	return n
}

// Marked says whether the inputs of job id are being brought to a place.
func (c *Catalog) Marked(id int64) bool {
	_, ok := c.stg.to[id]
	return ok
}

// StagingElsewhere says whether another place than to is bringing the
// inputs of any of jobs ids.
func (c *Catalog) StagingElsewhere(ids []int64, to Place) bool {
	for _, id := range ids {
		if p, ok := c.stg.to[id]; ok && p != to {
			return true
		}
	}
	return false
}

// InputsAt says whether jobs ids (one, or a bundle's) have every movable
// input at place to. When not, it asks the stager for the missing ones and
// marks the jobs queued (per queued) as staging to there. Inputs the
// catalog has no replica of are not held back for: nothing could bring
// them (the agent checks for them before the command starts). Without a
// stager everything is everywhere.
func (c *Catalog) InputsAt(ids []int64, to Place, now time.Time, queued func(id int64) bool) bool {
	if c.stager == nil {
		return true
	}
	if c.stg.isDown(to, now) {
		return false // unreachable for now: other places may run them
	}
	if c.StagingElsewhere(ids, to) {
		return false // another place is bringing its inputs
	}
	missing := false
	for _, id := range ids {
		w := c.jobs[id]
		if w == nil {
			continue
		}
		for _, in := range w.in {
			f := c.files[in.Path]
			if !in.Movable || f == nil || len(f.reps) == 0 || c.present(f, to) {
				continue
			}
			missing = true
			if c.allDown(f, now) || c.stg.isFull(to, now) {
				continue // wait until a replica's place is back, or room is
			}
			// The file has a replica: a request cannot fail at once.
			c.RequestStage(in.Path, to, id)
		}
	}
	if !missing {
		return true
	}
	for _, id := range ids {
		if c.stg.pending[id] > 0 && queued(id) {
			c.stg.to[id] = to
		}
	}
	return false
}

// Ready is InputsAt for a placeholder asking for work at place to with
// free slots left: it asks for inputs for no more jobs than that. Staging
// every job examined (up to the window) moved files for jobs that other
// places, holding their data, then ran (BENCHMARKS.md, "FCFS vs DC, live
// and simulated").
func (c *Catalog) Ready(ids []int64, to Place, free int, now time.Time, queued func(id int64) bool) bool {
	if !dispatch.MayStage(c.Marked(ids[0]), c.StagingTo(to), free) && !c.InputsPresent(ids, to) {
		return false
	}
	return c.InputsAt(ids, to, now, queued)
}

// InputsPresent says, asking for nothing, whether jobs ids have every
// movable input at to.
func (c *Catalog) InputsPresent(ids []int64, to Place) bool {
	for _, id := range ids {
		w := c.jobs[id]
		if w == nil {
			continue
		}
		for _, in := range w.in {
			f := c.files[in.Path]
			if in.Movable && f != nil && len(f.reps) > 0 && !c.present(f, to) {
				return false
			}
		}
	}
	return true
}

// RequestStage asks for path at to on behalf of job, once per file and
// place while a transfer is in flight. A file with no replica left cannot
// be brought: the jobs waiting for it are returned, to fail.
func (c *Catalog) RequestStage(path string, to Place, job int64) *Unstageable {
	k := stageKey{path, to}
	if st := c.stg.inflight[k]; st != nil {
		c.stg.wait(st, job)
		return nil
	}
	st := &stagingFile{jobs: map[int64]bool{}}
	c.stg.wait(st, job)
	c.stg.inflight[k] = st
	return c.sendStage(k, st, job)
}

// allDown says whether every replica of f is at a place left alone now.
func (c *Catalog) allDown(f *file, now time.Time) bool {
	for _, r := range f.reps {
		if c.IsShared(r.Site) {
			r = Shared
		}
		if !c.stg.isDown(r, now) {
			return false
		}
	}
	return true
}

func (c *Catalog) sendStage(k stageKey, st *stagingFile, job int64) *Unstageable {
	f := c.files[k.path]
	var from []Place
	if f != nil {
		from = c.sources(f, st.tried)
	}
	if len(from) == 0 {
		return c.failStaging(k, st, fmt.Errorf("no replica of it is left"))
	}
	req := StageRequest{Path: k.path, To: k.to, From: from, Size: f.size, SHA256: f.sha, Job: job}
	st.mtime = 0
	if f.mtime != 0 && f.producer == 0 {
		req.ModTime = time.Unix(0, f.mtime)
		st.mtime = f.mtime
	}
	c.stager.Stage(req)
	return nil
}

// failStaging gives up the transfer k: the jobs that waited for it fail.
func (c *Catalog) failStaging(k stageKey, st *stagingFile, cause error) *Unstageable {
	reason := protocol.ClipText(fmt.Sprintf("input %s could not be staged to %s: %v", k.path, k.to, cause), protocol.MaxReasonBytes)
	c.stg.end(k)
	return &Unstageable{Jobs: slices.Sorted(maps.Keys(st.jobs)), Reason: reason}
}

// AddSums gives a job's inputs, as an assignment carries them, the
// catalog's size (when known) and checksum of each.
func (c *Catalog) AddSums(in []protocol.AssignedFile) {
	for i := range in {
		if f := c.files[in[i].Path]; f != nil {
			if f.size >= 0 {
				in[i].Size = f.size
			}
			in[i].SHA256 = f.sha
		}
	}
}

// KeepAt asks for a copy of path, which job made, at the store place of
// site (a plan keeps the file there), on behalf of job: the copy is
// accounted to it, and its failure fails no one the producer having
// ended (consumers that run before it lands stage the file as usual).
// Nothing is asked without a stager, for a file the catalog does not
// know, or one already there.
func (c *Catalog) KeepAt(path, site string, job int64) *Unstageable {
	if c.stager == nil {
		return nil
	}
	to := c.StorePlace(site, "")
	if !c.Known(path) || c.Present(path, to) {
		return nil
	}
	return c.RequestStage(path, to, job)
}
