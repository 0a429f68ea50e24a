package server

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// TestRegistrationsPipelined: the bound on placeholders per connection
// (Limits.Registrations) holds for registrations sent back to back,
// which all arrive before the first is recorded (a registration under
// way holds its place).
func TestRegistrationsPipelined(t *testing.T) {
	t.Parallel()
	srv := &Server{Store: newStore(t)}
	p := connect(t, srv, protocol.RolePlaceholder)
	p.hello(protocol.RolePlaceholder)
	const n = DefaultPlaceholderInFlight
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = p.send(protocol.OpRegister.Name, protocol.Register{Site: "s", Host: "h", Slots: 1})
	}
	ok := 0
	for _, id := range ids {
		if r := p.recv(id); r.Err == nil {
			ok++
		}
	}
	if ok > DefaultRegistrations {
		t.Fatalf("%d registrations on one connection went through; the bound is %d", ok, DefaultRegistrations)
	}
}

// TestInternalRepliesLogLimited: requests answered internal are logged
// through the limiter, the first of a kind and then a count, not a line
// each: while the database's disk has no room every next, report,
// registration and submit is answered so, and a line each would fill the
// room freed for deletes. A routed op stands in for the core's answer.
func TestInternalRepliesLogLimited(t *testing.T) {
	t.Parallel()
	var buf syncBuf
	srv := &Server{Store: newStore(t), Log: slog.New(slog.NewTextHandler(&buf, nil)), Limits: Limits{LogWindow: time.Hour}}
	Route(srv, protocol.OpSiteList, func(context.Context, protocol.Empty) (protocol.SiteList, error) {
		return protocol.SiteList{}, protocol.Errorf(protocol.CodeInternal, "metaqueue storage failure: database or disk is full (13): nothing was changed; free space on the filesystem of /home/u/.mq and try again")
	})
	// One peer asking 2,000 times, then 200 peers (a fleet of
	// placeholders, each its own key) asking once each.
	p := connect(t, srv, protocol.RoleUser)
	p.hello("")
	const n, peers = 2000, 200
	for range n {
		p.fails(protocol.OpSiteList.Name, nil, protocol.CodeInternal)
	}
	for i := range peers {
		q := connectAs(t, srv, Peer{MaxRole: protocol.RoleUser, Identity: fmt.Sprintf("ssh-key:SHA256:%d", i)})
		q.hello("")
		q.fails(protocol.OpSiteList.Name, nil, protocol.CodeInternal)
	}
	srv.FlushLog()
	if lines := strings.Count(buf.String(), "\n"); lines > 10 {
		t.Fatalf("%d requests answered internal made %d log lines (%d bytes)", n+peers, lines, len(buf.String()))
	}
}
