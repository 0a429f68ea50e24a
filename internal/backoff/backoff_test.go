package backoff

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestNext(t *testing.T) {
	const ms = time.Millisecond
	for _, tc := range []struct {
		name     string
		min, max time.Duration
		want     []time.Duration
	}{
		{"doubles up to the cap", 20 * ms, time.Second, []time.Duration{20 * ms, 40 * ms, 80 * ms, 160 * ms, 320 * ms, 640 * ms, time.Second, time.Second}},
		{"cap not a power of two away", 50 * ms, 5 * time.Second, []time.Duration{50 * ms, 100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 5 * time.Second, 5 * time.Second}},
		{"min above max", time.Minute, 30 * time.Second, []time.Duration{30 * time.Second, 30 * time.Second}},
		{"min equals max", time.Second, time.Second, []time.Duration{time.Second, time.Second}},
		{"zero", 0, 0, []time.Duration{0, 0}},
	} {
		b := Backoff{Min: tc.min, Max: tc.max}
		var got []time.Duration
		for range tc.want {
			got = append(got, b.Next())
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: delays %v, want %v", tc.name, got, tc.want)
		}
		b.Reset()
		if d := b.Next(); d != tc.want[0] {
			t.Errorf("%s: after Reset %v, want %v", tc.name, d, tc.want[0])
		}
	}
}

// Jitter adds up to the fraction on top of the doubled, capped delay, and a
// seeded source gives the same delays every time.
func TestJitter(t *testing.T) {
	seq := func() []time.Duration {
		b := Backoff{Min: 10 * time.Millisecond, Max: 80 * time.Millisecond, Jitter: 0.5, Rand: rand.New(rand.NewPCG(1, 2))}
		var out []time.Duration
		for range 50 {
			out = append(out, b.Next())
		}
		return out
	}
	got := seq()
	if again := seq(); !slices.Equal(got, again) {
		t.Errorf("same seed, different delays:\n%v\n%v", got, again)
	}
	base := 10 * time.Millisecond
	jittered := false
	for i, d := range got {
		if d < base || d > base+base/2 {
			t.Errorf("delay %d is %v, want %v..%v", i, d, base, base+base/2)
		}
		jittered = jittered || d != base
		base = min(2*base, 80*time.Millisecond)
	}
	if !jittered {
		t.Error("no delay had jitter")
	}
	// The global source stays within the same bounds.
	b := Backoff{Min: time.Second, Max: time.Second, Jitter: 0.5}
	for range 100 {
		if d := b.Next(); d < time.Second || d > 1500*time.Millisecond {
			t.Fatalf("delay %v out of 1s..1.5s", d)
		}
	}
}

func TestWait(t *testing.T) {
	b := Backoff{Min: time.Millisecond, Max: time.Millisecond}
	if err := b.Wait(context.Background()); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b = Backoff{Min: time.Hour, Max: time.Hour}
	if err := b.Wait(ctx); err != context.Canceled {
		t.Fatalf("Wait with an ended context: %v, want %v", err, context.Canceled)
	}
}
