package bundles

import "testing"

func TestSeq(t *testing.T) {
	for _, tc := range []struct {
		bundle, id int64
		want       int
	}{
		{0, 17, 0},
		{10, 10, 0},
		{10, 11, 1},
		{10, 13, 3},
	} {
		if got := Seq(tc.bundle, tc.id); got != tc.want {
			t.Errorf("Seq(%d, %d) = %d, want %d", tc.bundle, tc.id, got, tc.want)
		}
	}
}
