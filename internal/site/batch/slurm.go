package batch

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/mq-hpc/mq/internal/shellwords"
)

// Slurm is Slurm: sbatch, squeue, scancel.
type Slurm struct{}

func (Slurm) Directives(r Request) []string {
	d := []string{
		"#SBATCH --job-name=" + r.Name,
		"#SBATCH --output=" + r.LogDir + "/%x-%j.out",
		"#SBATCH --time=" + hms(r.Walltime),
		"#SBATCH --ntasks=1",
		"#SBATCH --cpus-per-task=" + strconv.Itoa(max(r.Slots, 1)),
	}
	if r.Mem > 0 {
		d = append(d, "#SBATCH --mem="+strconv.FormatInt(mebibytes(r.Mem), 10)+"M") // per node, and the job has one
	}
	if r.GPUs > 0 {
		d = append(d, "#SBATCH --gres=gpu:"+strconv.Itoa(r.GPUs))
	}
	if r.Queue != "" {
		d = append(d, "#SBATCH --partition="+r.Queue)
	}
	return d
}

func (Slurm) SubmitCommand(script string, args []string) string {
	return "sbatch --parsable " + quoteAll(args) + " " + shellwords.Quote(script)
}

// ParseSubmit reads `sbatch --parsable`: "4711" or "4711;cluster".
func (Slurm) ParseSubmit(out []byte) (string, error) {
	l := firstLine(out)
	id, _, _ := strings.Cut(l, ";")
	if !isDigits(id) {
		return "", fmt.Errorf("sbatch printed %q, not a job id", truncate(l, 200))
	}
	return id, nil
}

// squeueFormat: id, state (long form), submit time, start time, reason
// (why a pending job waits), name. The name comes last so a name holding
// the separator cannot shift fields.
const squeueFormat = "%i|%T|%V|%S|%r|%j"

// ListCommand lists the user's pending and running jobs of that name (no
// -t: finished jobs are left out, so a job that ends simply disappears).
func (Slurm) ListCommand(name string) string {
	return `squeue --noheader -u "$(id -un)" -n ` + shellwords.Quote(name) + ` -o '` + squeueFormat + `'`
}

// ParseList reads the squeue lines of ListCommand. A line it cannot read is
// an error, never skipped: an unreadable listing must not look empty.
func (Slurm) ParseList(out []byte, name string) ([]Placeholder, error) {
	var ps []Placeholder
	for n, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := strings.SplitN(line, "|", 6)
		if len(f) == 5 { // without the reason: the format of mq before it asked for one
			f = []string{f[0], f[1], f[2], f[3], "", f[4]}
		}
		if len(f) != 6 || f[0] == "" || f[1] == "" {
			return nil, fmt.Errorf("squeue line %d: %q is not id|state|submit|start|reason|name", n+1, truncate(line, 200))
		}
		if f[5] != name {
			continue
		}
		if !slurmValidID(f[0]) {
			return nil, fmt.Errorf("squeue line %d: job id %q", n+1, truncate(f[0], 50))
		}
		st, ok := slurmState(f[1])
		if !ok {
			return nil, fmt.Errorf("squeue line %d: unknown job state %q", n+1, truncate(f[1], 50))
		}
		p := Placeholder{ID: f[0], State: st, Submitted: parseLocalTime(f[2]), Started: parseLocalTime(f[3])}
		if why := strings.TrimSpace(f[4]); st == Queued && why != "" && why != "None" {
			p.Why = truncate(why, 200)
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// slurmValidID says whether id is a job id as squeue's %i prints it:
// "4711", an array's "4711_3" or "4711_[1-3%2]", a heterogeneous job's
// "4711+0". An id is handed to scancel, so it must never read as an
// option, and it is bounded.
func slurmValidID(id string) bool {
	if len(id) > 64 || id == "" || id[0] < '0' || id[0] > '9' {
		return false
	}
	for _, c := range id {
		if !(c >= '0' && c <= '9' || strings.ContainsRune("_+[]-,%", c)) {
			return false
		}
	}
	return true
}

// slurmState maps squeue's long state names (and their short codes):
// every base state and every flag squeue may show in its place (Slurm's
// job state codes page). An unknown one fails the whole listing (and
// degrades the site) until the job leaves it: POWER_UP_NODE, shown while
// a power-saving cluster boots the placeholder's node, did for minutes.
func slurmState(s string) (State, bool) {
	switch strings.ToUpper(s) {
	// Not started: waiting, being requeued, or its nodes booting.
	case "PENDING", "PD", "CONFIGURING", "CF", "REQUEUED", "RQ", "REQUEUE_HOLD", "RH", "REQUEUE_FED", "RF", "RESV_DEL_HOLD", "RD",
		"EXPEDITING", "POWER_UP_NODE":
		return Queued, true
	// Started and holding its allocation (UPDATE_DB: a note to the
	// accounting, on a job whose state it hides).
	case "RUNNING", "R", "SIGNALING", "SI", "STAGE_OUT", "SO", "RESIZING", "RS", "UPDATE_DB":
		return Running, true
	case "SUSPENDED", "S", "STOPPED", "ST":
		return Suspended, true
	// COMPLETING: the batch system is killing it; it takes no more work, and
	// can stay so for long, so it must not hold back a replacement.
	case "COMPLETING", "CG", "COMPLETED", "CD", "CANCELLED", "CA", "FAILED", "F", "TIMEOUT", "TO", "NODE_FAIL", "NF", "PREEMPTED", "PR",
		"OUT_OF_MEMORY", "OOM", "BOOT_FAIL", "BF", "DEADLINE", "DL", "REVOKED", "RV", "SPECIAL_EXIT", "SE",
		"LAUNCH_FAILED", "RECONFIG_FAIL":
		return Exited, true
	}
	return 0, false
}

func (Slurm) CancelCommand(ids []string) string { return "scancel " + quoteAll(ids) }
