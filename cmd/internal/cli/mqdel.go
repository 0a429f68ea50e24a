package cli

import (
	"bufio"
	"fmt"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/cmd/internal/flagorder"
	"github.com/mq-hpc/mq/cmd/internal/jobids"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// Mqdel returns the mqdel command.
func Mqdel(env Env) *cli.App {
	app := NewApp("mqdel", "delete jobs from the metaqueue", env)
	app.UsageText = `mqdel [-q QUEUE] [-Q] ID... | FIRST-LAST
   mqdel [-q QUEUE] [-t TARGET[,TARGET...]] [-s STATES] [-Q]
   mqdel --all [-s STATES] [-Q]`
	app.Description = `Deletes jobs that have not ended; an executing job is killed on its
placeholder. Jobs waiting on a deleted job's target become blocked (B);
mqsub --rerun brings a deleted job back. Jobs are named by id, by a range
FIRST-LAST (a job array, as mqsub --array prints it), or selected by queue,
target and states (-s, among W Q H E B), or all of them; -t A,B,... deletes
the jobs of each target in turn, going on past a target that fails (a
workflow system cancelling a run's jobs). Jobs named by id
are deleted all or none: if one cannot be deleted, nothing is, and the
error names each culprit. A range or selection is deleted 10,000 jobs at a
time, the CLS serving others in between. Prints a line per deleted job
unless -Q; a range or selection that matches nothing says so on stderr
(exit 0, nothing with -Q), but a range no job is in is an error (exit 1).`
	app.Flags = selectFlags("delete")
	app.Metadata = map[string]any{rewriteArgs: flagorder.First(app.Flags)}
	app.Action = func(c *cli.Context) error {
		sel, err := selectionOf(c, "WQHEB", true)
		if err != nil {
			return err
		}
		cl, err := Dial(c.Context, env, "mqdel")
		if err != nil {
			return err
		}
		defer cl.Close()
		if strings.Contains(sel.Target, ",") {
			return deleteTargets(c, cl, sel)
		}
		reply, err := client.Do(c.Context, cl, protocol.OpDelete, sel)
		if err != nil {
			return cutShort(err, batchesDone("mqdel"))
		}
		if err := atomicErrors("deleted", reply); err != nil {
			return err
		}
		if reply.Acted() == 0 {
			return nothingActed(c, cl, sel, "WQHEB", "deleted")
		}
		if !c.Bool("Q") {
			return listActed(c, "deleted", reply, "deleted job %d\n")
		}
		return nil
	}
	return app
}

// selectFlags are the flags that select jobs for mqdel and mqsub --rerun.
func selectFlags(verb string) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "q", Aliases: []string{"queue"}, Usage: "with ids: they must be in this queue; else " + verb + " its jobs"},
		&cli.StringFlag{Name: "t", Aliases: []string{"target"}, Usage: verb + " the jobs of this target"},
		&cli.StringFlag{Name: "s", Aliases: []string{"states"}, Usage: "only jobs in these states, e.g. QW"},
		&cli.BoolFlag{Name: "all", Usage: verb + " every job (in the states -s gives)"},
		&cli.BoolFlag{Name: "Q", Aliases: []string{"quiet"}, Usage: "print nothing but errors"},
		userFlag("", true), // scancel -u $USER: --all (selectUserError)
	}
}

// selection builds the Select of mqsub --rerun, mqhold, mqrls, mqalter
// and cls purge from the arguments (ids or one range) and flags; allowed
// are the states the action applies to.
func selection(c *cli.Context, allowed string) (protocol.Select, error) {
	return selectionOf(c, allowed, false)
}

// selectionOf is selection; with targets, -t may name several targets
// (A,B,...), as mqdel's does.
func selectionOf(c *cli.Context, allowed string, targets bool) (protocol.Select, error) {
	sel := protocol.Select{Target: c.String("t"), States: statesFlag(c), All: c.Bool("all")}
	if err := selectUserError(c); err != nil {
		return sel, err
	}
	if err := emptyName(c); err != nil {
		return sel, err
	}
	if !targets {
		if err := oneTarget(c); err != nil {
			return sel, err
		}
	}
	if c.IsSet("q") {
		sel.Queue = c.String("q")
	}
	if c.NArg() > 0 {
		first, last, isRange, err := jobids.Range(c.Args().First())
		if err != nil {
			return sel, Usagef("%v", err)
		}
		if isRange {
			if c.NArg() > 1 {
				return sel, Usagef("give one range FIRST-LAST or job ids, not both")
			}
			sel.First, sel.Last = first, last
		} else if strings.EqualFold(c.Args().First(), "all") {
			return sel, Usagef("\"all\" is not a job id: --all selects every job (as qdel all, scancel -u USER)")
		} else if sel.IDs, err = jobids.List(c.Args().Slice()); err != nil {
			return sel, Usagef("%v", err)
		}
	}
	// -s given empty (-s "$S", -s ,) is an error, not no -s: with --all
	// it would act on every job.
	if c.IsSet("s") {
		sts, err := job.ParseStates(sel.States)
		if err != nil {
			return sel, Usagef("-s: %v%s", err, squeueStates)
		}
		ok := false
		for _, st := range sts {
			ok = ok || strings.IndexByte(allowed, byte(st)) >= 0
		}
		// PD where P cannot be acted on is squeue's pending: mqsub --rerun
		// -s PD would rerun every done job.
		if squeuePD(c) && strings.IndexByte(allowed, 'P') < 0 {
			return sel, Usagef("%s; only jobs in states %s can be acted on here", pdHint, allowed)
		}
		if !ok {
			return sel, Usagef("-s %s: only jobs in states %s can be acted on here", sel.States, allowed)
		}
	}
	named := len(sel.IDs) > 0
	// cls purge has no --all: its messages must not offer one.
	all := ", --all"
	if !hasFlag(c, "all") {
		all = ""
	}
	if named && (sel.Target != "" || sel.States != "" || sel.All) {
		return sel, Usagef("give job ids or a selection (-t, -s%s), not both", all)
	}
	if !named && sel.First == 0 && sel.Target == "" && sel.Queue == "" && sel.States == "" && !sel.All {
		if all == "" {
			return sel, Usagef("missing job ids (or a range, -q, -t or -s)")
		}
		return sel, Usagef("missing job ids (or a range, -q, -t, -s or --all)")
	}
	// Jobs named by id are acted on all or none. A range or selection
	// takes, when its query runs, only jobs the action applies to, so
	// nothing would be refused: the CLS may act on it in batches.
	sel.Atomic = named
	return sel, nil
}

// emptyName refuses -t or -q given empty: -t "$T" with T unset narrows
// nothing, so mqdel -t "" -s Q would act on the queued jobs of every
// target, and mqwait -t "" wait for every job.
func emptyName(c *cli.Context) error {
	for _, f := range [][2]string{{"t", "target"}, {"q", "queue"}} {
		if c.IsSet(f[0]) && c.String(f[0]) == "" {
			return Usagef("-%s: empty %s name", f[0], f[1])
		}
	}
	return nil
}

// listActed prints each job id in reply with format; a reply that names
// only the first jobs of many (protocol.MaxActionIDs) is followed by a
// note on stderr of how many more there were.
func listActed(c *cli.Context, verb string, reply protocol.ActionReply, format string) error {
	w := bufio.NewWriter(c.App.Writer)
	for _, id := range reply.IDs {
		fmt.Fprintf(w, format, id)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if more := reply.Acted() - len(reply.IDs); more > 0 {
		fmt.Fprintf(c.App.ErrWriter, "%s: %s %d more jobs, not listed (%d in all)\n", c.App.Name, verb, more, reply.Acted())
	}
	return nil
}

// atomicErrors turns an atomic action's refusals into one error naming
// every culprit (at most 20 of them, and how many more).
func atomicErrors(verb string, reply protocol.ActionReply) error {
	return refusals("nothing "+verb, reply)
}

// refusals is reply's refusals as one error after what, naming every
// culprit (at most 20 of them, and how many more).
func refusals(what string, reply protocol.ActionReply) error {
	if len(reply.Errors) == 0 {
		return nil
	}
	errs := reply.Errors
	if len(errs) > 20 {
		errs = errs[:20]
	}
	more := reply.Refused() - len(errs)
	msg := what + ": " + strings.Join(errs, "; ")
	if more > 0 {
		msg += fmt.Sprintf("; and %d more", more)
	}
	return exitError{code: ExitFailed, msg: msg}
}

// oneTarget refuses a list of targets in -t (A,B) where one is
// expected: no target name has a comma, so the list would select no job
// (mqstat printed an empty table) or name a target that does not exist.
func oneTarget(c *cli.Context) error {
	if t := c.String("t"); strings.Contains(t, ",") {
		return Usagef("-t %s: one target here (a target name has no comma): one command per target (mqdel -t alone takes a list)", protocol.Quote(t))
	}
	return nil
}

// deleteTargets is mqdel -t A,B,...: the jobs of each target, one request
// a target, pipelined on one connection. A workflow system cancels
// hundreds of targets at once and allows seconds for it (Snakemake two),
// which one mqdel process per target on a small machine did not meet.
// Every target is tried; each failure is printed, and any makes the exit
// status 1.
func deleteTargets(c *cli.Context, cl *client.Client, sel protocol.Select) error {
	targets := strings.Split(sel.Target, ",")
	for _, t := range targets {
		if err := job.ValidName("target", t); err != nil {
			return Usagef("-t: %v", err)
		}
	}
	calls := make([]*client.Call[protocol.ActionReply], len(targets))
	for i, t := range targets {
		s := sel
		s.Target = t
		var err error
		if calls[i], err = client.Go(cl, protocol.OpDelete, s); err != nil {
			return err
		}
	}
	failed, acted := 0, 0
	for _, call := range calls {
		reply, err := call.Wait(c.Context)
		err = cutShort(err, batchesDone("mqdel"))
		if err == nil {
			acted += reply.Acted()
			err = refusals("not deleted", reply)
		}
		if err == nil && !c.Bool("Q") {
			err = listActed(c, "deleted", reply, "deleted job %d\n")
		}
		if err != nil {
			fmt.Fprintf(c.App.ErrWriter, "%s: %v\n", c.App.Name, err)
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("the jobs of %d of %d targets were not all deleted (above)", failed, len(targets))
	}
	if acted == 0 {
		return nothingActed(c, cl, sel, "WQHEB", "deleted")
	}
	return nil
}

// hasFlag says whether the command c runs defines the flag name.
func hasFlag(c *cli.Context, name string) bool {
	flags := c.App.Flags
	if c.Command != nil && c.Command.Name != "" {
		flags = c.Command.Flags
	}
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			return true
		}
	}
	return false
}
