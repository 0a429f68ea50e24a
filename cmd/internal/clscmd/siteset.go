package clscmd

import (
	"errors"
	"flag"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/client"
	mqcli "github.com/mq-hpc/mq/cmd/internal/cli"
	"github.com/mq-hpc/mq/internal/site"
	"github.com/mq-hpc/mq/protocol"
)

// siteSetFlags declares cls site set's flags: the settings a site can
// change while it runs.
func siteSetFlags() ([]cli.Flag, *siteSetValues) {
	v := &siteSetValues{}
	flags := append([]cli.Flag{
		&cli.Float64Flag{Name: "price", Usage: "what one core-hour at the site costs (0 = free)", Destination: &v.price},
		&cli.IntFlag{Name: "slots", Usage: "jobs (cores) per placeholder, for placeholders submitted from now on", Destination: &v.slots},
		&cli.IntFlag{Name: "min", Usage: "placeholders to keep queued+running while there is work", Destination: &v.min},
		&cli.IntFlag{Name: "max", Usage: "most placeholders queued+running", Destination: &v.max},
		&cli.StringFlag{Name: "provision", Usage: "how many placeholders to hold: " + provisionHelp() + "; none: as many as the ready work warrants", Destination: &v.provision},
		&cli.StringFlag{Name: "walltime", Usage: "each placeholder's batch time limit, for placeholders submitted from now on", Destination: &v.walltime},
		&cli.StringFlag{Name: "idle", Usage: "a placeholder exits after this long without work, for placeholders submitted from now on", Destination: &v.idle},
		&cli.StringFlag{Name: "output", Usage: "streams, files or default (as cls serve --output): how the site's placeholders keep jobs' stdout and stderr, for placeholders that connect from now on", Destination: &v.output},
		&cli.StringFlag{Name: "queue", Aliases: []string{"partition"}, Usage: "batch queue (SGE, PBS) or partition (Slurm), for placeholders submitted from now on (\"\" = the cluster's default)", Destination: &v.queue},
		&cli.StringFlag{Name: "submit-args", Usage: "extra qsub/sbatch arguments, e.g. \"-A project\", for placeholders submitted from now on (they replace the site's; \"\" = none)", Destination: &v.submitArgs},
		&cli.StringFlag{Name: "cls-addr", Usage: "`HOST[:PORT]` where the site's compute nodes reach the CLS (direct mode), for placeholders submitted from now on (queued ones are cancelled; \"\" = the CLS's own address)", Destination: &v.clsAddr},
	}, v.size.flags(", for placeholders submitted from now on")...)
	// A flag left out leaves its setting as it is: no default applies.
	for _, f := range flags {
		switch f := f.(type) {
		case *cli.IntFlag:
			f.DefaultText = "unchanged"
		case *cli.Float64Flag:
			f.DefaultText = "unchanged"
		case *cli.StringFlag:
			f.DefaultText = "unchanged"
		case *cli.StringSliceFlag:
			f.DefaultText = "unchanged"
		}
	}
	return flags, v
}

type siteSetValues struct {
	price                     float64
	slots, min, max           int
	provision, walltime, idle string
	output, queue, submitArgs string
	clsAddr                   string
	size                      siteSize
}

// siteSet changes a site's settings without removing it (op site.set);
// its placeholders keep running.
func siteSet(env mqcli.Env) *cli.Command {
	flags, _ := siteSetFlags()
	return &cli.Command{
		Name:            "set",
		Usage:           "change a site's price, placeholder size (slots or cpus, mem, gpus, resources), min, max, provisioning, walltime, idle timeout, output mode, queue, submit arguments or the CLS's address; its placeholders keep running",
		ArgsUsage:       "NAME",
		SkipFlagParsing: true,
		Flags:           flags,
		Action: func(c *cli.Context) error {
			flags, v := siteSetFlags()
			names, set, err := parseFlags(c, flags)
			if errors.Is(err, flag.ErrHelp) {
				return cli.ShowSubcommandHelp(c)
			}
			if err != nil {
				return err
			}
			if len(names) != 1 {
				return mqcli.Usagef("site set takes exactly one NAME")
			}
			if len(set) == 0 {
				return mqcli.Usagef("site set %s: nothing to change (--price, --slots, --cpus, --mem, --gpus, --resource, --min, --max, --provision, --walltime, --idle, --output, --queue, --submit-args, --cls-addr)", protocol.Printable(names[0]))
			}
			req := protocol.SiteSet{Name: names[0]}
			if set["price"] {
				req.Price = &v.price
			}
			slots, ok, err := v.size.slots(set, v.slots)
			if err != nil {
				return err
			}
			if ok {
				req.Slots = &slots
			}
			if set["mem"] {
				mem, err := v.size.memory()
				if err != nil {
					return err
				}
				req.Mem = &mem
			}
			if set["gpus"] {
				req.GPUs = &v.size.gpus
			}
			if set["resource"] {
				named := ""
				if vals := v.size.resources.Value(); len(vals) != 1 || vals[0] != "none" {
					m, err := v.size.named()
					if err != nil {
						return err
					}
					named = site.FormatResources(m)
				}
				req.Resources = &named
			}
			if set["min"] {
				req.Min = &v.min
			}
			if set["max"] {
				if v.max == 0 {
					return maxZero()
				}
				req.Max = &v.max
			}
			if set["output"] {
				switch v.output {
				case protocol.OutputModeFiles, protocol.OutputModeStreams:
				case "default":
					v.output = ""
				default:
					return mqcli.Usagef("--output %q: want files, streams or default (as cls serve --output)", protocol.Printable(v.output))
				}
				req.Output = &v.output
			}
			if set["provision"] {
				if v.provision == "none" {
					v.provision = ""
				}
				req.Provision = &v.provision
			}
			for name, d := range map[string]**float64{"walltime": &req.Walltime, "idle": &req.Idle} {
				if !set[name] {
					continue
				}
				s := v.walltime
				if name == "idle" {
					s = v.idle
				}
				secs, err := parseSeconds(s)
				if err != nil {
					return mqcli.Usagef("--%s: %v", name, err)
				}
				*d = &secs
			}
			if set["queue"] || set["partition"] {
				req.Queue = &v.queue
			}
			if set["submit-args"] {
				req.SubmitArgs = &v.submitArgs
			}
			if set["cls-addr"] {
				req.CLSAddr = &v.clsAddr
			}
			if err := checkSet(req); err != nil {
				return err
			}
			cl, err := mqcli.Dial(c.Context, env, "cls")
			if err != nil {
				return err
			}
			defer cl.Close()
			si, err := client.Do(c.Context, cl, protocol.OpSiteSet, req)
			if err != nil {
				return err
			}
			printSites(c.App.Writer, []protocol.SiteInfo{si})
			return nil
		},
	}
}

// checkSet checks each value req gives as cls site add would, so that a
// value wrong in itself (--max -1, --walltime 10s) is a usage error (exit 2)
// here as there. What is wrong only with the site's other settings (--min
// above its --max, --queue for a local site) the CLS refuses (exit 1).
func checkSet(req protocol.SiteSet) error {
	// A site whose settings allow any value the others could: each value
	// given replaces one of them.
	spec := site.ApplySet(protocol.SiteSpec{Name: "s", Type: site.Slurm, SSH: "u@h", Max: 10000, Slots: 1, Walltime: 366 * 24 * 3600, Idle: 1}, req)
	if err := site.Validate(&spec); err != nil {
		return mqcli.Usagef("%v", err)
	}
	return nil
}

// maxZero refuses --max 0 given on the command line: the site's record
// takes 0 for "not given" (then 1), and a user pausing a site with
// --max 0 got a placeholder instead.
func maxZero() error {
	return mqcli.Usagef("--max 0: want 1 <= max <= 10000 (to stop using a site, cls site remove it)")
}
