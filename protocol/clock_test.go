package protocol

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// OnClock moves reports' times by how far the placeholder's clock is from
// the CLS's, only past MaxClockSkew, and leaves times not set unset.
func TestOnClock(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		clock time.Time
		want  time.Duration
	}{
		{"not said", time.Time{}, 0},
		{"in step", now, 0},
		{"a request's way", now.Add(-MaxClockSkew), 0},
		{"three hours ahead", now.Add(3 * time.Hour), -3 * time.Hour},
		{"a day behind", now.Add(-24 * time.Hour), 24 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			started := now.Add(-time.Minute)
			if !tc.clock.IsZero() {
				started = tc.clock.Add(-time.Minute)
			}
			reps := []Report{{ID: 1, Started: started, Finished: started.Add(time.Second)}, {ID: 2}}
			if got := OnClock(reps, tc.clock, now); got != tc.want {
				t.Fatalf("moved by %v, want %v", got, tc.want)
			}
			if want := started.Add(tc.want); !reps[0].Started.Equal(want) || reps[0].Finished.Sub(reps[0].Started) != time.Second {
				t.Errorf("report %+v: want started %v, a second long", reps[0], want)
			}
			if !reps[1].Started.IsZero() || !reps[1].Finished.IsZero() {
				t.Errorf("times not set were set: %+v", reps[1])
			}
		})
	}
}

// The CLS's clock travels in the replies a placeholder gets regularly,
// and only when said: a reply without it is what an older CLS sends,
// and reads back as not said.
func TestReplyClockWire(t *testing.T) {
	t.Parallel()
	clock := time.Date(2026, 1, 2, 15, 4, 5, 123456789, time.FixedZone("CLS", 3600))
	for _, tc := range []struct {
		name string
		said func(time.Time) any
		got  func([]byte) (time.Time, error)
	}{
		{"register", func(c time.Time) any { return RegisterReply{ID: 1, Clock: c} }, decodeClock[RegisterReply](func(r RegisterReply) time.Time { return r.Clock })},
		{"next", func(c time.Time) any { return NextReply{Clock: c} }, decodeClock[NextReply](func(r NextReply) time.Time { return r.Clock })},
		{"heartbeat", func(c time.Time) any { return HeartbeatReply{Clock: c} }, decodeClock[HeartbeatReply](func(r HeartbeatReply) time.Time { return r.Clock })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := json.Marshal(tc.said(clock))
			if err != nil {
				t.Fatal(err)
			}
			if got, err := tc.got(data); err != nil || !got.Equal(clock) {
				t.Errorf("%s read back as clock %v, %v; want %v", data, got, err, clock)
			}
			data, err = json.Marshal(tc.said(time.Time{}))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(data), "clock") {
				t.Errorf("a clock not said is sent: %s", data)
			}
			if got, err := tc.got(data); err != nil || !got.IsZero() {
				t.Errorf("%s read back as clock %v, %v; want none", data, got, err)
			}
		})
	}
}

func decodeClock[R any](clock func(R) time.Time) func([]byte) (time.Time, error) {
	return func(data []byte) (time.Time, error) {
		var r R
		err := json.Unmarshal(data, &r)
		return clock(r), err
	}
}
