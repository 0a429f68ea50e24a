package shellwords

import (
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func TestSimple(t *testing.T) {
	tests := []struct {
		line string
		want []string // nil: not simple
	}{
		{"sleep 0.02", []string{"sleep", "0.02"}},
		{"  ls\t-l  /tmp ", []string{"ls", "-l", "/tmp"}},
		{"'prog' 'a b' 'it'\\''s'", []string{"prog", "a b", "it's"}},
		{`grep "a b" x`, []string{"grep", "a b", "x"}},
		{`cp a\ b c`, []string{"cp", "a b", "c"}},
		{"dd if=/dev/zero of=x count=1", []string{"dd", "if=/dev/zero", "of=x", "count=1"}},
		{"/usr/bin/env", []string{"/usr/bin/env"}},
		{"./run.sh a#b", []string{"./run.sh", "a#b"}},
		{"cmd ''", []string{"cmd", ""}},
		{"cmd a\\\nb", []string{"cmd", "ab"}},
		{"prog é", []string{"prog", "é"}},
		{"", nil},
		{"   ", nil},
		{"''", nil},
		{"echo hi", nil},
		{"true", nil},
		{"cd /tmp", nil},
		{"'echo' hi", nil},
		{"if", nil},
		{"A=1 prog", nil},
		{"a'=1' prog", []string{"a=1", "prog"}}, // a quoted = makes no assignment
		{"prog $HOME", nil},
		{"prog `id`", nil},
		{`prog "$x"`, nil},
		{`prog "a\b"`, nil},
		{"prog *.txt", nil},
		{"prog a?", nil},
		{"prog [ab]", nil},
		{"prog {a,b}", nil},
		{"prog ~/x", nil},
		{"prog --prefix=~/x", nil},
		{"prog #comment", nil},
		{"a | b", nil},
		{"a && b", nil},
		{"a; b", nil},
		{"a > f", nil},
		{"a < f", nil},
		{"(a)", nil},
		{"a &", nil},
		{"a\nb", nil},
		{"a\rb", nil},
		{"prog 'open", nil},
		{`prog "open`, nil},
		{`prog \`, nil},
		{"! prog", nil},
	}
	for _, tt := range tests {
		got, ok := Simple(tt.line)
		if ok != (tt.want != nil) || !slices.Equal(got, tt.want) {
			t.Errorf("Simple(%q) = %q, %v; want %q", tt.line, got, ok, tt.want)
		}
	}
}

// shWords is what /bin/sh makes of line's words: it runs them as the
// arguments of `set --` and prints each.
func shWords(t testing.TB, line string) []string {
	out, err := exec.Command("/bin/sh", "-c", "set -- "+line+"\nprintf '%s\\0' \"$@\"").Output()
	if err != nil {
		t.Fatalf("sh on %q: %v", line, err)
	}
	if len(out) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
}

// FuzzSimple checks that every line Simple accepts has the words the real
// shell gives it.
func FuzzSimple(f *testing.F) {
	if _, err := exec.LookPath("/bin/sh"); err != nil {
		f.Skip("no /bin/sh")
	}
	for _, s := range []string{"sleep 0.02", "'a b' c", `p "x y" z\ w`, "p a\\\nb", "p ''\"\"x", "p a=b", "p \\$x", "p '\\'"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		words, ok := Simple(line)
		if !ok || bytes.IndexByte([]byte(line), 0) >= 0 {
			return
		}
		if got := shWords(t, line); !slices.Equal(got, words) {
			t.Fatalf("Simple(%q) = %q; sh reads %q", line, words, got)
		}
	})
}
