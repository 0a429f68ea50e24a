package simcmd

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	mqcli "github.com/mq-hpc/mq/cmd/internal/cli"
	"github.com/mq-hpc/mq/plan"
	"github.com/mq-hpc/mq/wfformat"
)

// planCommand is `mqsim plan`: the planners of seed 003 against late
// binding on WfFormat traces, in the planners' schedule model.
func planCommand() *cli.Command {
	return &cli.Command{
		Name:      "plan",
		Usage:     "compare planners (HEFT, MinMin, AEH-ETAA, LP) with late binding on WfFormat traces",
		ArgsUsage: "TRACE.json...",
		Description: `For each trace and site count, builds sites of --slots slots with speeds
drawn per --seed (the first, which holds the workflow's inputs, at speed 1),
linked by --bandwidth and --latency, and prints each way's predicted
makespan and bytes moved between sites: late binding taking the job ready
longest (late-fcfs) or the one with most input bytes at the asking site
(late-local), MinMin, HEFT, AEH-ETAA and LP (seed 001). The model is the planners' (docs/planning.md).`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "sites", Value: "2,4,8", Usage: "site counts"},
			&cli.IntFlag{Name: "slots", Value: 4, Usage: "slots per site"},
			&cli.Float64Flag{Name: "bandwidth", Value: 10e6, Usage: "bytes per second between two sites"},
			&cli.Float64Flag{Name: "latency", Value: 0.05, Usage: "seconds, one way, between two sites"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed for site speeds and AEH-ETAA"},
			&cli.DurationFlag{Name: "time-limit", Value: 20 * time.Second, Usage: "AEH-ETAA's limit per plan"},
			&cli.BoolFlag{Name: "json", Usage: "one JSON object per trace and site count"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return mqcli.Usagef("mqsim plan: name WfFormat trace files")
			}
			sites, err := parseList(c, "sites", func(v string) (int, error) {
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 || n > 64 {
					return 0, fmt.Errorf("%q is not a site count 1..64", v)
				}
				return n, nil
			})
			if err != nil {
				return err
			}
			if c.Int("slots") < 1 || c.Int("slots") > 4096 {
				return mqcli.Usagef("--slots must be 1..4096, not %d", c.Int("slots"))
			}
			out := bufio.NewWriter(c.App.Writer)
			defer out.Flush()
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
			if !c.Bool("json") {
				fmt.Fprintln(tw, "trace\ttasks\tsites\tlate-fcfs\tlate-local\tminmin\theft\taeh-etaa\tlp\tGB moved: late-fcfs\tlate-local\tminmin\theft\taeh-etaa\tlp\t")
			}
			for _, path := range c.Args().Slice() {
				w, err := readTrace(path)
				if err != nil {
					return err
				}
				for _, n := range sites {
					row, err := comparePlans(c, w, n)
					if err != nil {
						return fmt.Errorf("%s: %w", filepath.Base(path), err)
					}
					row.Trace = strings.TrimSuffix(filepath.Base(path), ".json")
					if c.Bool("json") {
						b, _ := json.Marshal(row)
						fmt.Fprintf(out, "%s\n", b)
						continue
					}
					fmt.Fprintf(tw, "%s\t%d\t%d\t", row.Trace, row.Tasks, row.Sites)
					for _, k := range planWays {
						fmt.Fprintf(tw, "%.0f\t", row.Makespan[k])
					}
					for _, k := range planWays {
						fmt.Fprintf(tw, "%.2f\t", float64(row.Moved[k])/1e9)
					}
					fmt.Fprintln(tw)
				}
			}
			return tw.Flush()
		},
	}
}

var planWays = []string{"late-fcfs", "late-local", "minmin", "heft", "aeh-etaa", "lp"}

type planRow struct {
	Trace    string             `json:"trace"`
	Tasks    int                `json:"tasks"`
	Sites    int                `json:"sites"`
	Makespan map[string]float64 `json:"makespan_s"`
	Moved    map[string]int64   `json:"moved_bytes"`
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

func comparePlans(c *cli.Context, w *wfformat.Workflow, sites int) (planRow, error) {
	pl := plan.GenPlatform(sites, c.Int("slots"), c.Float64("bandwidth"), c.Float64("latency"), c.Uint64("seed"))
	p, err := plan.FromWorkflow(w, pl)
	if err != nil {
		return planRow{}, err
	}
	p.Seed = int64(c.Uint64("seed"))
	row := planRow{Tasks: len(w.Tasks), Sites: sites, Makespan: map[string]float64{}, Moved: map[string]int64{}}
	for k, b := range map[string]plan.Binding{"late-fcfs": plan.FirstReady, "late-local": plan.MostLocal} {
		ms, mv, err := plan.LateBinding(p, b)
		if err != nil {
			return row, err
		}
		row.Makespan[k], row.Moved[k] = ms, mv
	}
	for _, info := range plan.Planners() {
		pp, err := info.New(c.Duration("time-limit")).Plan(c.Context, p)
		if err != nil {
			return row, fmt.Errorf("%s: %w", info.Name, err)
		}
		row.Makespan[info.Name], row.Moved[info.Name] = pp.Makespan, pp.Moved
	}
	return row, nil
}
