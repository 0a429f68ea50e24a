// Package job declares the states a metaqueue job moves through and the
// small facts about jobs that every other package shares.
package job

import "fmt"

// State is a job's state, stored and shown as one letter (after PBS qstat).
type State byte

const (
	// Waiting: some prerequisite target is not complete yet (or has no jobs
	// yet). The metaqueue moves it to Queued when they all complete, or to
	// Blocked when one of them fails.
	Waiting State = 'W'
	// Queued: ready to run. A placeholder's request moves it to Executing;
	// a prerequisite target re-opened by a new job moves it back to Waiting.
	Queued State = 'Q'
	// Executing: handed to a placeholder under a lease. A report moves it to
	// Done or Failed (or back to Queued for a retry); an expired lease moves it
	// back to Queued (or Failed when its attempts are used up); mqdel to Deleted.
	Executing State = 'E'
	// Done: exited 0. Terminal unless the user reruns it.
	Done State = 'D'
	// Failed: non-zero exit (or lost, or over its queue's ceiling) with no
	// attempts left. Terminal unless rerun; its dependents become Blocked.
	Failed State = 'F'
	// Blocked: a prerequisite target has a Failed, Deleted or Blocked job.
	// Returns to Waiting/Queued by itself when that job is rerun.
	Blocked State = 'B'
	// Deleted by mqdel. Terminal unless rerun; dependents become Blocked.
	Deleted State = 'X'
	// Held: kept from running by mqhold (or submitted with mqsub -H) until
	// mqrls releases it to whatever its prerequisites say (Queued, Waiting
	// or Blocked). Never dispatched; its target is incomplete, so its
	// dependents wait. Only Waiting and Queued jobs can be held; mqdel
	// deletes a held job as any other live one.
	Held State = 'H'
	// Prefetched: Executing, handed to a placeholder that fetched it
	// ahead of a free slot and has not said it started it. Shown, never
	// stored as a state nor in the graph: the row is E with its
	// prefetched mark, set by dispatch and cleared by the placeholder's
	// next message (or its report). A job handed back unstarted goes to
	// Queued; one whose placeholder vanishes is treated as any Executing
	// one. Selectors that act on jobs (mqdel -s) take E for both (P alone
	// is refused: only E can be acted on); mqstat -s P lists P jobs alone.
	Prefetched State = 'P'
)

// States lists every state in display order.
var States = []State{Waiting, Queued, Held, Prefetched, Executing, Done, Failed, Blocked, Deleted}

// ParseState reads one state letter.
func ParseState(c byte) (State, error) {
	s := State(c)
	if !s.Valid() {
		return 0, fmt.Errorf("unknown job state %q (want one of WQHPEDFBX)", string(c))
	}
	return s, nil
}

// ParseStates reads a set of state letters such as "QE".
func ParseStates(s string) ([]State, error) {
	if s == "" {
		return nil, fmt.Errorf("empty state list (want letters from WQHPEDFBX)")
	}
	var out []State
	for i := 0; i < len(s); i++ {
		st, err := ParseState(s[i])
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// Valid reports whether s is one of the declared states.
func (s State) Valid() bool {
	switch s {
	case Waiting, Queued, Held, Prefetched, Executing, Done, Failed, Blocked, Deleted:
		return true
	}
	return false
}

func (s State) String() string { return string(rune(s)) }

// Name is the state's long name.
func (s State) Name() string {
	switch s {
	case Waiting:
		return "waiting"
	case Queued:
		return "queued"
	case Executing:
		return "executing"
	case Done:
		return "done"
	case Failed:
		return "failed"
	case Blocked:
		return "blocked"
	case Deleted:
		return "deleted"
	case Held:
		return "held"
	case Prefetched:
		return "prefetched"
	}
	return "unknown"
}

// Pending reports whether the job has not started: its state is derived
// from its prerequisites (Waiting, Queued or Blocked).
func (s State) Pending() bool { return s == Waiting || s == Queued || s == Blocked }

// Terminal reports whether the job has ended (only a rerun revives it).
func (s State) Terminal() bool { return s == Done || s == Failed || s == Deleted }

// Bad reports whether a job in this state keeps its target from ever
// completing until the user acts: its target's dependents are Blocked.
func (s State) Bad() bool { return s == Failed || s == Deleted || s == Blocked }
