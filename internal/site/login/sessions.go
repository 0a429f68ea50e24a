package login

import (
	"context"
	"fmt"
	"sync"
)

// Sessions bounds the sessions the CLS opens at once on each master
// connection (one per command's ssh, and a site's SFTP session for its
// life). sshd refuses a connection's sessions past its MaxSessions (10
// by default), and every site on a login host rides on one master: past
// the bound a command waits for a session to end rather than be refused,
// where ssh's try of a connection of its own is a failed login at a host
// only the user's login can log in to.
type Sessions struct {
	// Max is how many at once on one master; 0 is DefaultMaxSessions.
	Max int

	mu sync.Mutex
	by map[string]chan struct{} // by the master's socket
}

// DefaultMaxSessions is sshd's default MaxSessions.
const DefaultMaxSessions = 10

// max is how many sessions at once ss allows on one master.
func (ss *Sessions) max() int {
	if ss == nil || ss.Max <= 0 {
		return DefaultMaxSessions
	}
	return ss.Max
}

// take waits until ctx ends for a session on the master at socket, and
// returns its release.
func (ss *Sessions) take(ctx context.Context, socket string) (release func(), err error) {
	if ss == nil {
		return func() {}, nil
	}
	ss.mu.Lock()
	if ss.by == nil {
		ss.by = map[string]chan struct{}{}
	}
	sem := ss.by[socket]
	if sem == nil {
		sem = make(chan struct{}, ss.max())
		ss.by[socket] = sem
	}
	ss.mu.Unlock()
	select {
	case sem <- struct{}{}:
		return sync.OnceFunc(func() { <-sem }), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("every one of the %d sessions the CLS opens at once on the login connection stayed in use: %w", cap(sem), ctx.Err())
	}
}
