package driver

import (
	"errors"
	"fmt"
	"strings"

	"github.com/mq-hpc/mq/protocol"
)

// Jobs run as `/bin/sh -c LINE` wherever their placeholder is, so argv,
// environment and standard input reach them as one POSIX shell line. The
// rules here are the only quoting in the driver: each argument is one
// single-quoted word (a ' inside becomes '\''), and standard input is a
// printf format whose bytes are octal escapes where they are not plain.

// MaxStdin is the most standard input a job may be given as bytes (Stdin,
// Cmd.Stdin). The bytes travel in the job's environment as a printf
// format, or, when the environment has no room left for them, in its
// command line, which as a whole must stay under 128 KiB
// (job.MaxCommandBytes): a printable byte takes one character there, any
// other four. Larger input goes in a file (StdinFile) on a file system the
// job's host sees.
const MaxStdin = 24 << 10

// Quote returns s as one word for a POSIX shell: unchanged if it is made
// only of characters no shell treats specially, else single-quoted.
func Quote(s string) string {
	if s != "" && plain(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("_@%+:,./-", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// ShellLine joins argv into a shell command line that runs args[0] with
// exactly args[1:] as its arguments. The program name is always quoted, so
// it is never read as a reserved word or a variable assignment.
func ShellLine(args []string) (string, error) {
	if len(args) == 0 || args[0] == "" {
		return "", errors.New("no program to run")
	}
	var b strings.Builder
	for i, a := range args {
		if strings.IndexByte(a, 0) >= 0 {
			return "", fmt.Errorf("argument %d holds a NUL byte, which no argument can carry", i)
		}
		if i > 0 {
			b.WriteByte(' ')
			b.WriteString(Quote(a))
			continue
		}
		b.WriteString("'" + strings.ReplaceAll(a, "'", `'\''`) + "'")
	}
	return b.String(), nil
}

// stdinFormat returns data as a quoted printf format that prints exactly
// data: POSIX printf turns \ddd (octal) into that byte, %% into %. A
// leading '-' is escaped too: printf would take the format for an option.
func stdinFormat(data []byte) string {
	var b strings.Builder
	b.Grow(len(data) + 2)
	b.WriteByte('\'')
	for i, c := range data {
		switch {
		case c == '%':
			b.WriteString("%%")
		case c == '\n':
			b.WriteByte('\n') // a newline is literal inside single quotes
		case c == '\'' || c == '\\' || c < ' ' || c >= 0x7f || c == '-' && i == 0:
			fmt.Fprintf(&b, `\%03o`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// validEnvName reports whether name may be assigned by a POSIX shell.
func validEnvName(name string) bool {
	if name == "" || ('0' <= name[0] && name[0] <= '9') {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// wrap is what a job needs besides its command line.
type wrap struct {
	env       []string // NAME=value
	stdin     []byte
	hasStdin  bool
	stdinEnv  bool // stdin travels as a printf format in stdinVar (private)
	stdinFile string
	combined  bool // stderr into stdout, interleaved as written
}

// stdinVar carries a job's standard input in its environment, as a
// printf format (see wrap.private); the job's command does not see it.
const stdinVar = "MQ_DRIVER_STDIN"

// private takes out of w what the job's environment can carry rather
// than its command line, and returns it as the job's environment
// (JobSpec.Env): the variables of Env, and standard input as a printf
// format in stdinVar. The command line runs as /bin/sh -c LINE, which
// every user of the host the job runs on can read (ps, /proc/PID/cmdline)
// for as long as it runs; the environment only its owner. What the
// environment cannot carry stays in w, for the line: a value that is not
// UTF-8, a name of mq's own (MQ_...), and what would pass
// protocol.MaxEnvBytes. A variable script would refuse leaves w whole,
// for script to say why.
func (w *wrap) private() (map[string]string, error) {
	var names []string
	last := map[string]string{} // a later entry for a name wins
	for _, kv := range w.env {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !validEnvName(name) || strings.IndexByte(val, 0) >= 0 {
			return nil, nil
		}
		if name == stdinVar {
			return nil, fmt.Errorf("environment variable %s is the driver's own", stdinVar)
		}
		if _, seen := last[name]; !seen {
			names = append(names, name)
		}
		last[name] = val
	}
	env := map[string]string{}
	room := protocol.MaxEnvBytes
	var line []string
	for _, name := range names {
		val := last[name]
		n := len(name) + len(val) + 2
		if strings.HasPrefix(name, "MQ_") || n > room || protocol.ValidateEnv(map[string]string{name: val}) != nil {
			line = append(line, name+"="+val)
			continue
		}
		env[name] = val
		room -= n
	}
	w.env = line
	if w.hasStdin && len(w.stdin) <= MaxStdin {
		// stdinFormat's text between its quotes: ASCII, every other byte
		// escaped, so the environment carries it exactly.
		f := stdinFormat(w.stdin)
		if format := f[1 : len(f)-1]; len(stdinVar)+len(format)+2 <= room {
			env[stdinVar] = format
			w.stdinEnv = true
		}
	}
	if len(env) == 0 {
		return nil, nil
	}
	return env, nil
}

func (w *wrap) empty() bool {
	return len(w.env) == 0 && !w.hasStdin && w.stdinFile == "" && !w.combined
}

// script returns line wrapped so that it runs with w's environment,
// standard input and stderr: plain shell, for /bin/sh on any host.
func (w *wrap) script(line string) (string, error) {
	if w.empty() {
		return line, nil
	}
	var b strings.Builder
	if w.combined {
		b.WriteString("exec 2>&1\n")
	}
	if len(w.env) > 0 {
		b.WriteString("export")
		for _, kv := range w.env {
			name, val, ok := strings.Cut(kv, "=")
			if !ok || !validEnvName(name) {
				return "", fmt.Errorf("environment entry %q is not NAME=value with NAME a shell variable name (letters, digits, _)", clip(kv))
			}
			if strings.IndexByte(val, 0) >= 0 {
				return "", fmt.Errorf("environment variable %s holds a NUL byte", name)
			}
			b.WriteString(" " + name + "=" + Quote(val))
		}
		b.WriteByte('\n')
	}
	switch {
	case w.stdinFile != "" && w.hasStdin:
		return "", errors.New("a job takes standard input from bytes or from a file, not both")
	case w.stdinFile != "":
		if strings.IndexByte(w.stdinFile, 0) >= 0 {
			return "", errors.New("the standard input file's name holds a NUL byte")
		}
		b.WriteString("exec <" + Quote(w.stdinFile) + "\n")
	case w.hasStdin:
		if len(w.stdin) > MaxStdin {
			return "", fmt.Errorf("standard input is %d bytes; the limit is %d (MaxStdin): give a file instead", len(w.stdin), MaxStdin)
		}
		if w.stdinEnv {
			// Expanded in double quotes, the format is printf's as it is.
			b.WriteString(`printf "$` + stdinVar + `" | { unset ` + stdinVar + "; " + line + "\n}")
			return b.String(), nil
		}
		b.WriteString("printf " + stdinFormat(w.stdin) + " | ")
	}
	b.WriteString("{ " + line + "\n}")
	return b.String(), nil
}

// clip bounds a caller's string quoted in an error.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
