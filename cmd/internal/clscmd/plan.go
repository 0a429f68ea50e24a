package clscmd

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/client"
	mqcli "github.com/mq-hpc/mq/cmd/internal/cli"
	"github.com/mq-hpc/mq/internal/plan"
	"github.com/mq-hpc/mq/protocol"
)

// clsPlan is the planning command (ops plan.*): plan a target's DAG over
// the sites ahead, see how the plans are followed, drop them.
func clsPlan(env mqcli.Env) *cli.Command {
	var names []string
	for _, p := range plan.Planners() {
		names = append(names, p.Name)
	}
	return &cli.Command{
		Name:  "plan",
		Usage: "plan a target's jobs and files over the sites ahead (HEFT, MinMin, AEH-ETAA, LPSched, a list search); late binding stays the fallback",
		Subcommands: []*cli.Command{
			planCmd(env, "make", "plan TARGET and the targets it needs with a planner ("+strings.Join(names, ", ")+"), and follow the plan", "TARGET", planMakeFlags, planMake),
			planCmd(env, "show", "explain the plans in force: predicted makespan and bytes moved, each site's timeline (jobs in predicted start order, their slots, busy time), and where the jobs ran", "", planShowFlags, planShow),
			planCmd(env, "clear", "forget every plan: jobs bind late again", "", planJSONFlags, planClear),
		},
	}
}

type planValues struct {
	planner   string
	timeLimit time.Duration
	est       time.Duration
	siteSpeed string
	noLearn   bool
	json      bool
	limit     int
}

func planJSONFlags(v *planValues) []cli.Flag {
	return []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON", Destination: &v.json}}
}

func planShowFlags(v *planValues) []cli.Flag {
	return append(planJSONFlags(v),
		&cli.IntFlag{Name: "limit", Value: protocol.DefaultPlanShowLimit, Usage: fmt.Sprintf("jobs listed per site of each plan's timeline, the rest counted (0 = as many as one reply holds, %s; up to %d)", protocol.FormatBytes(protocol.PlanShowBytes), protocol.MaxPlanShowLimit), Destination: &v.limit})
}

func planMakeFlags(v *planValues) []cli.Flag {
	return append(planJSONFlags(v),
		&cli.StringFlag{Name: "planner", Value: plan.Default().Name, Usage: "one of " + strings.Join(plan.Names(), ", "), Destination: &v.planner},
		&cli.DurationFlag{Name: "time-limit", Value: 30 * time.Second, Usage: "how long a planner that searches may take, at most 10m", Destination: &v.timeLimit},
		&cli.DurationFlag{Name: "est", Value: time.Minute, Usage: "runtime assumed for jobs that declare none (mqsub --est) and whose command never ran", Destination: &v.est},
		&cli.StringFlag{Name: "site-speed", Usage: "sites' relative speeds, SITE=F,... (runtime at speed 1 over F); default: learned from the accounting, else 1", Destination: &v.siteSpeed},
		&cli.BoolFlag{Name: "no-learn", Usage: "ignore the accounting: declared estimates (or --est) over the sites' speeds", Destination: &v.noLearn},
	)
}

// planCmd is one plan subcommand, its flags declared once.
func planCmd(env mqcli.Env, name, usage, args string, flags func(*planValues) []cli.Flag,
	action func(c *cli.Context, cl *client.Client, args []string, v planValues) error) *cli.Command {
	return &cli.Command{
		Name:            name,
		Usage:           usage,
		ArgsUsage:       args,
		SkipFlagParsing: true,
		Flags:           flags(&planValues{}),
		Action: func(c *cli.Context) error {
			var v planValues
			args, _, err := parseFlags(c, flags(&v))
			if errors.Is(err, flag.ErrHelp) {
				return cli.ShowSubcommandHelp(c)
			}
			if err != nil {
				return err
			}
			if name == "make" {
				if len(args) != 1 || args[0] == "" {
					return mqcli.Usagef("plan make takes one TARGET")
				}
				if _, err := plan.Lookup(v.planner); err != nil {
					return mqcli.Usagef("--planner: %v", err)
				}
				if v.timeLimit <= 0 || v.timeLimit > 10*time.Minute {
					return mqcli.Usagef("--time-limit must be above 0 and at most 10m, not %s", v.timeLimit)
				}
				if v.est <= 0 {
					return mqcli.Usagef("--est must be above 0, not %s", v.est)
				}
				if _, err := parseSiteSpeeds(v.siteSpeed); err != nil {
					return mqcli.Usagef("--site-speed: %v", err)
				}
			} else if len(args) > 0 {
				return mqcli.Usagef("plan %s takes no arguments", name)
			}
			if v.limit < 0 || v.limit > protocol.MaxPlanShowLimit {
				return mqcli.Usagef("--limit must be 0 (as many as fit) to %d, not %d", protocol.MaxPlanShowLimit, v.limit)
			}
			cl, err := mqcli.Dial(c.Context, env, "cls")
			if err != nil {
				return err
			}
			defer cl.Close()
			return action(c, cl, args, v)
		},
	}
}

// parseSiteSpeeds reads SITE=F,... (empty: none).
func parseSiteSpeeds(spec string) (map[string]float64, error) {
	if spec == "" {
		return nil, nil
	}
	out := map[string]float64{}
	for _, kv := range strings.Split(spec, ",") {
		site, v, ok := strings.Cut(kv, "=")
		f, err := strconv.ParseFloat(v, 64)
		if !ok || site == "" || err != nil || !(f > 0) || f > 1e6 {
			return nil, fmt.Errorf("%q: want SITE=F with F above 0, at most 1e6", kv)
		}
		out[site] = f
	}
	if len(out) > protocol.MaxSiteSpeeds {
		return nil, fmt.Errorf("more than %d sites", protocol.MaxSiteSpeeds)
	}
	return out, nil
}

func planMake(c *cli.Context, cl *client.Client, args []string, v planValues) error {
	speeds, _ := parseSiteSpeeds(v.siteSpeed) // checked with the flags
	s, err := client.Do(c.Context, cl, protocol.OpPlanMake, protocol.PlanMake{
		Target: args[0], Planner: v.planner, TimeLimitS: v.timeLimit.Seconds(), EstS: v.est.Seconds(),
		SiteSpeed: speeds, NoLearn: v.noLearn,
	})
	if err != nil {
		return err
	}
	w := c.App.Writer
	if v.json {
		return json.NewEncoder(w).Encode(s)
	}
	fmt.Fprintf(w, "planned %d jobs of %s with %s in %.1f s: predicted makespan %s, %s moved between sites\n",
		s.Jobs, protocol.Quote(s.Target), s.Planner, s.PlanningS,
		time.Duration(s.MakespanS*float64(time.Second)).Round(time.Second), protocol.FormatBytes(s.MovedBytes))
	var from []string
	for _, k := range []string{"site", "class", "declared", "default"} {
		if n := s.Estimates[k]; n > 0 {
			from = append(from, fmt.Sprintf("%d %s", n, estimateWords[k]))
		}
	}
	if len(from) > 0 {
		fmt.Fprintf(w, "runtimes: %s\n", strings.Join(from, ", "))
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "SITE\tSPEED\tJOBS")
	for _, site := range s.Sites {
		fmt.Fprintf(tw, "%s\t%.3g\t%d\n", protocol.ClipText(site.Site, 64), site.Speed, site.Jobs)
	}
	return tw.Flush()
}

var estimateWords = map[string]string{
	"site":     "learned at their planned site",
	"class":    "learned elsewhere and scaled by site speed",
	"declared": "declared (mqsub --est)",
	"default":  "assumed (--est)",
}

func planShow(c *cli.Context, cl *client.Client, _ []string, v planValues) error {
	limit := v.limit
	if limit == 0 {
		limit = protocol.MaxPlanShowLimit
	}
	r, err := client.Do(c.Context, cl, protocol.OpPlanShow, protocol.PlanShow{Limit: limit})
	if err != nil {
		return err
	}
	if v.json {
		return json.NewEncoder(c.App.Writer).Encode(r)
	}
	return writePlanShow(c.App.Writer, r)
}

// writePlanShow prints cls plan show's text: the per-planner counts, a
// line for jobs of plans made before timelines were stored (which have
// none to show), then each plan's timeline.
func writePlanShow(w io.Writer, r protocol.PlanShowReply) error {
	for _, p := range r.Provision {
		writeProvision(w, p)
	}
	if len(r.Sites) == 0 {
		fmt.Fprintln(w, "no plans: jobs bind late (cls plan make TARGET to plan one)")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "PLANNER\tSITE\tJOBS\tENDED\tRAN THERE\tRAN ELSEWHERE")
	for _, s := range r.Sites {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\n", protocol.ClipText(s.Planner, 32), protocol.ClipText(s.Site, 64), s.Jobs, s.Ended, s.RanHere, s.RanElse)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.Untimed > 0 {
		fmt.Fprintf(w, "\n%d planned jobs have no timeline: their plan was made before timelines were stored; run cls plan make again to see one\n", r.Untimed)
	}
	if r.Older > 0 {
		fmt.Fprintf(w, "\n%d older plans in force are not shown (the newest %d are)\n", r.Older, len(r.Plans))
	}
	for _, p := range r.Plans {
		writePlanTimeline(w, p)
	}
	return nil
}

// writeProvision prints a provisioning policy's last plan: placeholders
// per site, then each queue (an lp plan's stages, in order) with the jobs
// each site may run of it at once.
func writeProvision(w io.Writer, p protocol.ProvisionShown) {
	fmt.Fprintf(w, "provisioning by %s, planned %s", protocol.ClipText(p.Policy, 32), protocol.ClipText(p.Made, 40))
	if p.Rate > 0 {
		fmt.Fprintf(w, ": predicted %.3g jobs/s through the first stage", p.Rate)
	}
	fmt.Fprintln(w)
	if p.Error != "" {
		fmt.Fprintf(w, "  no plan found (%s): the queues run uncapped\n", protocol.ClipText(p.Error, 200))
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  SITE\tPLACEHOLDERS")
	for _, site := range slices.Sorted(maps.Keys(p.Placeholders)) {
		fmt.Fprintf(tw, "  %s\t%d\n", protocol.ClipText(site, 64), p.Placeholders[site])
	}
	tw.Flush()
	tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\tQUEUE\tREADY\tWAITING\tRUNNING\tOUT/JOB\tJOBS AT ONCE PER SITE")
	for i, q := range p.Queues {
		var caps []string
		for _, site := range slices.Sorted(maps.Keys(q.Slots)) {
			caps = append(caps, fmt.Sprintf("%s=%d", protocol.ClipText(site, 64), q.Slots[site]))
		}
		out := "-"
		if q.OutBytes > 0 {
			out = protocol.FormatBytes(q.OutBytes)
		}
		line := strings.Join(caps, " ")
		if q.Unfinishable > 0 {
			line += fmt.Sprintf(" (%d cannot end within deadline and budget)", q.Unfinishable)
		}
		fmt.Fprintf(tw, "  %d\t%s\t%d\t%d\t%d\t%s\t%s\n", i+1, protocol.ClipText(q.Queue, 64), q.Ready, q.Waiting, q.Running, out, line)
	}
	tw.Flush()
	if p.More > 0 {
		fmt.Fprintf(w, "  ... and %d more queues\n", p.More)
	}
	fmt.Fprintln(w)
}

// writePlanTimeline prints one plan: what it predicts, each site's load,
// and each site's jobs in predicted start order (as many as the reply
// lists, the rest counted). Names come from users and sites: escaped
// and clipped.
func writePlanTimeline(w io.Writer, p protocol.PlanShown) {
	fmt.Fprintf(w, "\nplan %d: %s of %s, made %s: %d jobs, predicted makespan %s, %s moved between sites\n",
		p.ID, protocol.ClipText(p.Planner, 32), protocol.Quote(protocol.ClipText(p.Target, 128)), protocol.ClipText(p.Made, 40), p.Jobs,
		secs(p.MakespanS), protocol.FormatBytes(p.MovedBytes))
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  SITE\tSLOTS\tJOBS\tBUSY\tUTIL\tENDED\tRAN THERE\tRAN ELSEWHERE")
	for _, s := range p.Sites {
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%s\t%.0f%%\t%d\t%d\t%d\n", protocol.ClipText(s.Site, 64), s.Slots, s.Jobs, secs(s.BusyS), 100*s.Util, s.Ended, s.RanHere, s.RanElse)
	}
	tw.Flush()
	for _, s := range p.Sites {
		if s.Jobs == 0 {
			continue
		}
		fmt.Fprintf(w, "  site %s, in predicted start order:\n", protocol.ClipText(s.Site, 64))
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "    START\tEND\tSLOT\tJOB\tTARGET\tSTATE\tRAN AT")
		for _, j := range s.Timeline {
			at := "-"
			if j.RanAt != "" {
				at = protocol.ClipText(j.RanAt, 64)
			}
			fmt.Fprintf(tw, "    %.1f\t%.1f\t%d\t%d\t%s\t%s\t%s\n", j.StartS, j.EndS, j.Slot, j.ID, protocol.ClipText(j.Target, 64), protocol.ClipText(j.State, 4), at)
		}
		tw.Flush()
		if s.More > 0 {
			fmt.Fprintf(w, "    ... and %d more (--limit N lists more, up to what one reply holds)\n", s.More)
		}
	}
}

// secs prints predicted seconds for a person: 12.3s, 4m05s.
func secs(v float64) string {
	if v < 60 {
		return fmt.Sprintf("%.1fs", v)
	}
	return time.Duration(v * float64(time.Second)).Round(time.Second).String()
}

func planClear(c *cli.Context, cl *client.Client, _ []string, v planValues) error {
	r, err := client.Do(c.Context, cl, protocol.OpPlanClear, protocol.Empty{})
	if err != nil {
		return err
	}
	if v.json {
		return json.NewEncoder(c.App.Writer).Encode(r)
	}
	fmt.Fprintf(c.App.Writer, "dropped the plans of %d jobs\n", r.Cleared)
	return nil
}
