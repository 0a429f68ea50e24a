package server

import (
	"context"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// A placeholder that reconnects registers again with its id on a new
// connection. Its earlier connection may look alive to the server (a cut
// the kernel has not noticed), and a next reply written into it is lost
// unread. So the server ends the placeholder's earlier connection, and
// waits until it has closed, before the store hears the registration: the
// store then hands back the placeholder's executing attempts that it does
// not list as holding (protocol.Register.Holding), and no reply on the
// earlier connection can still claim more.

// closeGrace bounds the wait for an earlier connection's close: its
// requests see their context end and return, but one inside a long
// commit finishes it first.
const closeGrace = 10 * time.Second

// latest records c as the connection placeholder id registered on last.
func (s *Server) latest(id int64, c *conn) {
	s.phConnMu.Lock()
	defer s.phConnMu.Unlock()
	if s.phConn == nil {
		s.phConn = map[int64]*conn{}
	}
	s.phConn[id] = c
}

// forgetConn drops c as the latest connection of the placeholders it
// registered, when it closes, and the names of their stream copies.
func (s *Server) forgetConn(c *conn) {
	s.phConnMu.Lock()
	defer s.phConnMu.Unlock()
	c.phMu.Lock()
	defer c.phMu.Unlock()
	for id := range c.phs {
		if s.phConn[id] == c {
			delete(s.phConn, id)
			// Its next piece checks its copy's tail again (shippedSet).
			s.shipped.forgetAll(id)
		}
	}
}

// closeEarlier ends the connection placeholder id registered on before
// c, if any, and waits (closeGrace at most) until it has closed. Only a
// registration the store would let reclaim the id (same identity, site
// and host) ends it: another key naming the id must not cut the
// placeholder off.
func (s *Server) closeEarlier(ctx context.Context, id int64, c *conn, reg protocol.Register) error {
	s.phConnMu.Lock()
	old := s.phConn[id]
	s.phConnMu.Unlock()
	if old == nil || old == c || old.identity != c.identity {
		return nil
	}
	old.phMu.Lock()
	was, ok := old.phs[id]
	old.phMu.Unlock()
	if !ok || was.Site != reg.Site || was.Host != reg.Host {
		return nil
	}
	old.cancel()
	old.rwc.Close()
	t := time.NewTimer(closeGrace)
	defer t.Stop()
	select {
	case <-old.done:
	case <-t.C:
		c.log.Warn("a placeholder's earlier connection did not close in time; registering it again anyway", "placeholder", id)
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}
