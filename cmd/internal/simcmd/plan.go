package simcmd

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	mqcli "github.com/mq-hpc/mq/cmd/internal/cli"
	"github.com/mq-hpc/mq/internal/plan"
	"github.com/mq-hpc/mq/internal/wfformat"
)

// planCommand is `mqsim plan`: the planners of seed 003 against late
// binding on WfFormat traces, in the planners' schedule model.
func planCommand() *cli.Command { return planCommandWith(plan.Planners) }

// planCommandWith is planCommand comparing the given planners (tests
// inject one that fails).
func planCommandWith(planners func() []plan.Info) *cli.Command {
	return &cli.Command{
		Name:      "plan",
		Usage:     "compare planners (HEFT, MinMin, AEH-ETAA, LP) with late binding on WfFormat traces",
		ArgsUsage: "[TRACE.json...]",
		Description: `For each trace and site count, builds sites of --slots slots with speeds
drawn per --seed (the first, which holds the workflow's inputs, at speed 1),
linked by --bandwidth and --latency, and prints each way's predicted
makespan and bytes moved between sites: late binding taking the job ready
longest (late-fcfs) or the one with most input bytes at the asking site
(late-local), MinMin, HEFT, AEH-ETAA and LP (seed 001). The model is the planners' (docs/policies/planners.md).
A planner that fails does not stop the comparison: its column shows
HEFT's plan (else MinMin's, else the list search's), marked * and explained
under the table ("fallback" in --json).

--gen SHAPE:TASKS,... adds generated Pegasus-shaped workflows (montage,
cybershake, epigenomics, inspiral; runtimes and file sizes per task type
drawn per --seed). --platform ec2 replaces the generated sites with the
seed's four EC2 VMs (1, 2, 4 and 8 slots at speed 1), ignoring --sites
and --slots.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "sites", Value: "2,4,8", Usage: "site counts"},
			&cli.IntFlag{Name: "slots", Value: 4, Usage: "slots per site"},
			&cli.Float64Flag{Name: "bandwidth", Value: 10e6, Usage: "bytes per second between two sites"},
			&cli.Float64Flag{Name: "latency", Value: 0.05, Usage: "seconds, one way, between two sites"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed for site speeds and AEH-ETAA"},
			&cli.DurationFlag{Name: "time-limit", Value: 20 * time.Second, Usage: "AEH-ETAA's limit per plan"},
			&cli.StringFlag{Name: "gen", Usage: "generated workflows, SHAPE:TASKS,... (shapes: " + strings.Join(plan.Shapes, ", ") + ")"},
			&cli.StringFlag{Name: "platform", Value: "random", Usage: "random (--sites, --slots, speeds per --seed) or ec2 (the seed's four VMs)"},
			&cli.BoolFlag{Name: "json", Usage: "one JSON object per trace and site count"},
		},
		Action: func(c *cli.Context) error { return runPlans(c, planners) },
	}
}

// runPlans is mqsim plan: each trace and generated workflow at each site
// count, every planner compared, as a table (failures explained under
// it) or JSON.
func runPlans(c *cli.Context, planners func() []plan.Info) error {
	gens, sites, err := planArgs(c)
	if err != nil {
		return err
	}
	// Every workflow is read before anything is printed: a bad trace is
	// one line of error, not a table cut short.
	type workflow struct {
		w    *wfformat.Workflow
		name string
	}
	var ws []workflow
	for _, src := range append(c.Args().Slice(), gens...) {
		w, name, err := loadWorkflow(src, c.Uint64("seed"))
		if err != nil {
			return mqcli.Usagef("%v", err)
		}
		ws = append(ws, workflow{w, name})
	}
	out := bufio.NewWriter(c.App.Writer)
	defer out.Flush()
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	cols := newPlanColumns(planners())
	if !c.Bool("json") {
		writePlanHeader(tw, cols)
	}
	if c.String("platform") == "ec2" {
		sites = []int{4}
	}
	var notes []string // under the table: planners that failed
	for _, wf := range ws {
		w, name := wf.w, wf.name
		for _, n := range sites {
			row, err := comparePlans(c, w, n, planners())
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			row.Trace = name
			if c.Bool("json") {
				b, _ := json.Marshal(row)
				fmt.Fprintf(out, "%s\n", b)
				continue
			}
			notes = append(notes, writePlanRow(tw, cols, row)...)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(notes) > 0 {
		fmt.Fprintf(out, "\n%s\n", strings.Join(notes, "\n"))
	}
	return nil
}

// planArgs checks mqsim plan's arguments and returns the generated
// workflows' specs and the site counts.
func planArgs(c *cli.Context) (gens []string, sites []int, err error) {
	if c.NArg() == 0 && c.String("gen") == "" {
		return nil, nil, mqcli.Usagef("mqsim plan: name WfFormat trace files or --gen SHAPE:TASKS")
	}
	if c.String("gen") != "" {
		for _, spec := range strings.Split(c.String("gen"), ",") {
			if _, _, err := plan.ParseGen(spec); err != nil {
				return nil, nil, mqcli.Usagef("--gen: %v", err)
			}
			gens = append(gens, spec)
		}
	}
	switch c.String("platform") {
	case "random", "ec2":
	default:
		return nil, nil, mqcli.Usagef("--platform must be random or ec2, not %q", c.String("platform"))
	}
	sites, err = parseList(c, "sites", func(v string) (int, error) {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 64 {
			return 0, fmt.Errorf("%q is not a site count 1..64", v)
		}
		return n, nil
	})
	if err != nil {
		return nil, nil, err
	}
	if c.Int("slots") < 1 || c.Int("slots") > 4096 {
		return nil, nil, mqcli.Usagef("--slots must be 1..4096, not %d", c.Int("slots"))
	}
	if bw := c.Float64("bandwidth"); !(bw > 0) || math.IsInf(bw, 0) {
		return nil, nil, mqcli.Usagef("--bandwidth must be a number of bytes per second above 0, not %g", bw)
	}
	if lat := c.Float64("latency"); !(lat >= 0) || math.IsInf(lat, 0) {
		return nil, nil, mqcli.Usagef("--latency must be a number of seconds >= 0, not %g", lat)
	}
	if c.Duration("time-limit") < 0 {
		return nil, nil, mqcli.Usagef("--time-limit must be >= 0 (0: the planners' default, 30 s), not %v", c.Duration("time-limit"))
	}
	return gens, sites, nil
}

// planColumns are the table's columns: the late-binding ways, then the
// planners that have columns of their own.
type planColumns []string

func newPlanColumns(planners []plan.Info) planColumns {
	var cols planColumns
	for _, b := range plan.Bindings {
		cols = append(cols, b.Name)
	}
	for _, p := range planners {
		if !p.OnlyStandsIn {
			cols = append(cols, p.Name)
		}
	}
	return cols
}

// planned are the planners' columns.
func (cols planColumns) planned() []string { return cols[len(plan.Bindings):] }

func writePlanHeader(tw *tabwriter.Writer, cols planColumns) {
	fmt.Fprintf(tw, "trace\ttasks\tsites\t%s\tGB moved: %s\ts to plan: %s\taeh iterations\t\n",
		strings.Join(cols, "\t"), strings.Join(cols, "\t"), strings.Join(cols.planned(), "\t"))
}

// writePlanRow writes row to the table and returns the notes for under
// it: the planners another planner stood in for.
func writePlanRow(tw *tabwriter.Writer, cols planColumns, row planRow) (notes []string) {
	// cell is a planner's figure, * if another planner's stands in for
	// it, - if none could.
	cell := func(k, format string, v float64) string {
		if _, ok := row.Makespan[k]; !ok {
			return "-"
		}
		s := fmt.Sprintf(format, v)
		if row.Fallback[k] != "" {
			s += "*"
		}
		return s
	}
	fmt.Fprintf(tw, "%s\t%d\t%d\t", row.Trace, row.Tasks, row.Sites)
	for _, k := range cols {
		fmt.Fprintf(tw, "%s\t", cell(k, "%.0f", row.Makespan[k]))
	}
	for _, k := range cols {
		fmt.Fprintf(tw, "%s\t", cell(k, "%.2f", float64(row.Moved[k])/1e9))
	}
	for _, k := range cols.planned() {
		fmt.Fprintf(tw, "%.2f\t", row.PlanningS[k])
	}
	fmt.Fprintf(tw, "%d (%s)\t\n", row.AEH.Iterations, row.AEH.Stopped)
	for _, k := range cols {
		if row.Fallback[k] != "" {
			notes = append(notes, fmt.Sprintf("* %s, %d sites: %s", row.Trace, row.Sites, row.Fallback[k]))
		}
	}
	return notes
}

type planRow struct {
	Trace    string             `json:"trace"`
	Tasks    int                `json:"tasks"`
	Sites    int                `json:"sites"`
	Makespan map[string]float64 `json:"makespan_s"`
	Moved    map[string]int64   `json:"moved_bytes"`
	// PlanningS is each planner's time to plan; AEH how its search went.
	PlanningS map[string]float64 `json:"planning_s"`
	AEH       plan.AEHStats      `json:"aeh"`
	// Fallback says, for a planner that failed, why and whose plan its
	// Makespan and Moved are ("lp failed: ...; list's plan shown"); a
	// planner with no entry in Makespan had no stand-in.
	Fallback map[string]string `json:"fallback,omitempty"`
}

// standIns are the planners whose plan stands in for one that failed, in
// their order (plan.Info.StandIn): a failing planner must not abort the
// comparison.
func standIns(planners []plan.Info) []string {
	var ps []plan.Info
	for _, p := range planners {
		if p.StandIn > 0 {
			ps = append(ps, p)
		}
	}
	slices.SortFunc(ps, func(a, b plan.Info) int { return a.StandIn - b.StandIn })
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	return names
}

func readTrace(path string) (*wfformat.Workflow, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	w, err := wfformat.Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return w, nil
}

// loadWorkflow reads a trace file or generates SHAPE:TASKS.
func loadWorkflow(src string, seed uint64) (*wfformat.Workflow, string, error) {
	if shape, n, err := plan.ParseGen(src); err == nil {
		w, err := plan.Generate(shape, n, seed)
		return w, fmt.Sprintf("%s_%d", shape, len(w.Tasks)), err
	}
	w, err := readTrace(src)
	return w, strings.TrimSuffix(filepath.Base(src), ".json"), err
}

func comparePlans(c *cli.Context, w *wfformat.Workflow, sites int, planners []plan.Info) (planRow, error) {
	pl := plan.GenPlatform(sites, c.Int("slots"), c.Float64("bandwidth"), c.Float64("latency"), c.Uint64("seed"))
	if c.String("platform") == "ec2" {
		pl = plan.EC2Platform(c.Float64("bandwidth"), c.Float64("latency"))
	}
	p, err := plan.FromWorkflow(w, pl)
	if err != nil {
		return planRow{}, err
	}
	p.Seed = int64(c.Uint64("seed"))
	row := planRow{Tasks: len(w.Tasks), Sites: sites, Makespan: map[string]float64{}, Moved: map[string]int64{}, PlanningS: map[string]float64{}}
	for _, b := range plan.Bindings {
		ms, mv, err := plan.LateBinding(p, b.Binding)
		if err != nil {
			return row, err
		}
		row.Makespan[b.Name], row.Moved[b.Name] = ms, mv
	}
	failed := map[string]error{}
	for _, info := range planners {
		pl := info.New(c.Duration("time-limit"))
		if a, ok := pl.(plan.AEHETAA); ok {
			a.Stats = &row.AEH
			pl = a
		}
		start := time.Now()
		pp, err := pl.Plan(c.Context, p)
		row.PlanningS[info.Name] = time.Since(start).Seconds()
		if err != nil {
			if c.Context.Err() != nil {
				return row, err // interrupted: no table to finish
			}
			failed[info.Name] = err
			continue
		}
		row.Makespan[info.Name], row.Moved[info.Name] = pp.Makespan, pp.Moved
	}
	for name, err := range failed {
		if row.Fallback == nil {
			row.Fallback = map[string]string{}
		}
		why := fmt.Sprintf("%s failed: %s", name, oneLine(err.Error()))
		row.Fallback[name] = why + "; no planner could stand in"
		for _, f := range standIns(planners) {
			if ms, ok := row.Makespan[f]; ok && failed[f] == nil {
				row.Makespan[name], row.Moved[name] = ms, row.Moved[f]
				row.Fallback[name] = fmt.Sprintf("%s; %s's plan shown", why, f)
				break
			}
		}
	}
	return row, nil
}

// oneLine keeps an error to one line of at most 200 bytes for the notes.
func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}
