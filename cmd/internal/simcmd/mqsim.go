// Package simcmd implements the mqsim command, the scheduling simulator.
// It is apart from cmd/internal/cli so that mqsub, mqstat and mqdel do not
// link the simulator.
package simcmd

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	mqcli "github.com/mq-hpc/mq/cmd/internal/cli"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/internal/resource"
	"github.com/mq-hpc/mq/internal/sim"
)

// Mqsim returns the mqsim command: the scheduling simulator.
func Mqsim(env mqcli.Env) *cli.App {
	app := mqcli.NewApp("mqsim", "simulate placeholder scheduling policies before spending allocation", env)
	app.UsageText = `mqsim [--policy ` + strings.Join(sim.WorkflowPolicies(), ",") + `] [--placeholders 2,4,8,16,32] [--inflation 1,10,100]
         [--network lan,wan] [--seeds 1-10] [--staging inline|live] [--workload FILE|--trace FILE|--mixed N]
         [--ph-cpus N] [--ph-mem SIZE] [--ph-gpus N] [--starve-after SECONDS] [--json] [--plot DIR]`
	app.Description = `Runs the discrete-event simulation of thesis 004 chapter 6 for every
combination of the lists (each flag takes one value or a comma list; seeds
also take ranges like 1-10), in parallel, deterministically per seed.

Networks: lan and wan are thesis table 6.2 with its scp rates read as bytes
per 10 ms, which is what the thesis's own results imply (lan-itu and wan-itu
are older names for them); lan-printed and wan-printed are the table as
printed (100x slower copies); or give a platform JSON file. Without --workload the thesis's synthetic PA
workload is used (1,000 pipelines, batches of 16, generated per seed).
--staging inline (the default) is the thesis's model: a placeholder copies
its job's inputs within its turn; --staging live is the live CLS's: the
CLS brings inputs beforehand, 4 files at a time, and keeps every copy.
File formats and the model: docs/policies/simulator.md.

Resources per job: --ph-cpus/--ph-mem/--ph-gpus size every placeholder
(a platform file's "hosts" list sizes hosts one by one), and jobs ask for
cores, memory and GPUs (a workload's "cpus"/"mem"/"gpus", a WfFormat
trace's task cores with --trace, or --mixed N: N jobs of 1, 2, 4 and 8
cores). A placeholder then runs at once every job that fits it, by the
CLS's own packing rule, and the tables add core_util (busy cores over all
cores over the makespan). Without them every placeholder is one job at a
time, the thesis's model.

Output: a table per network and file inflation (mean over seeds), or with
--json one object per run. --plot DIR writes SVG charts and DIR/index.html.`
	app.Flags = []cli.Flag{
		&cli.StringFlag{Name: "policy", Value: strings.Join(sim.WorkflowPolicies(), ","), Usage: "policies: " + strings.Join(sim.WorkflowPolicies(), ", ")},
		&cli.StringFlag{Name: "placeholders", Value: "2,4,8,16,32", Usage: "placeholder counts (one per host)"},
		&cli.StringFlag{Name: "inflation", Value: "1,10,100", Usage: "factors on the size of files jobs write"},
		&cli.StringFlag{Name: "network", Value: "lan,wan", Usage: "lan, wan, lan-printed, wan-printed or platform JSON files"},
		&cli.StringFlag{Name: "seeds", Value: "1-10", Usage: "seeds, e.g. 1-10 or 1,3,5"},
		&cli.StringFlag{Name: "staging", Value: sim.StagingInline, Usage: "how inputs move: inline (the thesis: the placeholder copies them in its turn) or live (the CLS stages them, as mq does)"},
		&cli.StringFlag{Name: "workload", Usage: "workload JSON `FILE` instead of the thesis's PA workload", TakesFile: true},
		&cli.StringFlag{Name: "trace", Usage: "a WfFormat trace `FILE` as the workload (one job per task, asking for its cores)", TakesFile: true},
		&cli.IntFlag{Name: "mixed", Usage: "a synthetic workload of `N` independent jobs of 1, 2, 4 and 8 cores (10-100 s each, per seed)"},
		&cli.StringFlag{Name: "ph-cpus", Usage: "cores of every placeholder (`N`; models resources per job)"},
		&cli.StringFlag{Name: "ph-mem", Usage: "memory of every placeholder (`SIZE`, e.g. 64G; needs --ph-cpus)"},
		&cli.StringFlag{Name: "ph-gpus", Usage: "GPUs of every placeholder (`N`; needs --ph-cpus)"},
		&cli.Float64Flag{Name: "starve-after", Usage: "the starvation reservation's bound in virtual `SECONDS` (0: the CLS's rule, the recent mean run within 1 s and 5 min)"},
		&cli.BoolFlag{Name: "json", Usage: "print one JSON object per run"},
		&cli.StringFlag{Name: "plot", Usage: "write SVG plots and index.html into `DIR`", TakesFile: true},
	}
	app.Commands = []*cli.Command{gridCommand(), planCommand(), econCommand(), lpCommand()}
	app.Action = func(c *cli.Context) error {
		if c.NArg() > 0 {
			return mqcli.Usagef("unexpected argument %q", c.Args().First())
		}
		s, err := sweepFlags(c)
		if err != nil {
			return err
		}
		out := bufio.NewWriter(c.App.Writer)
		defer out.Flush()
		var runs []sim.Outcome
		emit := func(o sim.Outcome) error {
			runs = append(runs, o)
			if c.Bool("json") {
				return writeRunJSON(out, o)
			}
			return nil
		}
		if err := s.Run(c.Context, 0, emit); err != nil {
			return err
		}
		sums := sim.Summarize(runs)
		if !c.Bool("json") {
			writeTables(out, sums, s.Staging)
		}
		if dir := c.String("plot"); dir != "" {
			files, err := sim.WritePlots(dir, sums)
			if err != nil {
				return fmt.Errorf("--plot: %w", err)
			}
			fmt.Fprintf(c.App.ErrWriter, "mqsim: wrote %d plots; open %s\n", len(files)-1, files[len(files)-1])
		}
		return out.Flush()
	}
	return app
}

// simulatedBy is the mqsim command that simulates policy p.
func simulatedBy(p policy.Info) string {
	switch {
	case sim.Workflow(p):
		return "mqsim --policy " + p.Name
	case p.Kind == policy.Ordered || p.NewChooser != nil:
		return "mqsim grid --policy " + p.Name
	case strings.HasPrefix(p.Name, "dbc-"):
		return "mqsim econ --strategy " + strings.TrimPrefix(p.Name, "dbc-")
	case p.Name == "lp":
		return "mqsim lp --strategy lpsched"
	}
	return "no mqsim command simulates it"
}

// sweepFlags turns the flags into a sweep, or a usage error.
func sweepFlags(c *cli.Context) (sim.Sweep, error) {
	var s sim.Sweep
	var err error
	if s.Policies, err = parseList(c, "policy", func(v string) (string, error) {
		p, err := policy.Lookup(v)
		if err != nil {
			return "", err
		}
		if !sim.Workflow(p) {
			return "", fmt.Errorf("policy %s is not of the workflow model: %s", v, simulatedBy(p))
		}
		return v, nil
	}); err != nil {
		return s, err
	}
	if s.Placeholders, err = parseList(c, "placeholders", func(v string) (int, error) {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100000 {
			return 0, fmt.Errorf("%q is not a placeholder count (1-100000)", v)
		}
		return n, nil
	}); err != nil {
		return s, err
	}
	if s.Inflations, err = parseList(c, "inflation", func(v string) (float64, error) {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0) || math.IsInf(f, 0) {
			return 0, fmt.Errorf("%q is not a positive factor", v)
		}
		return f, nil
	}); err != nil {
		return s, err
	}
	nets, err := parseList(c, "network", func(v string) (string, error) { return v, nil })
	if err != nil {
		return s, err
	}
	for _, n := range nets {
		p, err := sim.LoadPlatform(n)
		if err != nil {
			return s, mqcli.Usagef("--network: %v", err)
		}
		s.Networks = append(s.Networks, p)
	}
	names := map[string]bool{}
	for _, p := range s.Networks {
		if names[p.Name] {
			return s, mqcli.Usagef("--network: %q given twice", p.Name)
		}
		names[p.Name] = true
	}
	s.Staging = c.String("staging")
	if !slices.Contains(sim.StagingModes, s.Staging) {
		return s, mqcli.Usagef("--staging: %q is not a staging mode (inline or live)", s.Staging)
	}
	if s.Seeds, err = parseSeeds(c.String("seeds")); err != nil {
		return s, mqcli.Usagef("--seeds: %v", err)
	}
	if err := workloadFlags(c, &s); err != nil {
		return s, err
	}
	return s, resourceFlags(c, &s)
}

// workloadFlags sets s's workload from --workload, --trace or --mixed (at
// most one), or leaves the thesis's PA workload.
func workloadFlags(c *cli.Context, s *sim.Sweep) error {
	var given []string
	for _, f := range []string{"workload", "trace", "mixed"} {
		if c.IsSet(f) {
			given = append(given, "--"+f)
		}
	}
	if len(given) > 1 {
		return mqcli.Usagef("%s: give one workload", strings.Join(given, " and "))
	}
	switch {
	case c.IsSet("workload"):
		w, err := sim.LoadWorkload(c.String("workload"))
		if err != nil {
			return mqcli.Usagef("--workload: %v", err)
		}
		s.Workload = func(uint64) (*sim.Workload, error) { return w, nil }
	case c.IsSet("trace"):
		tr, err := readTrace(c.String("trace"))
		if err != nil {
			return mqcli.Usagef("--trace: %v", err)
		}
		w, err := sim.TraceWorkload(tr)
		if err != nil {
			return mqcli.Usagef("--trace: %v", err)
		}
		s.Workload = func(uint64) (*sim.Workload, error) { return w, nil }
	case c.IsSet("mixed"):
		n := c.Int("mixed")
		if n < 1 || n > 1000000 {
			return mqcli.Usagef("--mixed: %d is not a job count (1-1000000)", n)
		}
		s.Workload = func(seed uint64) (*sim.Workload, error) { return sim.MixedBag(seed, n), nil }
	}
	return nil
}

// resourceFlags sets every placeholder's capacity from --ph-cpus, --ph-mem
// and --ph-gpus, parsed as mqsub and cls site parse them, and the
// reservation's bound.
func resourceFlags(c *cli.Context, s *sim.Sweep) error {
	if !c.IsSet("ph-cpus") {
		for _, f := range []string{"ph-mem", "ph-gpus"} {
			if c.IsSet(f) {
				return mqcli.Usagef("--%s: give --ph-cpus too", f)
			}
		}
	} else {
		cpus, err := resource.ParseCPUs(c.String("ph-cpus"))
		if err != nil {
			return mqcli.Usagef("--ph-cpus: %v", err)
		}
		var mem int64
		if v := c.String("ph-mem"); v != "" {
			if mem, err = resource.ParseMem(v); err != nil {
				return mqcli.Usagef("--ph-mem: %v", err)
			}
		}
		gpus := 0
		if v := c.String("ph-gpus"); v != "" && v != "0" {
			if gpus, err = resource.ParseGPUs(v); err != nil {
				return mqcli.Usagef("--ph-gpus: %v", err)
			}
		}
		if s.Capacity, err = sim.NewCapacity(cpus, mem, gpus); err != nil {
			return mqcli.Usagef("--ph-cpus/--ph-mem/--ph-gpus: %v", err)
		}
	}
	s.StarveAfter = c.Float64("starve-after")
	if v := s.StarveAfter; v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return mqcli.Usagef("--starve-after: %g is not a number of seconds >= 0", v)
	}
	return nil
}

// parseList splits a comma list and converts each item, refusing empty
// items and repeats.
func parseList[T comparable](c *cli.Context, flag string, conv func(string) (T, error)) ([]T, error) {
	var out []T
	for _, item := range strings.Split(c.String(flag), ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return nil, mqcli.Usagef("--%s: empty item in %q", flag, c.String(flag))
		}
		v, err := conv(item)
		if err != nil {
			return nil, mqcli.Usagef("--%s: %v", flag, err)
		}
		if slices.Contains(out, v) {
			return nil, mqcli.Usagef("--%s: %q given twice", flag, item)
		}
		out = append(out, v)
	}
	return out, nil
}

// parseSeeds reads "1-10", "3" or "1,4,7-9".
func parseSeeds(s string) ([]uint64, error) {
	var out []uint64
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		lo, hi, isRange := strings.Cut(item, "-")
		a, err := strconv.ParseUint(lo, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a seed or a range like 1-10", item)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(hi, 10, 64); err != nil || b < a {
				return nil, fmt.Errorf("%q is not a range like 1-10", item)
			}
		}
		if b-a >= 100000 || len(out)+int(b-a) >= 100000 {
			return nil, fmt.Errorf("more than 100000 seeds")
		}
		for v := a; ; v++ {
			if slices.Contains(out, v) {
				return nil, fmt.Errorf("seed %d given twice", v)
			}
			out = append(out, v)
			if v == b {
				break
			}
		}
	}
	return out, nil
}

// runJSON is one line of --json output.
type runJSON struct {
	Policy       string   `json:"policy"`
	Placeholders int      `json:"placeholders"`
	Inflation    float64  `json:"inflation"`
	Network      string   `json:"network"`
	Seed         uint64   `json:"seed"`
	Staging      string   `json:"staging"`
	Makespan     float64  `json:"makespan_s"`
	DataAffinity float64  `json:"data_affinity"`
	MeanResponse float64  `json:"mean_response_s"`
	BytesMoved   int64    `json:"bytes_moved"`
	Transfers    int      `json:"transfers"`
	Requests     int      `json:"requests"`
	Empty        int      `json:"empty_replies"`
	Waits        int      `json:"dc_waits"`
	Events       uint64   `json:"events"`
	CoreUtil     *float64 `json:"core_util,omitempty"` // when resources are modelled
}

func writeRunJSON(w io.Writer, o sim.Outcome) error {
	var util *float64
	if o.Resources {
		v := round(o.CoreUtil, 4)
		util = &v
	}
	b, err := json.Marshal(runJSON{
		Policy: o.Policy, Placeholders: o.Placeholders, Inflation: o.Inflation, Network: o.Network, Seed: o.Seed, Staging: o.Staging,
		Makespan: round(o.Makespan, 3), DataAffinity: round(o.DataAffinity, 4), MeanResponse: round(o.MeanResponse, 3),
		BytesMoved: o.BytesMoved, Transfers: o.Transfers, Requests: o.Requests, Empty: o.Empty, Waits: o.Waits, Events: o.Events,
		CoreUtil: util,
	})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

// writeTables prints one table per network and inflation.
func writeTables(w io.Writer, sums []sim.Summary, staging string) {
	type panel struct {
		net string
		inf float64
	}
	var panels []panel
	for _, s := range sums {
		if p := (panel{s.Network, s.Inflation}); !slices.Contains(panels, p) {
			panels = append(panels, p)
		}
	}
	for i, p := range panels {
		if i > 0 {
			fmt.Fprintln(w)
		}
		var rows []sim.Summary
		baseline := policy.Baseline().Name
		base := map[int]sim.Summary{}
		for _, s := range sums {
			if s.Network == p.net && s.Inflation == p.inf {
				rows = append(rows, s)
				if s.Policy == baseline {
					base[s.Placeholders] = s
				}
			}
		}
		slices.SortStableFunc(rows, func(a, b sim.Summary) int { return a.Placeholders - b.Placeholders })
		fmt.Fprintf(w, "network %s, files x%g, mean (sd) over %d seeds", p.net, p.inf, rows[0].Seeds)
		if staging == sim.StagingLive {
			fmt.Fprint(w, ", live staging")
		}
		fmt.Fprintln(w)
		res := slices.ContainsFunc(rows, func(s sim.Summary) bool { return s.Resources })
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, "placeholders\tpolicy\tmakespan_s\t(sd)\tvs_"+baseline+"\tdata_affinity\tmean_response_s\tMB_moved\t")
		if res {
			fmt.Fprint(tw, "core_util\t")
		}
		fmt.Fprint(tw, "\n")
		for _, s := range rows {
			vs := "-"
			if f, ok := base[s.Placeholders]; ok && s.Policy != baseline && f.Makespan.Mean > 0 {
				vs = fmt.Sprintf("%+.1f%%", 100*(s.Makespan.Mean/f.Makespan.Mean-1))
			}
			fmt.Fprintf(tw, "%d\t%s\t%.0f\t(%.0f)\t%s\t%.3f\t%.1f\t%.1f\t", s.Placeholders, s.Policy,
				s.Makespan.Mean, s.Makespan.SD, vs, s.DataAffinity.Mean, s.MeanResponse.Mean, s.BytesMoved.Mean/1e6)
			if res {
				fmt.Fprintf(tw, "%.3f\t", s.CoreUtil.Mean)
			}
			fmt.Fprint(tw, "\n")
		}
		tw.Flush()
	}
}
