package cls

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/catalog"
	"github.com/mq-hpc/mq/internal/metaqueue/dc"
	"github.com/mq-hpc/mq/internal/site/login"
	"github.com/mq-hpc/mq/internal/stage"
	"github.com/pkg/sftp"
)

// stagerStore is what the stager needs of the store.
type stagerStore interface {
	Staged(ctx context.Context, r catalog.StageResult) error
	MeasuredLink(site string, l dc.Link)
}

// placeFunc resolves a place of the catalog to where its files are. host
// says the place is the CLS host's own filesystem (the local site, and
// sites that share it), where the files are the user's own.
type placeFunc func(ctx context.Context, p catalog.Place) (pl stage.Place, host bool, err error)

// stager is the store's catalog.Stager: it queues stage requests and
// serves them with a bounded pool of workers, each moving one file
// through the CLS (stage.Mover) from the first place of the request that
// has it, and reports each end to the store (Staged). Every transfer feeds
// per-site link estimates, pushed to the store for DC's pricing.
type stager struct {
	places  placeFunc
	workers int
	log     *slog.Logger
	// prior is a site's configured link, kept for what is not measured yet.
	prior func(site string) dc.Link
	now   func() time.Time

	mover stage.Mover
	rates stage.Rates
	full  fullPlaces // targets whose disk was full (stagefull.go)
	// alt, if set, is a place's second path: its data root through the
	// connection of one of its placeholders (agentplace.go), when the place
	// is a site's shared data root (reached over SFTP otherwise) and a
	// placeholder there takes files now.
	alt func(p catalog.Place) (stage.Place, bool)

	ctx    context.Context // ends at stop: transfers are cancelled
	cancel context.CancelFunc
	wg     sync.WaitGroup
	wake   chan struct{}

	mu      sync.Mutex
	store   stagerStore // set by start: the store is opened with the stager
	queue   []catalog.StageRequest
	started bool
	stopped bool
}

// DefaultStageWorkers is how many files the CLS moves at once by default.
const DefaultStageWorkers = stage.DefaultWorkers

func newStager(workers int, places placeFunc, prior func(string) dc.Link, log *slog.Logger) *stager {
	if workers < 1 {
		workers = DefaultStageWorkers
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &stager{places: places, workers: workers, log: log, prior: prior, now: time.Now, wake: make(chan struct{}, 1)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mover = stage.Mover{Places: s.moverPlace, Log: log, Rates: &s.rates, Local: catalog.LocalSite}
	return s
}

// moverPlace is the Mover's view of places: by name, a site or
// site:host (placeName), and with agentSuffix the place's second path.
func (s *stager) moverPlace(name string) (stage.Place, error) {
	base, viaAgent := strings.CutSuffix(name, agentSuffix)
	site, host, _ := strings.Cut(base, ":")
	p := catalog.Place{Site: site, Host: host}
	if viaAgent {
		if s.alt != nil {
			if pl, ok := s.alt(p); ok {
				return pl, nil
			}
		}
		return nil, &unreachableError{base, &noAgentError{site, host}}
	}
	pl, _, err := s.places(s.ctx, p)
	return pl, err
}

// agentSuffix names a place's path through a placeholder's connection in
// the Mover's names and the rates (no site name has a '#').
const agentSuffix = "#agent"

// route chooses the path to a place for a file of size bytes, and names
// it: the place's own (SFTP to the login host, or the agent path of a
// host of a --node-local site), or, where a placeholder of the site takes
// files now, its connection. Each path's link is measured apart; the one
// whose estimate (latency + size/bandwidth) is lower is taken. A path not
// measured yet for a file of this size is taken next, so both are
// measured: SFTP first, then the agent's connection.
func (s *stager) route(p catalog.Place, pl stage.Place, host bool, size int64) (name, via string) {
	name, via = placeName(p), pathOf(pl, host)
	if s.alt == nil || via != "sftp" {
		return name, via
	}
	if _, ok := s.alt(p); !ok {
		return name, via
	}
	alt := name + agentSuffix
	ts, okS := s.estimate(name, size)
	ta, okA := s.estimate(alt, size)
	switch {
	case !okS:
		return name, via
	case !okA || ta < ts:
		return alt, "agent"
	}
	return name, via
}

// estimate is the measured time of moving size bytes over a path; false
// when what a file of this size depends on is not measured yet.
func (s *stager) estimate(name string, size int64) (float64, bool) {
	lat, bw, ok := s.rates.Link(name)
	if !ok {
		return 0, false
	}
	if size > stage.SmallBytes {
		if bw <= 0 {
			return 0, false
		}
		return lat + float64(size)/bw, true
	}
	if lat <= 0 {
		return 0, false
	}
	t := lat
	if bw > 0 {
		t += float64(max(size, 0)) / bw
	}
	return t, true
}

// pathOf names the path a place is reached by in transfer records: the
// CLS host's filesystem (host), a placeholder's connection, or else the
// site's login host.
func pathOf(pl stage.Place, host bool) string {
	if host {
		return "fs"
	}
	if _, ok := pl.(agentPlace); ok {
		return "agent"
	}
	return "sftp"
}

// Stage queues r. It never blocks (the store's core calls it).
func (s *stager) Stage(r catalog.StageRequest) {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	s.queue = append(s.queue, r)
	s.mu.Unlock()
	s.signal()
}

func (s *stager) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// start starts the workers, reporting to store. Requests queued before
// are served then.
func (s *stager) start(store stagerStore) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.stopped {
		return
	}
	s.store, s.started = store, true
	for range s.workers {
		s.wg.Go(s.work)
	}
	s.signal()
}

// stop cancels the transfers running (they are not reported: the store
// asks again after a restart), drops the queue and waits for the
// workers. Call it before the store closes.
func (s *stager) stop() {
	s.mu.Lock()
	s.stopped = true
	s.queue = nil
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// next takes the oldest request; ok is false when none waits.
func (s *stager) next() (r catalog.StageRequest, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) == 0 || s.stopped {
		return r, false
	}
	r = s.queue[0]
	s.queue[0] = catalog.StageRequest{}
	s.queue = s.queue[1:]
	if len(s.queue) > 0 {
		s.signal() // one wake-up per request: pass it on to another worker
	}
	return r, true
}

func (s *stager) work() {
	for {
		r, ok := s.next()
		if !ok {
			select {
			case <-s.wake:
				continue
			case <-s.ctx.Done():
				return
			}
		}
		res := s.stage(s.ctx, r)
		if res.Err != nil && s.ctx.Err() != nil {
			return // cancelled by stop, not a failure of the transfer
		}
		if res.Err != nil {
			s.log.Warn("staging failed", "path", r.Path, "to", placeName(r.To), "job", r.Job, "permanent", res.Permanent, "err", res.Err)
		}
		if err := s.store.Staged(context.WithoutCancel(s.ctx), res); err != nil {
			s.log.Error("cannot record a transfer", "path", r.Path, "to", placeName(r.To), "err", err)
		}
	}
}

// stage moves r.Path to r.To from the first of r.From that has it.
func (s *stager) stage(ctx context.Context, r catalog.StageRequest) catalog.StageResult {
	res := catalog.StageResult{Path: r.Path, To: r.To, Job: r.Job, Started: s.now()}
	if len(r.From) == 0 {
		res.Err, res.Permanent = fmt.Errorf("staging %s to %s: no place holds it", r.Path, placeName(r.To)), true
		return res
	}
	to, toHost, err := s.places(ctx, r.To)
	if err != nil {
		res.Err = fmt.Errorf("staging %s: %w", r.Path, err)
		// A target site removed meanwhile is no fault of the file, as
		// one down is not: its jobs wait, or run elsewhere, unfailed.
		var gone *noSiteError
		if isUnreachable(err) || errors.As(err, &gone) {
			res.Unreachable = []catalog.Place{r.To}
		}
		return res
	}
	var errs []error
	missing := 0
	for _, from := range r.From {
		res.From, res.Started = from, s.now()
		err := s.stageFrom(ctx, r, from, to, toHost, &res)
		if err == nil {
			s.full.ok(r.To)
			return res
		}
		if errors.Is(err, stage.ErrNoSpace) {
			// The target's fault, whichever the source: its jobs wait.
			res.Full = true
			res.FullFor = s.full.failed(r.To, err, s.now())
			res.Err = fmt.Errorf("%s has no room (its jobs wait; tried again in %s): %w", placeName(r.To), res.FullFor, err)
			return res
		}
		var changed *changedError
		if errors.As(err, &changed) {
			res.Err, res.Permanent = err, true
			return res
		}
		errs = append(errs, err)
		if errors.Is(err, fs.ErrNotExist) {
			missing++
		}
		if isUnreachable(err) {
			res.Unreachable = append(res.Unreachable, from)
		}
		if ctx.Err() != nil || slices.Contains(res.Unreachable, r.To) {
			break
		}
	}
	res.Err = errors.Join(errs...)
	// Missing everywhere it was asked from: another try cannot help.
	res.Permanent = missing == len(r.From) && ctx.Err() == nil
	return res
}

// isUnreachable says err is a place's login host not reached.
func isUnreachable(err error) bool {
	var u *unreachableError
	return errors.As(err, &u)
}

// connectionLost says err is a connection to a login host that broke
// under a transfer: SFTP's, or the SSH connection under it, or one cut
// because the transfer stalled on it.
func connectionLost(err error) bool {
	var ce *login.ConnError
	return errors.Is(err, sftp.ErrSSHFxConnectionLost) || errors.As(err, &ce) || errors.Is(err, stage.ErrStalled)
}

// changedError says a user's file changed on the CLS host since it was
// submitted: it is never staged in its new form.
type changedError struct{ path, what string }

func (e *changedError) Error() string {
	return fmt.Sprintf("input %s changed after submission (%s)", e.path, e.what)
}

// stageFrom tries one source, filling res on success.
func (s *stager) stageFrom(ctx context.Context, r catalog.StageRequest, from catalog.Place, to stage.Place, toHost bool, res *catalog.StageResult) error {
	src, fromHost, err := s.places(ctx, from)
	if err != nil {
		return err
	}
	userFile := fromHost && !r.ModTime.IsZero()
	if userFile {
		info, err := src.Stat(ctx, r.Path)
		if err != nil {
			return fmt.Errorf("staging %s from %s: %w", r.Path, placeName(from), err)
		}
		if what := changed(info, r); what != "" {
			return &changedError{r.Path, what}
		}
	}
	if fromHost && toHost {
		// One filesystem: the file is there already; measure it.
		sum, n, err := stage.HashFile(ctx, src, r.Path)
		if err == nil && r.Size >= 0 && n != r.Size {
			err = fmt.Errorf("%w: %d bytes, expected %d", stage.ErrMismatch, n, r.Size)
		}
		if err == nil && r.SHA256 != "" && !strings.EqualFold(sum, r.SHA256) {
			err = fmt.Errorf("%w: SHA-256 %s, expected %s", stage.ErrMismatch, sum, r.SHA256)
		}
		if err != nil {
			if userFile && errors.Is(err, stage.ErrMismatch) {
				return &changedError{r.Path, err.Error()}
			}
			return err
		}
		if what := reread(ctx, src, r, userFile); what != "" {
			return &changedError{r.Path, what}
		}
		res.SHA256, res.Bytes, res.Duration, res.Err = sum, 0, s.now().Sub(res.Started), nil
		return nil
	}
	fromName, fromVia := s.route(from, src, fromHost, r.Size)
	toName, toVia := s.route(r.To, to, toHost, r.Size)
	res.Via = fromVia + ">" + toVia
	m := s.mover.Move(ctx, stage.Transfer{Path: r.Path, From: fromName, To: toName, Size: r.Size, SHA256: r.SHA256})
	res.Bytes, res.Duration, res.SHA256 = m.Bytes, m.Duration, m.SHA256
	if m.Err != nil {
		if userFile && errors.Is(m.Err, stage.ErrMismatch) {
			return &changedError{r.Path, m.Err.Error()}
		}
		if connectionLost(m.Err) {
			// A login host's connection broke mid-transfer (which of
			// the two, the error cannot say): nothing is wrong with the
			// file. The places off the CLS host are left alone a while,
			// so that the next try reaches them over a new connection
			// instead of spending the file's tries on the dead one.
			if !fromHost {
				res.Unreachable = append(res.Unreachable, from)
			}
			if !toHost && !slices.Contains(res.Unreachable, r.To) {
				res.Unreachable = append(res.Unreachable, r.To)
			}
		}
		return m.Err
	}
	if what := reread(ctx, src, r, userFile); what != "" {
		// Its copy is in place already, but recorded nowhere: removed,
		// it takes the file's name there from no job.
		if err := to.Remove(ctx, r.Path); err != nil {
			s.log.Warn("a copy of a changed input stays", "path", r.Path, "to", placeName(r.To), "err", err)
		}
		return &changedError{r.Path, what}
	}
	res.Err = nil
	for _, p := range []struct {
		place catalog.Place
		host  bool
	}{{from, fromHost}, {r.To, toHost}} {
		if !p.host {
			s.pushLink(p.place)
		}
	}
	return nil
}

// changed says how a user's file differs from what it was at submit, ""
// if it does not. A time at submit without a fraction of a second was
// stored to the second: it is compared so.
func changed(info stage.Info, r catalog.StageRequest) string {
	if r.Size >= 0 && info.Size != r.Size {
		return fmt.Sprintf("%d bytes, %d at submit", info.Size, r.Size)
	}
	mt := info.ModTime
	if r.ModTime.Nanosecond() == 0 {
		mt = mt.Truncate(time.Second)
	}
	if !mt.Equal(r.ModTime) {
		return fmt.Sprintf("modified %s, %s at submit", info.ModTime.Format(time.RFC3339Nano), r.ModTime.Format(time.RFC3339Nano))
	}
	return ""
}

// reread says how a user's file, just read, differs from what it was at
// submit ("" if it does not, or it is not a user's file): one rewritten
// in place at its size while it was read shows it by its mtime alone.
func reread(ctx context.Context, src stage.Place, r catalog.StageRequest, userFile bool) string {
	if !userFile {
		return ""
	}
	info, err := src.Stat(ctx, r.Path)
	if err != nil {
		return err.Error()
	}
	return changed(info, r)
}

// pushLink gives the store a site's measured link, once measured; what is
// not measured yet (latency or bandwidth) keeps the configured prior. A
// place per host measures the site's link: DC prices links per site. Of a
// place's two paths, the one with the higher bandwidth measured (else the
// lower latency) stands for it: the stager takes the faster.
func (s *stager) pushLink(p catalog.Place) {
	site := p.Site
	lat, bw, ok := s.rates.Link(placeName(p))
	if alat, abw, aok := s.rates.Link(placeName(p) + agentSuffix); aok {
		if !ok || abw > bw || abw == bw && alat > 0 && (lat <= 0 || alat < lat) {
			lat, bw, ok = alat, abw, true
		}
	}
	if !ok {
		return
	}
	prior := dc.DefaultSiteLink
	if s.prior != nil {
		prior = s.prior(site)
	}
	l := dc.Link{Latency: lat, Bandwidth: bw}
	if l.Latency <= 0 {
		l.Latency = prior.Latency
	}
	if l.Bandwidth <= 0 {
		l.Bandwidth = prior.Bandwidth
	}
	s.mu.Lock()
	store := s.store
	s.mu.Unlock()
	if store != nil {
		store.MeasuredLink(site, l)
	}
}

// placeName names a place in messages and transfer records: the site, and
// the host where the site has one filesystem per node.
func placeName(p catalog.Place) string {
	if p.Host == "" {
		return p.Site
	}
	return p.Site + ":" + p.Host
}
