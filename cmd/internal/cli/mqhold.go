package cli

import (
	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/cmd/internal/flagorder"
	"github.com/mq-hpc/mq/protocol"
)

// Mqhold returns the mqhold command (PBS's qhold).
func Mqhold(env Env) *cli.App {
	app := NewApp("mqhold", "keep jobs from running until mqrls", env)
	app.UsageText = `mqhold [-q QUEUE] [-Q] ID... | FIRST-LAST
   mqhold [-q QUEUE] [-t TARGET] [-s STATES] [-Q]
   mqhold --all [-s STATES] [-Q]`
	app.Description = `Holds jobs that have not started: a waiting (W) or queued (Q) job becomes
held (H), is never dispatched, and its dependents wait for it (W) as for
any unfinished prerequisite, until mqrls releases it. A held job can be
deleted with mqdel. Jobs are named by id, by a range FIRST-LAST (a job
array), or selected by queue, target and states (-s, among W Q), or all of
them. Jobs named by id are held all or none: if one cannot be held (it is
executing or has ended), nothing is, and the error names each culprit; a
range or selection takes those of its jobs that can be, 10,000 at a time,
the CLS serving others in between. mqsub -H submits jobs held. Prints a
line per held job unless -Q; a range or selection that matches nothing
says so on stderr (exit 0, nothing with -Q), but a range no job is in is
an error (exit 1).`
	app.Flags = selectFlags("hold")
	app.Metadata = map[string]any{rewriteArgs: flagorder.First(app.Flags)}
	app.Action = func(c *cli.Context) error {
		return holdAction(c, env, protocol.OpHold, "WQ", "held")
	}
	return app
}

// Mqrls returns the mqrls command (PBS's qrls).
func Mqrls(env Env) *cli.App {
	app := NewApp("mqrls", "release held jobs", env)
	app.UsageText = `mqrls [-q QUEUE] [-Q] ID... | FIRST-LAST
   mqrls [-q QUEUE] [-t TARGET] [-Q]
   mqrls --all [-Q]`
	app.Description = `Releases held (H) jobs, from mqhold or mqsub -H: each becomes queued (Q),
waiting (W) or blocked (B), as its prerequisites say now. Jobs are named
by id, by a range FIRST-LAST (a job array), or selected by queue and
target, or all held jobs. Jobs named by id are released all or none: if
one is not held, nothing is released, and the error names each culprit; a
range or selection takes its held jobs, 10,000 at a time, the CLS serving
others in between. Prints a line per released job unless -Q; a range or
selection that matches nothing says so on stderr (exit 0, nothing with
-Q), but a range no job is in is an error (exit 1).`
	app.Flags = selectFlags("release")
	app.Metadata = map[string]any{rewriteArgs: flagorder.First(app.Flags)}
	app.Action = func(c *cli.Context) error {
		return holdAction(c, env, protocol.OpRelease, "H", "released")
	}
	return app
}

// holdAction is mqhold's and mqrls's: op on the selected jobs (allowed
// are the states it applies to), each acted on named unless -Q.
func holdAction(c *cli.Context, env Env, op protocol.Op[protocol.Select, protocol.ActionReply], allowed, verb string) error {
	sel, err := selection(c, allowed)
	if err != nil {
		return err
	}
	cl, err := Dial(c.Context, env, c.App.Name)
	if err != nil {
		return err
	}
	defer cl.Close()
	reply, err := client.Do(c.Context, cl, op, sel)
	if err != nil {
		return cutShort(err, batchesDone(c.App.Name))
	}
	if err := atomicErrors(verb, reply); err != nil {
		return err
	}
	if reply.Acted() == 0 {
		return nothingActed(c, cl, sel, allowed, verb)
	}
	if !c.Bool("Q") {
		return listActed(c, verb, reply, verb+" job %d\n")
	}
	return nil
}
