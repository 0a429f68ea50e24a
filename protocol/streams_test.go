package protocol

import (
	"strings"
	"testing"
)

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

// FuzzStreamPiece: whatever file name and bounds a placeholder key sends,
// a piece passes only for one of its own stream files, named in the one
// spelling StreamFileName gives (so the CLS's copy can be no other file),
// with its data and offset inside the bounds.
func FuzzStreamPiece(f *testing.F) {
	f.Add(int64(7), "7-0.mqs", int64(0), 10)
	f.Add(int64(7), "../7-0.mqs", int64(0), 10)
	f.Add(int64(7), "7-0.mqs", int64(MaxStreamCopy), 1)
	f.Add(int64(1), "1-00.mqs", int64(-1), 0)
	f.Fuzz(func(t *testing.T, ph int64, file string, off int64, n int) {
		n = max(0, min(n, MaxStreamPiece+1))
		p := StreamPiece{Placeholder: ph, File: file, Offset: off, Data: make([]byte, n)}
		if CheckStreamPiece(ph, p) != nil {
			return
		}
		owner, ok := StreamFileOwner(file)
		seq, _ := StreamFileSeq(file)
		switch {
		case !ok || owner != ph:
			t.Fatalf("piece of %q passed for placeholder %d (owner %d, %v)", file, ph, owner, ok)
		case StreamFileName(ph, seq) != file || strings.ContainsAny(file, "/\x00") || len(file) > 64:
			t.Fatalf("piece of %q passed: not the one spelling %q", file, StreamFileName(ph, seq))
		case off < 0 || off+int64(n) > MaxStreamCopy || n > MaxStreamPiece:
			t.Fatalf("piece at %d of %d bytes passed", off, n)
		}
	})
}
