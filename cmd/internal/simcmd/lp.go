package simcmd

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	mqcli "github.com/mq-hpc/mq/cmd/internal/cli"
	"github.com/mq-hpc/mq/internal/lpplace"
	"github.com/mq-hpc/mq/internal/sim"
)

// lpCommand is `mqsim lp`: seed 001's LPSched against Trivial and Total.
func lpCommand() *cli.Command {
	var names []string
	for _, s := range sim.LPScenarios() {
		names = append(names, s.Name)
	}
	return &cli.Command{
		Name:      "lp",
		Usage:     "seed 001: LP-planned placeholders per stage and site (LPSched) against one per stage and all of them",
		UsageText: "mqsim lp [--scenario " + strings.Join(names, ",") + "] [--strategy trivial,total,lpsched]\n         [--items N,...] [--min-util W] [--plan] [--json]",
		Description: `Simulates seed 001's experiments (do Nascimento et al., section 5): a
pipeline whose stages are run by placeholders bound to them, each pulling
the next item its stage has ready, under Trivial (one placeholder per
stage), Total (every placeholder, split by stage work) and LPSched (the
lpsched planner's counts). Scenarios: 1x2x1 and 1x5x1 (the
GridArrayAverager, adder 2x and 5x the reader, on UFMG's 17 machines),
intra (the virtual microscope on Maryland's 48) and inter (Maryland and
Ohio joined by a slow shared link, minimum utilisation 0.7). Prints, per
scenario and input size, each strategy's time and placeholders; --plan
prints where each strategy puts them. docs/policies/lp.md compares with the
seed.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "scenario", Value: strings.Join(names, ","), Usage: "scenarios: " + strings.Join(names, ", ")},
			&cli.StringFlag{Name: "strategy", Value: "trivial,total,lpsched", Usage: "strategies: trivial, total, lpsched"},
			&cli.StringFlag{Name: "items", Usage: "items through the pipeline (default: each scenario's sweep)"},
			&cli.Float64Flag{Name: "min-util", Value: -1, Usage: "W_MIN in [0, 1) for every scenario (default: each scenario's)"},
			&cli.BoolFlag{Name: "plan", Usage: "also print each strategy's placeholders per stage and site"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object per run"},
		},
		Action: runLP,
	}
}

func runLP(c *cli.Context) error {
	if c.NArg() > 0 {
		return mqcli.Usagef("unexpected argument %q", c.Args().First())
	}
	var w sim.LPSweep
	names, err := parseList(c, "scenario", func(v string) (string, error) {
		_, err := sim.FindLPScenario(v)
		return v, err
	})
	if err != nil {
		return err
	}
	for _, n := range names {
		sc, _ := sim.FindLPScenario(n)
		w.Scenarios = append(w.Scenarios, sc)
	}
	if w.Strategies, err = parseList(c, "strategy", sim.ParseLPStrategy); err != nil {
		return err
	}
	if c.IsSet("items") {
		if w.Items, err = parseList(c, "items", func(v string) (int, error) {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 1_000_000 {
				return 0, fmt.Errorf("%q is not a count of items in 1-1000000", v)
			}
			return n, nil
		}); err != nil {
			return err
		}
	}
	if c.IsSet("min-util") {
		u := c.Float64("min-util")
		if !(u >= 0 && u < 1) {
			return mqcli.Usagef("--min-util: %g is not in [0, 1)", u)
		}
		for i := range w.Scenarios {
			w.Scenarios[i].Problem.MinUtil = u
		}
	}
	rs, err := w.Run(c.Context)
	if err != nil {
		return err
	}
	out := bufio.NewWriter(c.App.Writer)
	defer out.Flush()
	if c.Bool("json") {
		for _, r := range rs {
			if err := writeLPJSON(out, w, r); err != nil {
				return err
			}
		}
		return out.Flush()
	}
	fmt.Fprintln(out, "seed 001: per scenario and input size, each strategy's time (s) and placeholders")
	writeLPTable(out, w, rs)
	if c.Bool("plan") {
		writeLPPlans(out, w, rs)
	}
	return out.Flush()
}

// writeLPTable prints one row per scenario and size, the strategies side
// by side (rs is in sweep order: strategies vary fastest).
func writeLPTable(w io.Writer, s sim.LPSweep, rs []sim.LPResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "scenario\titems\t")
	for _, st := range s.Strategies {
		fmt.Fprintf(tw, "%[1]s_time\t%[1]s_ph\t", st)
	}
	fmt.Fprintln(tw)
	for i := 0; i < len(rs); i += len(s.Strategies) {
		fmt.Fprintf(tw, "%s\t%d\t", rs[i].Scenario, rs[i].Items)
		for _, r := range rs[i : i+len(s.Strategies)] {
			fmt.Fprintf(tw, "%.1f\t%d\t", r.Makespan, r.Placeholders)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// writeLPPlans prints each scenario's allocations once.
func writeLPPlans(w io.Writer, s sim.LPSweep, rs []sim.LPResult) {
	seen := map[string]bool{}
	for _, r := range rs {
		k := r.Scenario + "/" + r.Strategy.String()
		if seen[k] {
			continue
		}
		seen[k] = true
		p := scenarioProblem(s, r.Scenario)
		fmt.Fprintf(w, "%s %s: %s", r.Scenario, r.Strategy, allocString(p, r.Alloc))
		if r.PlanRate > 0 {
			fmt.Fprintf(w, " (planned %.3g items/s)", r.PlanRate)
		}
		fmt.Fprintln(w)
	}
}

func scenarioProblem(s sim.LPSweep, name string) *lpplace.Problem {
	for i := range s.Scenarios {
		if s.Scenarios[i].Name == name {
			return &s.Scenarios[i].Problem
		}
	}
	return nil
}

// allocString is "reader mg1-6:1; adder mg1-6:3; ...".
func allocString(p *lpplace.Problem, alloc [][]int) string {
	var parts []string
	for k, st := range p.Stages {
		var on []string
		for s, n := range alloc[k] {
			if n > 0 {
				on = append(on, fmt.Sprintf("%s:%d", p.Sites[s].Name, n))
			}
		}
		parts = append(parts, st.Name+" "+strings.Join(on, ","))
	}
	return strings.Join(parts, "; ")
}

type lpJSON struct {
	Scenario     string                    `json:"scenario"`
	Strategy     string                    `json:"strategy"`
	Items        int                       `json:"items"`
	Time         float64                   `json:"time_s"`
	Placeholders int                       `json:"placeholders"`
	CrossBytes   float64                   `json:"cross_bytes"`
	PlanRate     float64                   `json:"plan_rate,omitempty"`
	Alloc        map[string]map[string]int `json:"alloc"` // stage -> site -> placeholders
}

func writeLPJSON(w io.Writer, s sim.LPSweep, r sim.LPResult) error {
	p := scenarioProblem(s, r.Scenario)
	alloc := map[string]map[string]int{}
	for k, st := range p.Stages {
		alloc[st.Name] = map[string]int{}
		for i, n := range r.Alloc[k] {
			if n > 0 {
				alloc[st.Name][p.Sites[i].Name] = n
			}
		}
	}
	b, err := json.Marshal(lpJSON{Scenario: r.Scenario, Strategy: r.Strategy.String(), Items: r.Items,
		Time: round(r.Makespan, 3), Placeholders: r.Placeholders, CrossBytes: r.CrossBytes, PlanRate: round(r.PlanRate, 6), Alloc: alloc})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
