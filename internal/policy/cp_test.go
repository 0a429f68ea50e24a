package policy

import (
	"slices"
	"testing"
)

func TestBLevels(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		est     []float64
		prereqs [][]int32
		want    []float64
		ok      bool
	}{
		{"empty", nil, nil, []float64{}, true},
		{"unknown counts one second", []float64{0}, [][]int32{nil}, []float64{1}, true},
		// 0 -> 1 -> 2 chain, 3 independent.
		{"chain", []float64{2, 3, 4, 10}, [][]int32{nil, {0}, {1}, nil}, []float64{9, 7, 4, 10}, true},
		// diamond: 0 feeds 1 and 2, both feed 3; the longer branch counts.
		{"diamond", []float64{1, 5, 2, 1}, [][]int32{nil, {0}, {0}, {1, 2}}, []float64{7, 6, 3, 1}, true},
		{"cycle", []float64{1, 1}, [][]int32{{1}, {0}}, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, ok := BLevels(tc.est, tc.prereqs)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if ok && !slices.Equal(b, tc.want) {
				t.Fatalf("BLevels = %v, want %v", b, tc.want)
			}
		})
	}
}

// A CP heap hands out the highest b-level first, oldest first among equals.
func TestHeapCP(t *testing.T) {
	t.Parallel()
	h := NewHeap(CP{})
	for _, r := range []Ready{{ID: 1, Prio: 1}, {ID: 2, Prio: 9}, {ID: 3, Prio: 4}, {ID: 4, Prio: 9}, {ID: 5}} {
		h.Push(r)
	}
	var got []int64
	for _, r := range drain(h) {
		got = append(got, r.ID)
	}
	if want := []int64{2, 4, 3, 1, 5}; !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}
