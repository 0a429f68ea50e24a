package protocol

import (
	"math"
	"testing"
)

func TestReportKept(t *testing.T) {
	t.Parallel()
	good := Usage{CPUUser: 1, CPUSys: 2, MaxRSS: 3}
	tests := []struct {
		name string
		in   Usage
		want Usage
	}{
		{"measured", good, good},
		{"not measured", Usage{}, Usage{}},
		{"NaN CPU dropped", Usage{CPUUser: math.NaN(), MaxRSS: 1}, Usage{}},
		{"negative CPU dropped", Usage{CPUSys: -1, MaxRSS: 1}, Usage{}},
		{"negative rss dropped", Usage{MaxRSS: -1}, Usage{}},
	}
	for _, tt := range tests {
		r := Report{ID: 7, Reason: "x", Usage: tt.in}
		got := r.Kept()
		if got.Usage != tt.want || got.ID != 7 || got.Reason != "x" {
			t.Errorf("%s: Kept = %+v, want usage %+v", tt.name, got, tt.want)
		}
	}
}
