package site

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/mq-hpc/mq/policy"
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

// econPlan is the last joint plan of the sites that follow a
// Provisioning policy: placeholders per site.
type econPlan struct {
	at   time.Time
	want map[string]int
	err  error
	// last logged, per queue: the plan's want and unfinishable jobs.
	logged map[string]string
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
	// Sites by policy. A degraded or stalled site can provide nothing now:
	// planned at no placeholders, so the others take its share.
	groups := map[string][]policy.SiteView{}
	m.mu.Lock()
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
	m.mu.Unlock()
	want := map[string]int{}
	for _, name := range slices.Sorted(maps.Keys(groups)) {
		p, err := policy.Lookup(name)
		if err != nil || p.NewProvisioner == nil {
			return nil, fmt.Errorf("provisioning policy %q: %v", name, err)
		}
		prov := p.NewProvisioner()
		sites := groups[name]
		slices.SortFunc(sites, func(a, b policy.SiteView) int { return strings.Compare(a.Name, b.Name) })
		demand := func(q policy.EconQueue) policy.Demand {
			views := slices.Clone(sites)
			for i := range views {
				if secs := q.PerJob[views[i].Name]; secs > 0 {
					views[i].Rate = float64(views[i].Slots) / secs
				}
				views[i].Busy = q.Busy[views[i].Name]
			}
			return policy.Demand{Ready: q.Ready, Running: q.Running, Sites: views, Deadline: q.Deadline, Budget: q.Budget, Budgeted: q.Budgeted, Est: q.Est}
		}
		if sp, ok := prov.(policy.StageProvisioner); ok && len(qs) > 0 {
			// The queues are the stages of one pipeline, planned
			// together (LPSched): each queue's jobs at a site capped at
			// the slots its stage holds there.
			ds := make([]policy.Demand, len(qs))
			for i, q := range qs {
				ds[i] = demand(q)
			}
			got, slots := sp.ProvisionStages(now, ds)
			for i, q := range qs {
				if err := es.SetEconPlan(ctx, q.Queue, slots[i], 0); err != nil {
					return nil, fmt.Errorf("metaqueue: %w", err)
				}
				m.logEcon(q, name, slots[i], 0)
			}
			maps.Copy(want, got)
			continue
		}
		for _, q := range qs {
			d := demand(q)
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
			if err := es.SetEconPlan(ctx, q.Queue, caps, unfinishable); err != nil {
				return nil, fmt.Errorf("metaqueue: %w", err)
			}
			m.logEcon(q, name, got, unfinishable)
		}
		for _, v := range sites {
			want[v.Name] = clampInt(want[v.Name], v.Min, v.Max)
		}
	}
	return want, nil
}

// logEcon logs a queue's plan when it changes.
func (m *Manager) logEcon(q policy.EconQueue, pol string, got map[string]int, unfinishable int) {
	key := fmt.Sprint(got, unfinishable)
	if m.econ.logged == nil {
		m.econ.logged = map[string]string{}
	}
	if m.econ.logged[q.Queue] == key {
		return
	}
	m.econ.logged[q.Queue] = key
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
