package server

import "sync"

// maxShippedPerPlaceholder bounds the stream-file names the server
// remembers for one placeholder (shipped). An agent writes one stream
// file at a time and opens another only when a write fails, so a few
// suffice; a key sending endless names keeps this many.
const maxShippedPerPlaceholder = 64

// shippedSet holds, per placeholder, the names of the stream copies
// written since the server started (output.ship): the first piece of
// each checks the copy's tail (recoverCopy). A name forgotten is checked
// again at its next piece, which is safe: the check runs under the
// copy's flock and cuts only a tail that is not a whole chunk, which a
// placeholder's next piece finds refused (bad_state) and ships again from
// the copy's size. So names are forgotten when the placeholder's latest
// connection closes, and, past maxShippedPerPlaceholder, one of the
// placeholder's own others for each new one.
type shippedSet struct {
	mu    sync.Mutex
	names map[int64]map[string]bool
	// over holds the placeholders refused a stream file past
	// protocol.MaxStreamFiles, logged once each; forgotten with names.
	over map[int64]bool
}

// capped notes that placeholder ph was refused a stream file for their
// number and says whether it was the first time.
func (s *shippedSet) capped(ph int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.over[ph] {
		return false
	}
	if s.over == nil {
		s.over = map[int64]bool{}
	}
	s.over[ph] = true
	return true
}

// first notes file of placeholder ph and says whether it was not yet
// noted.
func (s *shippedSet) first(ph int64, file string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.names[ph]
	if m[file] {
		return false
	}
	if m == nil {
		if s.names == nil {
			s.names = map[int64]map[string]bool{}
		}
		m = map[string]bool{}
		s.names[ph] = m
	}
	for name := range m {
		if len(m) < maxShippedPerPlaceholder {
			break
		}
		delete(m, name)
	}
	m[file] = true
	return true
}

// forget drops file of placeholder ph (its check failed).
func (s *shippedSet) forget(ph int64, file string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.names[ph]; m != nil {
		delete(m, file)
		if len(m) == 0 {
			delete(s.names, ph)
		}
	}
}

// forgetAll drops every name of placeholder ph.
func (s *shippedSet) forgetAll(ph int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.names, ph)
	delete(s.over, ph)
}

// size is how many names are held, for all placeholders.
func (s *shippedSet) size() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range s.names {
		n += len(m)
	}
	return n
}
