// Package sim is a deterministic discrete-event simulation of placeholder
// scheduling (thesis 004, section 6.2): hosts whose batch queues alternate
// our placeholders with another user's jobs, one CLS serving one request at
// a time, file transfers by scp, and a workflow of jobs with input and
// output files. The scheduling decisions are made by package policy, the
// same code the live CLS runs.
package sim

import "math/rand/v2"

// event is something that happens at virtual time t. seq breaks ties in
// the order events were scheduled, so a run is deterministic.
type event struct {
	t    float64
	seq  uint64
	kind eventKind
	who  int32 // host or placeholder index, by kind
}

type eventKind uint8

const (
	evHostTurn eventKind = iota // a host's batch queue starts our next placeholder
	evArrive                    // a placeholder's request reaches the CLS
	evServed                    // the CLS finished serving the request at the head of its queue
	evReply                     // the CLS's reply reaches a placeholder
	evStaged                    // live staging: a transfer ended (who: its index)
	evJobEnd                    // resources modelled: a job ended on its placeholder (who: the job)
)

// clock is the virtual clock and its pending events: a binary heap of
// values (no interface calls, no allocation once grown).
type clock struct {
	now    float64
	seq    uint64
	events []event
	fired  uint64
}

func (c *clock) at(t float64, kind eventKind, who int32) {
	c.seq++
	c.events = append(c.events, event{t: t, seq: c.seq, kind: kind, who: who})
	// sift up
	h := c.events
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h[i].before(h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (c *clock) after(d float64, kind eventKind, who int32) { c.at(c.now+d, kind, who) }

func (a event) before(b event) bool {
	return a.t < b.t || (a.t == b.t && a.seq < b.seq)
}

// next removes the earliest event and advances the clock to it.
func (c *clock) next() (event, bool) {
	h := c.events
	n := len(h)
	if n == 0 {
		return event{}, false
	}
	top := h[0]
	n--
	h[0] = h[n]
	h = h[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h[r].before(h[l]) {
			m = r
		}
		if !h[m].before(h[i]) {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	c.events = h
	c.now = top.t
	c.fired++
	return top, true
}

// newRand is the run's random source: PCG, seeded, so runs repeat.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5171_0006)) }
