package cli

import (
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/internal/resource"
	"github.com/mq-hpc/mq/protocol"
)

// resourceFlags are mqsub's flags for what a job asks of a placeholder.
// --cpus-per-task is Slurm's name for -c with the same meaning (an mq job
// is one task), so it is accepted; the other batch systems' spellings are
// hidden flags that only explain (hintFlags).
func resourceFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "c", Aliases: []string{"cpus", "cpus-per-task"}, Usage: "cores the job runs on: `N`, or auto (learned from its queue and target's finished jobs)"},
		&cli.StringFlag{Name: "mem", Usage: "memory the job may use: `SIZE` as Slurm writes it (8G, 500M, 1.5G; a bare number is MiB), or auto"},
		&cli.StringFlag{Name: "gpus", Usage: "whole GPUs the job is given: `N`"},
		&cli.StringSliceFlag{Name: "resource", Usage: "an amount of a resource the site declares, `NAME=N` (repeat, or a comma list): licences, scratch, ..."},
		&cli.BoolFlag{Name: "no-trace-mem", Usage: "with --wfformat: do not ask for each task's measured memory (its memoryInBytes), for sites whose placeholders cannot hold it; --mem then gives every task's"},
	}
}

// resourcesFrom reads the resource flags set on c.
func resourcesFrom(c *cli.Context) (protocol.Resources, error) {
	r, _, err := readResources(c, false)
	return r, err
}

// readResources reads the resource flags set on c. With zeros (mqalter),
// --gpus 0 and --resource NAME=0 drop a request: they are listed in drop
// (protocol.Alter.Drop) rather than refused.
func readResources(c *cli.Context, zeros bool) (r protocol.Resources, drop []string, err error) {
	if c.IsSet("no-trace-mem") && !c.IsSet("wfformat") {
		return r, nil, Usagef("--no-trace-mem goes with --wfformat")
	}
	if c.IsSet("c") {
		if err := r.SetCPUs(c.String("c")); err != nil {
			return r, nil, Usagef("--cpus: %v", err)
		}
	}
	if c.IsSet("mem") {
		if v := c.String("mem"); strings.Trim(v, "0") == "" && v != "" {
			return r, nil, Usagef("--mem %s is Slurm's \"all of the node's memory\"; mq asks for a size (--mem 8G) or learns it (--mem auto)", v)
		}
		if err := r.SetMem(c.String("mem")); err != nil {
			return r, nil, Usagef("--mem: %v", err)
		}
	}
	if v := c.String("gpus"); zeros && isZeroCount(v) {
		drop = append(drop, protocol.DropGPUs)
	} else if c.IsSet("gpus") {
		if err := r.SetGPUs(v); err != nil {
			if _, n, ok := strings.Cut(v, ":"); ok {
				return r, nil, Usagef("--gpus %s: mq asks for a count, --gpus %s; a GPU model is a site's (give such GPUs a site of their own)", v, n)
			}
			return r, nil, Usagef("--gpus: %v", err)
		}
	}
	for _, v := range splitList(c.StringSlice("resource")) {
		if name, n, _ := strings.Cut(v, "="); zeros && isZeroCount(n) {
			if err := resource.CheckName(name); err != nil {
				return r, nil, Usagef("--resource %s: %v", v, err)
			}
			drop = append(drop, name)
			continue
		}
		if err := r.AddNamed(v); err != nil {
			return r, nil, Usagef("--resource: %v", err)
		}
	}
	return r, drop, nil
}

// isZeroCount says whether v is a count of 0 ("0", "00").
func isZeroCount(v string) bool { return v != "" && strings.Trim(v, "0") == "" }

// resourceSet reports whether any resource flag is set on c, and the
// first one's name as given.
func resourceSet(c *cli.Context) (string, bool) {
	for _, f := range [][2]string{{"c", "--cpus"}, {"mem", "--mem"}, {"gpus", "--gpus"}, {"resource", "--resource"}} {
		if c.IsSet(f[0]) {
			return f[1], true
		}
	}
	return "", false
}

// resourcesHelp is mqsub's help paragraph about requests.
const resourcesHelp = `-c/--cpus, --mem, --gpus and --resource say what the job needs of a
placeholder (docs/guide/submitting.md, "Resources"); with -f they are
the default of lines that do not say. Slurm's and qsub's spellings
(--ntasks, --gres, --mem-per-cpu, -l nodes=1:ppn=4, ...) are answered with
the mq flag to write.`
