// Package shellwords splits and quotes words the way a POSIX shell reads
// them, without expanding anything: one set of rules for the SSH endpoint's
// command lines and the sites' --submit-args (split), and for the commands
// sites run on login hosts (quote).
package shellwords

import (
	"errors"
	"strings"
)

// Split splits a command line into words the way a POSIX shell would
// without expanding anything: OpenSSH sends `ssh host mqsub -q q T "echo
// hi"` as one string, and users expect their quoting to hold.
// Single quotes keep everything literally; double quotes keep everything
// but \" \\ \$ \` and \newline; a backslash outside quotes escapes the next
// character. Shell syntax we do not run ($, `, |, ;, redirections) is kept
// as literal text: these words are arguments, never a shell script.
func Split(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case c == '\\':
			inWord = true
			if i+1 >= len(s) {
				return nil, errors.New("ends with a backslash")
			}
			i++
			if s[i] != '\n' { // backslash-newline is a line continuation
				w.WriteByte(s[i])
			}
		case c == '\'':
			inWord = true
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated single quote")
			}
			w.WriteString(s[i+1 : i+1+j])
			i += j + 1
		case c == '"':
			inWord = true
			closed := false
			for i++; i < len(s); i++ {
				c := s[i]
				if c == '"' {
					closed = true
					break
				}
				if c == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`\n", s[i+1]) >= 0 {
					i++
					if s[i] != '\n' {
						w.WriteByte(s[i])
					}
					continue
				}
				w.WriteByte(c)
			}
			if !closed {
				return nil, errors.New("unterminated double quote")
			}
		default:
			inWord = true
			w.WriteByte(c)
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// Quote quotes s so that a POSIX shell reads it back as one word, exactly.
func Quote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=@%+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Join quotes each word and joins them with spaces: Split(Join(w)) == w.
func Join(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = Quote(w)
	}
	return strings.Join(q, " ")
}

// Simple returns the words of line when a POSIX shell would run it as one
// simple command with nothing to expand, redirect or interpret: plain
// words, single-quoted words, double-quoted words without $, ` or \, and
// backslash escapes; the first word no assignment, reserved word or
// builtin of dash or bash. A placeholder may then exec the words itself
// and save the shell's fork and exec (GNU make's fast path). Anything
// else, or anything in doubt, is not simple (ok false): it goes to the
// shell, which gives it its full meaning.
func Simple(line string) (words []string, ok bool) {
	var w strings.Builder
	inWord := false
	end := func() {
		if inWord {
			words = append(words, w.String())
			w.Reset()
			inWord = false
		}
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			end()
		case c == '\\':
			if i+1 >= len(line) {
				return nil, false
			}
			i++
			if line[i] == '\n' {
				continue // a line continuation, no word
			}
			inWord = true
			w.WriteByte(line[i])
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, false
			}
			inWord = true
			w.WriteString(line[i+1 : i+1+j])
			i += j + 1
		case c == '"':
			j := strings.IndexByte(line[i+1:], '"')
			if j < 0 {
				return nil, false
			}
			in := line[i+1 : i+1+j]
			if strings.ContainsAny(in, "$`\\") {
				return nil, false
			}
			inWord = true
			w.WriteString(in)
			i += j + 1
		case c < ' ' || c == 0x7f:
			return nil, false // newline ends a command; other controls: let the shell judge
		case strings.IndexByte("|&;<>()$`*?[]{}!^~", c) >= 0:
			return nil, false
		case c == '#' && !inWord:
			return nil, false // a comment
		case c == '=' && len(words) == 0:
			return nil, false // an assignment (or too close to one to tell)
		default:
			inWord = true
			w.WriteByte(c)
		}
	}
	end()
	if len(words) == 0 || words[0] == "" || shellOwn[words[0]] {
		return nil, false
	}
	return words, true
}

// shellOwn are the first words a shell runs itself: reserved words and the
// builtins of dash and bash (either may be /bin/sh), which may behave
// unlike a program of the same name (echo -e) or change the shell (cd).
var shellOwn = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`! { } [[ ]] case coproc do done elif else esac fi for function if in select then time until while
		. : [ alias bg bind break builtin caller cd chdir command compgen complete compopt continue declare dirs disown
		echo enable eval exec exit export false fc fg getopts hash help history jobs kill let local logout mapfile
		popd printf pushd pwd read readarray readonly return set shift shopt source suspend test times trap true type
		typeset ulimit umask unalias unset wait`) {
		m[w] = true
	}
	return m
}()
