package batch

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/mq-hpc/mq/internal/shellwords"
)

// PBS is PBS Professional / OpenPBS: qsub, qstat -f -F json, qdel.
// Tested against a real OpenPBS 23.06 server (scripts/pbs.sh, test/sites);
// testdata/pbs_real_* were recorded from it.
type PBS struct{}

func (PBS) Directives(r Request) []string {
	d := []string{
		"#PBS -N " + r.Name,
		"#PBS -S /bin/sh",
		"#PBS -j oe",
		"#PBS -o " + r.LogDir + "/",
		"#PBS -l walltime=" + hms(r.Walltime),
		"#PBS -l " + pbsSelect(r),
	}
	if r.Queue != "" {
		d = append(d, "#PBS -q "+r.Queue)
	}
	return d
}

// pbsSelect is the one chunk a placeholder asks for: its cores, and its
// memory and GPUs when it asks for them (ngpus is the resource OpenPBS
// and PBS Pro schedule GPUs by).
func pbsSelect(r Request) string {
	s := "select=1:ncpus=" + strconv.Itoa(max(r.Slots, 1))
	if r.Mem > 0 {
		s += ":mem=" + strconv.FormatInt(mebibytes(r.Mem), 10) + "mb"
	}
	if r.GPUs > 0 {
		s += ":ngpus=" + strconv.Itoa(r.GPUs)
	}
	return s
}

func (PBS) SubmitCommand(script string, args []string) string {
	return "qsub " + quoteAll(args) + " " + shellwords.Quote(script)
}

// ParseSubmit reads qsub's output: the job id, "4711.server".
func (PBS) ParseSubmit(out []byte) (string, error) {
	l := firstLine(out)
	seq, _, _ := strings.Cut(l, ".")
	seq, _, _ = strings.Cut(seq, "[") // array ids: 4711[].server
	if !isDigits(seq) || strings.ContainsAny(l, " \t") {
		return "", fmt.Errorf("qsub printed %q, not a job id", truncate(l, 200))
	}
	return l, nil
}

// ListCommand lists every job in full as JSON (PBS Pro 18 and later),
// after a line naming the login user (pbsOwnerMark) and one naming the
// ids of the user's jobs of the name, as the server selects them
// (pbsIDsMark). qstat -f can select neither by name nor by owner, and it
// lists every user's jobs (OpenPBS's default query_other_jobs = True), so
// ParseList keeps the user's jobs of the name: another user of the
// cluster, who sees our placeholders' name in qstat, could otherwise
// submit jobs of that name for the CLS to take for its own, as
// placeholders queued (it then submits no more) or running that never
// connect (the site is then degraded). Their jobs' values are theirs, and
// PBS versions have written them into the JSON unescaped: a value could
// then list a job of its own making. The ids qselect prints are the
// server's, not any job's values, so only a job they name is kept.
func (PBS) ListCommand(name string) string {
	return `printf '` + pbsOwnerMark + `%s\n' "$(id -un)" && ids=$(qselect -u "$(id -un)" -N ` + shellwords.Quote(name) + `) && ` +
		`printf '` + pbsIDsMark + `%s\n' "$(printf '%s' "$ids" | tr '\n' ' ')" && qstat -f -F json`
}

// pbsOwnerMark starts the line ListCommand prints before the listing,
// with the login user's name after it; pbsIDsMark the line after it, with
// the ids of the user's jobs of the name.
const (
	pbsOwnerMark = "mq-owner="
	pbsIDsMark   = "mq-ids="
)

// pbsOwner reads the lines ListCommand prints before the listing (lines
// a login shell printed before them are skipped) and returns the user
// they name, the ids of the user's jobs, and the listing after them.
// Without them the listing is refused: whose jobs are ours cannot be told.
func pbsOwner(out []byte) (user string, ids map[string]bool, rest []byte, err error) {
	for len(out) > 0 {
		line, after, _ := bytes.Cut(out, []byte("\n"))
		if u, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte(pbsOwnerMark)); ok {
			if len(u) == 0 {
				return "", nil, nil, errors.New("id -un printed no user name: cannot tell the user's jobs from others' in qstat's listing")
			}
			line, after, _ = bytes.Cut(after, []byte("\n"))
			l, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte(pbsIDsMark))
			if !ok {
				return "", nil, nil, errors.New("qstat's listing does not say which jobs are the user's (no " + pbsIDsMark + " line)")
			}
			ids = map[string]bool{}
			for _, id := range strings.Fields(string(l)) {
				ids[id] = true
			}
			return string(u), ids, after, nil
		}
		out = after
	}
	return "", nil, nil, errors.New("qstat's listing does not say whose it is (no " + pbsOwnerMark + " line): cannot tell the user's jobs from others'")
}

// pbsOwned says whether Job_Owner (user@host, the host the job was
// submitted from) is user's.
func pbsOwned(owner, user string) bool {
	u, _, _ := strings.Cut(owner, "@")
	return u == user
}

type pbsJob struct {
	Name  string
	Owner string
	State string
	QTime string
	STime string
	// Comment is the scheduler's note on a job: why a queued one does
	// not run ("Not Running: Insufficient amount of resource: ncpus").
	Comment string
	// bad: the job's listing is not as PBS writes its attributes (one
	// named twice, a value that is not a string): never taken for ours.
	bad bool
}

// ParseList reads `qstat -f -F json`, or the plain `qstat -f` text, and
// keeps the login user's jobs of the name. Some PBS versions write JSON
// that is not valid (a backslash in Variable_List not escaped, bare
// numbers as names): pbsJSON reads it all the same, as any user of the
// cluster can make the listing so.
func (PBS) ParseList(out []byte, name string) ([]Placeholder, error) {
	user, ids, out, err := pbsOwner(out)
	if err != nil {
		return nil, err
	}
	t := bytes.TrimSpace(out)
	if len(t) == 0 {
		return nil, nil // qstat prints nothing when there are no jobs
	}
	var jobs map[string]pbsJob
	if t[0] == '{' {
		jobs, err = pbsJSON(t)
	} else {
		jobs, err = pbsText(t)
	}
	if err != nil {
		return nil, err
	}
	var ps []Placeholder
	for id, j := range jobs {
		if !ids[id] || j.bad || j.Name != name || !pbsOwned(j.Owner, user) {
			continue
		}
		if err := pbsValidID(id); err != nil {
			return nil, fmt.Errorf("qstat: job id %q: %w", truncate(id, 50), err)
		}
		st, ok := pbsState(j.State)
		if !ok {
			return nil, fmt.Errorf("qstat: job %s has unknown state %q", id, truncate(j.State, 20))
		}
		if st == Exited {
			continue
		}
		p := Placeholder{ID: id, State: st, Submitted: parseLocalTime(j.QTime), Started: parseLocalTime(j.STime)}
		if st == Queued {
			switch {
			case j.Comment != "":
				p.Why = truncate(strings.TrimSpace(j.Comment), 200)
			case j.State == "H":
				p.Why = "held"
			}
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// pbsState maps PBS job states: Q queued, H held, W waiting for its start
// time, T in transit, B array begun, R running, E exiting, S suspended, U
// suspended while its workstation is busy, F finished, X subjob done, M
// moved.
func pbsState(s string) (State, bool) {
	switch s {
	case "Q", "H", "W", "T":
		return Queued, true
	case "R", "E", "B":
		return Running, true
	case "S", "U":
		return Suspended, true
	case "F", "X", "M":
		return Exited, true
	}
	return 0, false
}

// CancelCommand cancels jobs. qdel cancels every job it can but fails if
// one has ended ("Unknown Job Id", or "Job has finished" where the server
// keeps job history, as OpenPBS sites often do): a placeholder may exit
// between a listing and the cancel. Those jobs are gone as asked, so only
// other errors fail the command, and only they are printed.
func (PBS) CancelCommand(ids []string) string {
	return `out=$(qdel ` + quoteAll(ids) + ` 2>&1) || ! printf '%s\n' "$out" | grep -v -e '^qdel: Unknown Job Id ' -e '^qdel: Job has finished ' >&2`
}
