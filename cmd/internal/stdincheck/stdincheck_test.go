package stdincheck

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStdinRefusal: what mqsub's stdin is decides whether it is refused:
// data in a pipe, a file redirected whole or memory are; a terminal or
// /dev/null, a pipe at its end or still open and empty, a file read to
// its end and a file a loop reads part way are not.
func TestStdinRefusal(t *testing.T) {
	t.Parallel()
	pipe := func(data string, closeW bool) *os.File {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close(); w.Close() })
		w.WriteString(data)
		if closeW {
			w.Close()
		}
		return r
	}
	file := func(data string, skip int64) *os.File {
		p := filepath.Join(t.TempDir(), "in")
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		f.Seek(skip, io.SeekStart)
		return f
	}
	stream := func(data string, open bool) io.Reader { // an SSH session's stdin
		if open {
			r, w := io.Pipe() // nothing written, never closed
			t.Cleanup(func() { w.Close() })
			return r
		}
		return struct{ io.Reader }{strings.NewReader(data)} // no Len: not taken for memory
	}
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	for _, tc := range []struct {
		name string
		r    io.Reader
		want string // "" or a part of the refusal
	}{
		{"nil", nil, ""},
		{"/dev/null", devNull, ""},
		{"empty memory", strings.NewReader(""), ""},
		{"memory", strings.NewReader("data"), "stdin has data"},
		{"pipe with data", pipe("data\n", true), "stdin has data"},
		{"pipe with data, open", pipe("data\n", false), "stdin has data"},
		{"pipe at its end", pipe("", true), ""},
		{"pipe open and empty", pipe("", false), ""},
		{"file with data", file("data\n", 0), "a file with data"},
		{"file read to its end", file("data\n", 5), ""},
		{"file a while-read loop reads", file("a\nb\n", 2), ""},
		{"empty file", file("", 0), ""},
		{"stream with data", stream("data", false), "stdin has data"},
		{"stream at its end", stream("", false), ""},
		{"stream open and empty (an interactive SSH client)", stream("", true), ""},
	} {
		got := Refusal(tc.r)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) || strings.Contains(got, "\n") {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestStdinRefusalLeavesData: the check takes nothing from a pipe, which
// may be a loop's input ("producer | while read s; do mqsub ...; done"):
// a byte taken was the next line's first, and the loop then submitted
// "ampleB" for "sampleB".
func TestStdinRefusalLeavesData(t *testing.T) {
	t.Parallel()
	for _, closeW := range []bool{true, false} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		w.WriteString("sampleB\nsampleC\n")
		if closeW {
			w.Close()
		}
		if got := Refusal(r); !strings.Contains(got, "stdin has data") {
			t.Errorf("writer closed %v: %q, want a refusal", closeW, got)
		}
		w.Close()
		rest, err := io.ReadAll(r)
		r.Close()
		if err != nil || string(rest) != "sampleB\nsampleC\n" {
			t.Errorf("writer closed %v: the pipe holds %q after the check (%v), want it untouched", closeW, rest, err)
		}
	}
}
