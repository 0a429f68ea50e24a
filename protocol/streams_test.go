package protocol

import "testing"

func TestStreamFileOwner(t *testing.T) {
	for _, c := range []struct {
		name string
		ph   int64
		ok   bool
	}{
		{"7-0.mqs", 7, true},
		{"123-45.mqs", 123, true},
		{StreamFileName(9, 3), 9, true},
		{"0-1.mqs", 0, false},
		{"-1-1.mqs", 0, false},
		{"7-01.mqs", 0, false},
		{"07-1.mqs", 0, false},
		{"7-1", 0, false},
		{"../7-1.mqs", 0, false},
		{"x/7-1.mqs", 0, false},
		{"7-1.mqs/", 0, false},
		{"+7-1.mqs", 0, false},
		{"7--1.mqs", 0, false},
		{"", 0, false},
	} {
		ph, ok := StreamFileOwner(c.name)
		if ph != c.ph || ok != c.ok {
			t.Errorf("StreamFileOwner(%q) = %d, %v; want %d, %v", c.name, ph, ok, c.ph, c.ok)
		}
	}
}

// TestCleanReportStreamed: entries a placeholder could not have written
// are dropped, one per stream at most.
func TestCleanReportStreamed(t *testing.T) {
	good := Streamed{Stream: "stdout", File: "7-0.mqs", Last: 8, Bytes: 3}
	r := Report{Streamed: []Streamed{
		good,
		{Stream: "stdout", File: "7-0.mqs", Last: 100, Bytes: 3}, // a second stdout
		{Stream: "stdin", File: "7-0.mqs", Last: 8, Bytes: 3},
		{Stream: "stderr", File: "../../etc/passwd", Last: 8, Bytes: 3},
		{Stream: "stderr", File: "7-0.mqs", Last: -1, Bytes: 3},
		{Stream: "stderr", File: "7-0.mqs", Last: 8, Bytes: 0},
	}}
	if fixed := CleanReport(&r); fixed == "" {
		t.Error("CleanReport fixed nothing")
	}
	if len(r.Streamed) != 1 || r.Streamed[0] != good {
		t.Errorf("kept %+v, want only %+v", r.Streamed, good)
	}
}
