package cli

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/cmd/internal/acct"
	"github.com/mq-hpc/mq/cmd/internal/flagnames"
	"github.com/mq-hpc/mq/cmd/internal/flagorder"
	"github.com/mq-hpc/mq/cmd/internal/jobids"
	"github.com/mq-hpc/mq/internal/walltime"
	"github.com/mq-hpc/mq/protocol"
)

// purgeGoesOn is what becomes of a purge cut short.
const purgeGoesOn = "the batches purged so far stay purged (cls purge again for the rest)"

// Purge returns cls purge: it removes ended jobs for good. It lives with
// the user commands because it selects jobs as mqdel does.
func Purge(env Env) *cli.Command {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "q", Aliases: []string{"queue"}, Usage: "with ids: they must be in this queue; else purge its ended jobs"},
		&cli.StringFlag{Name: "t", Aliases: []string{"target"}, Usage: "purge the ended jobs of this target"},
		&cli.StringFlag{Name: "s", Aliases: []string{"states"}, Usage: "only jobs in these states, among D F X (e.g. DX; default all three)"},
		&cli.BoolFlag{Name: "Q", Aliases: []string{"quiet"}, Usage: "print nothing but errors"},
		&cli.StringFlag{Name: "ended-before", Usage: "purge jobs that ended at least this long ago: 7d, 2w, 12h, 90m, 04:00:00, 1-12:00:00 (required)"},
		&cli.BoolFlag{Name: "dry-run", Usage: "count what would go, change nothing"},
		&cli.IntFlag{Name: "batch", Usage: fmt.Sprintf("jobs removed per commit, 1..%d (the writer is free between commits)", protocol.MaxPurgeBatch), Value: protocol.DefaultPurgeBatch},
	}
	return &cli.Command{
		Name:      "purge",
		Usage:     "remove ended jobs and their output files from the metaqueue for good",
		UsageText: "cls purge --ended-before AGE [--dry-run] [-q QUEUE] [-t TARGET] [-s STATES] [ID... | FIRST-LAST]",
		Description: `Removes jobs that ended (done D, failed F, deleted X) at least AGE ago,
with every row the metaqueue keeps of them (attempts, prerequisites,
environment, resources, priority, plans, lost-output notes, declared files,
an array whose members are all gone) and their stdout/stderr files under
$MQ_HOME/output (local placeholders' own and the CLS's copies of remote
ones; never a -o/-e file). Without ids, a range, -q, -t or -s, every ended
job is a candidate; -s takes states among D F X. Jobs go in batches
(--batch), each its own commit, so dispatch goes on meanwhile and an
interrupted purge leaves whole batches done.

Kept (and counted): a job whose target a live job still waits on, and a
member of an array or bundle with live members. A purged job still counts
for its target: done keeps the target complete for dependents submitted
later; failed or deleted keeps it failed, so they are blocked. A purged
id is never given again. Charges and transfers stay (spending and moved
totals are their sums). Prints how many jobs went, how many were kept and
the output bytes freed; a selection that matches nothing also says so on
stderr (exit 0, nothing with -Q), and a range no job is in is an error
(exit 1).`,
		Flags: flags,
		Action: func(c *cli.Context) error {
			if args := c.Args().Slice(); slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "-") }) {
				// Flags after ids (urfave/cli stops at the first): parse
				// again with every flag first, as the user commands do.
				again := []string{"purge"}
				for _, f := range flags {
					name := f.Names()[0]
					if !c.IsSet(name) {
						continue
					}
					if _, isBool := flagnames.Unwrap(f).(*cli.BoolFlag); isBool {
						again = append(again, "--"+name)
					} else {
						again = append(again, "--"+name+"="+fmt.Sprint(c.Value(name)))
					}
				}
				again = flagorder.First(flags)(append(again, args...))
				return c.App.RunContext(c.Context, append([]string{c.App.Name}, again...))
			}
			req, err := purgeRequest(c)
			if err != nil {
				return err
			}
			cl, err := Dial(c.Context, env, "cls")
			if err != nil {
				return err
			}
			defer cl.Close()
			reply, err := client.Do(c.Context, cl, protocol.OpPurge, req)
			if err != nil {
				return cutShort(interrupted(c.Context, err, purgeGoesOn), purgeGoesOn)
			}
			verb := "purged"
			if req.DryRun {
				verb = "would purge"
			}
			if !c.Bool("Q") || req.DryRun {
				fmt.Fprintf(c.App.Writer, "%s %s (%s of output) in %s; kept %d\n",
					verb, plural(reply.Purged, "job"), acct.HumanBytes(reply.Bytes), plural(reply.Batches, "batch"), reply.Kept)
			}
			if reply.ErrorCount > 0 {
				msg := "not purged: " + strings.Join(reply.Errors, "; ")
				if more := reply.ErrorCount - len(reply.Errors); more > 0 {
					msg += fmt.Sprintf("; and %d more", more)
				}
				return exitError{code: ExitFailed, msg: msg}
			}
			if reply.Purged == 0 && reply.Kept == 0 && !req.All && len(req.IDs) == 0 {
				return nothingPurged(c, cl, req)
			}
			return nil
		},
	}
}

// nothingPurged follows a purge of a range or selection that matched no
// job, as nothingActed follows the other actions: a range no job is in
// is unknown ids (exit 1); a selection matching nothing is said on
// stderr unless -Q.
func nothingPurged(c *cli.Context, cl *client.Client, req protocol.Purge) error {
	if req.First > 0 {
		if found, err := anyJob(c.Context, cl, req.First, req.Last); err == nil && !found {
			return exitError{code: ExitFailed, msg: "nothing purged: " + jobids.RangeUnknown(req.First, req.Last)}
		}
	}
	if !c.Bool("Q") {
		fmt.Fprintf(c.App.ErrWriter, "%s: nothing purged: no job%s is %s with --ended-before %s\n", c.App.Name,
			selectionText(req.First, req.Last, req.Queue, req.Target), stateNames(protocol.PurgeStates, req.States), c.String("ended-before"))
	}
	return nil
}

// purgeRequest reads cls purge's command line.
func purgeRequest(c *cli.Context) (protocol.Purge, error) {
	var req protocol.Purge
	if !c.IsSet("ended-before") {
		return req, Usagef("--ended-before is required (e.g. --ended-before 7d)")
	}
	age, err := parseAge(c.String("ended-before"))
	if err != nil {
		return req, Usagef("--ended-before: %v", err)
	}
	if b := c.Int("batch"); b < 1 || b > protocol.MaxPurgeBatch {
		return req, Usagef("--batch %d: give 1..%d jobs", b, protocol.MaxPurgeBatch)
	}
	req.EndedBefore, req.Batch, req.DryRun = age, c.Int("batch"), c.Bool("dry-run")
	if c.NArg() == 0 && !c.IsSet("q") && !c.IsSet("t") && !c.IsSet("s") {
		req.All = true
		return req, nil
	}
	if req.Select, err = selection(c, protocol.PurgeStates); err != nil {
		return req, err
	}
	for _, st := range req.States {
		if !strings.ContainsRune(protocol.PurgeStates, st) {
			return req, Usagef("-s %s: only ended jobs (states %s) can be purged", req.States, protocol.PurgeStates)
		}
	}
	req.Atomic = false
	return req, nil
}

// parseAge reads an age as walltime does, plus days and weeks ("7d",
// "2w"), which a purge's cutoff is usually given in.
func parseAge(s string) (float64, error) {
	for suffix, unit := range map[string]float64{"d": 86400, "w": 7 * 86400} {
		if n, ok := strings.CutSuffix(s, suffix); ok {
			f, err := strconv.ParseFloat(n, 64)
			if err != nil || !(f >= 0 && f*unit <= walltime.Max) {
				return 0, fmt.Errorf("%q is not an age (e.g. 7d, 2w, 12h, 90m)", s)
			}
			return f * unit, nil
		}
	}
	f, err := walltime.Parse(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not an age (e.g. 7d, 2w, 12h, 90m)", s)
	}
	return f, nil
}

// plural is "1 job", "2 jobs", "0 batches".
func plural[N ~int | ~int64](n N, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "ch") {
		return fmt.Sprintf("%d %ses", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
