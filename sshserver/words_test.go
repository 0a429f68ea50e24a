package sshserver

import (
	"reflect"
	"strings"
	"testing"
)

func TestSplitWords(t *testing.T) {
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
		got, err := SplitWords(c.in)
		if (err != nil) != c.err || !reflect.DeepEqual(got, c.want) {
			t.Errorf("SplitWords(%q) = %q, %v; want %q (error %v)", c.in, got, err, c.want, c.err)
		}
	}
}

// FuzzSplitWords: never panics, and joining simply quoted words splits back
// to the same words.
func FuzzSplitWords(f *testing.F) {
	for _, s := range []string{`a "b c" 'd'`, `\`, `"\`, "x\ty\nz", `'"'"'`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		words, err := SplitWords(s)
		if err != nil {
			return
		}
		var quoted []string
		for _, w := range words {
			quoted = append(quoted, "'"+strings.ReplaceAll(w, "'", `'\''`)+"'")
		}
		again, err := SplitWords(strings.Join(quoted, " "))
		if err != nil || !reflect.DeepEqual(again, words) {
			t.Fatalf("round trip of %q: %q -> %q (%v)", s, words, again, err)
		}
	})
}
