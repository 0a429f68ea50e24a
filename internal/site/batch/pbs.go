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

// ListCommand asks qselect for the ids of the user's jobs of the name,
// then qstat for those jobs in full, as JSON (PBS Pro 18 and later). It
// prints a line naming the login user (pbsOwnerMark) and one naming the
// ids (pbsIDsMark), then qstat's listing of each batch of pbsBatch ids,
// each followed by a line with qstat's exit status (pbsStatusMark).
// qstat given no ids lists every user's jobs (OpenPBS's default
// query_other_jobs = True), and selects by neither name nor owner: on a
// large cluster hundreds of megabytes at every poll, and a load on the
// server. So it is given the ids, in batches that keep its command line
// short (-E: one request to the server for each batch rather than one for
// each job), and not run at all when there are none.
//
// qstat fails when a job it is given has ended since qselect named it
// ("Unknown Job Id", or "Job has finished" where the server keeps job
// history), and lists the others all the same: such a job is simply not
// listed. Any other error of qstat fails the command, in qstat's words,
// and so does a failure it gives no reason for. The status lines let
// ParseList tell a qstat that failed and printed nothing from one whose
// jobs had all ended, and a listing cut short from a whole one. Only what
// has a job id's form (pbsIDPattern) is passed to qstat, so that no id
// can read as an option.
//
// ParseList keeps the user's jobs of the name among those the ids name.
// Another user of the cluster, who sees our placeholders' name in qstat,
// could otherwise submit jobs of that name for the CLS to take for its
// own, as placeholders queued (it then submits no more) or running that
// never connect (the site is then degraded). Their values are theirs,
// and PBS versions have written them into the JSON unescaped: a value
// could then list a job of its own making. The ids qselect prints are the
// server's, not any job's values, so only a job they name is kept.
func (PBS) ListCommand(name string) string {
	return `printf '` + pbsOwnerMark + `%s\n' "$(id -un)" && ids=$(qselect -u "$(id -un)" -N ` + shellwords.Quote(name) + `) && ` +
		`printf '` + pbsIDsMark + `%s\n' "$(printf '%s' "$ids" | tr '\n' ' ')" && ` +
		`mq_qstat() { { e=$(qstat -f -F json -E "$@" 2>&1 >&3 3>&-); s=$?; } 3>&1; printf '\n` + pbsStatusMark + `%s\n' "$s"; ` +
		`[ "$s" -eq 0 ] || { [ -n "$e" ] && ! printf '%s\n' "$e" | grep -v -e '^qstat: Unknown Job Id ' -e '^qstat: [^ ]* Job has finished' >&2; } || ` +
		`{ echo "qstat: exit status $s" >&2; return "$s"; }; } && ` +
		`{ [ -z "$ids" ] || printf '%s\n' "$ids" | LC_ALL=C grep -E '` + pbsIDPattern + `' | ` +
		`{ set --; while read -r j; do set -- "$@" "$j"; [ $# -lt ` + strconv.Itoa(pbsBatch) + ` ] || { mq_qstat "$@" || exit; set --; }; done; [ $# -eq 0 ] || mq_qstat "$@"; }; }`
}

// pbsBatch is how many ids one qstat is given: a job id has at most
// pbsJobIDMax bytes, so their command line stays far below any limit.
const pbsBatch = 100

// pbsIDPattern is the form of a job id (as pbsValidID has it, its length
// aside) in grep -E's words: only ids of this form are passed to qstat.
const pbsIDPattern = `^[0-9]+(\[[0-9]*])?(\.[-A-Za-z0-9._]*)?$`

// pbsOwnerMark starts the line ListCommand prints before the listing,
// with the login user's name after it; pbsIDsMark the line after it, with
// the ids of the user's jobs of the name; pbsStatusMark the line after
// each qstat, with its exit status.
const (
	pbsOwnerMark  = "mq-owner="
	pbsIDsMark    = "mq-ids="
	pbsStatusMark = "mq-qstat="
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

// ParseList reads ListCommand's output: `qstat -f -F json`, or the plain
// `qstat -f` text, of each batch of ids (pbsBatches), and keeps the login
// user's jobs of the name. Some PBS versions write JSON that is not valid
// (a backslash in Variable_List not escaped, bare numbers as names):
// pbsJSON reads it all the same, as a job's values can make the listing
// so.
func (PBS) ParseList(out []byte, name string) ([]Placeholder, error) {
	user, ids, out, err := pbsOwner(out)
	if err != nil {
		return nil, err
	}
	jobs, batches, err := pbsBatches(out)
	if err != nil {
		return nil, err
	}
	if batches == 0 {
		for id := range ids {
			if pbsValidID(id) == nil {
				return nil, fmt.Errorf("qstat's listing of job %s is missing", truncate(id, 50))
			}
		}
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
