package cli

import (
	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/cmd/internal/flagorder"
	"github.com/mq-hpc/mq/cmd/internal/habits"
	"github.com/mq-hpc/mq/internal/walltime"
	"github.com/mq-hpc/mq/protocol"
)

// Mqalter returns the mqalter command (PBS's and SGE's qalter, Slurm's
// scontrol update).
func Mqalter(env Env) *cli.App {
	app := NewApp("mqalter", "change jobs that have not started", env)
	app.UsageText = `mqalter [--priority N] [--time LIMIT] [--est EST] [-c N|auto] [--mem SIZE|auto] [--gpus N]
           [--resource NAME=N]... [-q QUEUE] [-Q] ID... | FIRST-LAST
   mqalter [...] [-q QUEUE] [-t TARGET] [-s STATES] [-Q]
   mqalter [...] --all [-s STATES] [-Q]`
	app.Description = `Changes jobs that have not started: waiting (W), queued (Q) or held (H).
Each flag given replaces the job's own value, spelled and checked as mqsub
takes it; at least one is needed; --gpus 0 and --resource NAME=0 drop
that request. A job keeps its state (a held job stays held) and its place
among its prerequisites; a queued job is ranked again by its new priority
and estimate (in a cp queue, so are the jobs of its chain), and the next
placeholder that asks judges it by its new request. --time also makes the limit the job's
estimate when it has none of its own (none, or its old --time), unless
--est is given. Jobs are named by id, by a range FIRST-LAST (a job array),
or selected by queue, target and states (-s, among W Q H), or all of them.
Jobs named by id are changed all or none: if one has started or ended,
nothing is, and the error names each culprit; a range or selection takes
those of its jobs not started, 10,000 at a time, the CLS serving others in
between. Prints a line per changed job unless -Q; a range or selection
that matches nothing says so on stderr (exit 0, nothing with -Q), but a
range no job is in is an error (exit 1).`
	flags := append(selectFlags("change"),
		&cli.StringFlag{Name: "priority", Usage: "the jobs' new priority: `N` in -1024..1023, higher first (as mqsub --priority)"},
		&cli.StringFlag{Name: "time", Usage: "the jobs' new time limit, `LIMIT` (as mqsub --time)"},
		&cli.StringFlag{Name: "est", Aliases: []string{"estimate"}, Usage: "the jobs' new expected runtime, `EST` (as mqsub --est; 0: unknown)"},
	)
	for _, f := range resourceFlags() {
		switch f.Names()[0] {
		case "gpus":
			flags = append(flags, &cli.StringFlag{Name: "gpus", Usage: "whole GPUs the jobs are given: `N` (0: none)"})
		case "resource":
			flags = append(flags, &cli.StringSliceFlag{Name: "resource", Usage: "an amount of a resource the site declares, `NAME=N` (repeat, or a comma list; NAME=0: none)"})
		case "c", "mem":
			flags = append(flags, f)
		}
	}
	app.Flags = append(flags, habits.AlterFlags()...)
	app.Metadata = map[string]any{rewriteArgs: flagorder.First(app.Flags)}
	app.Action = func(c *cli.Context) error { return mqalterAction(c, env) }
	return app
}

// mqalterAction reads the new values as mqsub reads them, and asks the
// CLS to give them to the selected jobs.
func mqalterAction(c *cli.Context, env Env) error {
	if msg := habits.Refusal(c); msg != "" {
		return Usagef("%s", msg)
	}
	var req protocol.Alter
	var err error
	if c.IsSet("priority") {
		p, err := priorityFlag(c)
		if err != nil {
			return err
		}
		req.Priority = &p
	}
	if req.Time, err = timeLimit(c); err != nil {
		return err
	}
	if c.IsSet("est") {
		est, err := estFlag(c)
		if err != nil {
			return err
		}
		req.Est = &est
	}
	if req.Resources, req.Drop, err = readResources(c, true); err != nil {
		return err
	}
	if err := req.Check(); err != nil {
		if req.Priority == nil && req.Time == 0 && req.Est == nil && !req.Resources.Asks() && len(req.Drop) == 0 {
			return Usagef("nothing to change: give --priority, --time, --est, -c/--cpus, --mem, --gpus or --resource")
		}
		return Usagef("%v", err)
	}
	if req.Select, err = selection(c, "WQH"); err != nil {
		return err
	}
	cl, err := Dial(c.Context, env, c.App.Name)
	if err != nil {
		return err
	}
	defer cl.Close()
	reply, err := client.Do(c.Context, cl, protocol.OpAlter, req)
	if err != nil {
		// The CLS commits a change in batches of 10,000 jobs: a
		// connection lost before it answered may leave some changed.
		return cutShort(err, batchesDone(c.App.Name))
	}
	warn(c, reply.Warnings)
	// A selection may change some jobs and refuse others (a request
	// grown past its bounds): those changed are listed, then the others.
	if !req.Select.Atomic && reply.Acted() > 0 {
		if !c.Bool("Q") {
			if err := listActed(c, "changed", reply, "changed job %d\n"); err != nil {
				return err
			}
		}
		return refusals("not changed", reply)
	}
	if err := atomicErrors("changed", reply); err != nil {
		return err
	}
	if reply.Acted() == 0 {
		return nothingActed(c, cl, req.Select, "WQH", "changed")
	}
	if !c.Bool("Q") {
		return listActed(c, "changed", reply, "changed job %d\n")
	}
	return nil
}

// estFlag reads --est: a span as walltime.Parse takes it.
func estFlag(c *cli.Context) (float64, error) {
	est, err := walltime.Parse(c.String("est"))
	if err != nil {
		return 0, Usagef("--est: %v", err)
	}
	return est, nil
}
