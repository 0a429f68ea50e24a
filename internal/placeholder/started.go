package placeholder

import (
	"sync"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// announceAfter is how long a job started ahead runs before a message
// says so: a short job's report says it instead, so the CLS writes
// nothing for it (measured: announcing every start cost the CLS about a
// third more CPU per `true` job). A longer one is shown P that much
// longer, until the next message (a heartbeat at the latest).
const announceAfter = 100 * time.Millisecond

// startedSet holds the attempts handed out ahead of a free slot
// (Assignment.Ahead: the CLS shows them prefetched, P) that this agent
// has started and not yet told the CLS of. Every message to the CLS
// carries the list (Next, ReportBatch, Heartbeat: Started) until one is
// answered, so a lost message costs nothing; the attempt's report says it
// too, so an attempt that ends first leaves the set. A job started in a
// free slot (not Ahead) is E already and never enters it.
type startedSet struct {
	mu sync.Mutex
	m  map[int64]startedRef // by job id
}

type startedRef struct {
	attempt int
	at      time.Time
}

// add notes the unit's jobs that came ahead: it started at now.
func (s *startedSet) add(u []protocol.Assignment, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range u {
		if !a.Ahead {
			continue
		}
		if s.m == nil {
			s.m = map[int64]startedRef{}
		}
		s.m[a.ID] = startedRef{a.Attempt, now}
	}
}

// again notes attempt ref, started at, to be named once more
// (Agent.announceRunning).
func (s *startedSet) again(ref protocol.JobRef, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[int64]startedRef{}
	}
	s.m[ref.ID] = startedRef{ref.Attempt, at}
}

// ended forgets an attempt whose report is on its way.
func (s *startedSet) ended(id int64, attempt int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.m[id]; ok && r.attempt == attempt {
		delete(s.m, id)
	}
}

// list is what a message sent at now carries: the jobs that have run
// announceAfter (at most protocol.MaxStarted; the rest go on the one
// after).
func (s *startedSet) list(now time.Time) []protocol.JobRef {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) == 0 {
		return nil
	}
	var out []protocol.JobRef
	for id, r := range s.m {
		if len(out) == protocol.MaxStarted {
			break
		}
		if now.Sub(r.at) >= announceAfter {
			out = append(out, protocol.JobRef{ID: id, Attempt: r.attempt})
		}
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
		if sr, ok := s.m[r.ID]; ok && sr.attempt == r.Attempt {
			delete(s.m, r.ID)
		}
	}
}
