package simcmd

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	mqcli "github.com/mq-hpc/mq/cmd/internal/cli"
	"github.com/mq-hpc/mq/internal/dbc"
	"github.com/mq-hpc/mq/internal/sim"
)

// econCommand is `mqsim econ`: seed 002's deadline-and-budget-constrained
// scheduling over priced resources.
func econCommand() *cli.Command {
	return &cli.Command{
		Name:  "econ",
		Usage: "seed 002: deadline and budget constrained cost, time and cost-time optimisation over priced resources",
		UsageText: `mqsim econ [--strategy cost,costtime,time] [--deadline 100,600,...,3600] [--budget 5000,...,22000]
         [--jobs 200] [--seed 1] [--by-resource] [--json]
         [--resource NAME:PES:SPEED:PRICE ... --mi 10000 --spread 0.1]`,
		Description: `Simulates seed 002's experiment (Buyya et al. 2005, section 5): a broker
runs --jobs jobs of 10,000 MI plus U(0, 10%) over the 11 priced resources
of the seed's Table I under each deadline (time units) and budget (G$),
re-planning with the strategy at every job end. Prints, per deadline and
budget, each strategy's jobs completed, time spent (when the last job
ended) and budget spent; --by-resource adds how many jobs each resource
ran. docs/policies/dbc.md compares the results with the seed's.

--resource (repeat) replaces Table I: PES jobs at once, SPEED MI per time
unit per PE, PRICE per PE time unit; with --mi and --spread it predicts a
live run (docs/policies/dbc.md, "Live").`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "strategy", Value: "cost,costtime,time", Usage: "strategies: cost, costtime, time"},
			&cli.StringFlag{Name: "deadline", Value: joinFloats(sim.SeedDeadlines()), Usage: "deadlines, time units from the start"},
			&cli.StringFlag{Name: "budget", Value: joinFloats(sim.SeedBudgets()), Usage: "budgets, G$"},
			&cli.IntFlag{Name: "jobs", Value: 200, Usage: "jobs in the bag"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "draws the job lengths"},
			&cli.BoolFlag{Name: "by-resource", Usage: "also print the jobs each resource ran"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object per experiment"},
			&cli.StringSliceFlag{Name: "resource", Usage: "`NAME:PES:SPEED:PRICE` in place of Table I (repeat)"},
			&cli.Float64Flag{Name: "mi", Value: 10000, Usage: "the shortest job, MI"},
			&cli.Float64Flag{Name: "spread", Value: 0.1, Usage: "jobs are MI x (1 + U(0, spread)); 0: all equal"},
		},
		Action: runEcon,
	}
}

// parseResource reads NAME:PES:SPEED:PRICE.
func parseResource(v string) (dbc.Resource, error) {
	f := strings.Split(v, ":")
	if len(f) != 4 || f[0] == "" {
		return dbc.Resource{}, fmt.Errorf("%q is not NAME:PES:SPEED:PRICE", v)
	}
	pes, err := strconv.Atoi(f[1])
	if err != nil || pes < 1 || pes > 1_000_000 {
		return dbc.Resource{}, fmt.Errorf("%q: PES must be 1..1000000", v)
	}
	speed, err := positive("speed")(f[2])
	if err != nil {
		return dbc.Resource{}, err
	}
	price, err := strconv.ParseFloat(f[3], 64)
	if err != nil || !(price >= 0 && price <= 1e12) {
		return dbc.Resource{}, fmt.Errorf("%q: PRICE must be 0..1e12", v)
	}
	return dbc.Resource{Name: f[0], PEs: pes, MIPS: speed, Price: price}, nil
}

func joinFloats(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatFloat(x, 'f', -1, 64)
	}
	return strings.Join(s, ",")
}

func positive(name string) func(string) (float64, error) {
	return func(v string) (float64, error) {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0) || math.IsInf(f, 0) || f > 1e12 {
			return 0, fmt.Errorf("%q is not a %s (a number > 0)", v, name)
		}
		return f, nil
	}
}

func runEcon(c *cli.Context) error {
	if c.NArg() > 0 {
		return mqcli.Usagef("unexpected argument %q", c.Args().First())
	}
	var s sim.BrokerSweep
	var err error
	if s.Strategies, err = parseList(c, "strategy", dbc.ParseStrategy); err != nil {
		return err
	}
	if s.Deadlines, err = parseList(c, "deadline", positive("deadline")); err != nil {
		return err
	}
	if s.Budgets, err = parseList(c, "budget", positive("budget")); err != nil {
		return err
	}
	jobs := c.Int("jobs")
	if jobs < 1 || jobs > 1_000_000 {
		return mqcli.Usagef("--jobs: %d is not in 1-1000000", jobs)
	}
	s.Base = sim.BrokerConfig{Jobs: jobs, Seed: c.Uint64("seed"), MinMI: c.Float64("mi"), Spread: c.Float64("spread")}
	if !(s.Base.MinMI > 0 && s.Base.MinMI <= 1e12) || !(s.Base.Spread >= 0 && s.Base.Spread <= 100) {
		return mqcli.Usagef("--mi must be > 0 and --spread 0..100")
	}
	if s.Base.Spread == 0 {
		s.Base.Spread = 1e-12 // 0 is RunBroker's default (0.1)
	}
	for _, v := range c.StringSlice("resource") {
		r, err := parseResource(v)
		if err != nil {
			return mqcli.Usagef("--resource: %v", err)
		}
		s.Base.Resources = append(s.Base.Resources, r)
	}
	rs, err := s.Run(c.Context, 0)
	if err != nil {
		return err
	}
	out := bufio.NewWriter(c.App.Writer)
	defer out.Flush()
	if c.Bool("json") {
		for _, r := range rs {
			if err := writeEconJSON(out, r); err != nil {
				return err
			}
		}
		return out.Flush()
	}
	over := "Table I's 11 resources"
	if s.Base.Resources != nil {
		over = fmt.Sprintf("%d resources", len(s.Base.Resources))
	}
	fmt.Fprintf(out, "seed 002: %d jobs over %s, seed %d; per strategy: jobs completed, time spent, G$ spent\n", jobs, over, s.Base.Seed)
	writeEconTable(out, s, rs, c.Bool("by-resource"))
	return out.Flush()
}

// writeEconTable prints one row per deadline and budget, the strategies
// side by side (rs is in sweep order: strategies vary fastest).
func writeEconTable(w io.Writer, s sim.BrokerSweep, rs []sim.BrokerResult, byResource bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "deadline\tbudget\t")
	for _, st := range s.Strategies {
		fmt.Fprintf(tw, "%[1]s_jobs\t%[1]s_time\t%[1]s_spent\t", st)
		if byResource {
			fmt.Fprintf(tw, "%s_on\t", st)
		}
	}
	fmt.Fprintln(tw)
	for i := 0; i < len(rs); i += len(s.Strategies) {
		fmt.Fprintf(tw, "%g\t%g\t", rs[i].Deadline, rs[i].Budget)
		for _, r := range rs[i : i+len(s.Strategies)] {
			fmt.Fprintf(tw, "%d\t%.1f\t%.1f\t", r.Completed, r.Time, r.Spent)
			if byResource {
				fmt.Fprintf(tw, "%s\t", onResources(r))
			}
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// onResources is "R4:184,R8:16": the resources that ran jobs.
func onResources(r sim.BrokerResult) string {
	var parts []string
	for i, n := range r.PerResource {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%s:%d", r.Names[i], n))
		}
	}
	if parts == nil {
		return "-"
	}
	return strings.Join(parts, ",")
}

type econJSON struct {
	Strategy    string         `json:"strategy"`
	Deadline    float64        `json:"deadline"`
	Budget      float64        `json:"budget"`
	Seed        uint64         `json:"seed"`
	Completed   int            `json:"completed"`
	Time        float64        `json:"time"`
	Spent       float64        `json:"spent"`
	PerResource map[string]int `json:"per_resource"`
	Events      int            `json:"events"`
}

func writeEconJSON(w io.Writer, r sim.BrokerResult) error {
	per := map[string]int{}
	for i, n := range r.PerResource {
		if n > 0 {
			per[r.Names[i]] = n
		}
	}
	b, err := json.Marshal(econJSON{Strategy: r.Strategy.String(), Deadline: r.Deadline, Budget: r.Budget, Seed: r.Seed,
		Completed: r.Completed, Time: round(r.Time, 3), Spent: round(r.Spent, 3), PerResource: per, Events: r.Events})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
