// Package jobscript reads the mqsub flags a job script carries on #MQ
// lines at its top, as sbatch reads #SBATCH lines and HyperQueue #HQ
// lines:
//
//	#!/bin/sh
//	#MQ --time 4:00:00 -c 8 --mem 16G
//	#MQ -o align.%j.out
//	bwa mem ...
//
// The lines are read until the first that is neither blank nor a comment,
// as sbatch does; mqsub sets the flags they give that its command line
// does not.
package jobscript

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"

	"github.com/mq-hpc/mq/internal/shellwords"
)

// Prefix begins a directive line.
const Prefix = "#MQ"

// maxHead bounds what is read of a script for its directives.
const maxHead = 64 << 10

// shells run a script named as their first argument.
var shells = []string{"sh", "bash", "dash", "ksh", "zsh", "/bin/sh", "/bin/bash", "/usr/bin/sh", "/usr/bin/bash"}

// Line is one #MQ line: its number and its words.
type Line struct {
	N     int
	Words []string
}

// Head is what the top of a script says to mqsub.
type Head struct {
	Lines []Line // its #MQ lines
	// Foreign are the other batch systems' prefixes its top uses
	// (#SBATCH, #PBS, #$, #BSUB), which mqsub does not read.
	Foreign []string
	// BOM: the script begins with a UTF-8 byte order mark (some editors
	// write one). Its #MQ lines are read past it; the system and shells
	// take it as part of the first line, so mqsub warns.
	BOM bool
}

// Read reads the head of a script: at most 64 KiB, up to its first
// command. A line longer than that ends the head, what came before it
// standing.
func Read(r io.Reader) (Head, error) {
	var h Head
	sc := bufio.NewScanner(io.LimitReader(r, maxHead))
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		if n == 1 {
			text, h.BOM = strings.CutPrefix(text, "\ufeff")
		}
		line := strings.TrimSpace(text)
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "#") {
			break // the first command: directives end
		}
		if rest, ok := strings.CutPrefix(line, Prefix); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t') {
			words, err := shellwords.Split(rest)
			if err != nil {
				return Head{}, fmt.Errorf("line %d: %s: %w", n, Prefix, err)
			}
			h.Lines = append(h.Lines, Line{N: n, Words: words})
			continue
		}
		for _, p := range []string{"#SBATCH", "#PBS", "#$", "#BSUB"} {
			if strings.HasPrefix(line, p+" ") && !slices.Contains(h.Foreign, p) {
				h.Foreign = append(h.Foreign, p)
			}
		}
	}
	return h, nil
}

// ReadFile reads the head of the script at path (Read); ok is false when
// there is nothing to read: no such file, or not a regular file. Anything
// but a regular file is left unopened: the command's first word may name
// a device (/dev/ttyS0), whose open may act on it (a serial line's
// modem lines, a terminal becoming a controlling one), and over SSH the
// CLS itself would open it.
func ReadFile(path string) (h Head, ok bool, err error) {
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return Head{}, false, nil
	}
	// O_NONBLOCK: a FIFO swapped in since the look would make an open
	// for reading wait for a writer; O_NOCTTY: a terminal never becomes
	// ours. The descriptor is looked at again below.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return Head{}, false, nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return Head{}, false, nil
	}
	h, err = Read(f)
	return h, err == nil, err
}

// Of is the script a job's command words run, "" when they run none: its
// first word, or the second after a shell (sh job.sh, bash job.sh ARGS).
func Of(words []string) string {
	cmd := shellWords(words)
	switch {
	case len(cmd) == 0:
		return ""
	case len(cmd) >= 2 && slices.Contains(shells, cmd[0]):
		if strings.HasPrefix(cmd[1], "-") {
			return "" // sh -c '...', bash -x job.sh: not a plain script run
		}
		return cmd[1]
	}
	return cmd[0]
}

// ViaShell says whether a job's command words run their script through
// a shell named first (sh job.sh), which needs neither its mode nor PATH.
func ViaShell(words []string) bool {
	cmd := shellWords(words)
	return len(cmd) >= 2 && slices.Contains(shells, cmd[0])
}

// shellWords splits a job's command words as the job's /bin/sh -c will,
// quotes and backslashes taken away, so that the script named is the
// file the job runs: sh "my job.sh" runs my job.sh, not "my. A line
// that does not split (an unterminated quote) names no script.
func shellWords(words []string) []string {
	cmd, err := shellwords.Split(strings.Join(words, " "))
	if err != nil {
		return nil
	}
	return cmd
}

// Flag is one of mqsub's flags as a script may give it: its first name,
// and whether it takes a value.
type Flag struct {
	Name       string
	TakesValue bool
}

// Setting is a flag a script's line gives, and where ("job.sh:3: #MQ -c").
type Setting struct {
	Where, Name, Value string
}

// Settings are the flags h's lines give, of script, each looked up by any
// of its names: an error names the line and the word of a word that is
// not a flag, a flag mqsub lacks, or one without its value.
func Settings(h Head, script string, lookup func(name string) (Flag, bool)) ([]Setting, error) {
	var out []Setting
	for _, l := range h.Lines {
		for i := 0; i < len(l.Words); i++ {
			w := l.Words[i]
			where := fmt.Sprintf("%s:%d: %s %s", script, l.N, Prefix, w)
			if len(w) < 2 || w[0] != '-' {
				return nil, fmt.Errorf("%s: not a flag (a script's %s lines give mqsub's flags only)", where, Prefix)
			}
			name, value, hasValue := strings.Cut(strings.TrimLeft(w, "-"), "=")
			f, ok := lookup(name)
			if !ok {
				return nil, fmt.Errorf("%s: mqsub has no such flag", where)
			}
			switch {
			case !f.TakesValue && !hasValue:
				value = "true"
			case f.TakesValue && !hasValue:
				if i+1 == len(l.Words) {
					return nil, fmt.Errorf("%s: needs a value", where)
				}
				i++
				value = l.Words[i]
			}
			out = append(out, Setting{Where: where, Name: f.Name, Value: value})
		}
	}
	return out, nil
}
