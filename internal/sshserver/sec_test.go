package sshserver

import (
	"context"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/protocol"
)

// TestSecChannelsUnbounded: the bounds on authenticated SSH connections
// (PerKey, Conns) count connections, but one connection may open any
// number of session channels, and each mq subsystem channel is a whole
// protocol connection (server.ServePeer) with its own bounds: 64
// requests in progress, 4 parked polls, 4 registrations. With PerKey 1,
// one placeholder key still registers 4 placeholders per channel on
// as many channels as it likes: the "one key parks at most 4,096" of
// security.md does not hold, and a key's memory and goroutines at the
// CLS are unbounded.
func TestSecChannelsUnbounded(t *testing.T) {
	t.Skip("finding: SSH channels per connection are unbounded; each mq channel is a full protocol connection")
	t.Parallel()
	c := newCLS(t, func(s *Server) { s.PerKey = 1 })
	signer := c.keyNamed(protocol.RolePlaceholder, "a")
	sc := c.dial(t, signer)
	const channels = 50
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	registered := 0
	for range channels {
		ch, reqs, err := sc.OpenChannel("session", nil)
		if err != nil {
			t.Fatalf("channel %d: %v", registered/4, err)
		}
		go ssh.DiscardRequests(reqs)
		if ok, err := ch.SendRequest("subsystem", true, ssh.Marshal(struct{ Value string }{Subsystem})); err != nil || !ok {
			t.Fatalf("subsystem: %v %v", ok, err)
		}
		cl, err := client.New(ctx, ch, protocol.RolePlaceholder, "test")
		if err != nil {
			t.Fatalf("hello: %v", err)
		}
		t.Cleanup(func() { cl.Close() })
		for range 4 {
			if _, err := client.Do(ctx, cl, protocol.OpRegister, protocol.Register{Site: "s", Host: "h", Slots: 1}); err != nil {
				t.Fatalf("register: %v", err)
			}
			registered++
		}
	}
	if registered > 4 {
		t.Fatalf("one key with PerKey 1 registered %d placeholders over %d channels of one connection", registered, channels)
	}
}
