package cli

import (
	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/protocol"
)

// Mqdel returns the mqdel command.
func Mqdel(env Env) *cli.App {
	app := NewApp("mqdel", "delete jobs from the metaqueue", env)
	app.UsageText = `mqdel [-q QUEUE] ID...
   mqdel [-q QUEUE] -t TARGET`
	app.Description = `Deletes jobs that have not ended; an executing job is killed on its
placeholder. Jobs waiting on a deleted job's target become blocked (B);
mqsub --rerun brings a deleted job back.`
	app.Flags = []cli.Flag{
		&cli.StringFlag{Name: "q", Aliases: []string{"queue"}, Usage: "the jobs must be in this queue"},
		&cli.StringFlag{Name: "t", Aliases: []string{"target"}, Usage: "delete every unfinished job of this target"},
	}
	app.Action = func(c *cli.Context) error {
		ids, err := parseIDs(c.Args().Slice())
		if err != nil {
			return err
		}
		sel := protocol.Select{IDs: ids, Queue: c.String("q"), Target: c.String("t")}
		if sel.Target == "" && len(ids) == 0 {
			return Usagef("missing job ids (or -t TARGET)")
		}
		if sel.Target != "" && len(ids) > 0 {
			return Usagef("give job ids or -t TARGET, not both")
		}
		cl, err := Dial(c.Context, env, "mqdel")
		if err != nil {
			return err
		}
		defer cl.Close()
		reply, err := client.Do(c.Context, cl, protocol.OpDelete, sel)
		if err != nil {
			return err
		}
		return actionErrors(reply)
	}
	return app
}
