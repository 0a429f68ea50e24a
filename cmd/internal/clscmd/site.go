package clscmd

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/cmd/internal/acct"
	"github.com/mq-hpc/mq/cmd/internal/argfile"
	mqcli "github.com/mq-hpc/mq/cmd/internal/cli"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/internal/resource"
	"github.com/mq-hpc/mq/internal/site"
	"github.com/mq-hpc/mq/protocol"
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
			siteSet(env),
			siteLogin(env),
			siteLogout(env),
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
					if si.Error != "" {
						// The cancel failed: the counts are not of placeholders cancelled.
						fmt.Fprintf(c.App.Writer, "removed site %s\n", protocol.Printable(si.Name))
						fmt.Fprintf(c.App.ErrWriter, "cls: site %s: %s\n", protocol.Printable(si.Name), protocol.Printable(si.Error))
						return nil
					}
					fmt.Fprintf(c.App.Writer, "removed site %s (%d queued and %d running placeholders cancelled)\n", protocol.Printable(si.Name), si.Queued, si.Running)
					return nil
				},
			},
		},
	}
}

// siteAddFlags declares cls site add's flags once, for --help and for
// parsing (parseFlags), with their values in a spec and the strings that
// need checking.
func siteAddFlags() ([]cli.Flag, *siteAddValues) {
	v := &siteAddValues{}
	flags := []cli.Flag{
		&cli.StringFlag{Name: "type", Usage: "local, sge, slurm or pbs (required)", Destination: &v.spec.Type},
		&cli.StringFlag{Name: "ssh", Usage: "`user@login-host[:port]` of a remote site, or a host NAME[:port] of your ssh config (~/.ssh/config, /etc/ssh/ssh_config), read as ssh NAME would for the flags not given: HostName, User, Port, IdentityFile (--key), ProxyJump (--jump), UserKnownHostsFile (--known-hosts)", Destination: &v.spec.SSH},
		&cli.StringFlag{Name: "jump", Usage: "`user@jump-host[:port]` the login host is reached through, as ssh -J (its key checked in the same known_hosts; the same keys log in)", Destination: &v.spec.Jump},
		&cli.BoolFlag{Name: "openssh", Usage: "reach the login host by running your ssh command, your ssh config applied whole (ProxyCommand, several jumps, Kerberos, Match): --ssh is then ssh's destination, [user@]host[:port]; where the login host asks for a password or a second factor, log in once with cls site login NAME and the CLS's connections ride on that one", Destination: &v.spec.OpenSSH},
		&cli.StringFlag{Name: "key", Usage: "private key `FILE` for the login host, offered with its certificate FILE-cert.pub if there is one (default: ssh-agent, then ~/.ssh/id_*)", Destination: &v.key, TakesFile: true},
		&cli.StringFlag{Name: "known-hosts", Usage: "known_hosts `FILE` to check the login host's key (default ~/.ssh/known_hosts)", Destination: &v.knownHosts, TakesFile: true},
		&cli.StringFlag{Name: "queue", Aliases: []string{"partition"}, Usage: "batch queue (SGE, PBS) or partition (Slurm)", Destination: &v.spec.Queue},
		&cli.IntFlag{Name: "min", Usage: "placeholders to keep queued+running while there is work", Value: 0, Destination: &v.spec.Min},
		&cli.IntFlag{Name: "max", Usage: "most placeholders queued+running", Value: 1, Destination: &v.spec.Max},
		&cli.StringFlag{Name: "walltime", Usage: "each placeholder's batch time limit, e.g. 2h", Value: "1h", Destination: &v.walltime},
		&cli.IntFlag{Name: "slots", Usage: "jobs (cores) per placeholder, all on one host (Slurm --cpus-per-task, PBS select=1:ncpus, SGE -pe PE K)", Value: 1, Destination: &v.spec.Slots},
	}
	flags = append(flags, v.size.flags("")...)
	return append(flags,
		&cli.StringFlag{Name: "pe", Usage: "SGE with --slots > 1: the parallel environment to ask for (default smp); it must exist on the cluster, be in the queue's pe_list and put all slots on one host (allocation_rule $pe_slots)", Destination: &v.spec.PE},
		&cli.StringFlag{Name: "submit-args", Usage: "extra qsub/sbatch arguments, e.g. \"-A project\"", Destination: &v.spec.SubmitArgs},
		&cli.StringFlag{Name: "connect", Usage: "direct (compute nodes reach the CLS; the default) or tunnel (through the login host)", Destination: &v.spec.Connect},
		&cli.StringFlag{Name: "cls-addr", Usage: "direct mode: `HOST[:PORT]` where compute nodes reach the CLS, when this host's name or the --ssh address is not it (a short hostname, NAT, a port forward); default: the --ssh address, a wildcard one by this host's name; PORT defaults to --ssh's", Destination: &v.spec.CLSAddr},
		&cli.StringFlag{Name: "idle", Usage: "a placeholder exits after this long without work", Value: "1m", Destination: &v.idle},
		&cli.StringFlag{Name: "data-root", Usage: "remote site: where files staged there live on the login host, `DIR` (relative: to the login home; default .mq-data/CLSID); a declared file P is DIR/P", Destination: &v.spec.DataRoot},
		&cli.BoolFlag{Name: "node-local", Usage: "remote site whose nodes share no filesystem: each node keeps files in the data root on its own disk, staged to it over its placeholder's connection", Destination: &v.spec.NodeLocal},
		&cli.BoolFlag{Name: "shared-fs", Usage: "remote site: it sees the CLS host's files at their paths (same home or mount): nothing is staged there", Destination: &v.spec.SharedFS},
		&cli.Float64Flag{Name: "price", Usage: "what one core-hour at the site costs, in the unit of queue budgets (0 = free); each attempt there is charged price x its cores x elapsed hours", Destination: &v.spec.Price},
		&cli.StringFlag{Name: "provision", Usage: "how many placeholders to hold: " + provisionHelp() + "; default: as many as the ready work warrants", Destination: &v.spec.Provision},
		&cli.StringFlag{Name: "output", Usage: "how the site's placeholders keep jobs' stdout and stderr: streams (a few stream files per placeholder, shipped to the CLS in bulk) or files (one per output, for tools that expect them); default: cls serve --output", Destination: &v.spec.Output},
		&cli.StringFlag{Name: "connect-timeout", Usage: "a placeholder that has run this long without connecting to the CLS is cancelled and the site marked degraded (default: cls serve --connect-timeout)", Destination: &v.connectTimeout},
	), v
}

type siteAddValues struct {
	spec                                            protocol.SiteSpec
	key, knownHosts, walltime, idle, connectTimeout string
	size                                            siteSize
}

// siteAdd parses its own flags so they may come before or after NAME.
func siteAdd(env mqcli.Env) *cli.Command {
	flags, _ := siteAddFlags()
	return &cli.Command{
		Name:            "add",
		Usage:           "add a site; the CLS starts keeping placeholders there while it has work they can take",
		ArgsUsage:       "NAME",
		SkipFlagParsing: true,
		Flags:           flags,
		Action: func(c *cli.Context) error {
			flags, v := siteAddFlags()
			names, set, err := parseFlags(c, flags)
			if errors.Is(err, flag.ErrHelp) {
				return cli.ShowSubcommandHelp(c)
			}
			if err != nil {
				return err
			}
			if set["max"] && v.spec.Max == 0 {
				return maxZero()
			}
			spec := v.spec
			if spec.Slots, _, err = v.size.slots(set, spec.Slots); err != nil {
				return err
			}
			if set["mem"] {
				if spec.Mem, err = v.size.memory(); err != nil {
					return err
				}
			}
			spec.GPUs = v.size.gpus
			named, err := v.size.named()
			if err != nil {
				return err
			}
			spec.Resources = site.FormatResources(named)
			if len(names) != 1 {
				return mqcli.Usagef("site add takes exactly one NAME")
			}
			spec.Name = names[0]
			if spec.SSH != "" && spec.Type != site.Local && !spec.OpenSSH && !strings.Contains(spec.SSH, "@") {
				if err := fromSSHConfig(env, &spec, v); err != nil {
					return err
				}
			}
			for flagName, p := range map[string]*string{"key": &v.key, "known-hosts": &v.knownHosts} {
				if *p == "" {
					continue
				}
				// Absolute: the CLS reads it, from another directory
				// (over SSH this command's is the home directory).
				abs, err := argfile.Path(*p, env.Getwd)
				if err != nil {
					return mqcli.Usagef("--%s: %v", flagName, err)
				}
				// The CLS reads it at each connection: a device or a
				// FIFO would hold it (one missing now may come later).
				if fi, err := os.Stat(abs); err == nil && !fi.Mode().IsRegular() {
					return mqcli.Usagef("--%s %s is not a regular file", flagName, protocol.Quote(abs))
				}
				*p = abs
			}
			spec.Key, spec.KnownHosts = v.key, v.knownHosts
			for flagName, pair := range map[string]struct {
				s string
				d *float64
			}{"walltime": {v.walltime, &spec.Walltime}, "idle": {v.idle, &spec.Idle}} {
				v, err := parseSeconds(pair.s)
				if err != nil {
					return mqcli.Usagef("--%s: %v", flagName, err)
				}
				*pair.d = v
			}
			if v.connectTimeout != "" {
				v, err := parseSeconds(v.connectTimeout)
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
			if spec.OpenSSH {
				fmt.Fprintf(c.App.Writer, "if its login host asks for a password or a one-time code, log in once with: cls site login %s\n", protocol.Printable(si.Name))
			}
			return nil
		},
	}
}

// provisionHelp lists the Provisioning policies for --help.
func provisionHelp() string {
	var parts []string
	for _, p := range policy.All() {
		if p.Kind == policy.Provisioning {
			parts = append(parts, p.Name+" ("+p.Summary+")")
		}
	}
	return strings.Join(parts, "; ")
}

// siteSizeText says what each placeholder of a site asks for besides its
// slots, "" when nothing: "16 cpus, 64 GiB, 2 GPUs, lic=3".
func siteSizeText(s protocol.SiteSpec) string {
	if s.Mem == 0 && s.GPUs == 0 && s.Resources == "" {
		return ""
	}
	parts := []string{fmt.Sprintf("%d cpus", s.Slots)}
	if s.Mem > 0 {
		parts = append(parts, resource.FormatMem(s.Mem))
	}
	if s.GPUs > 0 {
		parts = append(parts, fmt.Sprintf("%d GPUs", s.GPUs))
	}
	if s.Resources != "" {
		parts = append(parts, strings.Split(s.Resources, ",")...)
	}
	return strings.Join(parts, ", ")
}

func printSites(w io.Writer, sites []protocol.SiteInfo) {
	now := time.Now()
	clock := func(t time.Time) string { return acct.TimeOf(t, now) }
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
		if s.Jump != "" {
			where += " via " + s.Jump
		}
		if s.OpenSSH {
			where += " (openssh)"
		}
		if s.Connect == site.Tunnel {
			where += " (tunnel)"
		}
		if s.CLSAddr != "" {
			where += " (nodes dial the CLS at " + s.CLSAddr + ")"
		}
		switch {
		case s.Type == site.Local:
		case s.SharedFS:
			where += " (shared fs)"
		default:
			root := s.DataRoot
			if root == "" {
				root = site.DefaultDataRoot + "/CLSID" // a CLS that does not say which
			}
			if s.NodeLocal {
				root += " on each node" // a place per host: replicas, staging and DC's unit
			}
			where += " (data " + root + ")"
		}
		if s.Price > 0 {
			where += fmt.Sprintf(" (%g per core-hour)", s.Price)
		}
		if s.Provision != "" {
			where += " (" + s.Provision + ")"
		}
		if s.Output != "" {
			where += " (output " + s.Output + ")"
		}
		if size := siteSizeText(s.SiteSpec); size != "" {
			where += " (each " + size + ")"
		}
		if s.Given != "" {
			// What the placeholders found they were given, where it is
			// not what the site asked: they offer the smaller.
			where += " (" + s.Given + ")"
		}
		if s.Paused > 0 {
			where += fmt.Sprintf(" (%d paused: output disk nearly full or refusing writes)", s.Paused)
		}
		if len(s.Broken) > 0 {
			// Their node cannot run jobs (a job's processes survived
			// SIGKILL: a hung filesystem?); they exit once their jobs end.
			b := s.Broken[0]
			on := ""
			if b.Host != "" {
				on = " on " + b.Host
			}
			where += fmt.Sprintf(" (%d broken in the last day, their node cannot run jobs: drain it; latest placeholder %d%s: %s)", len(s.Broken), b.ID, on, b.Why)
		}
		if cut := s.CutNote(clock); cut != "" {
			// A network cut: its silent placeholders' jobs stay Running
			// until it answers again or the partition grace runs out.
			where += " (" + cut + ")"
		}
		if s.Error != "" {
			where += ": " + strings.ReplaceAll(s.Error, "\n", " ")
		}
		if s.Staging != "" {
			// Its data root had no room: it takes no file now, its jobs wait.
			where += "; staging paused: " + strings.ReplaceAll(s.Staging, "\n", " ")
		}
		where = protocol.Printable(where)
		wait := "-"
		if s.QueueWaitS > 0 || s.OldestQueuedS > 0 {
			wait = protocol.Duration(max(s.QueueWaitS, 0)).Round(100 * time.Millisecond).String()
			if s.OldestQueuedS > 0 {
				why := ""
				if s.OldestWhy != "" {
					why = ": " + s.OldestWhy // what the batch system says: held, JobHeldAdmin...
				}
				wait += fmt.Sprintf(" (oldest %s%s)", protocol.Duration(s.OldestQueuedS).Round(time.Second), why)
			}
		}
		pr := protocol.Printable
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d-%d\t%d\t%d\t%d\t%d\t%s\t%s\n", pr(s.Name), pr(s.Type), pr(s.State), s.Min, s.Max, s.Queued, s.Running, s.Exited, s.Connected, pr(wait), where)
	}
	tw.Flush()
}

// fromSSHConfig fills a site's --ssh NAME, given without a user, and the
// --jump, --key and --known-hosts not given, from the user's ssh config
// as ssh NAME would read it, and says what it took.
func fromSSHConfig(env mqcli.Env, spec *protocol.SiteSpec, v *siteAddValues) error {
	cfg, err := userSSHConfig()
	var h sshHost
	if err == nil {
		h, err = cfg.resolve(spec.SSH)
	}
	if err != nil {
		return mqcli.Usagef("--ssh %s: %v", protocol.Quote(spec.SSH), err)
	}
	took := []string{"--ssh " + protocol.Printable(h.SSH)}
	if spec.Jump == "" && h.Jump != "" {
		spec.Jump = h.Jump
		took = append(took, "--jump "+protocol.Printable(h.Jump))
	}
	if v.key == "" && h.Key != "" {
		v.key = h.Key
		took = append(took, "--key "+protocol.Quote(h.Key))
	}
	if v.knownHosts == "" && h.KnownHosts != "" {
		v.knownHosts = h.KnownHosts
		took = append(took, "--known-hosts "+protocol.Quote(h.KnownHosts))
	}
	fmt.Fprintf(env.Stderr, "cls: %s, from your ssh config\n", strings.Join(took, " "))
	spec.SSH = h.SSH
	return nil
}
