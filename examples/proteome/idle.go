package main

import (
	"slices"
	"time"
)

// span is one job's run as its placeholder measured it.
type span struct{ start, end time.Time }

// idle splits a phase's idle slot time (slots x makespan - the jobs' own
// runtimes) by when it happened, in slot-seconds:
//
//	FirstStart  from the phase's start to the first job's start (every slot idle)
//	Ramp        from then until every slot is busy for the first time
//	Middle      between that and the last job's start: gaps between jobs
//	Tail        from the last job's start to the last job's end
//	EndLag      from the last job's end until the driver saw the phase end
//
// The loss fractions are each part / (slots x makespan); the speed-up by the
// jobs' own runtimes is slots x (1 - the sum of the fractions).
type idle struct {
	FirstStart float64 `json:"first_start_slot_s"`
	Ramp       float64 `json:"ramp_slot_s"`
	Middle     float64 `json:"middle_slot_s"`
	Tail       float64 `json:"tail_slot_s"`
	EndLag     float64 `json:"end_lag_slot_s"`
	// Loss is each part as a share of slots x makespan, in the order above.
	Loss [5]float64 `json:"loss"`
	// MaxRunning is the most jobs seen running at once (above slots means
	// the CLS's and the placeholders' clocks or reports disagree).
	MaxRunning int `json:"max_running"`
}

func idleBreakdown(start, end time.Time, slots int, spans []span) *idle {
	if len(spans) == 0 || !end.After(start) {
		return nil
	}
	type event struct {
		t time.Time
		d int
	}
	evs := make([]event, 0, 2*len(spans))
	var lastStart, lastEnd time.Time
	for _, s := range spans {
		evs = append(evs, event{s.start, +1}, event{s.end, -1})
		if s.start.After(lastStart) {
			lastStart = s.start
		}
		if s.end.After(lastEnd) {
			lastEnd = s.end
		}
	}
	// Ends before starts at the same instant: a slot handed on is not double-booked.
	slices.SortFunc(evs, func(a, b event) int {
		if c := a.t.Compare(b.t); c != 0 {
			return c
		}
		return a.d - b.d
	})
	first := evs[0].t
	if first.Before(start) {
		start = first // clocks: the CLS stamps starts, the driver the phase
	}
	if lastEnd.After(end) {
		end = lastEnd
	}
	out := &idle{}
	out.FirstStart = float64(slots) * first.Sub(start).Seconds()
	out.EndLag = float64(slots) * end.Sub(lastEnd).Seconds()
	running, full := 0, false
	prev := first
	for _, e := range evs {
		if dt := e.t.Sub(prev).Seconds(); dt > 0 {
			gap := float64(max(slots-running, 0)) * dt
			switch {
			case !prev.Before(lastStart):
				out.Tail += gap
			case !full:
				out.Ramp += gap
			default:
				out.Middle += gap
			}
		}
		prev = e.t
		running += e.d
		out.MaxRunning = max(out.MaxRunning, running)
		if running >= slots {
			full = true
		}
	}
	total := float64(slots) * end.Sub(start).Seconds()
	for i, v := range []float64{out.FirstStart, out.Ramp, out.Middle, out.Tail, out.EndLag} {
		out.Loss[i] = v / total
	}
	return out
}
