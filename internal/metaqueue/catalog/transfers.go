package catalog

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// The transfers: what the catalog asks of the stager and what it records
// of the copies made. StageRequest, StageResult and Stager are the store's
// side of the contract with the stager (package cls drives a stage.Mover
// with it).

// StageRequest asks the stager to copy Path to To from one of From (best
// first). The stager calls the store's Staged when the copy ended,
// whichever way.
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
	// for a while (PlaceDownFor) and the jobs wait, or run elsewhere.
	Unreachable []Place
	// Via is the path taken at each end, "SRC>DST" (fs, sftp or agent),
	// recorded with the transfer.
	Via string
}

// Stager moves files for the store. Stage must not block: it queues the
// request and reports through the store's Staged.
type Stager interface {
	Stage(StageRequest)
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
func (c *Catalog) InputsAt(ids []int64, to Place, now time.Time, queued func(id int64) bool) (bool, error) {
	if c.stager == nil {
		return true, nil
	}
	if c.stg.isDown(to, now) {
		return false, nil // unreachable for now: other places may run them
	}
	if c.StagingElsewhere(ids, to) {
		return false, nil // another place is bringing its inputs
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
			if c.allDown(f, now) {
				continue // wait until a replica's place is back
			}
			// The file has a replica: a request cannot fail at once.
			c.RequestStage(in.Path, to, id)
		}
	}
	if !missing {
		return true, nil
	}
	for _, id := range ids {
		if c.stg.pending[id] > 0 && queued(id) {
			c.stg.to[id] = to
		}
	}
	return false, nil
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
	if f.mtime != 0 && f.producer == 0 {
		req.ModTime = time.Unix(0, f.mtime)
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

// Transfer is one copy made, for the record (Record).
type Transfer struct {
	Job      int64
	Path     string
	From, To Place
	Bytes    int64
	Started  time.Time
	Duration time.Duration
	Err, Via string
}

// Record stores a transfer and adds it to the totals, in the core's
// transaction.
func (c *Catalog) Record(t Transfer) error {
	// A transfer's error can carry a site's words (an SFTP server's status
	// message): bounded and escaped before it is stored and shown.
	errText := protocol.ClipText(t.Err, protocol.MaxReasonBytes)
	if _, err := c.st.insTransfer.Exec(t.Job, t.Path, t.From.Site, t.From.Host, t.To.Site, t.To.Host, t.Bytes, t.Duration.Seconds(),
		t.Started.UnixMicro(), errText, protocol.ClipText(t.Via, 64)); err != nil {
		return err
	}
	c.moved.Transfers++
	if errText != "" {
		c.moved.Failed++
	}
	c.moved.Bytes += t.Bytes
	c.moved.Seconds += t.Duration.Seconds()
	return nil
}

// Moved totals the transfers made.
func (c *Catalog) Moved() protocol.MovedTotals { return c.moved }

// ParsePlace reads a place as Place.String writes it ("site" or
// "site:host").
func ParsePlace(s string) Place {
	site, host, _ := strings.Cut(s, ":")
	return Place{site, host}
}

// Outcome is what a stage request's end changed, for the core to act on.
type Outcome struct {
	// Arrived says the replica at the result's To exists now: the file
	// moved there. New says the catalog knew nothing of it before.
	Arrived, New bool
	// Changed says where files can be brought from changed (a place left
	// alone, a failure counted): data-conscious decisions may differ.
	Changed bool
	// Fail is the jobs to fail, when no transfer can bring the file.
	Fail *Unstageable
}

// Staged records how a stage request ended, in the core's transaction:
// the transfer for accounting, and on success the new replica. A failed
// transfer is tried again from another replica (the failed ones last);
// after MaxStageTries failures, or one that cannot be helped (Permanent),
// the jobs waiting for the file there fail (Outcome.Fail).
func (c *Catalog) Staged(ctx context.Context, db Execer, r StageResult, now time.Time) (Outcome, error) {
	errText := ""
	if r.Err != nil {
		errText = r.Err.Error()
	}
	if err := c.Record(Transfer{Job: r.Job, Path: r.Path, From: r.From, To: r.To, Bytes: r.Bytes, Started: r.Started, Duration: r.Duration, Err: errText, Via: r.Via}); err != nil {
		return Outcome{}, err
	}
	out := c.stageEnded(r, now)
	if out.Arrived {
		isNew, err := c.addReplica(ctx, db, r.Path, r.To, r.Bytes, r.SHA256, now)
		if err != nil {
			return Outcome{}, err
		}
		out.New = isNew
	}
	return out, nil
}

// stageEnded is Staged's decision, in memory: the transfer in flight
// ends, or is tried again, or gives up.
func (c *Catalog) stageEnded(r StageResult, now time.Time) Outcome {
	var out Outcome
	k := stageKey{r.Path, r.To}
	st := c.stg.inflight[k]
	if r.Err == nil {
		c.stg.end(k)
		out.Arrived = true
		return out
	}
	if len(r.Unreachable) > 0 {
		until := now.Add(PlaceDownFor)
		for _, p := range r.Unreachable {
			c.stg.down[p] = until
		}
		if slices.Contains(r.Unreachable, r.To) || !r.Permanent && c.files[r.Path] != nil && c.allDown(c.files[r.Path], now) {
			// Nothing wrong with the file: its jobs wait, or run
			// where it can be brought.
			c.stg.end(k)
			out.Changed = true
			return out
		}
	}
	if st == nil {
		return out // not asked in this run: jobs ask again
	}
	st.fails++
	st.tried = append(slices.DeleteFunc(st.tried, func(p Place) bool { return p == r.From }), r.From)
	out.Changed = true
	if !r.Permanent && st.fails < MaxStageTries {
		out.Fail = c.sendStage(k, st, r.Job)
	} else {
		out.Fail = c.failStaging(k, st, r.Err)
	}
	return out
}
