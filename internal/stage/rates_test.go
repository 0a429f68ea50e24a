package stage

import (
	"math"
	"testing"
	"time"
)

func TestRates(t *testing.T) {
	const lat, bw = 0.02, 50e6 // 20 ms, 50 MB/s
	took := func(bytes int64) time.Duration {
		return time.Duration((lat + float64(bytes)/bw) * float64(time.Second))
	}
	near := func(got, want float64) bool { return math.Abs(got-want) <= 0.05*want }
	for _, c := range []struct {
		name    string
		obs     []int64 // sizes, each taking took(size)
		lat, bw float64 // want; 0 = unmeasured
	}{
		{"none", nil, 0, 0},
		{"small only", []int64{1000, 10 << 10, 100}, lat, 0},
		{"large only", []int64{1 << 30}, 0, bw},
		{"mixed", []int64{100, 1 << 30, 2000, 200 << 20, 10 << 10, 1 << 30}, lat, bw},
		{"middle ignored", []int64{500 << 10}, 0, 0},
	} {
		var r Rates
		for _, b := range c.obs {
			r.Observe("s", b, took(b))
		}
		r.Observe("s", 1, 0) // no time: ignored
		gl, gb, ok := r.Link("s")
		if ok != (c.lat > 0 || c.bw > 0) {
			t.Errorf("%s: ok = %v", c.name, ok)
		}
		// Small transfers before the bandwidth is known count their
		// bytes as latency: a bias of well under 5% here.
		if (c.lat == 0) != (gl == 0) || c.lat > 0 && !near(gl, c.lat) {
			t.Errorf("%s: latency %g, want %g", c.name, gl, c.lat)
		}
		if (c.bw == 0) != (gb == 0) || c.bw > 0 && !near(gb, c.bw) {
			t.Errorf("%s: bandwidth %g, want %g", c.name, gb, c.bw)
		}
	}
	var r Rates
	if _, _, ok := r.Link("nowhere"); ok {
		t.Error("zero Rates has a link")
	}
	// The estimate follows a link that gets slower.
	for range 20 {
		r.Observe("s", 1<<30, 10*time.Second)
	}
	for range 20 {
		r.Observe("s", 1<<30, 100*time.Second)
	}
	if _, b, _ := r.Link("s"); !near(b, float64(1<<30)/100) {
		t.Errorf("after a slowdown: bandwidth %g, want %g", b, float64(1<<30)/100)
	}
}
