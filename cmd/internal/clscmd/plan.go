package clscmd

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/client"
	mqcli "github.com/mq-hpc/mq/cmd/internal/cli"
	"github.com/mq-hpc/mq/plan"
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
		Usage: "plan a target's jobs and files over the sites ahead (HEFT, MinMin, AEH-ETAA, LPSched); late binding stays the fallback",
		Subcommands: []*cli.Command{
			planCmd(env, "make", "plan TARGET and the targets it needs with a planner ("+strings.Join(names, ", ")+"), and follow the plan", "TARGET", planMakeFlags, planMake),
			planCmd(env, "show", "list the plans in force: jobs per planner and site, and where they ran", "", planJSONFlags, planShow),
			planCmd(env, "clear", "forget every plan: jobs bind late again", "", planJSONFlags, planClear),
		},
	}
}

type planValues struct {
	planner   string
	timeLimit time.Duration
	est       time.Duration
	json      bool
}

func planJSONFlags(v *planValues) []cli.Flag {
	return []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON", Destination: &v.json}}
}

func planMakeFlags(v *planValues) []cli.Flag {
	return append(planJSONFlags(v),
		&cli.StringFlag{Name: "planner", Value: "heft", Usage: "heft, minmin, aeh-etaa or lp", Destination: &v.planner},
		&cli.DurationFlag{Name: "time-limit", Value: 30 * time.Second, Usage: "how long a search (aeh-etaa, lp) may take, at most 10m", Destination: &v.timeLimit},
		&cli.DurationFlag{Name: "est", Value: time.Minute, Usage: "runtime assumed for jobs that declare none (mqsub -e)", Destination: &v.est},
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
			} else if len(args) > 0 {
				return mqcli.Usagef("plan %s takes no arguments", name)
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

func planMake(c *cli.Context, cl *client.Client, args []string, v planValues) error {
	s, err := client.Do(c.Context, cl, protocol.OpPlanMake, protocol.PlanMake{
		Target: args[0], Planner: v.planner, TimeLimitS: v.timeLimit.Seconds(), EstS: v.est.Seconds(),
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
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "SITE\tJOBS")
	for _, site := range s.Sites {
		fmt.Fprintf(tw, "%s\t%d\n", protocol.ClipText(site.Site, 64), site.Jobs)
	}
	return tw.Flush()
}

func planShow(c *cli.Context, cl *client.Client, _ []string, v planValues) error {
	r, err := client.Do(c.Context, cl, protocol.OpPlanShow, protocol.Empty{})
	if err != nil {
		return err
	}
	w := c.App.Writer
	if v.json {
		return json.NewEncoder(w).Encode(r)
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
	return tw.Flush()
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
