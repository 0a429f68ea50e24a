package dc

import "testing"

func TestRanLearn(t *testing.T) {
	names := map[int32]string{1: "build", 2: "test", 3: "none"}
	for _, tc := range []struct {
		name   string
		runs   [][2]int64 // target, micros
		target string
		est    float64 // declared
		want   float64
	}{
		{"nothing learned", nil, "build", 0, 0},
		{"one run", [][2]int64{{1, 2_000_000}}, "build", 0, 2},
		{"mean of runs", [][2]int64{{1, 1_000_000}, {1, 3_000_000}, {2, 10_000_000}}, "build", 0, 2},
		{"per target", [][2]int64{{1, 1_000_000}, {2, 10_000_000}}, "test", 0, 10},
		{"declared wins", [][2]int64{{1, 1_000_000}}, "build", 7, 7},
		{"other target", [][2]int64{{1, 1_000_000}}, "none", 0, 0},
	} {
		d := newState()
		var r Ran
		for _, run := range tc.runs {
			r.Add(int32(run[0]), run[1])
		}
		d.Learn(&r, func(t int32) string { return names[t] })
		if got := d.Estimate(tc.target, tc.est); got != tc.want {
			t.Errorf("%s: Estimate(%q, %v) = %v, want %v", tc.name, tc.target, tc.est, got, tc.want)
		}
	}
}
