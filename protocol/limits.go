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
