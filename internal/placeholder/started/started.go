// Package started holds the attempts handed to a placeholder ahead of a
// free slot that it has started, until the CLS hears of them.
package started

import (
	"sync"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// AnnounceAfter is how long a job started ahead runs before a message
// says so: a short job's report says it instead, so the CLS writes
// nothing for it (measured: announcing every start cost the CLS about a
// third more CPU per `true` job). A longer one is shown P that much
// longer, until the next message (a heartbeat at the latest).
const AnnounceAfter = 100 * time.Millisecond

// Set holds the attempts handed out ahead of a free slot
// (Assignment.Ahead: the CLS shows them prefetched, P) that this agent
// has started and not yet told the CLS of. Every message to the CLS
// carries the list (Next, ReportBatch, Heartbeat: Started) until one is
// answered, so a lost message costs nothing; the attempt's report says it
// too, so an attempt that ends first leaves the set. A job started in a
// free slot (not Ahead) is E already and never enters it.
type Set struct {
	mu sync.Mutex
	m  map[int64]startedRef // by job id
}

type startedRef struct {
	attempt int
	at      time.Time
}

// Add notes the unit's jobs that came ahead: it started at now.
func (s *Set) Add(u []protocol.Assignment, now time.Time) {
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

// Again notes attempt ref, started at, to be named once more
// (a placeholder that reconnected names its running attempts again).
func (s *Set) Again(ref protocol.JobRef, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[int64]startedRef{}
	}
	s.m[ref.ID] = startedRef{ref.Attempt, at}
}

// Ended forgets an attempt whose report is on its way.
func (s *Set) Ended(id int64, attempt int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.m[id]; ok && r.attempt == attempt {
		delete(s.m, id)
	}
}

// List is what a message sent at now carries: the jobs that have run
// AnnounceAfter (at most protocol.MaxStarted; the rest go on the one
// after).
func (s *Set) List(now time.Time) []protocol.JobRef {
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
		if now.Sub(r.at) >= AnnounceAfter {
			out = append(out, protocol.JobRef{ID: id, Attempt: r.attempt})
		}
	}
	return out
}

// Sent forgets what a message the CLS answered carried.
func (s *Set) Sent(refs []protocol.JobRef) {
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
