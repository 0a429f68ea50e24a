package stage

import (
	"sync"
	"time"
)

// Rates estimates each place's link to the CLS from the transfers seen:
// a latency (seconds) and a bandwidth (bytes per second), fitting
//
//	time = latency + bytes/bandwidth
//
// with two exponentially weighted moving averages (weight RatesAlpha for
// the newest sample). A small transfer (at most SmallBytes) is almost all
// latency: it gives a latency sample, its duration less the time its bytes
// take at the bandwidth known so far. A large one (at least LargeBytes) is
// almost all bandwidth: it gives a bandwidth sample, its bytes over its
// duration less the latency known so far (never less than half the
// duration, so a latency estimate too high cannot make the bandwidth
// absurd). Transfers in between, and ones that took no time, are not
// used: they would mostly add noise. The zero value is ready to use and
// safe for concurrent use.
type Rates struct {
	mu    sync.Mutex
	links map[string]*link
}

// Thresholds and weight of the estimator.
const (
	SmallBytes = 64 << 10
	LargeBytes = 1 << 20
	RatesAlpha = 0.25
)

type link struct {
	latency, bandwidth float64
	nLat, nBW          int
}

func ewma(old float64, n int, sample float64) float64 {
	if n == 0 {
		return sample
	}
	return old + RatesAlpha*(sample-old)
}

// Observe records that bytes moved to or from place in d.
func (r *Rates) Observe(place string, bytes int64, d time.Duration) {
	if d <= 0 || bytes < 0 {
		return
	}
	s := d.Seconds()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.links == nil {
		r.links = make(map[string]*link)
	}
	l := r.links[place]
	if l == nil {
		l = &link{}
		r.links[place] = l
	}
	switch {
	case bytes <= SmallBytes:
		lat := s
		if l.nBW > 0 {
			lat = max(0, s-float64(bytes)/l.bandwidth)
		}
		l.latency = ewma(l.latency, l.nLat, lat)
		l.nLat++
	case bytes >= LargeBytes:
		t := max(s-l.latency, s/2)
		l.bandwidth = ewma(l.bandwidth, l.nBW, float64(bytes)/t)
		l.nBW++
	}
}

// Link returns place's estimated latency (seconds) and bandwidth (bytes
// per second); each is 0 until measured, and ok reports whether either
// is, so a caller keeps its configured prior for what is still 0.
func (r *Rates) Link(place string) (latency, bandwidth float64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.links[place]
	if l == nil {
		return 0, 0, false
	}
	return l.latency, l.bandwidth, l.nLat > 0 || l.nBW > 0
}
