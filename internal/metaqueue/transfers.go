package metaqueue

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// The transfers of the data-staging catalog: what the store asks of the
// stager and what it records of the copies made. This file declares the
// store's side of the contract with the stager (package cls drives a
// stage.Mover with it).

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
