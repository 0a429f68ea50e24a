package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/cmd/internal/flagorder"
	"github.com/mq-hpc/mq/cmd/internal/jobids"
	"github.com/mq-hpc/mq/cmd/internal/progressview"
	"github.com/mq-hpc/mq/protocol"
)

// Mqwait returns the mqwait command.
func Mqwait(env Env) *cli.App {
	app := NewApp("mqwait", "wait for jobs to end, showing progress", env)
	app.UsageText = `mqwait [-q QUEUE] [-t TARGET | --target-prefix PREFIX] [--timeout DURATION] [-Q]
   mqwait ID... | FIRST-LAST`
	app.Description = `Follows a set of jobs until none is waiting, queued, held or executing: the jobs
named (ids, or one range FIRST-LAST as mqsub -f and --array print them), or
every job of a queue and/or target (or of the targets whose names start with
--target-prefix, those made meanwhile too: a --wfformat replay's), or
without any of these every job. On a
terminal it shows a bar with the jobs ended, the rate, the done/failed
counts and an ETA; otherwise a line whenever the counts change. Exits 0 when
every job ended done, 1 naming those that did not (failed, blocked, or,
for named jobs, deleted), 130 when interrupted (the jobs go on). Deleted
jobs do not count in a queue or target: one with none left is said on
stderr (exit 0), a range no job is in is an error. If the CLS goes away meanwhile (a
restart), mqwait says so and waits up to 2 minutes for it to come back
(MQ_RECONNECT=10m waits longer, MQ_RECONNECT=0 not at all).`
	app.Flags = []cli.Flag{
		&cli.StringFlag{Name: "q", Aliases: []string{"queue"}, Usage: "the jobs of this queue"},
		&cli.StringFlag{Name: "t", Aliases: []string{"target"}, Usage: "the jobs of this target"},
		&cli.StringFlag{Name: "target-prefix", Usage: "the jobs of the targets whose names start with `PREFIX`"},
		&cli.DurationFlag{Name: "interval", Value: time.Second, Usage: "time between updates"},
		&cli.DurationFlag{Name: "timeout", Usage: "give up (exit 1) after this long; 0 = never"},
		&cli.BoolFlag{Name: "Q", Aliases: []string{"quiet"}, Usage: "show no progress, only the failures"},
	}
	app.Metadata = map[string]any{rewriteArgs: flagorder.First(app.Flags)}
	app.Action = func(c *cli.Context) error {
		req := protocol.Progress{Queue: c.String("q"), Target: c.String("t"), TargetPrefix: c.String("target-prefix"),
			IntervalMS: int(c.Duration("interval") / time.Millisecond)}
		if c.Duration("interval") < 100*time.Millisecond {
			return Usagef("--interval must be at least 100ms")
		}
		if err := oneTarget(c); err != nil {
			return err
		}
		if err := emptyName(c); err != nil {
			return err
		}
		if c.IsSet("target-prefix") {
			if req.TargetPrefix == "" {
				return Usagef("--target-prefix: empty prefix (mqwait with no -t waits for every target)")
			}
			if req.Target != "" {
				return Usagef("give -t or --target-prefix, not both")
			}
		}
		if c.Duration("timeout") < 0 {
			return Usagef("--timeout must not be negative")
		}
		if c.NArg() > 0 {
			if req.Queue != "" || req.Target != "" || req.TargetPrefix != "" {
				return Usagef("give job ids or -q/-t/--target-prefix, not both")
			}
			if strings.EqualFold(c.Args().First(), "all") {
				return Usagef("\"all\" is not a job id: mqwait with no ids, -q or -t waits for every job")
			}
			first, last, isRange, err := jobids.Range(c.Args().First())
			if err != nil {
				return Usagef("%v", err)
			}
			if isRange {
				if c.NArg() > 1 {
					return Usagef("give one range FIRST-LAST or job ids, not both")
				}
				req.First, req.Last = first, last
			} else if req.IDs, err = jobids.List(c.Args().Slice()); err != nil {
				return Usagef("%v", err)
			}
		}
		cl, err := Dial(c.Context, env, "mqwait")
		if err != nil {
			return interrupted(c.Context, err, "the jobs go on (mqwait again to follow them)")
		}
		defer cl.Close()
		v := &progressview.View{Out: c.App.Writer, TTY: !c.Bool("Q") && progressview.IsTerminal(c.App.Writer), Plain: !c.Bool("Q")}
		last, err := progressview.Follow(c.Context, cl, waiter(env, "mqwait", c.App.ErrWriter), req, v, c.Duration("timeout"))
		if err != nil {
			return interrupted(c.Context, err, "the jobs go on (mqwait again to follow them)")
		}
		if last.Ended && last.Total == 0 {
			return nothingToWait(c, req)
		}
		return notDoneError(last)
	}
	return app
}

// nothingToWait follows a wait for no job: a range no job is in is
// unknown ids (exit 1, as ids named are; a range counts its deleted
// jobs); a queue or target without jobs not deleted, or an empty
// metaqueue, is said on stderr unless -Q.
func nothingToWait(c *cli.Context, req protocol.Progress) error {
	if req.First > 0 {
		return exitError{code: ExitFailed, msg: jobids.RangeUnknown(req.First, req.Last)}
	}
	if !c.Bool("Q") {
		sel := selectionText(0, 0, req.Queue, req.Target)
		if p := req.TargetPrefix; p != "" {
			sel += " whose target starts with " + protocol.Printable(p)
		}
		fmt.Fprintf(c.App.ErrWriter, "%s: nothing to wait for: no job%s (deleted ones do not count)\n", c.App.Name, sel)
	}
	return nil
}

// notDoneError names the jobs that did not end done (nil if all did).
func notDoneError(r protocol.ProgressReply) error {
	if msg := progressview.NotDone(r); msg != "" {
		return exitError{code: ExitFailed, msg: msg}
	}
	return nil
}
