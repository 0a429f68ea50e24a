// Package dc is data-conscious scheduling's memory in the live CLS: where
// each Done job's outputs lie, where placeholders run, when ready jobs of
// choosing queues became ready, the runtimes learned per target and the
// placeholders' arrivals. A choosing queue (policy DC, SA, XSufferage;
// docs/policies/dc.md) prices each candidate's inputs by where they are
// and the links between sites, and its pick waits when a placeholder
// expected soon is a better place for the job.
//
// The state is owned by the metaqueue's core goroutine, which tells it
// what happened, one call per event (a placeholder asked or went silent,
// a job was submitted, became ready, ended Done or ended; events.go), and
// asks it for a choosing queue's pick (PickFor; choose.go), which runs
// the dispatch chain (dispatch.Examine) and the chooser
// (dispatch.Choose). It imports no other module: what it needs of the
// core and the file catalog it asks through Jobs and Catalog, which the
// core answers, and what its answers mean for the catalog, plans, ledger
// or copies (Made) the core carries out. The sites' links (links.go)
// price the copies.
package dc

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/internal/sqlfile"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

//go:embed dc.sql
var dcSQL string

var queries = sqlfile.MustParse("dc.sql", dcSQL)

// Querier reads in the core's batch (the writer connection or a *sql.Tx).
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// LocalSite is the site name of the CLS's own placeholders (the catalog's
// too). Files there are located per host; at other sites per site (a
// cluster shares its file system), but per host at sites whose nodes
// share none (node-local).
const LocalSite = protocol.LocalSite

// Redecide is the longest a "wait" stands without being decided again: a
// waiting job's queue-time term grows, so it cannot wait forever.
const Redecide = time.Second

// Link is how fast data moves between a site and the others.
type Link struct {
	// Latency is the one-way time in seconds between the site and the CLS:
	// the start-up cost of one file copy, and DC's placeholder latency for
	// placeholders there. Must be > 0.
	Latency float64
	// Bandwidth is bytes per second of a copy. Must be > 0.
	Bandwidth float64
}

// Default links when the options do not say: the local site is a LAN, any
// other site a WAN.
var (
	DefaultLocalLink = Link{Latency: 0.05, Bandwidth: 100e6}
	DefaultSiteLink  = Link{Latency: 0.5, Bandwidth: 10e6}
)

// Valid says whether both figures are positive and finite.
func (l Link) Valid() bool {
	ok := func(f float64) bool { return f > 0 && !math.IsInf(f, 0) && !math.IsNaN(f) }
	return ok(l.Latency) && ok(l.Bandwidth)
}

// Place is where files live and placeholders run: a site, and a host at
// the local site and at node-local sites.
type Place struct{ Site, Host string }

// String is site, or site:host.
func (p Place) String() string {
	if p.Host == "" {
		return p.Site
	}
	return p.Site + ":" + p.Host
}

// File is one file a job declared.
type File struct {
	Path string
	Size int64 // -1 = unknown
	Rel  bool  // declared relative: movable (data staging)
}

// Files is what a job declared it reads and writes.
type Files struct {
	In, Out []File
	// OutsideCwd: an output is declared absolute or outside the job's
	// working directory, so its attempts cannot keep it apart (never
	// copied).
	OutsideCwd bool
}

// Assigned is how an assignment carries the files: inputs and outputs
// with their declared sizes, a file declared absolute as local (not
// movable). The catalog adds the inputs' checksums.
func (f *Files) Assigned() (in, out []protocol.AssignedFile) {
	return assigned(f.In), assigned(f.Out)
}

func assigned(files []File) []protocol.AssignedFile {
	if len(files) == 0 {
		return nil
	}
	a := make([]protocol.AssignedFile, len(files))
	for i, f := range files {
		a[i] = protocol.AssignedFile{Path: f.Path, Size: f.Size, Local: !f.Rel}
	}
	return a
}

// Declared is what a job spec declares, for AddJob.
func Declared(js *protocol.JobSpec) *Files {
	jf := &Files{}
	for _, f := range js.Inputs {
		jf.In = append(jf.In, fileOf(f))
	}
	for _, f := range js.Outputs {
		jf.Out = append(jf.Out, fileOf(f))
		jf.OutsideCwd = jf.OutsideCwd || !f.Rel || !under(js.Cwd, f.Path)
	}
	return jf
}

func fileOf(f protocol.File) File {
	n := int64(-1)
	if f.Size != nil {
		n = *f.Size
	}
	return File{f.Path, n, f.Rel}
}

// under says whether path p lies strictly inside directory dir.
func under(dir, p string) bool {
	if dir == "" {
		return false
	}
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel)
}

// Loc is where a file was last produced (or the CLS host, for users'
// files).
type Loc struct {
	At   policy.Site
	Size int64 // the producer's declared size; -1 = unknown
	Job  int64
}

// State is the memory of data-conscious scheduling. The zero value is
// not ready: Reset it.
type State struct {
	files   map[int64]*Files      // live jobs that declared files
	where   map[string]Loc        // path -> where it was last produced
	perHost map[string]bool       // node-local sites: places per host
	places  map[policy.Site]Place // numbered by Site; see placeRefs
	placeID map[Place]policy.Site
	placeRefs
	phPlace map[int64]policy.Site // placeholder -> where it runs
	readyAt map[int64]time.Time   // jobs of choosing queues: when ready (BecameReady)
	// chose is when each queue last began to choose, as stored
	// (queues.choosing_since; LoadFiles), for LoadReady.
	chose   map[int32]time.Time
	expect  policy.Expect   // runtimes by target, of Done jobs (earlier runs' loaded at start)
	arr     policy.Arrivals // placeholders' requests, fed while a choosing queue exists
	lastAsk map[int64]time.Time
	epoch   time.Time // arrival times are seconds since this
	ndc     int       // choosing queues
	nsjf    int       // queues ordering by learned runtimes
	gen     uint64    // bumped when a decision may change (ready set, locations)
	// told counts the bumps of gen made by Moved and Changed, which say
	// what moved: any other bump may have moved any file.
	told  uint64
	waits int64     // "wait" decisions, for tests and logs
	links siteLinks // kept across Reset (UseLinks)

	// Scratch for one decision, kept to avoid allocating per request.
	popped []policy.Ready
	cands  []policy.Candidate
	inBuf  []policy.Input
	fut    []policy.Arrival
	pool   corePool
}

// Reset empties the state; arrival times count from now.
func (d *State) Reset(now time.Time) {
	*d = State{
		files: map[int64]*Files{}, where: map[string]Loc{}, perHost: map[string]bool{},
		places: map[policy.Site]Place{}, placeID: map[Place]policy.Site{},
		phPlace: map[int64]policy.Site{}, readyAt: map[int64]time.Time{}, chose: map[int32]time.Time{}, lastAsk: map[int64]time.Time{},
		epoch: now, links: d.links,
	}
}

// PlaceOf is the place of a placeholder or file at site and host: the
// host counts at the local site and at node-local sites.
func (d *State) PlaceOf(site, host string) Place {
	if site != LocalSite && !d.perHost[site] {
		host = ""
	}
	return Place{site, host}
}

// Site numbers place p for the choosers.
func (d *State) Site(p Place) policy.Site {
	if id, ok := d.placeID[p]; ok {
		return id
	}
	id := d.next
	d.next++
	d.places[id] = p
	d.placeID[p] = id
	return id
}

// SiteAt is the site and host of a place numbered by Site (the zero
// Place for one forgotten).
func (d *State) SiteAt(at policy.Site) Place { return d.places[at] }

// At numbers the place of site and host.
func (d *State) At(site, host string) policy.Site { return d.Site(d.PlaceOf(site, host)) }

// SetNodeLocal says that a site has a data root of its own (as the
// catalog keeps it) and whether its nodes share no filesystem; ok false
// forgets the site.
func (d *State) SetNodeLocal(site string, nodeLocal, ok bool) {
	if !ok {
		delete(d.perHost, site)
		return
	}
	d.perHost[site] = nodeLocal
}

// NodeLocal says whether site's places are per host.
func (d *State) NodeLocal(site string) bool { return d.perHost[site] }

// Shared is the place of the CLS host's filesystem (the catalog's too).
var Shared = Place{Site: LocalSite}

// IsShared says whether a site sees the CLS host's filesystem: every site
// but one with a data root of its own (SetNodeLocal). Placeholders of a
// site the CLS does not know (agents started by hand) are taken to share
// it.
func (d *State) IsShared(site string) bool {
	_, rooted := d.perHost[site]
	return !rooted
}

// StorePlace is where the jobs of placeholder ph find their files: the
// CLS host's filesystem at a site sharing it, else the place where it
// runs (read with db if it registered before this run).
func (d *State) StorePlace(ctx context.Context, db Querier, ph int64) (Place, error) {
	at, err := d.PlaceholderAt(ctx, db, ph)
	if err != nil {
		return Place{}, err
	}
	return d.storeAt(at), nil
}

func (d *State) storeAt(at policy.Site) Place {
	if pl := d.places[at]; !d.IsShared(pl.Site) {
		return pl
	}
	return Shared
}

// PlaceholderAt is where placeholder ph runs, reading its row once if it
// registered before this run; one not found is a place of its own.
func (d *State) PlaceholderAt(ctx context.Context, db Querier, ph int64) (policy.Site, error) {
	if at, ok := d.phPlace[ph]; ok {
		return at, nil
	}
	var site, host string
	err := db.QueryRowContext(ctx, queries.Get("PlaceholderPlace"), ph).Scan(&site, &host)
	if errors.Is(err, sql.ErrNoRows) {
		site, host = "", ""
	} else if err != nil {
		return 0, err
	}
	return d.SetPlaceholder(ph, site, host), nil
}

// SiteOf is the site placeholder ph runs at (PlaceholderAt).
func (d *State) SiteOf(ctx context.Context, db Querier, ph int64) (string, error) {
	at, err := d.PlaceholderAt(ctx, db, ph)
	if err != nil {
		return "", err
	}
	return d.places[at].Site, nil
}

// SetPlaceholder records where placeholder ph runs.
func (d *State) SetPlaceholder(ph int64, site, host string) policy.Site {
	at := d.At(site, host)
	if old, ok := d.phPlace[ph]; ok {
		if old == at {
			return at
		}
		d.unref(old)
	}
	d.phPlace[ph] = at
	d.ref(at)
	return at
}

// PlaceholderGone forgets placeholder ph: its place and its arrivals. It
// says whether a decision may differ.
func (d *State) PlaceholderGone(ph int64) bool {
	if at, ok := d.phPlace[ph]; ok {
		delete(d.phPlace, ph)
		d.unref(at)
	}
	return d.Forget(ph)
}

// Count records how many queues choose (ndc) and order by learned
// runtimes (nsjf). Arrivals are fed only while a queue chooses.
func (d *State) Count(ndc, nsjf int) {
	d.nsjf = nsjf
	if ndc == 0 && d.ndc > 0 {
		d.arr, d.lastAsk = policy.Arrivals{}, map[int64]time.Time{}
	}
	d.ndc = ndc
}

// Choosing says whether any queue chooses (then placeholders' requests
// are observed).
func (d *State) Choosing() bool { return d.ndc > 0 }

// Epoch is when the arrivals' clock started (Reset).
func (d *State) Epoch() time.Time { return d.epoch }

func (d *State) secs(t time.Time) float64 { return t.Sub(d.epoch).Seconds() }

// Asked feeds a request for work by placeholder ph at place at to the
// arrival predictor.
func (d *State) Asked(ph int64, at policy.Site, now time.Time) {
	d.arr.Observe(ph, at, d.secs(now))
	d.lastAsk[ph] = now
}

// Forget drops a placeholder from the arrival predictions, saying whether
// it was there.
func (d *State) Forget(ph int64) bool {
	if _, ok := d.lastAsk[ph]; !ok {
		return false
	}
	d.arr.Forget(ph)
	delete(d.lastAsk, ph)
	return true
}

// Silent returns the placeholders that have not asked for work for
// longer than lease and are not alive (parked asking now or running a
// job, whose lease their heartbeats renew): a vanished placeholder would
// otherwise be predicted to arrive at once, forever. Forgetting busy ones
// too left DC blind to a placeholder running jobs longer than a lease.
// alive is called once, when a placeholder is silent.
func (d *State) Silent(now time.Time, lease time.Duration, alive func() map[int64]bool) []int64 {
	var live map[int64]bool
	var out []int64
	for ph, t := range d.lastAsk {
		if now.Sub(t) <= lease {
			continue
		}
		if live == nil {
			live = alive()
		}
		if !live[ph] {
			out = append(out, ph)
		}
	}
	slices.Sort(out)
	return out
}

// Asking says whether placeholder ph is among the arrivals predicted.
func (d *State) Asking(ph int64) bool {
	_, ok := d.lastAsk[ph]
	return ok
}

// AddJob records a live job's declared files.
func (d *State) AddJob(id int64, jf *Files) { d.files[id] = jf }

// Job is job id's declared files (nil when it declared none or ended).
func (d *State) Job(id int64) *Files { return d.files[id] }

// AnyFiles says whether a live job declared files.
func (d *State) AnyFiles() bool { return len(d.files) > 0 }

// LoadFiles reads the declared files of live jobs (one job, or all when
// id is 0) and calls each with each job's inputs (none: nil) for the
// catalog. Reading all, at load, it also reads when queues began to
// choose (LoadReady).
func (d *State) LoadFiles(ctx context.Context, db Querier, id int64, each func(id int64, in []File)) error {
	q, args := queries.Get("LoadLive"), []any{}
	if id != 0 {
		q, args = queries.Get("LoadJob"), []any{id}
		delete(d.files, id)
	}
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var jid int64
		var kind, path, cwd string
		var size sql.NullInt64
		var rel bool
		if err := rows.Scan(&jid, &kind, &path, &size, &rel, &cwd); err != nil {
			return err
		}
		jf := d.files[jid]
		if jf == nil {
			jf = &Files{}
			d.files[jid] = jf
		}
		f := File{path, -1, rel}
		if size.Valid {
			f.Size = size.Int64
		}
		if kind == "i" {
			jf.In = append(jf.In, f)
		} else {
			jf.Out = append(jf.Out, f)
			jf.OutsideCwd = jf.OutsideCwd || !rel || !under(cwd, path)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if err := rows.Close(); err != nil {
		return err
	}
	if id != 0 {
		each(id, d.files[id].inputs())
		return nil
	}
	for jid, jf := range d.files {
		each(jid, jf.inputs())
	}
	return d.loadChose(ctx, db)
}

func (d *State) loadChose(ctx context.Context, db Querier) error {
	rows, err := db.QueryContext(ctx, queries.Get("LoadChoosingSince"))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var q int32
		var since int64
		if err := rows.Scan(&q, &since); err != nil {
			return err
		}
		d.chose[q] = time.UnixMicro(since)
	}
	return rows.Err()
}

// InputPaths lists the files job id declared it reads (nil: none).
func (d *State) InputPaths(id int64) []string {
	in := d.files[id].inputs()
	if len(in) == 0 {
		return nil
	}
	out := make([]string, len(in))
	for i, f := range in {
		out[i] = f.Path
	}
	return out
}

// inputs is what a job declared it reads; a nil Files read none.
func (jf *Files) inputs() []File {
	if jf == nil {
		return nil
	}
	return jf.In
}

// LocalBytes is how many bytes of job id's inputs are at an asking
// placeholder's site (cur, with storage place to): with staging, those
// cat has a replica of there; without, those produced there.
func (d *State) LocalBytes(id int64, cur policy.Site, to Place, staging bool, cat Sizes) int64 {
	jf := d.files[id]
	if jf == nil {
		return 0
	}
	var b int64
	for _, f := range jf.In {
		size := f.Size
		if staging {
			n, ok := cat.SizeAt(f.Path, to)
			if !ok {
				continue
			}
			if n >= 0 {
				size = n
			}
		} else {
			loc, ok := d.where[f.Path]
			if !ok || loc.At != cur {
				continue
			}
			if size < 0 {
				size = loc.Size
			}
		}
		b += max(size, 0)
	}
	return b
}

// Sizes is the catalog's answer to LocalBytes: the size of path's replica
// at place to (-1: unknown), ok false if it has none there.
type Sizes interface {
	SizeAt(path string, to Place) (size int64, ok bool)
}

// Where is where path was last produced.
func (d *State) Where(path string) (Loc, bool) {
	l, ok := d.where[path]
	return l, ok
}

// Locate records that path is at l.
func (d *State) Locate(path string, l Loc) {
	d.where[path] = l
	d.locatedAt(l.At)
}

// LocateNew records that path is at l unless its place is known.
func (d *State) LocateNew(path string, l Loc) {
	if _, ok := d.where[path]; !ok {
		d.where[path] = l
		d.locatedAt(l.At)
	}
}

// Gone forgets where files no replica is left of; a decision may differ.
func (d *State) Gone(paths []string) {
	for _, p := range paths {
		delete(d.where, p)
	}
	d.gen++
}

// Expect is the runtimes learned by target.
func (d *State) Expect() *policy.Expect { return &d.expect }

// Ran sums, while the load scans ended jobs, the runtimes Done jobs took
// per target: SJF and DC go on from what earlier runs learned rather than
// from nothing (State.Learn). The zero value is ready to use.
type Ran struct{ by map[int32]*ranSum }

type ranSum struct {
	secs float64
	n    int
}

// Add notes that a Done job of target t ran micros microseconds.
func (r *Ran) Add(t int32, micros int64) {
	if r.by == nil {
		r.by = map[int32]*ranSum{}
	}
	l := r.by[t]
	if l == nil {
		l = &ranSum{}
		r.by[t] = l
	}
	l.secs += float64(micros) / 1e6
	l.n++
}

// Learn teaches the runtimes r summed to the estimator, by the name of
// each target (name).
func (d *State) Learn(r *Ran, name func(t int32) string) {
	for t, l := range r.by {
		d.expect.Load(name(t), l.secs, l.n)
	}
}

// Estimate is a job's expected runtime: its declared estimate, else its
// target's learned one.
func (d *State) Estimate(target string, est float64) float64 { return d.expect.Estimate(target, est) }

// Learned is the estimate a queue that orders by learned runtimes gives a
// job that declared none (est 0): its target's mean so far; unknown (0)
// goes last.
func (d *State) Learned(target string, est float32) float32 {
	if est == 0 && d.nsjf > 0 {
		est = float32(d.expect.Estimate(target, 0))
	}
	return est
}

// Output is an output of a Done job, as recorded: its size (-1 unknown)
// and checksum ("" none).
type Output struct {
	Path string
	Size int64
	SHA  string
}

// Ran learns the runtime of a Done job of target that ran from started
// to finished. Kept for any queue: one may turn SJF or DC later.
func (d *State) Ran(target string, started, finished time.Time) {
	if !started.IsZero() && finished.After(started) {
		d.expect.Observe(target, finished.Sub(started).Seconds())
	}
}

// Outputs returns a Done job's declared outputs as they are recorded. With
// reported (staging, or an agent that reported them) outputs reported
// well carry the agent's size and checksum; an output not reported counts
// at its producer's place when it is site-local or was made where the CLS
// host's filesystem is seen (shared), and is skipped otherwise. valid says
// whether a checksum is well formed.
func (d *State) Outputs(id int64, outs []protocol.FileSum, reported, shared bool, valid func(string) bool) []Output {
	jf := d.files[id]
	if jf == nil || len(jf.Out) == 0 {
		return nil
	}
	// By path, the first of each: a scan of outs per declared output was
	// declared x reported comparisons in the core, and the agent's list
	// is as long as it likes.
	at := make(map[string]int, len(outs))
	for i := len(outs) - 1; i >= 0; i-- {
		at[outs[i].Path] = i
	}
	var rec []Output
	for _, f := range jf.Out {
		size, sha := f.Size, ""
		i, ok := at[f.Path]
		switch {
		case ok && outs[i].Size >= 0 && valid(outs[i].SHA256):
			size, sha = outs[i].Size, outs[i].SHA256
		case !reported || !f.Rel || shared:
			// Not reported but there: a site-local output (declared
			// absolute, never hashed), or one made where the CLS host's
			// filesystem is seen. DC still locates it at its producer.
		default:
			continue // not made (the agent fails such a job), or not said well
		}
		rec = append(rec, Output{f.Path, size, sha})
	}
	return rec
}

// BecameReady notes that a job of a choosing queue moved from state from
// to Queued at now: its queue time counts from then when its
// prerequisites made it ready (from Waiting or Blocked: it was not ready
// meanwhile, and its inputs may have been made again elsewhere), a rerun
// or its submission; a requeued attempt (from Executing) and a release
// from a hold (mqalter's too) keep the time it had, if it had one, so
// that a job whose attempts fail at a placeholder by its data is not held
// anew for a full bound each time. The database keeps the same time
// (jobs.ready, written by the UPDATE that moves the job; LoadReady).
func (d *State) BecameReady(id int64, from job.State, now time.Time) {
	if _, ok := d.readyAt[id]; !ok || (from != job.Held && from != job.Executing) {
		d.readyAt[id] = now
	}
	d.gen++
}

// Stored is the ready time the core's UPDATE that moves a job to state to
// at now takes (jobs.sql, SetState), whatever its queue: now, in Unix
// microseconds, for a job that becomes Queued; NULL for any other move,
// where the statement keeps the stored time (NULL costs no allocation).
func (*State) Stored(to job.State, now time.Time) any {
	if to == job.Queued {
		return now.UnixMicro()
	}
	return nil
}

// LoadReady notes, at load, that job id of choosing queue q has been
// ready since since (stored: jobs.ready, or its submission), unless
// already noted. It counts from no earlier than the queue's switch to
// choosing (Switched), nor later than now (a clock set back).
func (d *State) LoadReady(id int64, q int32, since, now time.Time) {
	if _, ok := d.readyAt[id]; ok {
		return
	}
	if chose, ok := d.chose[q]; ok && chose.After(since) {
		since = chose
	}
	if since.After(now) {
		since = now
	}
	d.readyAt[id] = since
}

// Switched notes that the queue of ready job id began to choose at now:
// its queue time counts from the switch (the database keeps it as
// queues.choosing_since), not from when it became ready under a policy
// that did not wait for its data.
func (d *State) Switched(id int64, now time.Time) { d.readyAt[id] = now }

// Ended forgets a job that reached a terminal state.
func (d *State) Ended(id int64) {
	delete(d.files, id)
	delete(d.readyAt, id)
}

// QueueTime is how long job id has been ready at now; a job not seen
// ready yet is from now.
func (d *State) QueueTime(id int64, now time.Time) float64 {
	ready, known := d.readyAt[id]
	if !known {
		ready = now
		d.readyAt[id] = now
	}
	return max(now.Sub(ready).Seconds(), 0)
}

// Inputs adds up the inputs of jobs ids by where they are, appending to
// dst. Inputs no job has produced have no known place and weigh nothing;
// an input of unknown size costs one copy's latency. here, when not nil,
// says whether a movable input has a replica at the asking placeholder's
// place (cur): it is then priced there, whoever produced it.
func (d *State) Inputs(dst []policy.Input, ids []int64, cur policy.Site, here Presence) []policy.Input {
	start := len(dst)
	for _, id := range ids {
		jf := d.files[id]
		if jf == nil {
			continue
		}
		for _, f := range jf.In {
			loc, ok := d.where[f.Path]
			if !ok {
				continue
			}
			if here != nil && f.Rel && loc.At != cur && here.Present(f.Path) {
				loc.At = cur
			}
			size := f.Size
			if size < 0 {
				size = loc.Size
			}
			i := start
			for ; i < len(dst) && dst[i].Site != loc.At; i++ {
			}
			if i == len(dst) {
				dst = append(dst, policy.Input{Site: loc.At})
			}
			dst[i].Bytes += max(size, 0)
			dst[i].Files++
		}
	}
	return dst
}

// Gen is the generation of the decisions: it moves when one may change.
func (d *State) Gen() uint64 { return d.gen }

// Untold is the bumps of Gen that did not say what moved.
func (d *State) Untold() uint64 { return d.gen - d.told }

// Bump says a decision may change, any file having perhaps moved.
func (d *State) Bump() { d.gen++ }

// Changed says a decision may change, with what moved told (or nothing:
// the ready set).
func (d *State) Changed() {
	d.gen++
	d.told++
}

// Waits counts the "wait" decisions.
func (d *State) Waits() int64 { return d.waits }

// Waited counts a "wait" decision.
func (d *State) Waited() { d.waits++ }
