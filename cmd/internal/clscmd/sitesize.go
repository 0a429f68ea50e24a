package clscmd

import (
	"github.com/urfave/cli/v2"

	mqcli "github.com/mq-hpc/mq/cmd/internal/cli"
	"github.com/mq-hpc/mq/internal/resource"
)

// siteSize holds the flags that say what each of a site's placeholders
// holds besides --slots: cls site add and set share them.
type siteSize struct {
	cpus, gpus int
	mem        string
	resources  cli.StringSlice
}

func (v *siteSize) flags(when string) []cli.Flag {
	replaces := ""
	if when != "" {
		replaces = " (they replace the site's; --resource none: no more)"
	}
	return []cli.Flag{
		&cli.IntFlag{Name: "cpus", Usage: "cores per placeholder, the same as --slots" + when, Destination: &v.cpus, DefaultText: "--slots"},
		&cli.StringFlag{Name: "mem", Usage: "memory per placeholder, `SIZE` (8G, 500M; 0 = the batch system's default): Slurm --mem, PBS select=1:mem, SGE mem_free per slot (and h_vmem from 4G a placeholder)" + when, Destination: &v.mem},
		&cli.IntFlag{Name: "gpus", Usage: "GPUs per placeholder (Slurm --gres=gpu:N, PBS select=1:ngpus, SGE -l gpu=N)" + when, Destination: &v.gpus, DefaultText: "none"},
		&cli.StringSliceFlag{Name: "resource", Usage: "a site-declared amount each placeholder holds, `NAME=N` (licences, scratch; repeat); the batch system is not asked for it" + when + replaces, Destination: &v.resources},
	}
}

// slots reconciles --cpus with --slots: the same setting, given once or
// alike. ok false: neither was given.
func (v *siteSize) slots(set map[string]bool, slots int) (n int, ok bool, err error) {
	switch {
	case set["cpus"] && set["slots"] && v.cpus != slots:
		return 0, false, mqcli.Usagef("--cpus %d and --slots %d say the same thing (cores per placeholder) differently; give one", v.cpus, slots)
	case set["cpus"]:
		if v.cpus < 1 || v.cpus > 4096 {
			return 0, false, mqcli.Usagef("--cpus must be 1..4096, not %d", v.cpus)
		}
		return v.cpus, true, nil
	}
	return slots, set["slots"], nil
}

// memory parses --mem: 0 asks for nothing.
func (v *siteSize) memory() (int64, error) {
	if v.mem == "0" {
		return 0, nil
	}
	n, err := resource.ParseMem(v.mem)
	if err != nil {
		return 0, mqcli.Usagef("--mem: %v", err)
	}
	return n, nil
}

// named parses the --resource flags.
func (v *siteSize) named() (map[string]int, error) {
	var r resource.Request
	for _, s := range v.resources.Value() {
		if err := r.AddNamed(s); err != nil {
			return nil, mqcli.Usagef("--resource: %v", err)
		}
	}
	return r.Named, nil
}
