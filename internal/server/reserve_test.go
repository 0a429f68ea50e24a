package server

import (
	"strings"
	"testing"
)

// TestRoomForReserve: staged output that would leave less than
// OutputReserve free on the output directory's filesystem is refused.
func TestRoomForReserve(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		reserve int64
		ok      bool
	}{
		{0, true},
		{1, true},
		{1 << 62, false}, // more than any disk has free
	} {
		s := &Server{OutputDir: dir, OutputReserve: tc.reserve}
		err := s.roomFor(1 << 10)
		if (err == nil) != tc.ok {
			t.Errorf("reserve %d: roomFor = %v, want ok %v", tc.reserve, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "--output-reserve") {
			t.Errorf("reserve %d: error %q does not say which setting", tc.reserve, err)
		}
	}
}
