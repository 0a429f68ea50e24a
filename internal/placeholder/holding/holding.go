// Package holding keeps the job attempts handed to a placeholder agent
// whose end the CLS has not acknowledged.
package holding

import (
	"sync"

	"github.com/mq-hpc/mq/protocol"
)

// Set holds the attempts the CLS handed this agent whose end it
// has not acknowledged: running, held ahead, or ended with the report on
// its way. An attempt enters as its reply is read (call, under recvMu)
// and leaves when the CLS takes (or refuses) its report.
//
// Heartbeats name them all, so an ended attempt keeps its lease however
// long its report takes (its stream files shipped first, a CLS that could
// not commit it for a while) and is not run again elsewhere as lost. A
// reconnecting agent lists them when it registers again
// (protocol.Register.Holding): the CLS hands back the attempts it claimed
// for this placeholder whose replies were lost with the connection.
type Set struct {
	mu sync.Mutex
	m  map[protocol.JobRef]struct{}
}

// Got notes the jobs of a reply just read.
func (h *Set) Got(jobs []protocol.Assignment) {
	if len(jobs) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[protocol.JobRef]struct{}{}
	}
	for _, j := range jobs {
		h.m[protocol.JobRef{ID: j.ID, Attempt: j.Attempt}] = struct{}{}
	}
}

// Done forgets the attempts of reports the CLS acknowledged (or refused:
// they are not sent again, and their leases run out).
func (h *Set) Done(rs []protocol.Report) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range rs {
		delete(h.m, protocol.JobRef{ID: r.ID, Attempt: r.Attempt})
	}
}

// AppendTo appends to refs the attempts held that refs does not name.
func (h *Set) AppendTo(refs []protocol.JobRef) []protocol.JobRef {
	h.mu.Lock()
	defer h.mu.Unlock()
	named := make(map[protocol.JobRef]bool, len(refs))
	for _, r := range refs {
		named[r] = true
	}
	for r := range h.m {
		if !named[r] {
			refs = append(refs, r)
		}
	}
	return refs
}

// List is what a registration carries: every attempt held, never nil;
// nil past protocol.MaxHolding (the CLS then hands nothing back).
func (h *Set) List() []protocol.JobRef {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.m) > protocol.MaxHolding {
		return nil
	}
	out := make([]protocol.JobRef, 0, len(h.m))
	for r := range h.m {
		out = append(out, r)
	}
	return out
}
