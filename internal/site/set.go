package site

import (
	"context"

	"github.com/mq-hpc/mq/protocol"
)

// SiteUpdater is what Set needs of the metaqueue beyond Store.
type SiteUpdater interface {
	UpdateSite(ctx context.Context, spec protocol.SiteSpec) error
}

// Set changes a site's settings without removing it (cls site set): its
// placeholders keep running and their jobs with them. The site's loop is
// stopped, the spec stored, and the loop started again with what it
// knew. A change of slots, walltime, idle timeout, queue, submit
// arguments or the CLS's address (--cls-addr) reaches placeholders
// submitted from then on (the site is opened again: a local site keeps
// watching its running processes, a remote one finds its placeholders in
// the batch system by name).
func (m *Manager) Set(ctx context.Context, set protocol.SiteSet) (protocol.SiteInfo, error) {
	up, ok := m.Store.(SiteUpdater)
	if !ok {
		return protocol.SiteInfo{}, protocol.Errorf(protocol.CodeBadRequest, "this CLS cannot change sites")
	}
	m.setMu.Lock()
	defer m.setMu.Unlock()
	m.mu.Lock()
	if m.sites == nil {
		m.mu.Unlock()
		return protocol.SiteInfo{}, protocol.Errorf(protocol.CodeShutdown, "sites are not being managed")
	}
	ms, ok := m.sites[set.Name]
	if !ok {
		m.mu.Unlock()
		return protocol.SiteInfo{}, protocol.Errorf(protocol.CodeNotFound, "no site %s", set.Name)
	}
	if ms.spec.Embedded {
		m.mu.Unlock()
		// Restarting with another --local changes their number only: a
		// price, slots or memory take a site of type local of one's own.
		return protocol.SiteInfo{}, protocol.Errorf(protocol.CodeBadRequest, "%s; for a price or other settings add a site of your own: cls site add NAME --type local --max N ...", embeddedMsg(ms.spec))
	}
	old := ms.spec
	m.mu.Unlock()
	spec := ApplySet(old, set)
	if err := Validate(&spec); err != nil {
		return protocol.SiteInfo{}, protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	reopen := spec.Slots != old.Slots || spec.Walltime != old.Walltime || spec.Idle != old.Idle || spec.PE != old.PE ||
		spec.Mem != old.Mem || spec.GPUs != old.GPUs || spec.Resources != old.Resources ||
		spec.Output != old.Output || // a local site's placeholders are started with it
		spec.Queue != old.Queue || spec.SubmitArgs != old.SubmitArgs || spec.CLSAddr != old.CLSAddr
	var next Site
	if reopen {
		var err error
		name := spec.Name
		if next, err = m.Open(spec, func(pid int) { m.localExited(name, pid) }); err != nil {
			return protocol.SiteInfo{}, err
		}
	}
	if err := up.UpdateSite(ctx, spec); err != nil {
		if next != nil {
			next.Close()
		}
		return protocol.SiteInfo{}, err
	}
	// Stop the loop, swap, start it again.
	ms.cancel()
	<-ms.done
	var retired Site
	m.mu.Lock()
	if next != nil {
		if r, ok := ms.site.(interface{ Retarget(Site) bool }); ok && r.Retarget(next) {
			retired = next
		} else {
			retired, ms.site = ms.site, next
		}
	}
	ms.spec = spec
	// Queued placeholders submitted to the old queue or with the old
	// arguments may never start (that is usually why they are changed:
	// a partition's time limit, an account), and those told an address
	// of the CLS that did not reach it would never connect: the loop
	// cancels them, and new ones are submitted as the new settings say.
	ms.stale = ms.stale || spec.Queue != old.Queue || spec.SubmitArgs != old.SubmitArgs || spec.CLSAddr != old.CLSAddr
	ctx2, cancel := context.WithCancel(m.ctx)
	ms.cancel, ms.done = cancel, make(chan struct{})
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer close(ms.done)
		m.loop(ctx2, ms)
	}()
	info := m.infoLocked(ms)
	m.mu.Unlock()
	if retired != nil {
		retired.Close()
	}
	// The next plan sees the new price, slots and limits.
	m.econMu.Lock()
	m.econ.want = nil
	m.econMu.Unlock()
	m.log().Info("site changed", "site", spec.Name, "price", spec.Price, "slots", spec.Slots, "min", spec.Min, "max", spec.Max, "provision", spec.Provision)
	return info, nil
}

// ApplySet is spec with the settings set gives (cls site set; the
// command checks its values with it too).
func ApplySet(spec protocol.SiteSpec, set protocol.SiteSet) protocol.SiteSpec {
	if set.Price != nil {
		spec.Price = *set.Price
	}
	if set.Slots != nil {
		spec.Slots = *set.Slots
		if spec.Type == SGE && spec.Slots <= 1 {
			spec.PE = "" // Validate sets the default for slots > 1
		}
	}
	if set.Min != nil {
		spec.Min = *set.Min
	}
	if set.Max != nil {
		spec.Max = *set.Max
	}
	if set.Provision != nil {
		spec.Provision = *set.Provision
	}
	if set.Walltime != nil {
		spec.Walltime = *set.Walltime
	}
	if set.Idle != nil {
		spec.Idle = *set.Idle
	}
	if set.Mem != nil {
		spec.Mem = *set.Mem
	}
	if set.GPUs != nil {
		spec.GPUs = *set.GPUs
	}
	if set.Resources != nil {
		spec.Resources = *set.Resources
	}
	if set.Output != nil {
		spec.Output = *set.Output
	}
	if set.Queue != nil {
		spec.Queue = *set.Queue
	}
	if set.SubmitArgs != nil {
		spec.SubmitArgs = *set.SubmitArgs
	}
	if set.CLSAddr != nil {
		spec.CLSAddr = *set.CLSAddr
	}
	return spec
}
