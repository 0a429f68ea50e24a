package protocol

import (
	"strconv"
	"unicode/utf8"
)

// fastJobLine parses the common shape of a job-file line, a flat object of
// known keys whose strings need no unescaping, several times faster than
// encoding/json. It reports ok=false for anything else (escapes, nulls,
// unusual numbers, unknown keys, malformed input) and the caller falls back
// to encoding/json, which then produces the result or the error message. So
// for every line it accepts it must agree with encoding/json exactly
// (FuzzFastJobLine checks this).
func fastJobLine(b []byte) (js JobSpec, ok bool) {
	if len(b) == 0 || b[0] != '{' { // callers trim; the slow path needs '{' first
		return js, false
	}
	i := skipSpace(b, 1)
	if i < len(b) && b[i] == '}' {
		return js, skipSpace(b, i+1) == len(b)
	}
	for {
		key, n, ok := fastString(b, i)
		if !ok {
			return js, false
		}
		i = skipSpace(b, n)
		if i >= len(b) || b[i] != ':' {
			return js, false
		}
		i = skipSpace(b, i+1)
		switch key {
		case "target", "command", "queue", "cwd":
			v, n, ok := fastString(b, i)
			if !ok {
				return js, false
			}
			switch key {
			case "target":
				js.Target = v
			case "command":
				js.Command = v
			case "queue":
				js.Queue = v
			default:
				js.Cwd = v
			}
			i = n
		case "est":
			n := i
			for n < len(b) && (b[n] >= '0' && b[n] <= '9' || b[n] == '.' || b[n] == '-') {
				n++
			}
			if !simpleNumber(b[i:n]) {
				return js, false
			}
			f, err := strconv.ParseFloat(string(b[i:n]), 64)
			if err != nil {
				return js, false
			}
			js.Est, i = f, n
		case "cpus", "gpus", "mem":
			// As a person writes them: a count, or a string ("auto",
			// "8G"), set through the same setters as the slow path's.
			v, n, ok := fastWord(b, i)
			if !ok {
				return js, false
			}
			var err error
			switch key {
			case "cpus":
				err = js.SetCPUs(v)
			case "gpus":
				err = js.SetGPUs(v)
			default:
				err = js.SetMem(v)
			}
			if err != nil {
				return js, false // the slow path words the error
			}
			i = n
		case "prereqs":
			// A repeated key replaces, as encoding/json does.
			if js.Prereqs, i, ok = fastStringArray(b, i); !ok {
				return js, false
			}
		case "env":
			// Merged into one given before, as encoding/json merges a
			// repeated key's object into its map.
			if js.Env == nil {
				js.Env = map[string]string{}
			}
			if i, ok = fastStringObject(b, i, js.Env); !ok {
				return js, false
			}
		default:
			return js, false
		}
		i = skipSpace(b, i)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
			continue
		}
		if i < len(b) && b[i] == '}' {
			return js, skipSpace(b, i+1) == len(b)
		}
		return js, false
	}
}

// fastStringArray reads a JSON array of strings at b[i]: its strings
// (empty, not nil, for []) and the index after it.
func fastStringArray(b []byte, i int) ([]string, int, bool) {
	if i >= len(b) || b[i] != '[' {
		return nil, 0, false
	}
	out := []string{}
	if i = skipSpace(b, i+1); i < len(b) && b[i] == ']' {
		return out, i + 1, true
	}
	for {
		v, n, ok := fastString(b, i)
		if !ok {
			return nil, 0, false
		}
		out = append(out, v)
		if i = skipSpace(b, n); i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
			continue
		}
		if i < len(b) && b[i] == ']' {
			return out, i + 1, true
		}
		return nil, 0, false
	}
}

// fastStringObject reads a JSON object of strings at b[i] into m and
// returns the index after it.
func fastStringObject(b []byte, i int, m map[string]string) (int, bool) {
	if i >= len(b) || b[i] != '{' {
		return 0, false
	}
	if i = skipSpace(b, i+1); i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		k, n, ok := fastString(b, i)
		if i = skipSpace(b, n); !ok || i >= len(b) || b[i] != ':' {
			return 0, false
		}
		v, n, ok := fastString(b, skipSpace(b, i+1))
		if !ok {
			return 0, false
		}
		m[k] = v
		if i = skipSpace(b, n); i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
			continue
		}
		if i < len(b) && b[i] == '}' {
			return i + 1, true
		}
		return 0, false
	}
}

// fastWord reads a run of digits or a string fastString takes.
func fastWord(b []byte, i int) (string, int, bool) {
	if i < len(b) && b[i] == '"' {
		return fastString(b, i)
	}
	n := i
	for n < len(b) && b[n] >= '0' && b[n] <= '9' {
		n++
	}
	if n == i {
		return "", 0, false
	}
	return string(b[i:n]), n, true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// fastString reads a JSON string with no escapes, no control characters and
// valid UTF-8, returning it and the index after its closing quote.
func fastString(b []byte, i int) (string, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return "", 0, false
	}
	start := i + 1
	for j := start; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			s := b[start:j]
			if !utf8.Valid(s) {
				return "", 0, false
			}
			return string(s), j + 1, true
		case c == '\\' || c < 0x20:
			return "", 0, false
		}
	}
	return "", 0, false
}

// simpleNumber accepts -?(0|[1-9][0-9]*)(\.[0-9]+)?, a subset of JSON
// numbers that strconv.ParseFloat reads the same way.
func simpleNumber(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i >= len(b) || b[i] < '0' || b[i] > '9' {
		return false
	}
	if b[i] == '0' {
		i++
	} else {
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	return i == len(b)
}
