package site

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mq-hpc/mq/internal/backoff"
	"github.com/mq-hpc/mq/internal/metaqueue/packing"
	"github.com/mq-hpc/mq/internal/resource"
	"github.com/mq-hpc/mq/internal/site/batch"
	"github.com/mq-hpc/mq/internal/site/login"
	"github.com/mq-hpc/mq/internal/wire"
	"github.com/mq-hpc/mq/protocol"
)

// Each site's provisioning loop: every poll it observes the site (lists its
// placeholders, notes the stalled and broken), decides (how many to submit
// or cancel, from the metaqueue's demand and the site's limits) and acts.

func (m *Manager) loop(ctx context.Context, ms *managed) {
	m.mu.Lock()
	name, remote := ms.spec.Name, ms.spec.Type != Local
	m.mu.Unlock()
	if ps, ok := m.Store.(pendingStore); ok && remote {
		// Until the first listing, the leases an earlier CLS's
		// placeholders hold there wait for it.
		if err := ps.SitePending(ctx, name); err != nil && ctx.Err() == nil {
			m.log().Warn("site: cannot hold its placeholders' leases until it is first listed", "site", name, "err", err)
		}
	}
	// A failing site is looked at less often: twice the poll, doubling up
	// to 32 polls (at most 30 s).
	retry := backoff.Backoff{Min: 2 * m.poll(), Max: min(32*m.poll(), 30*time.Second)}
	// A local placeholder that ended is replaced at once, backing off (up
	// to 10 s) while they keep ending within a minute, so a placeholder
	// that cannot start does not spin.
	respawn := backoff.Backoff{Min: 100 * time.Millisecond, Max: 10 * time.Second}
	var lastList, lastKick time.Time
	for {
		wait := m.poll()
		err := m.step(ctx, ms, &lastList)
		if err != nil && ctx.Err() != nil {
			return
		}
		m.mu.Lock()
		// Logged once per trouble, not at every retry of it.
		changed := err != nil && (!ms.failing || sameTrouble(ms.err) != sameTrouble(err.Error()))
		recovered := err == nil && ms.failing
		ms.failing = err != nil
		ms.needsLogin = err != nil && login.NeedsLogin(err)
		if err != nil {
			ms.state, ms.err = StateDegraded, err.Error()
			if !errors.As(err, new(actError)) {
				// Unknown: let other sites provide for the work. (A
				// refused submission, at a per-user job limit say, leaves
				// the running placeholders' supply as decided.)
				ms.supply = 0
			}
		} else if recovered {
			ms.settleLocked()
		}
		m.mu.Unlock()
		switch {
		case err != nil:
			wait = retry.Next()
			if changed {
				m.log().Warn("site degraded", "site", ms.spec.Name, "err", err)
			}
		case recovered:
			retry.Reset()
			m.log().Info("site recovered", "site", ms.spec.Name)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		case <-ms.kick:
			if m.now().Sub(lastKick) > time.Minute {
				respawn.Reset()
			}
			lastKick = m.now()
			if backoff.Sleep(ctx, respawn.Next()) != nil {
				return
			}
		}
	}
}

// sameTrouble is msg without its digits, commas and spaces: a trouble
// that recurs with other placeholder ids or counts (placeholders in the
// error state at every retry, two at first, then one) is logged once,
// not at every retry.
func sameTrouble(msg string) string {
	return strings.Map(func(r rune) rune {
		if '0' <= r && r <= '9' || r == ',' || r == ' ' {
			return -1
		}
		return r
	}, msg)
}

// step looks at a site once and acts: it observes the work the metaqueue
// has for the site and the placeholders the batch system lists, decides
// what to submit and cancel, and does it.
func (m *Manager) step(ctx context.Context, ms *managed, lastList *time.Time) error {
	w, err := m.workFor(ctx, ms)
	if err != nil {
		return err
	}
	// With no work and no placeholders there is nothing to watch: look at
	// the batch system only now and then (placeholders of an earlier CLS).
	if w.ready == 0 && w.idle && m.now().Sub(*lastList) < 30*time.Second {
		return nil
	}
	tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	asked := m.now()
	ps, err := ms.site.List(tctx)
	if rs, ok := m.Store.(reachStore); ok && w.spec.Type != Local && ctx.Err() == nil {
		if err := rs.SiteReached(ctx, w.spec.Name, asked, m.now(), err == nil || errors.As(err, new(answered))); err != nil {
			return fmt.Errorf("metaqueue: %w", err)
		}
	}
	if err != nil {
		return err
	}
	now := m.now()
	*lastList = now

	m.mu.Lock()
	var acts siteActions
	acts.broken, acts.vanished = m.observeLocked(ms, ps, now)
	ms.erred = ms.erred || len(acts.broken) > 0
	ms.noteVanishedLocked(&acts)
	if w.spec.Type != Local {
		acts.connects, acts.timeout = ms.connects, m.connectTimeout(w.spec)
		acts.stalled = m.stalledLocked(ms, now, acts.timeout)
	}
	m.decideLocked(ms, w, &acts, now)
	m.mu.Unlock()

	if err := m.act(tctx, ms, w, acts); err != nil {
		return actError{err}
	}
	return nil
}

// actError is a step that failed acting on what it saw: the site's
// placeholders were listed, so its supply is known.
type actError struct{ error }

func (e actError) Unwrap() error { return e.error }

// siteWork is what the metaqueue has for a site at one step.
type siteWork struct {
	spec             protocol.SiteSpec
	ready, executing int
	// readyNeed and execNeed measure the same jobs against the site's
	// placeholder shape, when the Store can (shapedStore).
	readyNeed, execNeed packing.Need
	// want is the count a Provisioning plan holds, or -1: the site has
	// no plan.
	want int
	// idle: no placeholders known and nothing amiss, so the batch system
	// need not be listed at every step.
	idle bool
}

// siteActions is what one step found wrong and decided to do.
type siteActions struct {
	broken   []string      // placeholders in the batch system's error state
	vanished []string      // placeholders that ended without reaching the CLS
	unproven string        // why, while a placeholder submitted since runs unregistered
	stalled  []string      // placeholders that ran without connecting
	connects int           // ms.connects when stalled was found
	timeout  time.Duration // how long they had to connect
	cancel   []string      // broken, stalled and the queued ones to cancel
	submit   int           // placeholders to submit
}

// idleAfter is how long after a placeholder disconnected a site with none
// left is still listed at every poll: a dead placeholder's jobs are
// requeued once a listing answers after their leases lapsed (the site is
// then not cut off), which an idle site's listing every 30 s would delay.
const idleAfter = 2 * time.Minute

// workFor observes the work the metaqueue has for the site.
func (m *Manager) workFor(ctx context.Context, ms *managed) (siteWork, error) {
	m.mu.Lock()
	w := siteWork{spec: ms.spec, want: -1}
	phs := make([]int64, 0, len(ms.connected))
	for id := range ms.connected {
		phs = append(phs, id)
	}
	w.idle = len(ms.known) == 0 && ms.state != StateDegraded && ms.state != StateStarting && !w.spec.Embedded &&
		m.now().Sub(ms.lastGone) > idleAfter
	elsewhere := m.elsewhereLocked(ms)
	m.mu.Unlock()
	// Count far enough to see this site's share beyond what other sites take.
	limit := w.spec.Max*w.spec.Slots + elsewhere + 1
	walltime := wire.AgentWalltime(protocol.Duration(w.spec.Walltime)).Seconds()
	var err error
	if ss, ok := m.Store.(shapedStore); ok {
		w.readyNeed, w.execNeed, err = ss.SiteNeed(ctx, wire.SiteCapacity(w.spec), walltime, phs, limit)
		w.ready, w.executing = min(w.readyNeed.Jobs, limit), w.execNeed.Jobs
	} else {
		w.ready, w.executing, err = m.Store.SiteDemand(ctx, walltime, phs, limit)
	}
	if err != nil {
		return w, fmt.Errorf("metaqueue: %w", err)
	}
	// A site that follows a Provisioning policy holds what its plan says.
	if w.spec.Provision != "" {
		if w.want, err = m.econWant(ctx, ms); err != nil {
			return w, err
		}
	} else if err := m.dropPlans(ctx); err != nil {
		return w, err
	}
	return w, nil
}

// shapedStore is a Store that measures the work against a site's
// placeholder shape, what each placeholder is asked to hold (the
// metaqueue's does): ready jobs the shape could never hold are not
// counted, and the others say how many placeholders their cores, memory,
// GPUs and named amounts need. A Store without it counts jobs as slots.
type shapedStore interface {
	SiteNeed(ctx context.Context, shape resource.Capacity, walltime float64, placeholders []int64, limit int) (ready, executing packing.Need, err error)
}

// reachStore is a Store told whether a site a network can cut off from
// the CLS answered each listing (the metaqueue's is): the leases of its
// placeholders, silent behind a cut, are held while it does not, for a
// while.
type reachStore interface {
	SiteReached(ctx context.Context, site string, asked, answered time.Time, ok bool) error
}

// pendingStore is a reachStore told that a site is about to be listed
// for the first time since the CLS started (the metaqueue's is).
type pendingStore interface {
	SitePending(ctx context.Context, site string) error
}

// observeLocked brings the site's placeholders up to date with the batch
// system's listing ps, forgets those gone, and returns those in its error
// state and those of a remote site that ended without reaching the CLS.
func (m *Manager) observeLocked(ms *managed, ps []batch.Placeholder, now time.Time) (broken, vanished []string) {
	seen := map[string]bool{}
	for _, p := range ps {
		seen[p.ID] = true
		t, ok := ms.known[p.ID]
		if !ok { // not ours this run: an earlier CLS submitted it
			t = &tracked{state: p.State, submitted: p.Submitted, why: p.Why, connects: -1}
			if t.submitted.IsZero() {
				t.submitted = now
			}
			if p.State == batch.Running || p.State == batch.Suspended {
				t.started = now // by our clock: the connect check counts from here
			}
			ms.known[p.ID] = t
		}
		if p.Why != t.why && p.State == batch.Queued && p.Why != "" {
			// Debug: reasons such as Slurm's Priority and Resources come and go.
			m.log().Debug("placeholder waits in its batch queue", "site", ms.spec.Name, "id", p.ID, "why", p.Why)
		}
		t.why = p.Why
		switch p.State {
		case batch.Running, batch.Suspended:
			if t.state == batch.Queued {
				t.started = now
				ms.waits = append(ms.waits, now.Sub(t.submitted))
				if len(ms.waits) > 20 {
					ms.waits = ms.waits[1:]
				}
			}
			if p.State != t.state && (p.State == batch.Suspended || t.state == batch.Suspended) {
				m.log().Info("placeholder "+p.State.String()+" by the batch system", "site", ms.spec.Name, "id", p.ID)
			}
			t.state = p.State
		case batch.Queued:
			if t.state == batch.Running || t.state == batch.Suspended {
				// Back in the queue (Slurm requeues a job whose node
				// failed, or preempted): it takes no work, and its wait
				// counts from now.
				t.state, t.submitted, t.started = batch.Queued, now, time.Time{}
			}
		case batch.Error:
			broken = append(broken, p.ID)
			t.state = batch.Exited
		case batch.Exited:
			t.state = batch.Exited
		}
	}
	for id, t := range ms.known {
		if !seen[id] || t.state == batch.Exited {
			// Submitted here and gone, with no registration of the site's
			// since (its own would be one): it never reached the CLS (an
			// agent that refused its --out or data root, or was refused),
			// whether or not a listing caught it running. Resubmitted at
			// every poll, such placeholders would flood the batch system.
			// (One still running that does not connect is NeverConnected's.)
			if ms.spec.Type != Local && t.connects >= 0 && t.connects == ms.connects && !slices.Contains(broken, id) {
				vanished = append(vanished, id)
			}
			delete(ms.known, id)
			delete(ms.batch, id)
			ms.exited++
		}
	}
	forgetStrayBatch(ms)
	return broken, vanished
}

// forgetStrayBatch forgets the batch ids placeholders registered with
// that are neither the site's placeholders nor connected now: a batch id
// is what the peer says (Register.Batch), and one holding the site's key
// could register under a new one each time, growing ms.batch without end
// (only known ids are forgotten when they go). A connected one is kept:
// it may have registered before the listing that adopts it.
func forgetStrayBatch(ms *managed) {
	live := make(map[string]bool, len(ms.connBatch))
	for _, b := range ms.connBatch {
		live[b] = true
	}
	for b := range ms.batch {
		if _, ok := ms.known[b]; !ok && !live[b] {
			delete(ms.batch, b)
		}
	}
}

// stalledLocked finds and forgets the placeholders that have run timeout
// without connecting. They burn their allocation for nothing (a CLS
// address the compute nodes cannot reach, a firewall): they are
// cancelled, and only a probe is kept until one connects.
func (m *Manager) stalledLocked(ms *managed, now time.Time, timeout time.Duration) []string {
	var started []Started
	for id, t := range ms.known {
		if t.state == batch.Running {
			started = append(started, Started{ID: id, Running: now.Sub(t.started), Connected: ms.batch[id]})
		}
	}
	anonymous := 0
	for _, b := range ms.connBatch {
		if b == "" {
			anonymous++
		}
	}
	stalled := NeverConnected(started, anonymous, timeout)
	for _, id := range stalled {
		// Forgotten now, as cancelled queued ones are: a listing that
		// still shows it would otherwise revive its state.
		delete(ms.known, id)
		delete(ms.batch, id)
		ms.exited++
	}
	return stalled
}

// decideLocked counts the site's placeholders, decides (Decide) what to
// submit and which queued ones to cancel, and notes the site's state.
func (m *Manager) decideLocked(ms *managed, w siteWork, acts *siteActions, now time.Time) {
	spec := w.spec
	c := Counts{Ready: w.ready, Executing: w.executing, ReadyNeed: w.readyNeed, ExecutingNeed: w.execNeed, Slots: spec.Slots, Min: spec.Min, Max: spec.Max, ThrottleAfter: m.throttleAfter(), Steady: spec.Embedded,
		Stalled: ms.stall != "" || len(acts.stalled) > 0, Erring: ms.erred}
	var queued, stale []string
	if ms.stale {
		for id, t := range ms.known {
			if t.state == batch.Queued {
				stale = append(stale, id)
				delete(ms.known, id)
			}
		}
		ms.stale = false
	}
	suspended := 0
	for id, t := range ms.known {
		switch t.state {
		case batch.Queued:
			c.Queued++
			c.OldestQueued = max(c.OldestQueued, now.Sub(t.submitted))
			queued = append(queued, id)
		case batch.Running:
			c.Running++
		case batch.Suspended:
			c.Running++ // it holds its allocation, and counts toward --max
			suspended++
		}
	}
	if w.want >= 0 {
		// The plan already shares the work among the sites that follow
		// it: hold exactly its count (queued ones beyond it are cancelled;
		// running ones take none of the planned queues' jobs past the
		// site's cap and exit on their idle timeout).
		c.Min, c.Max = w.want, w.want
	}
	// Decisions are made one at a time under m.mu, each seeing the others'
	// latest supply.
	c.Elsewhere = m.elsewhereLocked(ms)
	d := Decide(c)
	// A suspended placeholder takes no work: counted in the supply, it held
	// the other sites back from the work as long as it stayed suspended.
	supply := c
	supply.Running -= suspended
	ms.supply = supplyOf(supply)
	ms.throttled = d.Throttled
	if len(acts.stalled) == 0 { // else set by act, with what the placeholder's log says
		ms.settleLocked()
	}
	// Cancel the newest queued first: the oldest are nearest to starting.
	slices.SortFunc(queued, func(a, b string) int { return ms.known[b].submitted.Compare(ms.known[a].submitted) })
	acts.cancel = append(append(append(acts.broken, acts.stalled...), stale...), queued[:d.Cancel]...)
	for _, id := range queued[:d.Cancel] {
		delete(ms.known, id)
	}
	acts.submit = d.Submit
}

// settleLocked notes the site's state as its last decision found it,
// unless its steps are failing: then it stays degraded, saying why, until
// one succeeds (cls site list showed ok while each retry of a refused
// submission was in flight, and each failure was logged as new).
func (ms *managed) settleLocked() {
	switch {
	case ms.failing:
	case ms.stall != "":
		ms.state, ms.err = StateDegraded, ms.stall
	case ms.throttled:
		ms.state, ms.err = StateThrottled, ""
	default:
		ms.state, ms.err = StateOK, ""
	}
}

// explainer is a Site that can say why a placeholder is in its batch
// system's error state (Remote.Explain).
type explainer interface {
	Explain(ctx context.Context, id string) string
}

// explainWait bounds the question: a site whose placeholders fail waits
// for it.
const explainWait = 30 * time.Second

// act does what the step decided: it says why placeholders are cancelled,
// cancels them, and submits new ones.
func (m *Manager) act(ctx context.Context, ms *managed, w siteWork, acts siteActions) error {
	spec := w.spec
	var why string // what the batch system says of the first in its error state
	if len(acts.broken) > 0 {
		// Asked before the cancel, which takes the reason with the job.
		if ex, ok := ms.site.(explainer); ok {
			ectx, cancel := context.WithTimeout(ctx, explainWait)
			why = ex.Explain(ectx, acts.broken[0])
			cancel()
		}
		m.log().Warn("placeholders in the batch system's error state; cancelling them", "site", spec.Name, "ids", acts.broken, "why", why)
	}
	if len(acts.stalled) > 0 {
		m.degradeStalled(ctx, ms, spec.Name, acts)
	}
	if len(acts.cancel) > 0 {
		if err := ms.site.Cancel(ctx, acts.cancel); err != nil {
			m.log().Warn("cancel failed", "site", spec.Name, "ids", acts.cancel, "err", err)
		} else {
			m.log().Info("cancelled placeholders", "site", spec.Name, "ids", acts.cancel, "ready", w.ready)
		}
	}
	if acts.submit > 0 {
		ids, err := ms.site.Submit(ctx, acts.submit)
		m.mu.Lock()
		now := m.now()
		for _, id := range ids {
			t := &tracked{state: batch.Queued, submitted: now, connects: ms.connects}
			if spec.Type == Local { // processes start at once: no queue wait
				t.state, t.started = batch.Running, now
			}
			ms.known[id] = t
		}
		m.mu.Unlock()
		if len(ids) > 0 {
			m.log().Info("submitted placeholders", "site", spec.Name, "ids", ids, "ready", w.ready, "executing", w.executing)
		}
		if err != nil {
			return fmt.Errorf("submit: %w", err)
		}
	}
	if len(acts.broken) > 0 {
		// A failing site, then: degraded with why, and looked at less
		// often. A replacement will likely fail the same way (a -wd, a
		// project or a resource the cluster refuses), and was submitted
		// and cancelled again at every poll.
		ids := acts.broken[:min(len(acts.broken), 5)]
		if why != "" {
			return fmt.Errorf("%d placeholder(s) went into the batch system's error state and were cancelled (%s); it said of %s: %s: check the site's --submit-args",
				len(acts.broken), strings.Join(ids, ", "), acts.broken[0], why)
		}
		return fmt.Errorf("%d placeholder(s) went into the batch system's error state and were cancelled (%s): check the site's --submit-args (SGE says why in qstat -j of a job in Eqw: submit one by hand with the same arguments to see it)",
			len(acts.broken), strings.Join(ids, ", "))
	}
	if acts.unproven != "" {
		// As for broken ones: degraded, looked at less often, and well
		// again at the first step that finds none ended or running
		// unregistered.
		return errors.New(acts.unproven)
	}
	return nil
}

// noteVanishedLocked notes why the site fails when placeholders ended
// without connecting (acts.vanished), and keeps it while a placeholder
// submitted since runs with no registration of the site's since: a step
// that caught such a placeholder running would otherwise count as
// recovered, and undo the backoff before it ended the same way.
func (ms *managed) noteVanishedLocked(acts *siteActions) {
	switch {
	case len(acts.vanished) > 0:
		ids := acts.vanished[:min(len(acts.vanished), 5)]
		ms.vanished = fmt.Sprintf("%d placeholder(s) ended without connecting to the CLS (%s): their agent's log, in the log directory under the site's directory on the login host, says why",
			len(acts.vanished), strings.Join(ids, ", "))
	case ms.vanished != "" && !ms.unregisteredRunningLocked():
		ms.vanished = ""
	}
	acts.unproven = ms.vanished
}

// unregisteredRunningLocked says whether a placeholder this run submitted
// runs with no registration of the site's since its submission.
func (ms *managed) unregisteredRunningLocked() bool {
	for _, t := range ms.known {
		if t.state == batch.Running && t.connects >= 0 && t.connects == ms.connects {
			return true
		}
	}
	return false
}

// degradeStalled marks the site degraded for the placeholders that ran
// without connecting, saying why where the site can tell. It reads why
// before they are cancelled: the batch system may clean up.
func (m *Manager) degradeStalled(ctx context.Context, ms *managed, site string, acts siteActions) {
	stalled := acts.stalled
	msg := fmt.Sprintf("%d placeholder(s) ran %s without connecting to the CLS and were cancelled (%s); one at a time is tried until one connects",
		len(stalled), acts.timeout, strings.Join(stalled, ", "))
	if d, ok := ms.site.(interface {
		Diagnose(ctx context.Context, id string) string
	}); ok {
		if why := d.Diagnose(ctx, stalled[0]); why != "" {
			msg += "; " + why
		}
	}
	m.mu.Lock()
	if ms.connects == acts.connects { // else one connected meanwhile: the site works
		ms.stall, ms.state, ms.err = msg, StateDegraded, msg
	}
	m.mu.Unlock()
	m.log().Warn("placeholders ran without connecting to the CLS; cancelling them, site degraded", "site", site, "ids", stalled, "after", acts.timeout, "why", msg)
}

// elsewhereLocked is Counts.Elsewhere for ms: what the other sites'
// running placeholders will take of the ready work at once.
func (m *Manager) elsewhereLocked(ms *managed) int {
	n := 0
	for _, o := range m.sites {
		if o != ms {
			n += o.supply
		}
	}
	return n
}

// supplyOf is how many ready jobs a site's placeholders will take at once:
// the free slots of the running ones, no more than the ready jobs that fit
// there (idle slots take nothing they cannot fit). Queued ones do not
// count, at a fast site or a slow one: a batch queue gives no start time.
// Work measured against the site's shape (Counts.Shaped) counts the
// running placeholders' worth not taken by the jobs they run, at the
// ready jobs' own count per placeholder's worth.
func supplyOf(c Counts) int {
	if c.Shaped() {
		per := c.ReadyNeed.Placeholders()
		if per <= 0 || c.Ready <= 0 {
			return 0
		}
		free := float64(c.Running) - c.ExecutingNeed.Placeholders()
		if free <= 0 {
			return 0
		}
		return min(int(free*float64(c.Ready)/per), c.Ready)
	}
	free := max(c.Running*max(c.Slots, 1)-max(c.Executing, 0), 0)
	return min(free, max(c.Ready, 0))
}
