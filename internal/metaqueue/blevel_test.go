package metaqueue

import (
	"slices"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

func qspec(target string, est float64, prereqs ...string) protocol.JobSpec {
	return protocol.JobSpec{Queue: "q", Target: target, Command: "run " + target, Est: est, Prereqs: prereqs}
}

// A cp queue hands out the head of the longest remaining chain first, and
// re-ranks ready jobs when a later submit extends the chains behind them,
// however deep; a restart ranks the same.
func TestCPLongestChainFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setPolicy("q", "cp")
	// b-levels: x 1+10 = 11 (x declares nothing: 1 s), a 1+1+1 = 3, s 1.
	got := e.submit(qspec("s", 0), qspec("s", 0), qspec("s", 0), qspec("a", 0), qspec("b", 0, "a"), qspec("c", 0, "b"), qspec("x", 0), qspec("y", 10, "x"))
	s0, s1, s2, a, x := got[0], got[1], got[2], got[3], got[6]
	ph := e.register("site")
	first := e.next(ph, 2)
	if got, want := ids(first), []int64{x, a}; !slices.Equal(got, want) {
		t.Fatalf("first picks %v, want x %d then a %d", got, x, a)
	}
	e.report(ph, protocol.Report{ID: first[0].ID, Attempt: first[0].Attempt, Exit: 1}, protocol.Report{ID: first[1].ID, Attempt: first[1].Attempt, Exit: 1})

	more := e.submit(qspec("s", 0), qspec("a", 0), qspec("x", 0))
	s3, a2, x2 := more[0], more[1], more[2]
	// Later submits lengthen chains behind ready jobs: d after s makes every
	// s job 1+100; e after c (three targets down from a) makes a2 53.
	e.submit(qspec("d", 100, "s"))
	e.submit(qspec("e", 50, "c"))
	if got, want := ids(e.next(ph, 1)), []int64{s0}; !slices.Equal(got, want) {
		t.Fatalf("after the later submits picked %v, want s %v", got, want)
	}
	e.check()
	e.reopen()
	ph = e.register("site2")
	if got, want := ids(e.next(ph, 5)), []int64{s1, s2, s3, a2, x2}; !slices.Equal(got, want) {
		t.Fatalf("after a restart picked %v, want %v", got, want)
	}
	e.check()
}

// Switching a queue with ready jobs to cp ranks them; back to fcfs, the
// oldest goes first again.
func TestCPSwitch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	jobs := e.submit(qspec("s", 0), qspec("s", 0), qspec("a", 5), qspec("b", 5, "a"))
	e.setPolicy("q", "cp")
	ph := e.register("site")
	if got := ids(e.next(ph, 1)); !slices.Equal(got, []int64{jobs[2]}) {
		t.Fatalf("cp picked %v, want a %d", got, jobs[2])
	}
	e.setPolicy("q", "fcfs")
	if got := ids(e.next(ph, 1)); !slices.Equal(got, []int64{jobs[0]}) {
		t.Fatalf("fcfs picked %v, want %d", got, jobs[0])
	}
	e.check()
}
