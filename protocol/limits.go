package protocol

import (
	"fmt"
	"math"
	"time"
)

// MaxSeconds bounds every duration a request may carry (about 31 years).
// Converted to a time.Duration (nanoseconds in an int64, at most about 292
// years) it cannot overflow: `--ceiling 1e10` once became a negative
// duration that killed every job at once.
const MaxSeconds = 1e9

// CheckSeconds checks a duration in seconds: a finite number in
// 0..MaxSeconds. what names it in the error.
func CheckSeconds(what string, s float64) error {
	if !(s >= 0 && s <= MaxSeconds) { // also NaN
		return fmt.Errorf("%s must be 0..%g seconds (about 31 years), not %g", what, float64(MaxSeconds), s)
	}
	return nil
}

// MaxBudget is the largest budget a queue may have.
const MaxBudget = 1e15

// CheckDeadline checks a deadline in Unix seconds (0: none).
func CheckDeadline(t float64) error {
	if !(t >= 0 && t <= 1e11) { // also NaN
		return fmt.Errorf("deadline must be 0 (none) or Unix seconds up to 1e11, not %g", t)
	}
	return nil
}

// CheckBudget checks a budget (0: none).
func CheckBudget(b float64) error {
	if !(b >= 0 && b <= MaxBudget) { // also NaN
		return fmt.Errorf("budget must be 0..%g (0 = none), not %g", float64(MaxBudget), b)
	}
	return nil
}

// MaxQueueOutput is the largest per-queue output cap: 1 TiB, far above
// any placeholder's own (the smaller applies).
const MaxQueueOutput = 1 << 40

// CheckQueueOutput checks a queue's output cap in bytes (0: none).
func CheckQueueOutput(n int64) error {
	if n < 0 || n > MaxQueueOutput {
		return fmt.Errorf("max output must be 0..%d bytes (0 = none but the placeholder's), not %d", int64(MaxQueueOutput), n)
	}
	return nil
}

// CheckMillis checks a duration in milliseconds as CheckSeconds does.
func CheckMillis(what string, ms int64) error {
	if ms < 0 || ms > MaxSeconds*1000 {
		return fmt.Errorf("%s must be 0..%d milliseconds, not %d", what, int64(MaxSeconds*1000), ms)
	}
	return nil
}

// Duration converts seconds to a time.Duration, saturating: NaN and
// negative values give 0, values beyond its range the longest Duration.
// Peers check what they send; this keeps one that did not from turning a
// long limit into a negative one.
func Duration(s float64) time.Duration {
	switch {
	case !(s > 0):
		return 0
	case s >= float64(math.MaxInt64)/float64(time.Second):
		return math.MaxInt64
	}
	return time.Duration(s * float64(time.Second))
}

// NextsPerConn is how many next requests a placeholder may have in
// progress on one connection: its long poll, and reports that ask for
// the work they make ready. The CLS refuses more (CodeBusy), by default
// at exactly this bound; an agent stays within it.
const NextsPerConn = 4

// The range of a job's priority (qsub -p's): higher runs first.
const (
	MinPriority = -1024
	MaxPriority = 1023
)

// CheckPriority checks a job's priority.
func CheckPriority(p int) error {
	if p < MinPriority || p > MaxPriority {
		return fmt.Errorf("priority must be %d..%d, not %d", MinPriority, MaxPriority, p)
	}
	return nil
}
