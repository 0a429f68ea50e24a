package sshserver

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/protocol"
)

// TestSessionsPerConnection: one connection serves one mq subsystem at a
// time and at most Sessions session channels at once, so a key's bounds
// on connections bound its protocol connections too: with PerKey 1, one
// placeholder key registers no more than the 4 placeholders of one
// protocol connection, however many channels it opens.
func TestSessionsPerConnection(t *testing.T) {
	t.Parallel()
	c := newCLS(t, func(s *Server) { s.PerKey, s.Sessions = 1, 3 })
	sc := c.dial(t, c.keyNamed(protocol.RolePlaceholder, "a"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	subsystem := func() (ssh.Channel, bool) {
		t.Helper()
		ch, reqs, err := sc.OpenChannel("session", nil)
		if err != nil {
			t.Fatalf("session: %v", err)
		}
		go ssh.DiscardRequests(reqs)
		ok, err := ch.SendRequest("subsystem", true, ssh.Marshal(struct{ Value string }{Subsystem}))
		if err != nil && !errors.Is(err, io.EOF) {
			t.Fatalf("subsystem: %v", err)
		}
		return ch, ok
	}
	ch, ok := subsystem()
	if !ok {
		t.Fatal("the connection's first mq subsystem was refused")
	}
	cl, err := client.New(ctx, ch, protocol.RolePlaceholder, "test")
	if err != nil {
		t.Fatalf("hello: %v", err)
	}
	defer cl.Close()
	for range 4 {
		if _, err := client.Do(ctx, cl, protocol.OpRegister, protocol.Register{Site: "s", Host: "h", Slots: 1}); err != nil {
			t.Fatalf("register: %v", err)
		}
	}
	if _, ok := subsystem(); ok {
		t.Fatal("a second mq subsystem on the connection was served while the first is open")
	}
	// Sessions open at once: the subsystem and two undecided ones; the
	// next channel is refused.
	for range 2 {
		ch, reqs, err := sc.OpenChannel("session", nil)
		if err != nil {
			t.Fatalf("session within the bound: %v", err)
		}
		go ssh.DiscardRequests(reqs)
		defer ch.Close()
	}
	var oce *ssh.OpenChannelError
	if _, _, err := sc.OpenChannel("session", nil); !errors.As(err, &oce) || oce.Reason != ssh.ResourceShortage {
		t.Fatalf("a session beyond the bound of 3: %v, want refused for resource shortage", err)
	}
	// The first subsystem still serves.
	if _, err := client.Do(ctx, cl, protocol.OpRegister, protocol.Register{Site: "s", Host: "h", Slots: 1}); !protocol.IsCode(err, protocol.CodeBusy) {
		t.Fatalf("a fifth registration: %v, want busy", err)
	}
}
