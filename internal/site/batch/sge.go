package batch

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"strconv"
	"strings"

	"github.com/mq-hpc/mq/internal/shellwords"
)

// DefaultPE is the SGE parallel environment placeholders with more than one
// slot ask for unless the site names another (cls site add --pe).
const DefaultPE = "smp"

// SGEVmemFloor is the least memory a placeholder asks h_vmem for: under
// it the limit could stop the agent itself.
const SGEVmemFloor = 4 << 30

// SGE is Son of Grid Engine (and other Grid Engines: qsub, qstat -xml,
// qdel).
type SGE struct{}

func (SGE) Directives(r Request) []string {
	d := []string{
		"#$ -N " + r.Name,
		"#$ -S /bin/sh",
		"#$ -j y",
		"#$ -o " + r.LogDir + "/",
		"#$ -l h_rt=" + hms(r.Walltime),
	}
	if r.Queue != "" {
		d = append(d, "#$ -q "+r.Queue)
	}
	if r.Slots > 1 {
		// Grid Engine gives several cores only through a parallel
		// environment, whose name each cluster chooses (--pe; "smp" is
		// the usual one). It must place all slots on one host
		// (allocation_rule $pe_slots): the agent runs its jobs there.
		pe := r.PE
		if pe == "" {
			pe = DefaultPE
		}
		d = append(d, "#$ -pe "+pe+" "+strconv.Itoa(r.Slots))
	}
	if r.Mem > 0 {
		// Grid Engine's memory complexes are per slot: the job gets
		// slots times this. mem_free is what it schedules by; h_vmem the
		// limit it enforces, on each process's virtual size, which the
		// agent's own (a Go program reserves address space: about 1.6 GB)
		// would pass under a small one. The agent enforces each job's
		// memory itself, so below SGEVmemFloor only mem_free is asked.
		per := strconv.FormatInt((mebibytes(r.Mem)+int64(max(r.Slots, 1))-1)/int64(max(r.Slots, 1)), 10) + "M"
		if r.Mem >= SGEVmemFloor {
			d = append(d, "#$ -l h_vmem="+per+",mem_free="+per)
		} else {
			d = append(d, "#$ -l mem_free="+per)
		}
	}
	if r.GPUs > 0 {
		// No Grid Engine has a GPU resource of its own; "gpu" is the
		// consumable complex most clusters define (per host, so asked
		// once for the job). A cluster that names it otherwise asks with
		// --submit-args.
		d = append(d, "#$ -l gpu="+strconv.Itoa(r.GPUs))
	}
	return d
}

func (SGE) SubmitCommand(script string, args []string) string {
	return "qsub -terse " + quoteAll(args) + " " + shellwords.Quote(script)
}

// ParseSubmit reads `qsub -terse`: "4711", or "4711.1-10:1" for an array.
func (SGE) ParseSubmit(out []byte) (string, error) {
	l := firstLine(out)
	id, _, _ := strings.Cut(l, ".")
	if !isDigits(id) {
		return "", fmt.Errorf("qsub printed %q, not a job id", truncate(l, 200))
	}
	return id, nil
}

func (SGE) ListCommand(string) string { return `qstat -xml -u "$(id -un)"` }

type sgeJob struct {
	Number    string `xml:"JB_job_number"`
	Name      string `xml:"JB_name"`
	State     string `xml:"state"`
	Submitted string `xml:"JB_submission_time"`
	Started   string `xml:"JAT_start_time"`
}

// ParseList reads `qstat -xml`: running jobs under queue_info, pending ones
// under job_info. Array tasks of one job appear as several entries of the
// same number; placeholders are never arrays, so they are kept apart only
// by number.
func (SGE) ParseList(out []byte, name string) ([]Placeholder, error) {
	var doc struct {
		XMLName xml.Name
		Running []sgeJob `xml:"queue_info>job_list"`
		Pending []sgeJob `xml:"job_info>job_list"`
	}
	if len(bytes.TrimSpace(out)) == 0 {
		return nil, fmt.Errorf("qstat -xml printed nothing")
	}
	if err := xml.Unmarshal(out, &doc); err != nil {
		return nil, fmt.Errorf("qstat -xml: %w", err)
	}
	if doc.XMLName.Local != "job_info" {
		return nil, fmt.Errorf("qstat -xml printed <%s>, not <job_info>", doc.XMLName.Local)
	}
	var ps []Placeholder
	for _, j := range append(doc.Running, doc.Pending...) {
		if strings.TrimSpace(j.Name) != name {
			continue
		}
		id := strings.TrimSpace(j.Number)
		if !isDigits(id) || len(id) > sgeMaxID {
			return nil, fmt.Errorf("qstat -xml: job number %q", truncate(id, 50))
		}
		state := strings.TrimSpace(j.State)
		p := Placeholder{ID: id, State: sgeState(state), Submitted: parseLocalTime(j.Submitted), Started: parseLocalTime(j.Started)}
		if p.State == Queued && strings.Contains(state, "h") {
			p.Why = "held" // qhold, qsub -h, or a hold by the admin: it waits until released
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// sgeMaxID bounds a job number (Grid Engine's wrap at 10 digits at most).
const sgeMaxID = 20

// sgeState maps Grid Engine's state letters: E (error: it will never run
// until someone clears it) wins, then d (being deleted), then s/S/T
// (suspended: the job, the queue, or by a load threshold), then q/w
// (pending, held ones too: hqw; and Rq, a job rescheduled after its node
// failed or by qmod -rj, waiting to run again), then r/t/R (running,
// transferring, restarted and running: Rr; a running job on hold: hr).
func sgeState(s string) State {
	switch {
	case strings.Contains(s, "E"):
		return Error
	case strings.Contains(s, "d"):
		return Exited
	case strings.ContainsAny(s, "sST"):
		return Suspended
	case strings.ContainsAny(s, "qw"):
		return Queued
	case strings.ContainsAny(s, "rtR"):
		return Running
	case strings.Contains(s, "h"):
		return Queued
	}
	return Running // an unknown state holds resources until shown otherwise
}

func (SGE) CancelCommand(ids []string) string { return "qdel " + quoteAll(ids) }

func (SGE) ExplainCommand(id string) string { return "qstat -j " + shellwords.Quote(id) }

// ParseExplain reads `qstat -j`'s first "error reason" line, e.g.
// "error reason    1:  12/03/2026 09:00:37 [1001:501]: error: can't
// chdir to /x: No such file or directory", as its message alone ("can't
// chdir to /x: No such file or directory").
func (SGE) ParseExplain(out []byte) string {
	for line := range strings.SplitSeq(string(out), "\n") {
		rest, ok := strings.CutPrefix(line, "error reason")
		if !ok {
			continue
		}
		if _, msg, ok := strings.Cut(rest, "]: "); ok {
			rest = msg // past the time and [uid:pid]
		} else if _, msg, ok := strings.Cut(rest, ":"); ok {
			rest = msg // past the task number
		}
		rest = strings.TrimSpace(rest)
		return strings.TrimSpace(strings.TrimPrefix(rest, "error:"))
	}
	return ""
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
