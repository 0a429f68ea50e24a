package site

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mq-hpc/mq/internal/site/batch"
	"github.com/mq-hpc/mq/protocol"
)

// Store is what the Manager needs of the metaqueue.
type Store interface {
	AddSite(ctx context.Context, spec protocol.SiteSpec) error
	RemoveSite(ctx context.Context, name string) error
	Sites(ctx context.Context) ([]protocol.SiteSpec, error)
	// SiteDemand counts ready jobs whose estimate fits walltime (0 = any),
	// stopping at limit, and jobs the listed placeholders are running.
	SiteDemand(ctx context.Context, walltime float64, placeholders []int64, limit int) (ready, executing int, err error)
	PlaceholderGone(ctx context.Context, id int64) error
}

// Manager provisions every site: one loop per site lists its placeholders,
// asks the metaqueue how much work they could take, and submits or cancels
// placeholders as Decide says.
type Manager struct {
	Store Store
	// Open makes the Site of a spec. It should be cheap: connections are
	// made by the Site's calls. exited, for local sites, reports a
	// placeholder process that ended.
	Open func(spec protocol.SiteSpec, exited func(pid int)) (Site, error)
	// Prepare, if set, runs when a site is added (it makes the site's
	// placeholder key); Forget when it is removed.
	Prepare func(spec protocol.SiteSpec) error
	Forget  func(spec protocol.SiteSpec)
	// Poll is how often a site is looked at (default 2 s).
	Poll time.Duration
	// ThrottleAfter is how long a placeholder may wait in a batch queue
	// before its site counts as slow (default 5 min).
	ThrottleAfter time.Duration
	// ConnectTimeout is how long a running placeholder of a remote site
	// may take to connect before it is cancelled and its site marked
	// degraded (default 2 min; a site's own ConnectTimeout overrides it).
	ConnectTimeout time.Duration
	// LPMinUtil is seed 001's W_MIN for the sites that follow lp: every
	// job slot the LP plans for a stage is busy at least this share of
	// the time (0: no minimum).
	LPMinUtil float64
	Log       *slog.Logger
	// Embedded are sites of this run only, never stored: the CLS's own
	// local placeholders (cls serve --local N, Spec.Embedded). They start
	// with the Manager, shadow a stored site of the same name, and cannot
	// be added or removed.
	Embedded []protocol.SiteSpec
	// Now is the clock of the Manager's decisions: queue waits, throttling,
	// the connect timeout, how often an idle site is listed and how fast
	// local placeholders are respawned (default time.Now; tests move it).
	// It may be called from several goroutines.
	Now func() time.Time

	// econMu guards econ, the last deadline-and-budget plan (budget.go);
	// taken before mu, never under it.
	econMu sync.Mutex
	econ   econPlan
	// shownMu guards econ.shown alone: cls plan show reads it while a
	// plan is being made.
	shownMu sync.Mutex
	// setMu serialises Set and Remove, which stop and restart site loops.
	setMu sync.Mutex
	// brokenUnstored: the last broken placeholder could not be stored
	// (broken.go); logged once until one is.
	brokenUnstored atomic.Bool

	mu    sync.Mutex
	ctx   context.Context
	sites map[string]*managed
	wg    sync.WaitGroup
}

type managed struct {
	spec   protocol.SiteSpec
	site   Site
	cancel context.CancelFunc
	done   chan struct{}

	kick chan struct{} // a local placeholder process ended: look now

	// Guarded by Manager.mu.
	known     map[string]*tracked // batch id -> placeholder
	connected map[int64]int       // placeholder id -> pid, while connected
	// pids of a local site's placeholders (id -> pid) from registration
	// until the process ends: its disconnect may come before the exit.
	pids      map[int64]int
	exited    int
	waits     []time.Duration // recent queue waits
	state     string
	err       string
	throttled bool
	// failing: the last step failed (err says why); the site stays
	// degraded until a step succeeds.
	failing bool
	// needsLogin: the last step failed for a login only the user can
	// make (login.NeedsLogin).
	needsLogin bool
	// supply is how many ready jobs this site's running placeholders will
	// take at once, as of its last decision (see Counts.Elsewhere).
	supply int
	// batch: batch job ids of placeholders that have connected (by the id
	// they registered with); connBatch: that id per connected placeholder.
	batch     map[string]bool
	connBatch map[int64]string
	// given: the connected placeholders given other than they asked
	// (Register.CapacityNote), by id.
	given map[int64]string
	// offered: what each connected placeholder offers (Register.Capacity).
	offered map[int64]string
	// paused: the connected placeholders that take no new jobs for their
	// full output disk (Heartbeat.Paused).
	paused map[int64]bool
	// hosts: each connected placeholder's host; broken: the placeholders
	// that said their node cannot run jobs (broken.go); saidBroken: the
	// connected ones that said it, heard once a connection (each says it
	// in every heartbeat while it drains).
	hosts      map[int64]string
	broken     []protocol.BrokenPlaceholder
	saidBroken map[int64]bool
	// lastGone is when a placeholder last disconnected: its jobs' leases
	// lapse only once a listing answers after them (Store.SiteReached),
	// so the site is listed at every poll for a while (idleAfter).
	lastGone time.Time
	// stall says why the site is degraded after placeholders ran without
	// connecting (NeverConnected); "" once one connects.
	stall string
	// connects counts registrations: a stall found before one is stale.
	connects int
	// erred: placeholders went into the batch system's error state (SGE's
	// Eqw), and none has connected since: only a probe is kept, as for a
	// stall, so a setting the cluster always refuses costs one
	// placeholder a retry, not what the work warrants.
	erred bool
	// vanished says why the site is degraded after placeholders ended
	// without connecting; kept while one submitted since runs without a
	// registration of the site's (noteVanishedLocked).
	vanished string
	// stale: cls site set changed the queue or submit arguments; the
	// placeholders queued before are cancelled at the next decision.
	stale bool
}

type tracked struct {
	state     batch.State
	submitted time.Time // by the CLS's clock when we submitted it
	started   time.Time
	why       string // why it waits, as the batch system last said
	// connects is the site's registrations when this run submitted it
	// (-1: an earlier CLS did): one that ends before any registration
	// since never reached the CLS (observeLocked).
	connects int
}

// Site states in SiteInfo.State.
const (
	StateStarting  = "starting"
	StateOK        = "ok"
	StateThrottled = "throttled"
	StateDegraded  = "degraded"
)

func (m *Manager) log() *slog.Logger {
	if m.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return m.Log
}

func (m *Manager) now() time.Time {
	if m.Now == nil {
		return time.Now()
	}
	return m.Now()
}

func (m *Manager) poll() time.Duration {
	if m.Poll <= 0 {
		return 2 * time.Second
	}
	return m.Poll
}

// Start loads the sites from the metaqueue and starts provisioning them
// until ctx ends or Stop.
func (m *Manager) Start(ctx context.Context) error {
	specs, err := m.Store.Sites(ctx)
	if err != nil {
		return err
	}
	broken := m.loadBroken(ctx)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ctx = ctx
	m.sites = map[string]*managed{}
	for _, spec := range m.Embedded {
		spec.Embedded = true
		if err := m.startLocked(spec); err != nil {
			return fmt.Errorf("site %s: %w", spec.Name, err)
		}
	}
	for _, spec := range specs {
		if ms, ok := m.sites[spec.Name]; ok && ms.spec.Embedded {
			m.log().Warn("a stored site has the name of the CLS's own; it is not run", "site", spec.Name)
			continue
		}
		if err := m.startLocked(spec); err != nil {
			m.log().Error("cannot start site", "site", spec.Name, "err", err)
		}
	}
	for name, list := range broken {
		if ms, ok := m.sites[name]; ok {
			ms.broken = list
		}
	}
	return nil
}

func (m *Manager) startLocked(spec protocol.SiteSpec) error {
	ms := &managed{spec: spec, known: map[string]*tracked{}, connected: map[int64]int{}, pids: map[int64]int{},
		batch: map[string]bool{}, connBatch: map[int64]string{}, given: map[int64]string{}, offered: map[int64]string{}, paused: map[int64]bool{}, hosts: map[int64]string{},
		state: StateStarting, done: make(chan struct{}), kick: make(chan struct{}, 1)}
	name := spec.Name
	s, err := m.Open(spec, func(pid int) { m.localExited(name, pid) })
	if err != nil {
		return err
	}
	ms.site = s
	ctx, cancel := context.WithCancel(m.ctx)
	ms.cancel = cancel
	m.sites[name] = ms
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer close(ms.done)
		m.loop(ctx, ms)
	}()
	return nil
}

// Stop ends every site's loop and closes their connections. Placeholders
// keep running (a remote one reconnects to the next CLS); local ones are
// stopped.
func (m *Manager) Stop() { m.stop(false) }

// StopLeaving is Stop that leaves local placeholders running too
// (Processes.Leave): they finish their jobs and report them to the next
// CLS, as remote ones do.
func (m *Manager) StopLeaving() { m.stop(true) }

func (m *Manager) stop(leave bool) {
	m.mu.Lock()
	sites := m.sites
	for _, ms := range sites {
		ms.cancel()
	}
	m.mu.Unlock()
	m.wg.Wait()
	// At once: local sites wait for their placeholders to report and exit.
	var wg sync.WaitGroup
	for _, ms := range sites {
		if l, ok := ms.site.(interface{ Leave() }); ok && leave {
			l.Leave()
			continue
		}
		wg.Go(func() { ms.site.Close() })
	}
	wg.Wait()
}

// Add validates a site, stores it and starts provisioning it.
func (m *Manager) Add(ctx context.Context, spec protocol.SiteSpec) (protocol.SiteInfo, error) {
	if err := Validate(&spec); err != nil {
		return protocol.SiteInfo{}, protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sites == nil {
		return protocol.SiteInfo{}, protocol.Errorf(protocol.CodeShutdown, "sites are not being managed")
	}
	if ms, ok := m.sites[spec.Name]; ok {
		if ms.spec.Embedded {
			return protocol.SiteInfo{}, protocol.Errorf(protocol.CodeBadRequest, "%s", embeddedMsg(ms.spec))
		}
		return protocol.SiteInfo{}, protocol.Errorf(protocol.CodeBadRequest, "site %s already exists (cls site remove it first)", spec.Name)
	}
	if m.Prepare != nil {
		if err := m.Prepare(spec); err != nil {
			return protocol.SiteInfo{}, err
		}
	}
	if err := m.Store.AddSite(ctx, spec); err != nil {
		if m.Forget != nil {
			m.Forget(spec)
		}
		return protocol.SiteInfo{}, err
	}
	if err := m.startLocked(spec); err != nil {
		return protocol.SiteInfo{}, err
	}
	m.log().Info("site added", "site", spec.Name, "type", spec.Type, "ssh", spec.SSH)
	return m.infoLocked(m.sites[spec.Name]), nil
}

// Remove stops provisioning a site, cancels its placeholders (queued and
// running: their jobs are requeued at once) and forgets it.
func (m *Manager) Remove(ctx context.Context, name string) (protocol.SiteInfo, error) {
	m.setMu.Lock()
	defer m.setMu.Unlock()
	m.mu.Lock()
	ms, ok := m.sites[name]
	if ok && ms.spec.Embedded {
		m.mu.Unlock()
		return protocol.SiteInfo{}, protocol.Errorf(protocol.CodeBadRequest, "%s", embeddedMsg(ms.spec))
	}
	if ok {
		delete(m.sites, name)
	}
	m.mu.Unlock()
	if !ok {
		return protocol.SiteInfo{}, protocol.Errorf(protocol.CodeNotFound, "no site %s", name)
	}
	ms.cancel()
	<-ms.done
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var cancelErr error
	var queued, running int
	ps, err := ms.site.List(cctx)
	if err != nil {
		// Nothing is known of its placeholders: it may have none.
		cancelErr = fmt.Errorf("could not list its placeholders (cancel any it has by hand): %w", err)
	} else {
		var ids []string
		for _, p := range ps {
			ids = append(ids, p.ID)
			switch p.State {
			case batch.Queued:
				queued++
			case batch.Running, batch.Suspended:
				running++
			}
		}
		err = ms.site.Cancel(cctx, ids)
	}
	if r, ok := ms.site.(interface{ Retire(context.Context) error }); ok && err == nil {
		if rerr := r.Retire(cctx); rerr != nil {
			m.log().Warn("could not undo the site's setup on its login host", "site", name, "err", rerr)
		}
	}
	if err != nil && cancelErr == nil {
		cancelErr = fmt.Errorf("could not cancel its placeholders (cancel them by hand): %w", err)
	}
	m.mu.Lock()
	gone := make([]int64, 0, len(ms.connected))
	for id := range ms.connected {
		gone = append(gone, id)
	}
	info := m.infoLocked(ms)
	info.Queued, info.Running = queued, running // what was cancelled
	info.Error = ""                             // the site's last trouble is not the removal's
	m.mu.Unlock()
	for _, id := range gone {
		m.Store.PlaceholderGone(ctx, id)
	}
	ms.site.Close()
	if err := m.Store.RemoveSite(ctx, name); err != nil {
		return info, err
	}
	if m.Forget != nil {
		m.Forget(ms.spec)
	}
	if cancelErr != nil {
		info.Error = cancelErr.Error()
		m.log().Warn("site removed", "site", name, "err", cancelErr)
	} else {
		m.log().Info("site removed; placeholders cancelled", "site", name)
	}
	return info, nil
}

// embeddedMsg says why the CLS's own site cannot be added or removed.
func embeddedMsg(spec protocol.SiteSpec) string {
	return fmt.Sprintf("site %s is the CLS's own placeholders (cls serve --local %d): they run while the CLS runs; restart it with another --local (0 = none) to change them", spec.Name, spec.Max)
}

// List describes every site.
func (m *Manager) List() []protocol.SiteInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []protocol.SiteInfo
	for _, ms := range m.sites {
		out = append(out, m.infoLocked(ms))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Site returns a running site's spec and Site (a *Remote for remote
// sites: data staging reaches its login host through it), ok false when
// no site has that name.
func (m *Manager) Site(name string) (spec protocol.SiteSpec, s Site, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ms, ok := m.sites[name]
	if !ok {
		return protocol.SiteSpec{}, nil, false
	}
	return ms.spec, ms.site, true
}

func (m *Manager) infoLocked(ms *managed) protocol.SiteInfo {
	info := protocol.SiteInfo{SiteSpec: ms.spec, Exited: ms.exited, Connected: len(ms.connected), State: ms.state, Error: ms.err, NeedsLogin: ms.needsLogin}
	now := m.now()
	for _, t := range ms.known {
		switch t.state {
		case batch.Queued:
			info.Queued++
			if w := now.Sub(t.submitted).Seconds(); w >= info.OldestQueuedS {
				info.OldestQueuedS, info.OldestWhy = w, t.why
			}
		case batch.Running, batch.Suspended:
			info.Running++
		}
	}
	if len(ms.waits) > 0 {
		var sum time.Duration
		for _, w := range ms.waits {
			sum += w
		}
		info.QueueWaitS = (sum / time.Duration(len(ms.waits))).Seconds()
	}
	if p, ok := ms.site.(interface{ Platform() string }); ok {
		info.Platform = p.Platform()
	}
	info.Given, info.Offered = distinctNotes(ms.given), distinctNotes(ms.offered)
	info.Paused = len(ms.paused)
	info.Broken = ms.brokenLocked(now)
	return info
}

// distinctNotes is each distinct note of the placeholders (how they were
// given other than they asked, what they offer), once, with how many say
// it when more than one does.
func distinctNotes(given map[int64]string) string {
	n := map[string]int{}
	for _, note := range given {
		n[note]++
	}
	notes := make([]string, 0, len(n))
	for note, k := range n {
		if k > 1 {
			note = fmt.Sprintf("%s (%d placeholders)", note, k)
		}
		notes = append(notes, note)
	}
	sort.Strings(notes)
	return strings.Join(notes, "; ")
}

// Placeholder is told when a placeholder registers or disconnects (see
// server.Server.OnPlaceholder).
func (m *Manager) Placeholder(id int64, reg protocol.Register, connected bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ms, ok := m.sites[reg.Site]
	if !ok {
		return
	}
	if connected {
		ms.connected[id] = reg.PID
		ms.connBatch[id] = reg.Batch
		if ms.hosts == nil {
			ms.hosts = map[int64]string{}
		}
		ms.hosts[id] = reg.Host
		if reg.CapacityNote != "" {
			ms.given[id] = reg.CapacityNote
		}
		if reg.Capacity != nil {
			ms.offered[id] = reg.Capacity.String()
		}
		if reg.Batch != "" {
			ms.batch[reg.Batch] = true
		}
		if ms.spec.Type == Local {
			ms.pids[id] = reg.PID
		}
		ms.connects++
		ms.erred = false
		if ms.stall != "" {
			ms.stall = ""
			m.log().Info("a placeholder connected; the site is no longer stalled", "site", ms.spec.Name, "batch", reg.Batch)
		}
	} else {
		ms.lastGone = m.now()
		delete(ms.connected, id)
		delete(ms.connBatch, id)
		delete(ms.given, id)
		delete(ms.offered, id)
		delete(ms.paused, id)
		delete(ms.hosts, id)
		delete(ms.saidBroken, id)
	}
}

// Paused is told at each heartbeat of placeholder id whether it takes no
// new jobs for its full output disk (see server.Server.OnPaused).
func (m *Manager) Paused(id int64, paused bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ms := range m.sites {
		if _, ok := ms.connected[id]; !ok {
			continue
		}
		if paused {
			ms.paused[id] = true
		} else {
			delete(ms.paused, id)
		}
		return
	}
}

// localExited requeues the jobs of a local placeholder process that ended
// and wakes its site's loop to replace it.
func (m *Manager) localExited(site string, pid int) {
	m.mu.Lock()
	var ids []int64
	ms, ok := m.sites[site]
	if ok {
		// By pid since registration: the server may have seen the
		// connection close (and the disconnect) before we saw the exit.
		for id, p := range ms.pids {
			if p == pid {
				ids = append(ids, id)
				delete(ms.pids, id)
				delete(ms.connected, id)
				delete(ms.given, id)
				delete(ms.offered, id)
				delete(ms.paused, id)
				delete(ms.hosts, id)
				delete(ms.saidBroken, id)
			}
		}
	}
	m.mu.Unlock()
	for _, id := range ids {
		m.Store.PlaceholderGone(context.Background(), id)
	}
	if ok {
		select {
		case ms.kick <- struct{}{}:
		default:
		}
	}
}

func (m *Manager) connectTimeout(spec protocol.SiteSpec) time.Duration {
	if spec.ConnectTimeout > 0 {
		return time.Duration(spec.ConnectTimeout * float64(time.Second))
	}
	if m.ConnectTimeout <= 0 {
		return 2 * time.Minute
	}
	return m.ConnectTimeout
}

func (m *Manager) throttleAfter() time.Duration {
	if m.ThrottleAfter <= 0 {
		return 5 * time.Minute
	}
	return m.ThrottleAfter
}

// JobName is the batch job name of a site's placeholders: the site and an
// id of this CLS, so two CLSs of one user never take each other's.
func JobName(site, clsID string) string { return "mq-" + site + "-" + clsID }
