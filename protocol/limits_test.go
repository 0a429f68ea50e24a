package protocol

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestCheckSeconds(t *testing.T) {
	for _, tc := range []struct {
		s  float64
		ok bool
	}{
		{0, true}, {1.5, true}, {MaxSeconds, true},
		{-1, false}, {MaxSeconds * 1.0001, false}, {1e10, false}, {math.NaN(), false}, {math.Inf(1), false}, {math.Inf(-1), false},
	} {
		err := CheckSeconds("ceiling", tc.s)
		if (err == nil) != tc.ok {
			t.Errorf("CheckSeconds(%g) = %v; want ok %v", tc.s, err, tc.ok)
		}
		if err != nil && (!strings.HasPrefix(err.Error(), "ceiling must be 0..") || strings.Contains(err.Error(), "\n")) {
			t.Errorf("CheckSeconds(%g): %q", tc.s, err)
		}
	}
	for _, tc := range []struct {
		ms int64
		ok bool
	}{{0, true}, {60000, true}, {MaxSeconds * 1000, true}, {-1, false}, {math.MaxInt64, false}} {
		if err := CheckMillis("timeout", tc.ms); (err == nil) != tc.ok {
			t.Errorf("CheckMillis(%d) = %v; want ok %v", tc.ms, err, tc.ok)
		}
	}
}

// Duration never wraps to a negative duration.
func TestDurationSaturates(t *testing.T) {
	for _, tc := range []struct {
		s    float64
		want time.Duration
	}{
		{0, 0}, {-5, 0}, {math.NaN(), 0}, {1.5, 1500 * time.Millisecond}, {MaxSeconds, MaxSeconds * time.Second},
		{1e10, math.MaxInt64}, {1e300, math.MaxInt64}, {math.Inf(1), math.MaxInt64},
	} {
		if got := Duration(tc.s); got != tc.want {
			t.Errorf("Duration(%g) = %v; want %v", tc.s, got, tc.want)
		}
	}
}
