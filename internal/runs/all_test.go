package runs

import (
	"maps"
	"slices"
	"testing"
)

func TestAll(t *testing.T) {
	a, b, c := &Run{Placeholder: 1}, &Run{Placeholder: 2}, &Run{Placeholder: 1, Attempt: 2}
	for _, tc := range []struct {
		name  string
		rows  Rows
		cs    Copies
		n     int
		perPH map[int64]int
		jobs  []int64
	}{
		{"none", nil, nil, 0, map[int64]int{}, []int64{}},
		{"rows", Rows{11: b, 10: a}, nil, 2, map[int64]int{1: 1, 2: 1}, []int64{10, 11}},
		{"rows and copies", Rows{10: a}, Copies{10: {c}, 12: {b, c}}, 4, map[int64]int{1: 3, 2: 1}, []int64{10, 12}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			for range All(tc.rows, tc.cs) {
				n++
			}
			if n != tc.n {
				t.Errorf("All yields %d attempts, want %d", n, tc.n)
			}
			if got := PerPlaceholder(tc.rows, tc.cs); !maps.Equal(got, tc.perPH) {
				t.Errorf("PerPlaceholder = %v, want %v", got, tc.perPH)
			}
			if got := Jobs(tc.rows, tc.cs); !slices.Equal(got, tc.jobs) {
				t.Errorf("Jobs = %v, want %v", got, tc.jobs)
			}
		})
	}
	stopped := 0
	for range All(Rows{10: a, 11: b}, Copies{10: {c}}) {
		stopped++
		break
	}
	if stopped != 1 {
		t.Errorf("All went on after a break: %d", stopped)
	}
}
