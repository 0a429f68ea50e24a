package ledger

import "testing"

func TestDeclared(t *testing.T) {
	for _, tc := range []struct {
		name string
		ests []float64
		want float64
	}{
		{"none", nil, 0},
		{"undeclared only", []float64{0, 0}, 0},
		{"one", []float64{30}, 30},
		{"mean, undeclared skipped", []float64{10, 0, 30}, 20},
	} {
		var d Declared
		for _, e := range tc.ests {
			d.Note(e)
		}
		if got := d.Mean(); got != tc.want {
			t.Errorf("%s: Mean = %v, want %v", tc.name, got, tc.want)
		}
	}
}
