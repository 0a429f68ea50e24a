package flagmsg

import (
	"errors"
	"strings"
	"testing"
)

func TestReword(t *testing.T) {
	for _, tc := range []struct{ err, want string }{
		{"flag provided but not defined: -foo", "unknown flag --foo"},
		{"flag provided but not defined: -H", "unknown flag -H"},
		{`invalid value "x" for flag -slots: parse error`, `--slots: "x": not a valid value`},
		{`invalid value "x" for flag -n: parse error`, `-n: "x": not a valid value`},
		{`invalid value "2h" for flag -idle: want a duration`, `--idle: "2h": want a duration`},
		// A reason that names the value is not preceded by it again.
		{`invalid value "x=0" for flag -resource: resource "x=0": want a positive integer after =`, `--resource: resource "x=0": want a positive integer after =`},
		// A name that is not plain is quoted, and a long one cut.
		{"flag provided but not defined: -\r", `unknown flag "-\r"`},
		{"flag provided but not defined: -x y", `unknown flag "--x y"`},
		{"flag provided but not defined: -" + strings.Repeat("a", 70000), `unknown flag "--` + strings.Repeat("a", 57) + `..."`},
		{"something else", "something else"},
		// A long value is named by its start.
		{`invalid value "X=` + strings.Repeat("a", 70000) + `" for flag -v: the job's environment is 70003 bytes; the limit is 65536`,
			`-v: "X=` + strings.Repeat("a", 57) + `...": the job's environment is 70003 bytes; the limit is 65536`},
	} {
		if got := Reword(errors.New(tc.err)); got != tc.want {
			t.Errorf("Reword(%q) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestFlagWord(t *testing.T) {
	for _, tc := range []struct {
		word, dashes, name string
		hasValue           bool
	}{
		{"-t", "-", "t", false},
		{"--target=-s", "--", "target", true},
		{"-t=", "-", "t", true},
		{"--", "", "", false},
		{"-", "", "", false},
		{"---t", "", "", false},
		{"x", "", "", false},
		{"-5", "-", "5", false}, // a flag to the parser (which refuses it)
	} {
		d, n, v := FlagWord(tc.word)
		if d != tc.dashes || n != tc.name || v != tc.hasValue {
			t.Errorf("FlagWord(%q) = %q, %q, %v; want %q, %q, %v", tc.word, d, n, v, tc.dashes, tc.name, tc.hasValue)
		}
	}
}
