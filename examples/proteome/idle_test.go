package main

import (
	"math"
	"testing"
	"time"
)

func TestIdleBreakdown(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// Two slots, phase 0-100 ms. Jobs: [10,50] and [20,60] (ramp 10 ms x1 =
	// 0.010 after 10 ms x2 = 0.020 first start), a gap on one slot 50-55,
	// [55,90] starts last: the other slot, free at 60, idles to 90 (tail); end lag 90-100.
	spans := []span{{at(10), at(50)}, {at(20), at(60)}, {at(55), at(90)}}
	got := idleBreakdown(at(0), at(100), 2, spans)
	want := idle{FirstStart: 0.020, Ramp: 0.010, Middle: 0.005, Tail: 0.030, EndLag: 0.020, MaxRunning: 2}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if !near(got.FirstStart, want.FirstStart) || !near(got.Ramp, want.Ramp) || !near(got.Middle, want.Middle) ||
		!near(got.Tail, want.Tail) || !near(got.EndLag, want.EndLag) || got.MaxRunning != want.MaxRunning {
		t.Fatalf("idleBreakdown = %+v, want %+v", *got, want)
	}
	// The parts and the work add up to slots x makespan.
	work := 0.040 + 0.040 + 0.035
	sum := got.FirstStart + got.Ramp + got.Middle + got.Tail + got.EndLag + work
	if !near(sum, 2*0.100) {
		t.Errorf("idle + work = %v, want %v", sum, 0.2)
	}
	if idleBreakdown(at(0), at(100), 2, nil) != nil {
		t.Errorf("no jobs: want nil")
	}
}
