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
	// session opens a session channel, waiting while the connection is at
	// its bound: the server counts a closed one out after it closes.
	session := func() ssh.Channel {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
			ch, reqs, err := sc.OpenChannel("session", nil)
			if err == nil {
				go ssh.DiscardRequests(reqs)
				return ch
			}
			if time.Now().After(deadline) {
				t.Fatalf("session: %v", err)
			}
		}
	}
	subsystem := func(ch ssh.Channel) bool {
		t.Helper()
		ok, err := ch.SendRequest("subsystem", true, ssh.Marshal(struct{ Value string }{Subsystem}))
		if err != nil && !errors.Is(err, io.EOF) {
			t.Fatalf("subsystem: %v", err)
		}
		return ok
	}
	ch := session()
	if !subsystem(ch) {
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
	// Sessions open at once: the subsystem and two undecided ones (none
	// closing meanwhile); the next channel is refused.
	undecided := []ssh.Channel{session(), session()}
	defer undecided[1].Close()
	var oce *ssh.OpenChannelError
	if _, _, err := sc.OpenChannel("session", nil); !errors.As(err, &oce) || oce.Reason != ssh.ResourceShortage {
		t.Fatalf("a session beyond the bound of 3: %v, want refused for resource shortage", err)
	}
	// A place freed: a session again, but no second mq subsystem while the
	// first is open.
	undecided[0].Close()
	if subsystem(session()) {
		t.Fatal("a second mq subsystem on the connection was served while the first is open")
	}
	// The first subsystem still serves.
	if _, err := client.Do(ctx, cl, protocol.OpRegister, protocol.Register{Site: "s", Host: "h", Slots: 1}); !protocol.IsCode(err, protocol.CodeBusy) {
		t.Fatalf("a fifth registration: %v, want busy", err)
	}
}
