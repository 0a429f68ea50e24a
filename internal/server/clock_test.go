package server

import (
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// TestRepliesSayClock: the replies a placeholder gets regularly say the
// CLS's clock as they go, a long poll's after its wait, so that the agent
// knows how far its own is off for the reports it may have to spool.
func TestRepliesSayClock(t *testing.T) {
	t.Parallel()
	srv := &Server{Store: newStore(t)}
	p := connect(t, srv, protocol.RolePlaceholder)
	p.hello(protocol.RolePlaceholder)
	var reg protocol.RegisterReply
	var next protocol.NextReply
	var hb protocol.HeartbeatReply
	for _, tc := range []struct {
		name  string
		call  func()
		clock *time.Time
		wait  time.Duration
	}{
		{"register", func() {
			p.do(protocol.OpRegister.Name, protocol.Register{Site: "s", Host: "h", PID: 1, Slots: 1, OutDir: "/o"}, &reg)
		}, &reg.Clock, 0},
		{"next", func() {
			p.do(protocol.OpNext.Name, protocol.Next{Placeholder: reg.ID, Free: 1, WaitMS: 300}, &next)
		}, &next.Clock, 300 * time.Millisecond},
		{"heartbeat", func() {
			p.do(protocol.OpHeartbeat.Name, protocol.Heartbeat{Placeholder: reg.ID}, &hb)
		}, &hb.Clock, 0},
	} {
		before := time.Now()
		tc.call()
		after := time.Now()
		// A millisecond's slack: the reply's clock, decoded, is compared
		// by the wall clock alone, the test's readings by the monotonic.
		if c := *tc.clock; c.Before(before.Add(tc.wait-time.Millisecond)) || c.After(after.Add(time.Millisecond)) {
			t.Errorf("%s: reply says clock %v, want between %v and %v", tc.name, c, before.Add(tc.wait), after)
		}
	}
}
