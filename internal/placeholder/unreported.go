package placeholder

import (
	"sync"

	"github.com/mq-hpc/mq/protocol"
)

// unreportedSet holds the attempts that ended here whose reports the CLS
// has not acknowledged. Heartbeats name them with the running ones, so
// each keeps its lease however long its report takes (its stream files
// shipped first, a CLS that could not commit for a while): an attempt
// that ended is not taken for lost, and run again elsewhere, while its
// report waits.
type unreportedSet struct {
	mu sync.Mutex
	m  map[protocol.JobRef]struct{}
}

// add notes reports gathered, not yet sent.
func (u *unreportedSet) add(rs ...protocol.Report) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m == nil {
		u.m = map[protocol.JobRef]struct{}{}
	}
	for _, r := range rs {
		u.m[protocol.JobRef{ID: r.ID, Attempt: r.Attempt}] = struct{}{}
	}
}

// done forgets reports the CLS acknowledged (or refused: they are not
// sent again, and their attempts' leases run out).
func (u *unreportedSet) done(rs []protocol.Report) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, r := range rs {
		delete(u.m, protocol.JobRef{ID: r.ID, Attempt: r.Attempt})
	}
}

// appendTo appends the attempts whose reports wait to refs.
func (u *unreportedSet) appendTo(refs []protocol.JobRef) []protocol.JobRef {
	u.mu.Lock()
	defer u.mu.Unlock()
	for r := range u.m {
		refs = append(refs, r)
	}
	return refs
}
