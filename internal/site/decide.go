package site

import (
	"cmp"
	"slices"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/packing"
)

// Counts is what the provisioner knows about a site at one moment.
type Counts struct {
	Queued  int // placeholders waiting in the batch queue
	Running int // placeholders running
	// Ready is how many ready jobs a placeholder of this site could take
	// (their estimate fits its walltime); Executing is how many jobs its
	// placeholders run now.
	Ready, Executing int
	// ReadyNeed and ExecutingNeed are the same jobs measured against the
	// site's placeholder shape (packing.Need: per resource, placeholders'
	// worth of their cores, memory, GPUs and named amounts). Ready then
	// counts only the jobs the shape holds. While neither Asks (every job
	// one slot, or a Store that counts only jobs), Slots is the rule.
	ReadyNeed, ExecutingNeed packing.Need
	Slots                    int // jobs one placeholder runs at once
	Min, Max                 int
	// OldestQueued is the longest a placeholder still queued has waited;
	// ThrottleAfter the wait that marks the site slow.
	OldestQueued, ThrottleAfter time.Duration
	// Steady sites keep Min placeholders whether or not there is work
	// (the CLS's own local placeholders, --local N).
	Steady bool
	// Elsewhere is how many of the ready jobs other sites will take at
	// once: the free slots of their running placeholders, each site
	// counted up to its own ready jobs. Placeholders queued elsewhere do
	// not count: when they start is unknown, so every site may queue for
	// the same work and the first to start takes it (late binding); the
	// surplus is cancelled when the work is gone.
	Elsewhere int
	// Stalled: a placeholder of this site ran without connecting until it
	// was cancelled (NeverConnected), and none has connected since.
	Stalled bool
	// Erring: a placeholder of this site went into the batch system's
	// error state (SGE's Eqw), and none has connected since.
	Erring bool
}

// Decision is what to do now.
type Decision struct {
	Submit    int  // placeholders to submit
	Cancel    int  // queued placeholders to cancel (newest first)
	Throttled bool // the site starts placeholders slowly: only one is kept queued
}

// Decide is the provisioning rule, a pure function of counts:
//
//   - No ready work: cancel every queued placeholder; running ones finish
//     their jobs and exit on their idle timeout. A Steady site keeps Min
//     all the same.
//   - Ready work: keep queued+running between Min and Max, and no more than
//     the work warrants: the jobs running here and the ready ones that
//     running placeholders elsewhere will not take at once, Slots per
//     placeholder. Surplus queued placeholders are cancelled; running ones
//     are never cancelled (they may hold jobs).
//   - Jobs that ask for more than a slot (Shaped): the work warrants as
//     many placeholders as its requests need at least, per resource the
//     larger of their sum over the shape's amount and the jobs that take
//     more than half of it, the largest over the resources
//     (packing.Need.Whole) of the running jobs and of the share of the
//     ready ones left to this site (Elsewhere taken off in proportion).
//     Ready jobs the shape cannot hold were not counted: a site that can
//     hold none of the ready jobs has no ready work.
//   - Throttle: while a placeholder has waited in the batch queue longer
//     than ThrottleAfter, keep just one queued (a probe, kept while there
//     is any ready work: when it starts, the site is fast again), cancel
//     the others and submit nothing. The work goes to the placeholders
//     that start sooner elsewhere, which their sites keep provisioning.
//   - Stalled: placeholders start but cannot reach the CLS, so more would
//     only burn allocation. Keep one (queued or running) as a probe while
//     there is work: when it connects, the site is healthy again. So
//     while Erring: placeholders the batch system put in its error state
//     (a -wd the nodes lack) would all end there.
func Decide(c Counts) Decision {
	if c.Ready <= 0 && !c.Steady {
		return Decision{Cancel: max(c.Queued, 0)}
	}
	slots := max(c.Slots, 1)
	share := max(c.Ready-max(c.Elsewhere, 0), 0)
	warranted := (share + max(c.Executing, 0) + slots - 1) / slots
	if c.Shaped() {
		left := 0.0
		if c.Ready > 0 {
			left = float64(share) / float64(c.Ready)
		}
		warranted = c.ReadyNeed.Scale(left).Plus(c.ExecutingNeed).Whole()
	}
	want := min(max(warranted, c.Min), c.Max)
	have := c.Queued + c.Running
	d := Decision{}
	if c.ThrottleAfter > 0 && c.Queued > 0 && c.OldestQueued > c.ThrottleAfter {
		// One queued probe stays while there is work, even work other
		// sites take: when it starts, the site is fast again.
		d.Throttled = true
		want = min(c.Running+1, c.Max)
	}
	if c.Stalled || c.Erring {
		want = min(want, 1)
	}
	switch {
	case want > have:
		d.Submit = want - have
	case want < have:
		d.Cancel = min(have-want, c.Queued)
	}
	return d
}

// Shaped reports whether some job counted asks for more than a slot:
// Decide then counts placeholders by the jobs' requests, not by Slots.
func (c Counts) Shaped() bool { return c.ReadyNeed.Asks || c.ExecutingNeed.Asks }

// Started is a running placeholder as the connect check sees it.
type Started struct {
	ID      string
	Running time.Duration // since it was seen to start
	// Connected: it has registered with the CLS (matched by batch job id)
	// at some time since it started.
	Connected bool
}

// NeverConnected returns the running placeholders that have run longer
// than timeout without connecting to the CLS: cancel them, the batch
// system is running them for nothing. anonymous is how many of the site's
// placeholders are connected without having said their batch job id (an
// agent whose batch system sets none of the variables BatchJobID reads);
// each may be any of the candidates, so as many are spared, the longest
// running first (the first started are the first to connect).
func NeverConnected(ps []Started, anonymous int, timeout time.Duration) []string {
	if timeout <= 0 {
		return nil
	}
	var late []Started
	for _, p := range ps {
		if !p.Connected && p.Running > timeout {
			late = append(late, p)
		}
	}
	slices.SortFunc(late, func(a, b Started) int { return cmp.Compare(b.Running, a.Running) })
	late = late[min(max(anonymous, 0), len(late)):]
	ids := make([]string, len(late))
	for i, p := range late {
		ids[i] = p.ID
	}
	return ids
}
