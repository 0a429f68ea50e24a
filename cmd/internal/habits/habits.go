// Package habits answers the flags users of Slurm (sbatch), PBS, Torque
// and SGE (qsub) type out of habit and mqsub does not take: each is a
// hidden flag, refused with one line naming what mq writes instead.
package habits

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"
)

// A hint is a batch system's spelling of a request that mqsub does not
// take: its flag (hidden) and what to write instead, given its value.
type hint struct {
	names []string // the first is what the message calls it
	bool  bool     // takes no value
	from  string   // the system whose spelling it is
	say   func(v string) string
}

// hints are the spellings users of Slurm (sbatch), PBS, Torque and SGE
// (qsub) type out of habit; each is refused with one line naming the
// mq flag, never "unknown flag" alone.
var hints = []hint{
	{names: []string{"ntasks", "n"}, from: "Slurm", say: func(v string) string {
		return "an mq job is one task: ask for its cores with --cpus " + orN(v) + ", or for many jobs with --array"
	}},
	{names: []string{"ntasks-per-node"}, from: "Slurm", say: func(v string) string {
		return "an mq job is one task: ask for its cores with --cpus " + orN(v)
	}},
	{names: []string{"nodes", "N"}, from: "Slurm", say: func(string) string { // qsub's -N NAME: nameHint
		return "an mq job runs on one node, in one placeholder: ask for its cores with --cpus N"
	}},
	{names: []string{"mincpus"}, from: "Slurm", say: func(v string) string { return "mq writes --cpus " + orN(v) }},
	{names: []string{"mem-per-cpu"}, from: "Slurm", say: func(v string) string {
		return "mq asks for the job's whole memory: --mem SIZE, the cores times " + orSize(v)
	}},
	{names: []string{"mem-per-gpu"}, from: "Slurm", say: func(v string) string {
		return "mq asks for the job's whole memory: --mem SIZE, the GPUs times " + orSize(v)
	}},
	{names: []string{"gres"}, from: "Slurm", say: gresHint},
	{names: []string{"gpus-per-task"}, from: "Slurm", say: gpusHint},
	{names: []string{"gpus-per-node"}, from: "Slurm", say: gpusHint},
	{names: []string{"cpus-per-gpu"}, from: "Slurm", say: func(string) string {
		return "mq asks for the job's cores and GPUs apart: --cpus N --gpus M"
	}},
	{names: []string{"licenses", "L"}, from: "Slurm", say: licenseHint},
	{names: []string{"tmp"}, from: "Slurm", say: func(string) string {
		return "mq counts scratch space as a site-declared resource: --resource NAME=N (cls site set --resource)"
	}},
	{names: []string{"exclusive"}, bool: true, from: "Slurm", say: func(string) string {
		return "ask for all of a placeholder's cores with --cpus N (and its memory with --mem SIZE)"
	}},
	{names: []string{"dependency"}, from: "Slurm", say: Dependency},
	{names: []string{"W", "additional-attributes"}, from: "qsub", say: qsubWHint}, // PBS calls it additional_attributes
	{names: []string{"hold_jid"}, from: "SGE", say: func(string) string {
		// SGE starts the job once the named jobs have ended, whatever
		// their exit status: afterany.
		return "mq waits on targets, not job ids: --after-any TARGET runs after every job of TARGET has ended, in any state (-p/--after TARGET: only once all are done)"
	}},
	{names: []string{"job-name", "J"}, from: "Slurm", say: nil},           // nameHint: a name, or PBS Pro's array
	{names: []string{"l", "resource-list"}, from: "qsub", say: qsubLHint}, // qsub's man page calls it resource_list
	{names: []string{"pe"}, from: "SGE", say: nil},                        // hintError: its N is the next argument
	// Where and how the job runs, and who hears of it.
	{names: []string{"cwd"}, bool: true, from: "SGE", say: func(string) string {
		return "an mq job runs in the directory mqsub runs in already (-d DIR for another)"
	}},
	{names: []string{"wd"}, from: "SGE", say: func(v string) string { return "mq writes -d " + orWord(v, "DIR") }},
	{names: []string{"chdir", "D"}, from: "Slurm", say: func(v string) string { return "mq writes -d " + orWord(v, "DIR") }},
	{names: []string{"j", "join"}, from: "SGE", say: func(string) string {
		return "without -e, mq writes stderr into -o's file already; -e PATH keeps it apart"
	}},
	{names: []string{"S", "shell"}, from: "SGE", say: func(string) string {
		return "mq runs COMMAND with /bin/sh -c; for another shell make it the command: mqsub TARGET bash script.sh"
	}},
	{names: []string{"partition"}, from: "Slurm", say: func(v string) string {
		return "an mq job goes to a queue (-q QUEUE); the cluster's partition is its site's: cls site add NAME --partition " + orWord(v, "P")
	}},
	{names: []string{"wrap"}, from: "Slurm", say: func(v string) string {
		return "mq runs COMMAND with /bin/sh -c already: mqsub TARGET '" + orWord(v, "COMMAND") + "'"
	}},
	{names: []string{"sync"}, from: "SGE", say: func(string) string {
		return "mq writes -b (--block): wait for the job and exit with its exit status"
	}},
	{names: []string{"wait"}, bool: true, from: "Slurm", say: func(string) string {
		return "mq writes -b (--block): wait for the job and exit with its exit status"
	}},
	{names: []string{"account", "A"}, from: "Slurm", say: func(v string) string {
		return "placeholders are charged as their site submits them: cls site add NAME ... --submit-args '-A " + orWord(v, "ACCOUNT") + "'"
	}},
	{names: []string{"mail-type"}, from: "Slurm", say: mailHint},
	{names: []string{"mail-user"}, from: "Slurm", say: mailHint},
	{names: []string{"m", "mail-options"}, from: "qsub", say: mailHint},
	{names: []string{"M", "mail-list"}, from: "qsub", say: mailHint},
}

// mailHint answers the batch systems' mail flags.
func mailHint(string) string {
	return "mq sends no mail; mqsub -b, or mqwait ID..., waits for jobs to end"
}

// orWord is v, or word when v is empty.
func orWord(v, word string) string {
	if v == "" {
		return word
	}
	return v
}

// Flags are the hidden flags of the hints: mqsub takes them so as to
// refuse them (Refusal), never "unknown flag" alone.
func Flags() []cli.Flag { return flagsOf(hints) }

// alterNames are the hints that name a job's request, which qalter -l
// and scontrol update change too: mqalter refuses them as mqsub does.
var alterNames = []string{"l", "mem-per-cpu", "mem-per-gpu", "mincpus", "gres", "gpus-per-task", "gpus-per-node", "cpus-per-gpu", "licenses", "tmp"}

// AlterFlags are the hidden flags of the hints for a request, for
// mqalter (Refusal answers them).
func AlterFlags() []cli.Flag {
	var hs []hint
	for _, h := range hints {
		if slices.Contains(alterNames, h.names[0]) {
			hs = append(hs, h)
		}
	}
	return flagsOf(hs)
}

func flagsOf(hints []hint) []cli.Flag {
	var fs []cli.Flag
	for _, h := range hints {
		if h.bool {
			fs = append(fs, &cli.BoolFlag{Name: h.names[0], Aliases: h.names[1:], Hidden: true})
			continue
		}
		fs = append(fs, &cli.StringFlag{Name: h.names[0], Aliases: h.names[1:], Hidden: true})
	}
	return fs
}

// Refusal is the one-line refusal of the first hint flag set on c, or
// "".
func Refusal(c *cli.Context) string {
	for _, h := range hints {
		if !c.IsSet(h.names[0]) {
			continue
		}
		given := Dashed(h.names[0])
		if h.bool {
			return fmt.Sprintf("%s is %s's spelling; %s", given, h.from, h.say(""))
		}
		v := c.String(h.names[0])
		if msg := nameHint(h.names[0], v); msg != "" {
			return msg
		}
		if h.say == nil { // -pe PE N
			n := c.Args().First()
			return fmt.Sprintf("%s is SGE's spelling; mq writes --cpus %s for a job of that many slots on one node", spelled(given, v, n), orN(n))
		}
		return fmt.Sprintf("%s is %s's spelling; %s", spelled(given, v), h.from, h.say(v))
	}
	return ""
}

// spelled is a flag with its values as typed, the empty ones left out
// (-l "$RES" with RES unset): no double space in a message.
func spelled(flag string, values ...string) string {
	for _, v := range values {
		if v != "" {
			flag += " " + v
		}
	}
	return flag
}

// nameHint answers the letters that name a job in one batch system and
// mean something else in another: qsub's -N NAME (Slurm's -N 2 is
// --nodes), sbatch's -J NAME (PBS Pro's -J 1-100 is an array); "" for
// other flags, and for -N with a node count.
func nameHint(flag, v string) string {
	if flag != "nodes" && flag != "job-name" {
		return ""
	}
	if v != "" && v[0] >= '0' && v[0] <= '9' {
		if flag == "nodes" {
			return ""
		}
		return "-J " + v + " is PBS Pro's array; mq writes --array " + v
	}
	given := map[string]string{"nodes": spelled("-N", v) + " is qsub's", "job-name": spelled("-J", v) + " is sbatch's"}[flag]
	return given + " job name; mq's is the TARGET argument: mqsub " + orWord(v, "TARGET") + " COMMAND"
}

// Dashed is a flag as its batch system spells it: one letter, and
// SGE's words, with one dash.
func Dashed(name string) string {
	switch name {
	case "pe", "hold_jid", "cwd", "wd", "sync":
		return "-" + name
	}
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

func orN(v string) string {
	if n, err := strconv.Atoi(v); err == nil && n > 0 {
		return v
	}
	return "N"
}

func orSize(v string) string {
	if v == "" {
		return "SIZE"
	}
	return v
}

// gresHint translates Slurm's --gres=gpu[:TYPE]:N (several comma
// separated) into mq's flags where it can.
func gresHint(v string) string {
	var out []string
	for _, g := range strings.Split(v, ",") {
		parts := strings.Split(g, ":")
		name, n := orWord(parts[0], "NAME"), "1"
		if len(parts) > 1 {
			n = parts[len(parts)-1]
		}
		if name == "gpu" {
			out = append(out, "--gpus "+orN(n))
		} else {
			out = append(out, "--resource "+name+"="+orN(n))
		}
	}
	return "mq writes " + strings.Join(out, " ")
}

// gpusHint translates Slurm's GPU counts ([TYPE:]N): an mq job's GPUs
// are on one node, given to it alone.
func gpusHint(v string) string {
	n := v
	if i := strings.LastIndexByte(v, ':'); i >= 0 {
		n = v[i+1:]
	}
	return "mq writes --gpus " + orN(n) + " (all of a job's GPUs are on one node)"
}

// licenseHint translates Slurm's --licenses=NAME[:N] (comma separated).
func licenseHint(v string) string {
	var out []string
	for _, l := range strings.Split(v, ",") {
		name, n, ok := strings.Cut(l, ":")
		if !ok {
			n = "1"
		}
		if name == "" {
			name = "NAME"
		}
		out = append(out, "--resource "+name+"="+orN(n))
	}
	return "mq writes " + strings.Join(out, " ") + " (a resource the site declares)"
}

// qsubLHint translates qsub's -l resource lists (PBS/Torque nodes=1:ppn=4,
// mem=8gb; PBS Pro select=1:ncpus=4:mem=8gb:ngpus=1; SGE h_vmem=2G,
// per slot) into mq's flags.
func qsubLHint(v string) string {
	var flags, notes []string
	for _, item := range strings.Split(v, ",") {
		// select=1:ncpus=4:mem=8gb and nodes=1:ppn=4 chain pairs with ':';
		// walltime=01:00:00 has ':' in its value.
		var pairs []string
		for _, tok := range strings.Split(item, ":") {
			if !strings.Contains(tok, "=") && len(pairs) > 0 {
				pairs[len(pairs)-1] += ":" + tok
				continue
			}
			pairs = append(pairs, tok)
		}
		for _, pair := range pairs {
			k, val, _ := strings.Cut(pair, "=")
			switch strings.ToLower(k) {
			case "ppn", "ncpus":
				flags = append(flags, "--cpus "+orN(val))
			case "mem":
				flags = append(flags, "--mem "+qsubSize(val))
			case "ngpus", "gpus":
				flags = append(flags, "--gpus "+orN(val))
			case "nodes", "select":
				if n, err := strconv.Atoi(val); err == nil && n > 1 {
					notes = append(notes, "an mq job runs on one node")
				}
			case "h_vmem", "mem_free", "vmem", "pmem", "pvmem":
				notes = append(notes, k+" is per slot or process, --mem the job's whole memory")
				if len(flags) == 0 {
					flags = append(flags, "--mem SIZE")
				}
			case "walltime", "h_rt":
				flags = append(flags, "--time "+val)
			}
		}
	}
	if len(flags) == 0 {
		flags = []string{"--cpus N --mem SIZE --gpus N"}
	}
	s := "mq writes " + strings.Join(flags, " ")
	if len(notes) > 0 {
		s += " (" + strings.Join(notes, "; ") + ")"
	}
	return s
}

// qsubSize is a PBS size (8gb, 500mb) as --mem takes it (8G, 500M).
func qsubSize(v string) string {
	u := strings.ToUpper(v)
	u = strings.TrimSuffix(u, "B")
	if u == "" {
		return "SIZE"
	}
	return u
}

// Dependency answers sbatch's --dependency=TYPE:JOBID[:JOBID...]: mq
// jobs wait on targets (all of a target's jobs), not on job ids.
func Dependency(v string) string {
	kind, _, _ := strings.Cut(v, ":")
	switch kind {
	case "afterany":
		return "mq waits on targets, not job ids: --after-any TARGET runs after every job of TARGET has ended, in any state"
	case "afterok":
		return "mq waits on targets, not job ids: -p TARGET (or --after TARGET) runs after every job of TARGET is done"
	case "aftercorr":
		return "mq waits on targets, not job ids: with --array, -p 'TARGET{}' makes member i wait for target TARGET<i> (give the earlier array's members targets TARGET{})"
	}
	return "mq waits on targets, not job ids: -p TARGET (afterok) or --after-any TARGET (afterany)"
}

// qsubWHint answers PBS qsub's -W ATTR=VALUE; depend=TYPE:JOBID[:JOBID...]
// is the one users bring, as sbatch's --dependency.
func qsubWHint(v string) string {
	attr, val, ok := strings.Cut(v, "=")
	switch {
	case attr == "depend":
		return Dependency(val)
	case attr == "block" || !ok:
		// sbatch's -W is --wait, and takes no value.
		return "mqsub -b (--block) waits for the job to end and exits with its status"
	}
	return "mq has no job attributes: dependencies are -p TARGET (afterok) and --after-any TARGET (afterany)"
}

// squeueStates are the state names squeue -t takes, which mqstat -t
// (the target) would read as a target's name.
var squeueStates = []string{"PD", "PENDING", "R", "RUNNING", "CG", "COMPLETING", "CD", "COMPLETED", "F", "FAILED", "CA", "CANCELLED", "TO", "TIMEOUT", "S", "SUSPENDED", "ALL"}

// SqueueState says whether name is a state squeue -t takes (any case).
func SqueueState(name string) bool { return slices.Contains(squeueStates, strings.ToUpper(name)) }
