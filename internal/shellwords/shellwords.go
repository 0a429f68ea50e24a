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
