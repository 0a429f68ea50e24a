package site

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/protocol"
)

// EconStore is what deadline-and-budget provisioning needs of the
// metaqueue beyond Store: the queues with a deadline or a budget, and a
// way to cap each site's share of a queue's jobs at what the plan gives
// it (dispatch follows the caps, so a dear site's running placeholders
// take none of the queue's jobs the plan gave a cheap one).
type EconStore interface {
	EconQueues(ctx context.Context) ([]policy.EconQueue, error)
	SetEconPlan(ctx context.Context, queue string, caps map[string]int, unfinishable int) error
}

// StageStore is what LP provisioning needs beyond EconStore: every queue
// with jobs not ended, as the stages of one pipeline in the order their
// jobs feed each other, and the sites' links in bytes per second.
type StageStore interface {
	StageQueues(ctx context.Context, sites []string) ([]policy.EconQueue, map[string]float64, error)
}

// econPlan is the last joint plan of the sites that follow a
// Provisioning policy: placeholders per site.
type econPlan struct {
	at   time.Time
	want map[string]int
	err  error
	// last logged, per policy and queue: the plan's want and unfinishable jobs.
	logged map[string]string
	// shown is each policy's last plan, for cls plan show (under
	// Manager.shownMu, so a plan being made never holds the show up).
	shown []protocol.ProvisionShown
	// capped are the queues the last plan capped.
	capped map[string]bool
	// failed is the last lp plan's error (logged when it changes).
	failed string
}

// econWant is how many placeholders site ms should hold under its
// Provisioning policy: the sum over the queues with a deadline or a
// budget of what the policy plans for each, jointly over every site that
// follows the same policy, re-planned at most once a poll (as jobs end
// and rates are measured) by whichever site's loop looks first.
func (m *Manager) econWant(ctx context.Context, ms *managed) (int, error) {
	m.econMu.Lock()
	defer m.econMu.Unlock()
	now := m.now()
	if m.econ.want == nil || now.Sub(m.econ.at) >= m.poll()/2 || now.Before(m.econ.at) {
		m.econ.want, m.econ.err = m.planEcon(ctx, now)
		m.econ.at = now
	}
	if m.econ.err != nil {
		return 0, m.econ.err
	}
	return m.econ.want[ms.spec.Name], nil
}

// planEcon plans every Provisioning policy's sites for every costed queue
// and sets the queues' caps.
func (m *Manager) planEcon(ctx context.Context, now time.Time) (map[string]int, error) {
	es, ok := m.Store.(EconStore)
	if !ok {
		return nil, fmt.Errorf("the metaqueue does not plan deadlines and budgets")
	}
	qs, err := es.EconQueues(ctx)
	if err != nil {
		return nil, fmt.Errorf("metaqueue: %w", err)
	}
	groups := m.provisionGroups()
	want := map[string]int{}
	var shownPlans []protocol.ProvisionShown
	capped := planCaps{}
	for _, name := range slices.Sorted(maps.Keys(groups)) {
		prov, err := m.provisioner(name)
		if err != nil {
			return nil, err
		}
		sites := groups[name]
		slices.SortFunc(sites, func(a, b policy.SiteView) int { return strings.Compare(a.Name, b.Name) })
		if sp, ok := prov.(policy.StageProvisioner); ok {
			shown, err := m.planStages(ctx, now, name, sp, sites, qs, capped, want)
			if err != nil {
				return nil, err
			}
			if shown != nil {
				shownPlans = append(shownPlans, *shown)
			}
			continue
		}
		shownPlans = append(shownPlans, m.planQueues(now, name, prov, sites, qs, capped, want))
	}
	m.shownMu.Lock()
	m.econ.shown = shownPlans
	m.shownMu.Unlock()
	if err := m.setCaps(ctx, es, capped); err != nil {
		return nil, err
	}
	return want, nil
}

// provisionGroups is the sites that follow a Provisioning policy, by
// policy. A degraded or stalled site can provide nothing now: planned at
// no placeholders, so the others take its share.
func (m *Manager) provisionGroups() map[string][]policy.SiteView {
	groups := map[string][]policy.SiteView{}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ms := range m.sites {
		spec := ms.spec
		if spec.Provision == "" {
			continue
		}
		v := policy.SiteView{Name: spec.Name, Min: spec.Min, Max: spec.Max, Slots: max(spec.Slots, 1), Price: spec.Price}
		if ms.state == StateDegraded || ms.stall != "" {
			v.Min, v.Max = 0, 0
		}
		groups[spec.Provision] = append(groups[spec.Provision], v)
	}
	return groups
}

// provisioner returns the named Provisioning policy's planner, with the
// manager's settings.
func (m *Manager) provisioner(name string) (policy.Provisioner, error) {
	p, err := policy.Lookup(name)
	if err != nil || p.NewProvisioner == nil {
		return nil, fmt.Errorf("provisioning policy %q: %v", name, err)
	}
	prov := p.NewProvisioner()
	if lp, ok := prov.(policy.LP); ok {
		lp.MinUtil = m.LPMinUtil
		prov = lp
	}
	return prov, nil
}

// demandOf is queue q's demand on sites, with each site's measured rate
// and busy slots for q and its link (links may be nil).
func demandOf(q policy.EconQueue, sites []policy.SiteView, links map[string]float64) policy.Demand {
	views := slices.Clone(sites)
	for i := range views {
		if secs := q.PerJob[views[i].Name]; secs > 0 {
			views[i].Rate = float64(views[i].Slots) / secs
		}
		views[i].Busy = q.Busy[views[i].Name]
		views[i].Link = links[views[i].Name]
	}
	return policy.Demand{Ready: q.Ready, Running: q.Running, Waiting: q.Waiting, Out: q.Out, FeedsNext: q.FeedsNext, Sites: views,
		Deadline: q.Deadline, Budget: q.Budget, Budgeted: q.Budgeted, Est: q.Est}
}

// planStages plans one stage policy's sites. The queues are the stages of
// one pipeline, planned together (LPSched): each queue's jobs at a site
// capped at the slots its stage holds there. Every queue with work is a
// stage, costed or not, when the store can say how they feed each other
// and what the links carry; otherwise the stages are qs. It adds the plan
// to capped and want, and returns what cls plan show shows of it (nil:
// there were no stages).
func (m *Manager) planStages(ctx context.Context, now time.Time, name string, sp policy.StageProvisioner, sites []policy.SiteView, qs []policy.EconQueue, capped planCaps, want map[string]int) (*protocol.ProvisionShown, error) {
	stages := qs
	var links map[string]float64
	if ss, ok := m.Store.(StageStore); ok {
		names := make([]string, len(sites))
		for i, v := range sites {
			names[i] = v.Name
		}
		var err error
		if stages, links, err = ss.StageQueues(ctx, names); err != nil {
			return nil, fmt.Errorf("metaqueue: %w", err)
		}
	}
	if len(stages) == 0 {
		return nil, nil
	}
	ds := make([]policy.Demand, len(stages))
	for i, q := range stages {
		ds[i] = demandOf(q, sites, links)
	}
	var got map[string]int
	var slots []map[string]int
	rate := 0.0
	var failed error
	if rp, ok := sp.(interface {
		PlanStages(time.Time, []policy.Demand) (map[string]int, []map[string]int, float64, error)
	}); ok {
		got, slots, rate, failed = rp.PlanStages(now, ds)
	} else {
		got, slots = sp.ProvisionStages(now, ds)
	}
	shown := protocol.ProvisionShown{Policy: name, Made: now.UTC().Format(time.RFC3339), Rate: rate, Placeholders: got}
	if failed != nil {
		shown.Error = protocol.ClipText(failed.Error(), 200)
		if m.econ.failed != shown.Error {
			m.log().Warn("lp provisioning found no plan: the stages run uncapped", "err", failed)
		}
	}
	m.econ.failed = shown.Error
	for i, q := range stages {
		capped.add(q.Queue, slots[i], 0)
		m.logEcon(q, name, slots[i], 0)
		shown.Queues = append(shown.Queues, provisionQueue(q, slots[i], 0))
	}
	maps.Copy(want, got)
	return &shown, nil
}

// planQueues plans one policy's sites for each costed queue apart, adds
// the plans to capped and want (clamped to each site's bounds), and
// returns what cls plan show shows of them.
func (m *Manager) planQueues(now time.Time, name string, prov policy.Provisioner, sites []policy.SiteView, qs []policy.EconQueue, capped planCaps, want map[string]int) protocol.ProvisionShown {
	shown := protocol.ProvisionShown{Policy: name, Made: now.UTC().Format(time.RFC3339), Placeholders: map[string]int{}}
	for _, q := range qs {
		d := demandOf(q, sites, nil)
		views := d.Sites
		var got map[string]int
		unfinishable := 0
		if pl, ok := prov.(interface {
			Plan(time.Time, policy.Demand) (map[string]int, int)
		}); ok {
			got, unfinishable = pl.Plan(now, d)
		} else {
			got = prov.Provision(now, d)
		}
		caps := make(map[string]int, len(views))
		for _, v := range views {
			caps[v.Name] = got[v.Name] * v.Slots
			want[v.Name] += got[v.Name]
		}
		capped.add(q.Queue, caps, unfinishable)
		m.logEcon(q, name, got, unfinishable)
		shown.Queues = append(shown.Queues, provisionQueue(q, caps, unfinishable))
	}
	for _, v := range sites {
		want[v.Name] = clampInt(want[v.Name], v.Min, v.Max)
		shown.Placeholders[v.Name] = want[v.Name]
	}
	return shown
}

// setCaps sets each queue's caps to the tightest every plan holding it
// gives (a queue can be both a dbc plan's and an lp plan's, at their own
// sites), and uncaps the queues no plan holds now (their work ended, or
// their sites stopped following a policy).
func (m *Manager) setCaps(ctx context.Context, es EconStore, capped planCaps) error {
	keep := make(map[string]bool, len(capped))
	for _, q := range slices.Sorted(maps.Keys(capped)) {
		c := capped[q]
		if err := es.SetEconPlan(ctx, q, c.caps, c.unfinishable); err != nil {
			return fmt.Errorf("metaqueue: %w", err)
		}
		keep[q] = true
	}
	return m.uncap(ctx, es, keep)
}

// queueCaps is what the plans of one round say of a queue: the jobs each
// site may run of it at once (nil: no plan caps it anywhere) and the
// ready jobs a plan found cannot end within its deadline and budget.
type queueCaps struct {
	caps         map[string]int
	unfinishable int
}

// planCaps merges the caps each provisioning policy's plan puts on the
// queues, by queue.
type planCaps map[string]*queueCaps

// add merges a plan's caps on queue q: where two plans cap the same site,
// the lower cap holds (both plans' promises hold: a dbc plan's budget and
// an lp plan's slots); a site only one plan caps keeps that plan's cap,
// so a plan left out of the next round (its sites follow another policy
// or none) takes only its own caps with it. nil caps (an lp plan that
// found none) cap nothing.
func (pc planCaps) add(q string, caps map[string]int, unfinishable int) {
	c := pc[q]
	if c == nil {
		c = &queueCaps{}
		pc[q] = c
	}
	c.unfinishable = max(c.unfinishable, unfinishable)
	if caps == nil {
		return
	}
	if c.caps == nil {
		c.caps = make(map[string]int, len(caps))
	}
	for site, n := range caps {
		if had, ok := c.caps[site]; ok {
			n = min(n, had)
		}
		c.caps[site] = n
	}
}

// uncap lifts the caps of the queues the last plan capped that are not in
// keep. Called with econMu held.
func (m *Manager) uncap(ctx context.Context, es EconStore, keep map[string]bool) error {
	for q := range m.econ.capped {
		if keep[q] {
			continue
		}
		if err := es.SetEconPlan(ctx, q, nil, 0); err != nil && !protocol.IsCode(err, protocol.CodeNotFound) {
			return fmt.Errorf("metaqueue: %w", err)
		}
	}
	m.econ.capped = keep
	return nil
}

// dropPlans lifts every cap and forgets the plans once no site follows a
// provisioning policy (the last one removed or set to none): else the
// queues would stay held at those sites for good.
func (m *Manager) dropPlans(ctx context.Context) error {
	m.mu.Lock()
	for _, ms := range m.sites {
		if ms.spec.Provision != "" {
			m.mu.Unlock()
			return nil
		}
	}
	m.mu.Unlock()
	m.econMu.Lock()
	defer m.econMu.Unlock()
	if len(m.econ.capped) == 0 && m.econ.want == nil {
		return nil
	}
	es, ok := m.Store.(EconStore)
	if !ok {
		return nil
	}
	m.shownMu.Lock()
	m.econ.shown = nil
	m.shownMu.Unlock()
	m.econ.want = nil
	return m.uncap(ctx, es, nil)
}

// provisionQueue is queue q's part of a provisioning plan, as shown.
func provisionQueue(q policy.EconQueue, caps map[string]int, unfinishable int) protocol.ProvisionQueue {
	return protocol.ProvisionQueue{Queue: q.Queue, Ready: q.Ready, Waiting: q.Waiting, Running: q.Running,
		OutBytes: int64(q.Out), Slots: maps.Clone(caps), Unfinishable: unfinishable}
}

// ProvisionShown returns the last plan of each provisioning policy the
// sites follow (cls plan show), oldest policy name first.
func (m *Manager) ProvisionShown() []protocol.ProvisionShown {
	m.shownMu.Lock()
	defer m.shownMu.Unlock()
	return slices.Clone(m.econ.shown)
}

// logEcon logs a queue's plan when it changes.
func (m *Manager) logEcon(q policy.EconQueue, pol string, got map[string]int, unfinishable int) {
	key := fmt.Sprint(got, unfinishable)
	if m.econ.logged == nil {
		m.econ.logged = map[string]string{}
	}
	at := pol + "\x00" + q.Queue // a queue two policies plan is logged per plan
	if m.econ.logged[at] == key {
		return
	}
	m.econ.logged[at] = key
	args := []any{"queue", q.Queue, "policy", pol, "ready", q.Ready, "running", q.Running, "placeholders", got, "budget_left", q.Budget}
	if !q.Deadline.IsZero() {
		args = append(args, "deadline_in", q.Deadline.Sub(m.now()).Round(time.Second))
	}
	if unfinishable > 0 {
		m.log().Warn("deadline-and-budget plan: some ready jobs cannot end within the deadline and budget", append(args, "unfinishable", unfinishable)...)
		return
	}
	m.log().Info("deadline-and-budget plan", args...)
}

func clampInt(v, lo, hi int) int { return max(min(v, hi), lo) }
