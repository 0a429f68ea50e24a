package site

import (
	"slices"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// maxBrokenWhy bounds what a placeholder's word that its node cannot run
// jobs keeps of why.
const maxBrokenWhy = 1024

// Broken is told at each heartbeat of placeholder id that says its node
// cannot run jobs, and why (see server.Server.OnBroken). The site lists
// it (SiteInfo.Broken) for protocol.BrokenKept, after the placeholder
// exits too: the node is still broken, and the site should drain it.
func (m *Manager) Broken(id int64, why string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ms := range m.sites {
		if _, ok := ms.connected[id]; !ok {
			continue
		}
		if slices.ContainsFunc(ms.broken, func(b protocol.BrokenPlaceholder) bool { return b.ID == id }) {
			return // said once: the first time is when it broke
		}
		b := protocol.BrokenPlaceholder{ID: id, Host: ms.hosts[id], Why: protocol.ClipText(why, maxBrokenWhy), At: m.now()}
		ms.broken = append([]protocol.BrokenPlaceholder{b}, ms.broken...)
		if len(ms.broken) > protocol.MaxBroken {
			ms.broken = ms.broken[:protocol.MaxBroken]
		}
		m.log().Warn("a placeholder says its node cannot run jobs: it takes no more, and exits once its jobs end; drain the node", "site", ms.spec.Name, "placeholder", id, "host", b.Host, "why", b.Why)
		return
	}
}

// brokenLocked is the site's broken placeholders heard of since
// protocol.BrokenKept before now, the latest first; m.mu is held.
func (ms *managed) brokenLocked(now time.Time) []protocol.BrokenPlaceholder {
	ms.broken = slices.DeleteFunc(ms.broken, func(b protocol.BrokenPlaceholder) bool { return now.Sub(b.At) > protocol.BrokenKept })
	if len(ms.broken) == 0 {
		return nil
	}
	return slices.Clone(ms.broken)
}
