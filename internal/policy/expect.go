package policy

import "math"

// Expect is SJF's expectation rule: a job's declared estimate if it has
// one, else the mean runtime of finished jobs of the same group (target or
// command name), else unknown (0, which SJF orders last). The zero value is
// ready to use; it is not safe for concurrent use.
type Expect struct {
	groups map[string]*mean
}

type mean struct {
	sum float64
	n   int
}

// Observe records that a job of group ran for seconds.
func (e *Expect) Observe(group string, seconds float64) { e.Load(group, seconds, 1) }

// Load adds n observations summing to seconds, as n calls of Observe would
// (a restarted CLS loads what earlier runs saw).
func (e *Expect) Load(group string, seconds float64, n int) {
	if n <= 0 || seconds < 0 || math.IsNaN(seconds) || math.IsInf(seconds, 0) {
		return
	}
	if e.groups == nil {
		e.groups = make(map[string]*mean)
	}
	m := e.groups[group]
	if m == nil {
		m = &mean{}
		e.groups[group] = m
	}
	m.sum += seconds
	m.n += n
}

// Estimate returns the expected runtime of a job of group that declared
// estimate seconds (0 = none declared).
func (e *Expect) Estimate(group string, estimate float64) float64 {
	if estimate > 0 {
		return estimate
	}
	if m := e.groups[group]; m != nil && m.n > 0 {
		return m.sum / float64(m.n)
	}
	return 0
}

// Arrivals predicts when placeholders will next ask for work from the mean
// time between their past requests, as the thesis does (section 6.3). The
// zero value is ready to use; it is not safe for concurrent use.
type Arrivals struct {
	ph  []arrivalStats // in order of first arrival, so predictions are deterministic
	idx map[int64]int  // ph's index by id: a scan per request cost O(placeholders)
}

type arrivalStats struct {
	id        int64
	site      Site
	last, sum float64
	n         int // intervals seen
}

func (a *Arrivals) find(ph int64) int {
	if i, ok := a.idx[ph]; ok {
		return i
	}
	return -1
}

// Observe records that placeholder ph, running at site, asked for work at
// time now (seconds on any clock that only moves forward).
func (a *Arrivals) Observe(ph int64, site Site, now float64) {
	i := a.find(ph)
	if i < 0 {
		if a.idx == nil {
			a.idx = make(map[int64]int)
		}
		a.idx[ph] = len(a.ph)
		a.ph = append(a.ph, arrivalStats{id: ph, site: site, last: now})
		return
	}
	s := &a.ph[i]
	if now >= s.last {
		s.sum += now - s.last
		s.n++
	}
	s.site, s.last = site, now
}

// Forget drops a placeholder that has gone (its lease ended).
func (a *Arrivals) Forget(ph int64) {
	if i := a.find(ph); i >= 0 {
		a.ph = append(a.ph[:i], a.ph[i+1:]...)
		delete(a.idx, ph)
		for j := i; j < len(a.ph); j++ {
			a.idx[a.ph[j].id] = j
		}
	}
}

// Predict appends to dst every known placeholder's next arrival except
// exclude's (the one asking now), in seconds from now. A placeholder seen
// only once has no interval yet and is left out; one that is overdue is
// predicted to arrive now.
func (a *Arrivals) Predict(now float64, exclude int64, dst []Arrival) []Arrival {
	for i := range a.ph {
		s := &a.ph[i]
		if s.id == exclude || s.n == 0 {
			continue
		}
		next := s.last + s.sum/float64(s.n) - now
		dst = append(dst, Arrival{Site: s.site, In: max(next, 0), Placeholder: s.id})
	}
	return dst
}
