package protocol

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mq-hpc/mq/job"
)

// DefaultQueue is the queue of jobs that name none.
const DefaultQueue = "default"

// ValidateSpec checks one job spec and fills defaults (queue). It is what
// both the server and `mqsub -f` use, so a bad line is caught before upload.
func ValidateSpec(js *JobSpec) error {
	if len(js.CommandBytes) > 0 {
		if js.Command != "" {
			return fmt.Errorf("give command or command_bytes, not both")
		}
		js.Command, js.CommandBytes = string(js.CommandBytes), nil
	}
	if js.Queue == "" {
		js.Queue = DefaultQueue
	}
	if err := job.ValidName("queue", js.Queue); err != nil {
		return err
	}
	if err := job.ValidNewName("target", js.Target); err != nil {
		return err
	}
	if js.Command == "" {
		return fmt.Errorf("missing command")
	}
	if len(js.Command) > job.MaxCommandBytes {
		return fmt.Errorf("command is %d bytes; the limit is %d", len(js.Command), job.MaxCommandBytes)
	}
	for i := 0; i < len(js.Command); i++ {
		if js.Command[i] == 0 {
			return fmt.Errorf("command contains a NUL byte")
		}
	}
	if !utf8.ValidString(js.Cwd) {
		return fmt.Errorf("working directory %s is not valid UTF-8 (mq cannot carry such a directory name exactly)", Quote(js.Cwd))
	}
	if js.Cwd != "" && !filepath.IsAbs(js.Cwd) {
		return fmt.Errorf("working directory %q is not absolute", js.Cwd)
	}
	if !(js.Est >= 0 && js.Est <= MaxSeconds) {
		return CheckSeconds("estimate", js.Est)
	}
	if err := CheckPriority(js.Priority); err != nil {
		return err
	}
	if n := len(js.Prereqs) + len(js.AfterAny); n > 10000 {
		return fmt.Errorf("%d prerequisites; the limit is 10000", n)
	}
	for _, p := range js.Prereqs {
		if err := job.ValidNewName("prerequisite target", p); err != nil {
			return err
		}
		if p == js.Target {
			return fmt.Errorf("target %s cannot be its own prerequisite", p)
		}
	}
	for _, p := range js.AfterAny {
		if err := job.ValidNewName("after-any target", p); err != nil {
			return err
		}
		if p == js.Target {
			return fmt.Errorf("target %s cannot be its own after-any prerequisite", p)
		}
	}
	if err := validateFiles("input", js.Inputs, js.Cwd); err != nil {
		return err
	}
	if err := foldStdio(js); err != nil {
		return err
	}
	if err := foldTime(js); err != nil {
		return err
	}
	if err := ValidateEnv(js.Env); err != nil {
		return err
	}
	if err := CheckResources(js.Resources); err != nil {
		return err
	}
	return validateFiles("output", js.Outputs, js.Cwd)
}

// MaxEnvBytes bounds a job's own environment, names and values together.
const MaxEnvBytes = 64 << 10

// EnvAttemptID is set by the placeholder to an id of the attempt unique on
// its host: the processes the attempt leaves outside its process group
// are found by it, and killed with the job.
const EnvAttemptID = "MQ_ATTEMPT_ID"

// ValidateEnv checks a job's environment: names of letters, digits and
// underscores not starting with a digit, none the placeholder sets itself
// (MQ_JOB_ID, MQ_ATTEMPT, MQ_ATTEMPT_ID, MQ_TARGET, MQ_QUEUE), values
// without NUL bytes.
func ValidateEnv(env map[string]string) error {
	n := 0
	for k, v := range env {
		if !validEnvName(k) {
			return fmt.Errorf("environment variable name %s is not NAME (letters, digits, _)", Quote(k))
		}
		switch k {
		case "MQ_JOB_ID", "MQ_ATTEMPT", EnvAttemptID, "MQ_TARGET", "MQ_QUEUE":
			return fmt.Errorf("environment variable %s is set by mq itself", k)
		}
		if strings.IndexByte(v, 0) >= 0 || !utf8.ValidString(v) {
			return fmt.Errorf("environment variable %s: the value has a NUL byte or is not UTF-8", k)
		}
		if k == EnvStdout || k == EnvStderr {
			if err := CheckStdioPattern(v); err != nil {
				return fmt.Errorf("%s: %v", k, err)
			}
		}
		if k == EnvTimeLimit {
			if err := checkTimeLimitEnv(v); err != nil {
				return err
			}
		}
		n += len(k) + len(v) + 2
	}
	if n > MaxEnvBytes {
		return fmt.Errorf("the job's environment is %d bytes; the limit is %d", n, MaxEnvBytes)
	}
	return nil
}

func validEnvName(k string) bool {
	if k == "" || len(k) > 256 || (k[0] >= '0' && k[0] <= '9') {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// EnvList is env as sorted NAME=VALUE strings.
func EnvList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// EncodeCommand readies a validated spec for JSON: a command that is not
// valid UTF-8, which encoding/json would silently change (each bad byte
// becomes U+FFFD, so `ls café` in Latin-1 would run another command),
// travels as CommandBytes. Clients call it just before sending.
func EncodeCommand(js *JobSpec) {
	js.Command, js.CommandBytes = WireCommand(js.Command)
}

// WireCommand splits a command for JSON: itself if valid UTF-8, else ""
// and its bytes.
func WireCommand(cmd string) (text string, raw []byte) {
	if utf8.ValidString(cmd) {
		return cmd, nil
	}
	return "", []byte(cmd)
}

// CommandOf is the exact command of a JobInfo or Assignment.
func CommandOf(text string, raw []byte) string {
	if raw != nil {
		return string(raw)
	}
	return text
}

// ReadJobFile reads `mqsub -f` input: one JSON object per line (blank
// lines and lines starting with # are skipped). Each valid spec is passed to
// emit with its 1-based line number; the first bad line stops the read with
// an error naming the line and the problem. Unknown keys are errors, so a
// misspelt "prereqs" is not silently dropped. def supplies the queue and
// working directory of lines that name none, environment variables
// every line gets unless it sets the same name itself, and resources a
// line gets where it asks for none of the kind.
func ReadJobFile(r io.Reader, def JobSpec, emit func(line int, js JobSpec) error) error {
	return ReadJobLines(r, 1, def, emit)
}

// MaxJobLine is the longest line of a job file.
const MaxJobLine = 1 << 20

// ReadJobLines is ReadJobFile for input whose first line is line first.
func ReadJobLines(r io.Reader, first int, def JobSpec, emit func(line int, js JobSpec) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	for n := first; ; n++ {
		buf = buf[:0]
		var err error
		for {
			var chunk []byte
			chunk, err = br.ReadSlice('\n')
			if len(buf)+len(chunk) > MaxJobLine {
				return fmt.Errorf("line %d: longer than %d bytes", n, MaxJobLine)
			}
			buf = append(buf, chunk...)
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			break
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("line %d: %w", n, err)
		}
		line := bytes.TrimSpace(buf)
		if n == 1 {
			// A byte-order mark, as Windows editors write UTF-8 files:
			// JSON allows a reader to ignore it (RFC 8259).
			line = bytes.TrimSpace(bytes.TrimPrefix(line, []byte("\ufeff")))
		}
		if len(line) > 0 && line[0] != '#' {
			js, perr := parseJobLine(line)
			if perr == nil {
				if js.Cwd == "" {
					js.Cwd = def.Cwd
				}
				if js.Queue == "" {
					js.Queue = def.Queue
				}
				js.Env = mergeEnv(def.Env, js.Env)
				if def.Resources.Asks() {
					js.Resources = js.Resources.WithDefaults(def.Resources)
				}
				perr = ValidateSpec(&js)
			}
			if perr != nil {
				return fmt.Errorf("line %d: %v", n, perr)
			}
			if err := emit(n, js); err != nil {
				return err
			}
		}
		if err == io.EOF {
			return nil
		}
	}
}

func parseJobLine(line []byte) (JobSpec, error) { return parseJobLineWith(line, true) }

func parseJobLineWith(line []byte, fast bool) (JobSpec, error) {
	if fast {
		if js, ok := fastJobLine(line); ok {
			return js, nil
		}
	}
	var jl jobLine
	js := &jl.JobSpec
	if !bytes.HasPrefix(line, []byte("{")) {
		return *js, errors.New("not a JSON object")
	}
	if !utf8.Valid(line) {
		// encoding/json would replace the bad bytes and run another
		// command; the fast path never accepts such a line.
		col := 0
		for col < len(line) {
			r, n := utf8.DecodeRune(line[col:])
			if r == utf8.RuneError && n == 1 {
				break
			}
			col += n
		}
		return *js, fmt.Errorf("byte 0x%02x at column %d is not UTF-8; give a command with such bytes as \"command_bytes\": its bytes in base64", line[col], col+1)
	}
	if col := loneSurrogate(line); col > 0 {
		// Python's json.dumps writes a file name's undecodable byte 0xE9
		// as "\udce9"; encoding/json would read U+FFFD, another command.
		return *js, fmt.Errorf("%s at column %d is half a UTF-16 surrogate pair, which no UTF-8 text holds; give a command with bytes that are not UTF-8 as \"command_bytes\": its bytes in base64", line[col-1:col+5], col)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&jl); err != nil {
		return *js, errors.New(trimJSONError(err))
	}
	if dec.More() {
		return *js, errors.New("more than one JSON value on the line")
	}
	if err := jl.fileResources.apply(&js.Resources); err != nil {
		return *js, err
	}
	return *js, nil
}

// jobLine is a job-file line: a JobSpec whose "cpus", "mem" and "gpus"
// may be written as mqsub's flags take them ("cpus": "auto", "mem":
// "8G"). The keys of fileResources, one level up, shadow JobSpec's own.
type jobLine struct {
	JobSpec
	fileResources
}

// mergeEnv is base with own laid over it (own wins for the same name); it
// returns own itself when base adds nothing, so lines share no map.
func mergeEnv(base, own map[string]string) map[string]string {
	if len(base) == 0 {
		return own
	}
	env := make(map[string]string, len(base)+len(own))
	maps.Copy(env, base)
	maps.Copy(env, own)
	return env
}

// loneSurrogate returns the 1-based column of the first \uXXXX escape in a
// JSON line that is a UTF-16 surrogate not paired as JSON pairs them (high,
// then low), or 0 if there is none.
func loneSurrogate(line []byte) int {
	if !bytes.Contains(line, []byte(`\u`)) {
		return 0 // the common line: one vectorized search, not a loop
	}
	surrogate := func(i int) rune { // the escape at line[i:], or -1
		if i+6 > len(line) || line[i] != '\\' || line[i+1] != 'u' {
			return -1
		}
		r, err := strconv.ParseUint(string(line[i+2:i+6]), 16, 16)
		if err != nil || r < 0xd800 || r > 0xdfff {
			return -1
		}
		return rune(r)
	}
	for i := 0; i < len(line); i++ {
		if line[i] != '\\' {
			continue
		}
		switch r := surrogate(i); {
		case r < 0:
			i++ // an escaped character, perhaps a backslash: skip it
		case r < 0xdc00 && surrogate(i+6) >= 0xdc00:
			i += 11 // a pair
		default:
			return i + 1
		}
	}
	return 0
}
