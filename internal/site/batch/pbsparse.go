package batch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// qstat -f is given only the ids qselect selected, the user's own jobs,
// but the parsers below do not rely on it: a listing of every user's jobs
// (what qstat prints when given no ids) holds values each job's owner
// chooses (its name, its environment in Variable_List, its qsub
// arguments). They therefore take structure only where the format puts
// it and never from inside a value: a value that looks like another job,
// or like an attribute of its own job, stays a value. A job that names an
// attribute we read twice, or gives one a value that is no string, cannot
// be told apart from one whose value was written to look like
// attributes: it is marked bad and never taken for one of ours (our
// placeholders' attributes are ours and plain).

// pbsMaxValue bounds what is kept of an attribute's value: ours are short
// (a name, user@host, a state letter, a time, the scheduler's comment).
const pbsMaxValue = 4096

// pbsMaxDepth bounds the nesting the JSON reader follows.
const pbsMaxDepth = 32

// field is where j keeps attribute key, or nil for one it does not keep.
func (j *pbsJob) field(key string) *string {
	switch key {
	case "Job_Name":
		return &j.Name
	case "Job_Owner":
		return &j.Owner
	case "job_state":
		return &j.State
	case "qtime":
		return &j.QTime
	case "stime":
		return &j.STime
	case "comment":
		return &j.Comment
	}
	return nil
}

// set keeps attribute key's value, marking j bad when the key comes twice.
func (j *pbsJob) set(key, val string, seen map[string]bool) {
	f := j.field(key)
	if f == nil {
		return
	}
	if seen[key] {
		j.bad = true
		return
	}
	seen[key] = true
	*f = truncate(val, pbsMaxValue)
}

// pbsBatches reads what ListCommand prints after the ids: for each batch
// of ids, qstat's listing (a JSON document, or plain text) and the line
// with qstat's exit status, and returns the jobs listed and the number of
// batches. A status other than 0 is that of jobs that ended since qselect
// named them (the command fails at any other error of qstat): the
// listing of the others counts. But a qstat that failed and printed no
// listing did not run as asked (qstat -F json prints its document
// whatever it found), and a listing not followed by its status was cut
// short: either fails the listing, as a job it leaves out would be taken
// for ended. A job id listed twice, in one batch or two, fails it too:
// which one is real cannot be told.
func pbsBatches(out []byte) (jobs map[string]pbsJob, batches int, err error) {
	jobs = map[string]pbsJob{}
	mark := []byte(pbsStatusMark)
	for {
		if out = bytes.TrimLeft(out, " \t\r\n"); len(out) == 0 {
			return jobs, batches, nil
		}
		listed := false
		switch {
		case out[0] == '{':
			if out, err = pbsJSON(out, jobs); err != nil {
				return nil, 0, err
			}
			listed = true
		case !bytes.HasPrefix(out, mark):
			text := out
			if i := bytes.Index(out, append([]byte("\n"), mark...)); i >= 0 {
				text, out = out[:i+1], out[i+1:]
			} else {
				out = nil
			}
			n := len(jobs)
			if err := pbsText(text, jobs); err != nil {
				return nil, 0, err
			}
			listed = len(jobs) > n // text holds no document: a job is what shows it is a listing
		}
		line, rest, _ := bytes.Cut(bytes.TrimLeft(out, " \t\r\n"), []byte("\n"))
		status := -1
		if s, ok := bytes.CutPrefix(bytes.TrimSpace(line), mark); ok && len(s) <= 3 && isDigits(string(s)) {
			status, _ = strconv.Atoi(string(s))
		}
		if status < 0 || status > 255 {
			return nil, 0, fmt.Errorf("qstat's listing of batch %d is not followed by its exit status (%s line): cut short", batches+1, pbsStatusMark)
		}
		if status != 0 && !listed {
			return nil, 0, fmt.Errorf("qstat exited with status %d and printed no listing", status)
		}
		out = rest
		batches++
	}
}

// pbsJSON reads a `qstat -f -F json` document at the start of b into jobs
// and returns what follows it. Its scanner takes what some PBS versions
// write and JSON does not allow (a backslash not escaped, raw control
// characters, bare words as values), so a job's odd value cannot make
// the whole listing unreadable, yet it finds structure only outside
// strings. A job id already in jobs fails the listing.
func pbsJSON(b []byte, jobs map[string]pbsJob) (rest []byte, err error) {
	sc := &pbsScanner{b: b}
	err = sc.object(0, func(key string) error {
		if key != "Jobs" {
			return sc.skip(1)
		}
		return sc.object(1, func(id string) error {
			if _, dup := jobs[id]; dup {
				return fmt.Errorf("job %s is listed twice", truncate(id, 50))
			}
			var j pbsJob
			seen := map[string]bool{}
			err := sc.object(2, func(key string) error {
				if c := sc.peek(); c == '{' || c == '[' {
					if j.field(key) != nil {
						j.bad = true // an attribute we read is a string, never an object
					}
					return sc.skip(3)
				}
				v, err := sc.scalar()
				j.set(key, v, seen)
				return err
			})
			jobs[id] = j
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	return b[sc.i:], nil
}

type pbsScanner struct {
	b []byte
	i int
}

func (sc *pbsScanner) errorf(format string, a ...any) error {
	return fmt.Errorf("qstat -F json: offset %d: %s", sc.i, fmt.Sprintf(format, a...))
}

func (sc *pbsScanner) space() {
	for sc.i < len(sc.b) && strings.IndexByte(" \t\r\n", sc.b[sc.i]) >= 0 {
		sc.i++
	}
}

func (sc *pbsScanner) peek() byte {
	if sc.space(); sc.i < len(sc.b) {
		return sc.b[sc.i]
	}
	return 0
}

// object reads an object at nesting depth, calling member with each key
// when the scanner is at its value; member reads the value.
func (sc *pbsScanner) object(depth int, member func(key string) error) error {
	if depth >= pbsMaxDepth {
		return sc.errorf("nested too deep")
	}
	if sc.peek() != '{' {
		return sc.errorf("want {")
	}
	sc.i++
	if sc.peek() == '}' {
		sc.i++
		return nil
	}
	for {
		if sc.peek() != '"' {
			return sc.errorf("want a key")
		}
		key, err := sc.str()
		if err != nil {
			return err
		}
		if sc.peek() != ':' {
			return sc.errorf("want :")
		}
		sc.i++
		if err := member(key); err != nil {
			return err
		}
		switch sc.peek() {
		case ',':
			sc.i++
		case '}':
			sc.i++
			return nil
		default:
			return sc.errorf("want , or }")
		}
	}
}

// skip reads any value at nesting depth.
func (sc *pbsScanner) skip(depth int) error {
	switch sc.peek() {
	case '{':
		return sc.object(depth, func(string) error { return sc.skip(depth + 1) })
	case '[':
		if depth >= pbsMaxDepth {
			return sc.errorf("nested too deep")
		}
		sc.i++
		if sc.peek() == ']' {
			sc.i++
			return nil
		}
		for {
			if err := sc.skip(depth + 1); err != nil {
				return err
			}
			switch sc.peek() {
			case ',':
				sc.i++
			case ']':
				sc.i++
				return nil
			default:
				return sc.errorf("want , or ]")
			}
		}
	}
	_, err := sc.scalar()
	return err
}

// scalar reads a string or a bare word (a number, true, or what PBS
// writes unquoted).
func (sc *pbsScanner) scalar() (string, error) {
	if sc.peek() == '"' {
		return sc.str()
	}
	start := sc.i
	for sc.i < len(sc.b) && strings.IndexByte(",:{}[]\" \t\r\n", sc.b[sc.i]) < 0 {
		sc.i++
	}
	if sc.i == start {
		return "", sc.errorf("want a value")
	}
	return string(sc.b[start:sc.i]), nil
}

// str reads a string: it ends at the first quote no backslash escapes.
// JSON's escapes are decoded; a string with others (PBS writes a
// backslash in a value as it is) is kept as written.
func (sc *pbsScanner) str() (string, error) {
	start := sc.i
	for sc.i++; sc.i < len(sc.b); sc.i++ {
		switch sc.b[sc.i] {
		case '\\':
			sc.i++
		case '"':
			sc.i++
			raw := sc.b[start:sc.i]
			var s string
			if json.Unmarshal(raw, &s) != nil {
				s = string(raw[1 : len(raw)-1])
			}
			return s, nil
		}
	}
	sc.i = start
	return "", sc.errorf("a string does not end")
}

// pbsText reads plain `qstat -f`: a job starts at "Job Id: " at the start
// of a line, its attributes are "    key = value" (indented by four
// spaces), and a long value goes on over lines that start with a tab. A
// line of no such form, inside a job, is a value that held a line break:
// the job is marked bad. The jobs are read into jobs; a job id already
// there fails the listing.
func pbsText(out []byte, jobs map[string]pbsJob) error {
	var (
		cur  string
		j    pbsJob
		seen map[string]bool
		last string // the key the previous attribute line set
	)
	flush := func() {
		if cur != "" {
			jobs[cur] = j
		}
	}
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSuffix(line, "\r")
		switch {
		case strings.HasPrefix(line, "Job Id: "):
			flush()
			cur = strings.TrimSpace(line[len("Job Id: "):])
			if _, dup := jobs[cur]; dup {
				return fmt.Errorf("qstat: job %s is listed twice", truncate(cur, 50))
			}
			j, seen, last = pbsJob{}, map[string]bool{}, ""
		case cur == "" || strings.TrimSpace(line) == "":
			// Before the first job (a header), or between jobs.
			last = ""
		case strings.HasPrefix(line, "\t"):
			if f := j.field(last); f != nil && !j.bad && len(*f) < pbsMaxValue {
				*f = truncate(*f+strings.TrimRight(line[1:], " \t"), pbsMaxValue)
			}
		case strings.HasPrefix(line, "    ") && line[4] != ' ' && line[4] != '\t':
			k, v, ok := strings.Cut(line[4:], " = ")
			if !ok || strings.ContainsAny(k, " \t") {
				j.bad = true
				last = ""
				continue
			}
			last = k
			j.set(k, strings.TrimSpace(v), seen)
		default:
			j.bad = true
			last = ""
		}
	}
	flush()
	return nil
}

// pbsJobIDMax bounds a job id: PBS's own limit is 273 bytes.
const pbsJobIDMax = 273

// pbsValidID says whether id is a PBS job id ("4711.server", "4711[].server",
// "4711[3].server"): digits, an optional array index, then a server name.
// An id is handed to qdel, so it must never read as an option or hold
// what no server name holds.
func pbsValidID(id string) error {
	if len(id) > pbsJobIDMax {
		return errors.New("too long")
	}
	seq, server, _ := strings.Cut(id, ".")
	seq, idx, arr := strings.Cut(seq, "[")
	if !isDigits(seq) {
		return errors.New("no job number")
	}
	if arr && (!strings.HasSuffix(idx, "]") || idx != "]" && !isDigits(strings.TrimSuffix(idx, "]"))) {
		return errors.New("not an array index")
	}
	for _, c := range server {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return errors.New("not a server name")
		}
	}
	return nil
}
