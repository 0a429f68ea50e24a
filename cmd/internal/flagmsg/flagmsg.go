// Package flagmsg rewords the flag package's parse errors into the one-line
// messages every mq command prints ("unknown flag --foo", "--slots: "x": not
// a valid value"), and reads a word as the flag package will, for the
// checks made before it parses. It is apart so mqagent, which does not
// link urfave/cli, reads and words them as the other commands do.
package flagmsg

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxValue is how much of a refused value a message repeats: a 70 KB -v
// value refused for its size is named by its start, not printed whole.
const maxValue = 64

// Reword returns the message for a flag parse error.
func Reword(err error) string {
	s := err.Error()
	if f, ok := strings.CutPrefix(s, "flag provided but not defined: -"); ok {
		if len(f) > 1 {
			f = "-" + f // --foo as typed and as the help shows it, not -foo
		}
		return "unknown flag " + named("-"+f)
	}
	// invalid value "V" for flag -NAME: REASON, with the dashes the help shows.
	if rest, ok := strings.CutPrefix(s, "invalid value "); ok {
		if v, name, ok := strings.Cut(rest, " for flag -"); ok {
			name, reason, _ := strings.Cut(name, ": ")
			if len(name) > 1 {
				name = "-" + name
			}
			switch {
			case reason == "parse error":
				reason = "not a valid value"
			case strings.Contains(reason, v):
				return fmt.Sprintf("-%s: %s", name, reason) // it names the value itself
			}
			return fmt.Sprintf("-%s: %s: %s", name, clip(v), reason)
		}
	}
	return s
}

// named is a flag's name as typed, as it is if it is short and plain,
// else quoted (control characters escaped) and cut like a value: it is
// anything the user, or a peer over SSH, wrote.
func named(f string) string {
	plain := len(f) <= maxValue && strings.IndexFunc(f, func(r rune) bool { return r <= ' ' || r > '~' }) < 0
	if plain {
		return f
	}
	return clip(strconv.Quote(f))
}

// clip is quoted value v cut to about maxValue bytes, its end marked.
func clip(v string) string {
	if len(v) <= maxValue {
		return v
	}
	cut := maxValue - 4
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return v[:cut] + `..."`
}

// WithoutValue is the message for value flag a (as written) given without
// its value, followed by flag next: both named, never a value, so the
// message stays short whatever was typed.
func WithoutValue(a, next string) string {
	return fmt.Sprintf("%s has no value: the word after it, %s, is a flag (a value that begins with '-' is written %s=VALUE)", a, next, a)
}

// FlagWord splits a word written as a flag, -NAME or --NAME, with
// =VALUE or not, as the flag package reads one; dashes is "" for a word
// that is none.
func FlagWord(a string) (dashes, name string, hasValue bool) {
	dashes = "-"
	if strings.HasPrefix(a, "--") {
		dashes = "--"
	}
	if len(a) <= len(dashes) || a[0] != '-' || a[len(dashes)] == '-' {
		return "", "", false
	}
	name, _, hasValue = strings.Cut(a[len(dashes):], "=")
	return dashes, name, hasValue
}
