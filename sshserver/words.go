package sshserver

import (
	"errors"
	"strings"
)

// SplitWords splits an SSH exec command line into words the way a POSIX
// shell would without expanding anything: OpenSSH sends `ssh host mqsub -q
// q T "echo hi"` as one string, and users expect their quoting to hold.
// Single quotes keep everything literally; double quotes keep everything
// but \" \\ \$ \` and \newline; a backslash outside quotes escapes the next
// character. Shell syntax we do not run ($, `, |, ;, redirections) is kept
// as literal text: these words are arguments, never a shell script.
func SplitWords(s string) ([]string, error) {
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
				return nil, errors.New("command ends with a backslash")
			}
			i++
			if s[i] != '\n' { // backslash-newline is a line continuation
				w.WriteByte(s[i])
			}
		case c == '\'':
			inWord = true
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated single quote in command")
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
				return nil, errors.New("unterminated double quote in command")
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
