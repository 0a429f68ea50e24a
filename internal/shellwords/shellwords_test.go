package shellwords

import (
	"os/exec"
	"reflect"
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
		err  bool
	}{
		{"mqstat", []string{"mqstat"}, false},
		{"  mqsub  -q q  T echo hi ", []string{"mqsub", "-q", "q", "T", "echo", "hi"}, false},
		{`mqsub T "echo hi > out"`, []string{"mqsub", "T", "echo hi > out"}, false},
		{`mqsub T 'a "b" $c'`, []string{"mqsub", "T", `a "b" $c`}, false},
		{`a\ b c\\d`, []string{"a b", `c\d`}, false},
		{`"x\"y\$z\q"`, []string{`x"y$z\q`}, false},
		{`''`, []string{""}, false},
		{`a"b"'c'`, []string{"abc"}, false},
		{"a\\\nb", []string{"ab"}, false},
		{"$(rm -rf /); `x` | y", []string{"$(rm", "-rf", "/);", "`x`", "|", "y"}, false},
		{`"open`, nil, true},
		{`'open`, nil, true},
		{`end\`, nil, true},
		{"", nil, false},
	} {
		got, err := Split(c.in)
		if (err != nil) != c.err || !reflect.DeepEqual(got, c.want) {
			t.Errorf("Split(%q) = %q, %v; want %q (error %v)", c.in, got, err, c.want, c.err)
		}
	}
}

// FuzzSplit: never panics, and joined words split back to the same words.
func FuzzSplit(f *testing.F) {
	for _, s := range []string{`a "b c" 'd'`, `\`, `"\`, "x\ty\nz", `'"'"'`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		words, err := Split(s)
		if err != nil {
			return
		}
		again, err := Split(Join(words))
		if err != nil || !reflect.DeepEqual(again, words) {
			t.Fatalf("round trip of %q: %q -> %q (%v)", s, words, again, err)
		}
		// Any words, split from the input at NULs, survive Join and Split.
		raw := strings.Split(s, "\x00")
		if again, err := Split(Join(raw)); err != nil || !reflect.DeepEqual(again, raw) {
			t.Fatalf("join of %q split back as %q (%v)", raw, again, err)
		}
	})
}

// TestQuoteAgainstShell: what Quote quotes, a real sh reads back unchanged.
func TestQuoteAgainstShell(t *testing.T) {
	words := []string{"plain", "with space", "it's", `"dq"`, "$(touch /tmp/x)", "`x`", "a\\b", "", "semi;colon", "*", "tab\there", "new\nline"}
	out, err := exec.Command("/bin/sh", "-c", "printf '%s\\0' "+Join(words)).Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00"); !reflect.DeepEqual(got, words) {
		t.Fatalf("sh read back %q, want %q", got, words)
	}
}
