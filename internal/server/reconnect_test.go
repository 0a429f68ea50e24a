package server

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// TestReconnectClosesEarlier: a placeholder registering again with its
// id (same key, site and host) ends its earlier connection, which the
// server still takes for alive, before the store hears of it: the
// earlier connection's disconnect comes before the new registration.
// Another key, or another host, naming the id ends nothing.
func TestReconnectClosesEarlier(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var events []bool // placeholder 1's registrations (true) and disconnects
	srv := &Server{Store: newStore(t), OnPlaceholder: func(id int64, _ protocol.Register, connected bool) {
		mu.Lock()
		defer mu.Unlock()
		if id == 1 {
			events = append(events, connected)
		}
	}}
	reg := protocol.Register{Site: "s", Host: "h", Slots: 1}
	key := Peer{MaxRole: protocol.RolePlaceholder, Identity: "ssh-key:SHA256:a"}
	first := connectAs(t, srv, key)
	first.hello(protocol.RolePlaceholder)
	var r protocol.RegisterReply
	first.do(protocol.OpRegister.Name, reg, &r)
	if r.ID != 1 {
		t.Fatalf("registered as %d, want 1", r.ID)
	}

	again := reg
	again.ID, again.Holding = r.ID, []protocol.JobRef{}
	for _, tc := range []struct {
		name string
		who  Peer
		host string
	}{
		{"another key", Peer{MaxRole: protocol.RolePlaceholder, Identity: "ssh-key:SHA256:b"}, "h"},
		{"another host", key, "h2"},
	} {
		p := connectAs(t, srv, tc.who)
		p.hello(protocol.RolePlaceholder)
		other := again
		other.Host = tc.host
		var got protocol.RegisterReply
		p.do(protocol.OpRegister.Name, other, &got)
		if got.ID == r.ID {
			t.Fatalf("%s: reclaimed placeholder %d", tc.name, r.ID)
		}
		// The first connection still answers.
		first.do(protocol.OpHeartbeat.Name, protocol.Heartbeat{Placeholder: r.ID}, nil)
	}

	second := connectAs(t, srv, key)
	second.hello(protocol.RolePlaceholder)
	var got protocol.RegisterReply
	second.do(protocol.OpRegister.Name, again, &got)
	if got.ID != r.ID {
		t.Fatalf("registered again as %d, want %d", got.ID, r.ID)
	}
	select {
	case <-first.served:
	case <-time.After(patience):
		t.Fatal("the earlier connection was not ended")
	}
	second.do(protocol.OpHeartbeat.Name, protocol.Heartbeat{Placeholder: r.ID}, nil)
	mu.Lock()
	defer mu.Unlock()
	if want := []bool{true, false, true}; !slices.Equal(events, want) {
		t.Fatalf("placeholder 1's events %v, want %v (the earlier connection's end before the new registration)", events, want)
	}
}
