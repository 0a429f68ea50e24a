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
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/internal/sim"
	"github.com/mq-hpc/mq/protocol"
)

// gridCommand is `mqsim grid`: seed 000's bag-of-tasks grid with job
// replication.
func gridCommand() *cli.Command {
	return &cli.Command{
		Name:  "grid",
		Usage: "seed 000: bags of tasks over reused inputs on a grid behind one home link (Storage Affinity, WQR, XSufferage)",
		UsageText: `mqsim grid [--policy ` + strings.Join(sim.GridDefault(), ",") + `] [--granularity 3,15,75] [--seeds 1-10]
         [--runs 6] [--load 0.5] [--max-copies N] [--trace FILE,...] [--json]`,
		Description: `Simulates seed 000's grid (Santos-Neto 2004, chapter 4): U(2,12) sites,
hosts of mean speed 10 added until the grid's power is 1,000, every input
first at the user's home behind one shared 1 Mbit/s link, an application
of 2 GB of input in tasks of the given mean size, run --runs times over the
same inputs. Each seed draws the number of sites, the grid and application
heterogeneity and the application kind (visualization or pattern search),
the same for every policy. --load draws each copy's host availability
U(1-load, 1), standing in for the seed's NWS traces. With --trace, each
level of each WfFormat file with at least --min-tasks tasks is the bag of
tasks instead (traced runtimes taken on a host of speed 10).
docs/policies/bag-of-tasks.md compares the results with the seed's.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "policy", Value: strings.Join(sim.GridDefault(), ","), Usage: "policies: " + strings.Join(sim.GridPolicies(), ", ")},
			&cli.StringFlag{Name: "granularity", Value: "3,15,75", Usage: "mean task input sizes in MiB"},
			&cli.StringFlag{Name: "seeds", Value: "1-10", Usage: "seeds, e.g. 1-10 or 1,3,5"},
			&cli.IntFlag{Name: "runs", Value: 6, Usage: "executions over the same inputs"},
			&cli.Float64Flag{Name: "load", Value: 0.5, Usage: "host availability drawn U(1-load, 1) per copy; 0: dedicated hosts"},
			&cli.IntFlag{Name: "max-copies", Usage: "copies of one task running at once (0: unbounded, as the seed)"},
			&cli.StringFlag{Name: "trace", Usage: "WfFormat `FILES` (comma list): simulate their levels as bags of tasks", TakesFile: true},
			&cli.IntFlag{Name: "min-tasks", Value: 10, Usage: "with --trace, the fewest tasks a level needs"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object per simulation"},
		},
		Action: runGrid,
	}
}

func runGrid(c *cli.Context) error {
	if c.NArg() > 0 {
		return mqcli.Usagef("unexpected argument %q", c.Args().First())
	}
	var s sim.GridSweep
	var err error
	if s.Policies, err = parseList(c, "policy", func(v string) (string, error) {
		p, err := policy.Lookup(v)
		if err != nil {
			return "", err
		}
		if p.Kind != policy.Ordered && p.NewChooser == nil {
			return "", fmt.Errorf("policy %s is not of the grid model: %s", v, simulatedBy(p))
		}
		return v, nil
	}); err != nil {
		return err
	}
	if s.Granularities, err = parseList(c, "granularity", func(v string) (int64, error) {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 || f > 2048 {
			return 0, fmt.Errorf("%q is not a size in MiB (0-2048]", v)
		}
		return int64(f * (1 << 20)), nil
	}); err != nil {
		return err
	}
	if s.Seeds, err = parseSeeds(c.String("seeds")); err != nil {
		return mqcli.Usagef("--seeds: %v", err)
	}
	load, runs, maxCopies := c.Float64("load"), c.Int("runs"), c.Int("max-copies")
	switch {
	case load < 0 || load >= 1:
		return mqcli.Usagef("--load: %g is not in [0, 1)", load)
	case runs < 1 || runs > 1000:
		return mqcli.Usagef("--runs: %d is not in 1-1000", runs)
	case maxCopies < 0:
		return mqcli.Usagef("--max-copies: %d is negative", maxCopies)
	}
	s.Base = sim.GridConfig{AppHet: -1, Load: load, Runs: runs, MaxCopies: maxCopies}
	out := bufio.NewWriter(c.App.Writer)
	defer out.Flush()
	if c.String("trace") != "" {
		if err := runTraces(c, s, out); err != nil {
			return err
		}
		return out.Flush()
	}
	rs, err := s.Run(c.Context, 0)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		for _, r := range rs {
			if err := writeGridJSON(out, "", r); err != nil {
				return err
			}
		}
		return out.Flush()
	}
	fmt.Fprintf(out, "seed 000 grid: mean (sd) over %d seeds, %d runs each, load %g\n", len(s.Seeds), runs, load)
	writeGridTable(out, sim.SummarizeGrid(s, rs))
	return out.Flush()
}

// runTraces simulates each level of each trace as a bag of tasks.
func runTraces(c *cli.Context, s sim.GridSweep, out io.Writer) error {
	minTasks := c.Int("min-tasks")
	if minTasks < 1 {
		return mqcli.Usagef("--min-tasks: %d is not >= 1", minTasks)
	}
	// Every trace is read before anything is printed: a bad one is one
	// line of error, not a table cut short.
	var levels []sim.GridLevel
	var none []string // traces without such a level
	for _, path := range strings.Split(c.String("trace"), ",") {
		w, err := readTrace(path)
		if err != nil {
			return mqcli.Usagef("--trace: %v", err)
		}
		ls, err := sim.TraceLevels(w, minTasks, 10)
		if err != nil {
			return err
		}
		if len(ls) == 0 {
			none = append(none, path)
		}
		levels = append(levels, ls...)
	}
	if len(levels) == 0 {
		return mqcli.Usagef("--trace: no level of the traces has %d tasks; lower --min-tasks", minTasks)
	}
	for _, path := range none {
		fmt.Fprintf(c.App.ErrWriter, "mqsim: %s: no level (tasks at one depth) has %d tasks (--min-tasks): left out\n", path, minTasks)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	if !c.Bool("json") {
		fmt.Fprintf(out, "traced levels as bags of tasks: mean over %d seeds, %d runs each, load %g\n", len(s.Seeds), s.Base.Runs, s.Base.Load)
		fmt.Fprintln(tw, "level\ttasks\tinput_MiB\tpolicy\tmakespan_s\tfirst_s\tlater_s\tcpu_waste\tnet_waste\t")
	}
	for _, l := range levels {
		ls := s
		ls.Base.Tasks = l.Tasks
		ls.Granularities = []int64{1}
		rs, err := ls.Run(c.Context, 0)
		if err != nil {
			return fmt.Errorf("%s: %w", l.Name, err)
		}
		if c.Bool("json") {
			for _, r := range rs {
				if err := writeGridJSON(out, l.Name, r); err != nil {
					return err
				}
			}
			continue
		}
		for _, g := range sim.SummarizeGrid(ls, rs) {
			if g.Granularity != 0 {
				continue
			}
			fmt.Fprintf(tw, "%s\t%d\t%.0f\t%s\t%.0f\t%.0f\t%.0f\t%.1f%%\t%.1f%%\t\n", protocol.ClipText(l.Name, 60), len(l.Tasks), float64(l.Bytes)/(1<<20),
				g.Policy, g.Makespan, g.FirstRun, g.LaterRuns, 100*g.CPUWaste, 100*g.NetWaste)
		}
	}
	return tw.Flush()
}

// writeGridTable prints each granularity, then all of them, with each
// policy's improvement over the one the registry compares it with (SA's
// over XSufferage, as the seed's table 4.5 gives it).
func writeGridTable(w io.Writer, sums []sim.GridSummary) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "granularity\tpolicy\tmakespan_s\tfirst_s\tlater_s\tcpu_waste\tnet_waste\tcopies\tsa_vs_xs\t")
	type key struct {
		policy      string
		granularity int64
	}
	makespan := map[key]float64{}
	for _, s := range sums {
		makespan[key{s.Policy, s.Granularity}] = s.Makespan
	}
	for _, s := range sums {
		g := "all"
		if s.Granularity != 0 {
			g = fmt.Sprintf("%gMiB", float64(s.Granularity)/(1<<20))
		}
		vs := "-"
		if p, err := policy.Lookup(s.Policy); err == nil && p.ComparedWith != "" {
			if base := makespan[key{p.ComparedWith, s.Granularity}]; base > 0 {
				vs = fmt.Sprintf("%+.1f%%", 100*(base-makespan[key{s.Policy, s.Granularity}])/base)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f (%.0f)\t%.0f\t%.0f\t%.1f%% (%.1f)\t%.1f%% (%.1f)\t%.0f\t%s\t\n", g, s.Policy,
			s.Makespan, s.MakespanSD, s.FirstRun, s.LaterRuns, 100*s.CPUWaste, 100*s.CPUWasteSD, 100*s.NetWaste, 100*s.NetWasteSD, s.Copies, vs)
	}
	tw.Flush()
}

type gridJSON struct {
	Level     string    `json:"level,omitempty"`
	Policy    string    `json:"policy"`
	Seed      uint64    `json:"seed"`
	Sites     int       `json:"sites"`
	Hosts     int       `json:"hosts"`
	Tasks     int       `json:"tasks"`
	GridHet   float64   `json:"grid_het"`
	AppHet    float64   `json:"app_het"`
	App       string    `json:"app"`
	Makespans []float64 `json:"makespans_s"`
	Makespan  float64   `json:"makespan_s"`
	CPUWaste  float64   `json:"cpu_waste"`
	NetWaste  float64   `json:"net_waste"`
	Moved     int64     `json:"bytes_moved"`
	Copies    int       `json:"copies"`
	Waits     int       `json:"waits"`
}

func writeGridJSON(w io.Writer, level string, r sim.GridResult) error {
	ms := make([]float64, len(r.Makespans))
	for i, m := range r.Makespans {
		ms[i] = round(m, 3)
	}
	b, err := json.Marshal(gridJSON{Level: level, Policy: r.Policy, Seed: r.Seed, Sites: r.Sites, Hosts: r.Hosts, Tasks: r.Tasks,
		GridHet: r.GridHet, AppHet: r.AppHet, App: r.App, Makespans: ms, Makespan: round(r.Makespan, 3),
		CPUWaste: round(r.CPUWaste, 4), NetWaste: round(r.NetWaste, 4), Moved: r.BytesMoved, Copies: r.Copies, Waits: r.Waits})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
