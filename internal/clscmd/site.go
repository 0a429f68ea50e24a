package clscmd

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/client"
	mqcli "github.com/mq-hpc/mq/internal/cli"
	"github.com/mq-hpc/mq/protocol"
	"github.com/mq-hpc/mq/site"
)

// clsSite manages sites through the running CLS (ops site.add, site.list,
// site.remove), which keeps them in its database and provisions them at
// once.
func clsSite(env mqcli.Env) *cli.Command {
	return &cli.Command{
		Name:  "site",
		Usage: "manage the sites placeholders run on (local processes, or SGE, Slurm, PBS clusters over SSH)",
		Subcommands: []*cli.Command{
			siteAdd(env),
			{
				Name:  "list",
				Usage: "list sites with their placeholders (queued, running, exited) and batch queue wait",
				Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON"}},
				Action: func(c *cli.Context) error {
					if c.NArg() > 0 {
						return mqcli.Usagef("site list takes no arguments")
					}
					cl, err := mqcli.Dial(c.Context, env, "cls")
					if err != nil {
						return err
					}
					defer cl.Close()
					sl, err := client.Do(c.Context, cl, protocol.OpSiteList, protocol.Empty{})
					if err != nil {
						return err
					}
					if c.Bool("json") {
						enc := json.NewEncoder(c.App.Writer)
						enc.SetIndent("", "  ")
						return enc.Encode(sl)
					}
					printSites(c.App.Writer, sl.Sites)
					return nil
				},
			},
			{
				Name:      "remove",
				Usage:     "cancel a site's placeholders (their jobs are requeued) and forget the site",
				ArgsUsage: "NAME",
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return mqcli.Usagef("site remove takes one NAME")
					}
					cl, err := mqcli.Dial(c.Context, env, "cls")
					if err != nil {
						return err
					}
					defer cl.Close()
					si, err := client.Do(c.Context, cl, protocol.OpSiteRemove, protocol.SiteRemove{Name: c.Args().First()})
					if err != nil {
						return err
					}
					fmt.Fprintf(c.App.Writer, "removed site %s (%d queued and %d running placeholders cancelled)\n", protocol.Printable(si.Name), si.Queued, si.Running)
					if si.Error != "" {
						fmt.Fprintf(c.App.ErrWriter, "cls: site %s: %s\n", protocol.Printable(si.Name), protocol.Printable(si.Error))
					}
					return nil
				},
			},
		},
	}
}

// siteAdd parses its own flags so they may come before or after NAME.
func siteAdd(env mqcli.Env) *cli.Command {
	return &cli.Command{
		Name:            "add",
		Usage:           "add a site; the CLS starts keeping placeholders there while it has work they can take",
		ArgsUsage:       "NAME",
		SkipFlagParsing: true,
		Flags: []cli.Flag{ // for --help; parsed below
			&cli.StringFlag{Name: "type", Usage: "local, sge, slurm or pbs (required)"},
			&cli.StringFlag{Name: "ssh", Usage: "`user@login-host[:port]` of a remote site"},
			&cli.StringFlag{Name: "key", Usage: "private key `FILE` for the login host (default: ssh-agent, then ~/.ssh/id_*)"},
			&cli.StringFlag{Name: "known-hosts", Usage: "known_hosts `FILE` to check the login host's key (default ~/.ssh/known_hosts)"},
			&cli.StringFlag{Name: "queue", Aliases: []string{"partition"}, Usage: "batch queue (SGE, PBS) or partition (Slurm)"},
			&cli.IntFlag{Name: "min", Usage: "placeholders to keep queued+running while there is work", Value: 0},
			&cli.IntFlag{Name: "max", Usage: "most placeholders queued+running", Value: 1},
			&cli.StringFlag{Name: "walltime", Usage: "each placeholder's batch time limit, e.g. 2h", Value: "1h"},
			&cli.IntFlag{Name: "slots", Usage: "jobs (cores) per placeholder, all on one host (Slurm --cpus-per-task, PBS select=1:ncpus, SGE -pe PE K)", Value: 1},
			&cli.StringFlag{Name: "pe", Usage: "SGE with --slots > 1: the parallel environment to ask for; it must exist on the cluster, be in the queue's pe_list and put all slots on one host (allocation_rule $pe_slots)", Value: "smp"},
			&cli.StringFlag{Name: "submit-args", Usage: "extra qsub/sbatch arguments, e.g. \"-A project\""},
			&cli.StringFlag{Name: "connect", Usage: "direct (compute nodes reach the CLS) or tunnel (through the login host)", Value: "direct"},
			&cli.StringFlag{Name: "idle", Usage: "a placeholder exits after this long without work", Value: "1m"},
			&cli.StringFlag{Name: "connect-timeout", Usage: "a placeholder that has run this long without connecting to the CLS is cancelled and the site marked degraded (default: cls serve --connect-timeout)"},
		},
		Action: func(c *cli.Context) error {
			fs := flag.NewFlagSet("cls site add", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var spec protocol.SiteSpec
			fs.StringVar(&spec.Type, "type", "", "")
			fs.StringVar(&spec.SSH, "ssh", "", "")
			key := fs.String("key", "", "")
			kh := fs.String("known-hosts", "", "")
			fs.StringVar(&spec.Queue, "queue", "", "")
			fs.StringVar(&spec.Queue, "partition", "", "")
			fs.IntVar(&spec.Min, "min", 0, "")
			fs.IntVar(&spec.Max, "max", 1, "")
			wall := fs.String("walltime", "1h", "")
			fs.IntVar(&spec.Slots, "slots", 1, "")
			fs.StringVar(&spec.PE, "pe", "", "")
			fs.StringVar(&spec.SubmitArgs, "submit-args", "", "")
			fs.StringVar(&spec.Connect, "connect", "", "")
			idle := fs.String("idle", "1m", "")
			connTimeout := fs.String("connect-timeout", "", "")
			names, err := parseInterspersed(fs, c.Args().Slice())
			if errors.Is(err, flag.ErrHelp) {
				return cli.ShowSubcommandHelp(c)
			}
			if err != nil {
				return err
			}
			if len(names) != 1 {
				return mqcli.Usagef("site add takes exactly one NAME")
			}
			spec.Name = names[0]
			for flagName, p := range map[string]*string{"key": key, "known-hosts": kh} {
				if *p == "" {
					continue
				}
				abs, err := filepath.Abs(*p) // the CLS may run elsewhere
				if err != nil {
					return mqcli.Usagef("--%s: %v", flagName, err)
				}
				*p = abs
			}
			spec.Key, spec.KnownHosts = *key, *kh
			for flagName, pair := range map[string]struct {
				s string
				d *float64
			}{"walltime": {*wall, &spec.Walltime}, "idle": {*idle, &spec.Idle}} {
				v, err := parseSeconds(pair.s)
				if err != nil {
					return mqcli.Usagef("--%s: %v", flagName, err)
				}
				*pair.d = v
			}
			if *connTimeout != "" {
				v, err := parseSeconds(*connTimeout)
				if err != nil {
					return mqcli.Usagef("--connect-timeout: %v", err)
				}
				spec.ConnectTimeout = v
			}
			if spec.Type != site.Local && spec.Connect == "" {
				spec.Connect = site.Direct
			}
			if err := site.Validate(&spec); err != nil {
				return mqcli.Usagef("%v", err)
			}
			cl, err := mqcli.Dial(c.Context, env, "cls")
			if err != nil {
				return err
			}
			defer cl.Close()
			si, err := client.Do(c.Context, cl, protocol.OpSiteAdd, spec)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "added site %s (%s)\n", protocol.Printable(si.Name), protocol.Printable(si.Type))
			return nil
		},
	}
}

func printSites(w io.Writer, sites []protocol.SiteInfo) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "SITE\tTYPE\tSTATE\tMIN-MAX\tQUEUED\tRUNNING\tEXITED\tCONNECTED\tQUEUE WAIT\tWHERE")
	for _, s := range sites {
		where := s.SSH
		if s.Type == site.Local {
			where = "this host"
		}
		if s.Embedded {
			where += fmt.Sprintf(" (cls serve --local %d)", s.Max)
		}
		if s.Connect == site.Tunnel {
			where += " (tunnel)"
		}
		if s.Error != "" {
			where += ": " + strings.ReplaceAll(s.Error, "\n", " ")
		}
		where = protocol.Printable(where)
		wait := "-"
		if s.QueueWaitS > 0 || s.OldestQueuedS > 0 {
			wait = protocol.Duration(max(s.QueueWaitS, 0)).Round(100 * time.Millisecond).String()
			if s.OldestQueuedS > 0 {
				wait += fmt.Sprintf(" (oldest %s)", protocol.Duration(s.OldestQueuedS).Round(time.Second))
			}
		}
		pr := protocol.Printable
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d-%d\t%d\t%d\t%d\t%d\t%s\t%s\n", pr(s.Name), pr(s.Type), pr(s.State), s.Min, s.Max, s.Queued, s.Running, s.Exited, s.Connected, wait, where)
	}
	tw.Flush()
}
