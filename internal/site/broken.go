package site

import (
	"context"
	"slices"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// maxBrokenWhy bounds what a placeholder's word that its node cannot run
// jobs keeps of why.
const maxBrokenWhy = 1024

// brokenWriteWait bounds how long Broken waits to hand its record to the
// store: it runs on a placeholder's heartbeat.
const brokenWriteWait = 10 * time.Second

// BrokenStore keeps the sites' broken placeholders in the database, so
// that a restarted CLS lists them still: the node stays broken. A Store
// without it keeps them in memory alone.
type BrokenStore interface {
	// NoteBroken stores a site's record and keeps the site's latest
	// protocol.MaxBroken; a site no longer stored gets none unless
	// embedded (the CLS's own).
	NoteBroken(ctx context.Context, site string, b protocol.BrokenPlaceholder, embedded bool) error
	// BrokenPlaceholders lists the records heard at since or later, by
	// site, the latest first.
	BrokenPlaceholders(ctx context.Context, since time.Time) (map[string][]protocol.BrokenPlaceholder, error)
}

// Broken is told at each heartbeat of placeholder id that says its node
// cannot run jobs, and why (see server.Server.OnBroken). The site lists
// it (SiteInfo.Broken) for protocol.BrokenKept, after the placeholder
// exits and the CLS restarts too: the node is still broken, and the site
// should drain it. The record is stored the first time, outside m.mu:
// the store's core must never wait behind the manager's lock. A store
// that cannot write it (a full disk) is logged once; the site lists the
// record in this run still.
func (m *Manager) Broken(id int64, why string) {
	site, b, embedded, ok := m.noteBroken(id, why)
	if !ok {
		return
	}
	m.log().Warn("a placeholder says its node cannot run jobs: it takes no more, and exits once its jobs end; drain the node", "site", site, "placeholder", id, "host", b.Host, "why", b.Why)
	bs, ok := m.Store.(BrokenStore)
	if !ok {
		return
	}
	// Not the manager's context: a word heard as the CLS stops is kept.
	ctx, cancel := context.WithTimeout(context.Background(), brokenWriteWait)
	defer cancel()
	err := bs.NoteBroken(ctx, site, b, embedded)
	switch {
	case err != nil && m.brokenUnstored.CompareAndSwap(false, true):
		m.log().Warn("cannot store that a placeholder's node cannot run jobs: it is listed until the CLS restarts only", "site", site, "placeholder", id, "err", err)
	case err == nil && m.brokenUnstored.CompareAndSwap(true, false):
		m.log().Info("broken placeholders are stored again", "site", site, "placeholder", id)
	}
}

// noteBroken adds placeholder id's record to its site's, the first time
// it says so, and returns it with the site's name and whether the site is
// the CLS's own; ok is false when there is nothing to store.
func (m *Manager) noteBroken(id int64, why string) (site string, b protocol.BrokenPlaceholder, embedded, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ms := range m.sites {
		if _, ok := ms.connected[id]; !ok {
			continue
		}
		// Said once: the first time is when it broke. Heard again, one
		// the site's later ones pushed out stays out.
		if ms.saidBroken[id] || slices.ContainsFunc(ms.broken, func(b protocol.BrokenPlaceholder) bool { return b.ID == id }) {
			return "", b, false, false
		}
		if ms.saidBroken == nil {
			ms.saidBroken = map[int64]bool{}
		}
		ms.saidBroken[id] = true
		b = protocol.BrokenPlaceholder{ID: id, Host: ms.hosts[id], Why: protocol.ClipText(why, maxBrokenWhy), At: m.now()}
		ms.broken = append([]protocol.BrokenPlaceholder{b}, ms.broken...)
		if len(ms.broken) > protocol.MaxBroken {
			ms.broken = ms.broken[:protocol.MaxBroken]
		}
		return ms.spec.Name, b, ms.spec.Embedded, true
	}
	return "", b, false, false
}

// loadBroken reads the stored records of the last protocol.BrokenKept,
// for Start: none when the store keeps none or cannot read them (logged;
// the sites start without them).
func (m *Manager) loadBroken(ctx context.Context) map[string][]protocol.BrokenPlaceholder {
	bs, ok := m.Store.(BrokenStore)
	if !ok {
		return nil
	}
	stored, err := bs.BrokenPlaceholders(ctx, m.now().Add(-protocol.BrokenKept))
	if err != nil {
		m.log().Warn("cannot read the broken placeholders stored: sites list only those heard from now on", "err", err)
		return nil
	}
	for site, list := range stored {
		if len(list) > protocol.MaxBroken {
			stored[site] = list[:protocol.MaxBroken]
		}
	}
	return stored
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
