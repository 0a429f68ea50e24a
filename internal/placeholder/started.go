package placeholder

import (
	"sync"

	"github.com/mq-hpc/mq/protocol"
)

// startedSet holds the attempts handed out ahead of a free slot
// (Assignment.Ahead: the CLS shows them prefetched, P) that this agent
// has started and not yet told the CLS of. Every message to the CLS
// carries the list (Next, ReportBatch, Heartbeat: Started) until one is
// answered, so a lost message costs nothing; the attempt's report says it
// too, so an attempt that ends first leaves the set. A job started in a
// free slot (not Ahead) is E already and never enters it.
type startedSet struct {
	mu sync.Mutex
	m  map[int64]int // job id -> attempt
}

// add notes the unit's jobs that came ahead: it has started.
func (s *startedSet) add(u []protocol.Assignment) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range u {
		if !a.Ahead {
			continue
		}
		if s.m == nil {
			s.m = map[int64]int{}
		}
		s.m[a.ID] = a.Attempt
	}
}

// ended forgets an attempt whose report is on its way.
func (s *startedSet) ended(id int64, attempt int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if at, ok := s.m[id]; ok && at == attempt {
		delete(s.m, id)
	}
}

// list is what the next message carries (at most protocol.MaxStarted;
// the rest go on the one after).
func (s *startedSet) list() []protocol.JobRef {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) == 0 {
		return nil
	}
	out := make([]protocol.JobRef, 0, min(len(s.m), protocol.MaxStarted))
	for id, at := range s.m {
		if len(out) == protocol.MaxStarted {
			break
		}
		out = append(out, protocol.JobRef{ID: id, Attempt: at})
	}
	return out
}

// sent forgets what a message the CLS answered carried.
func (s *startedSet) sent(refs []protocol.JobRef) {
	if len(refs) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range refs {
		if at, ok := s.m[r.ID]; ok && at == r.Attempt {
			delete(s.m, r.ID)
		}
	}
}
