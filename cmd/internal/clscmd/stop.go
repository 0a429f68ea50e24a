package clscmd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/client"
	mqcli "github.com/mq-hpc/mq/cmd/internal/cli"
	"github.com/mq-hpc/mq/internal/cls"
)

// clsStop stops the CLS serving MQ_HOME, as hq server stop does: the
// owner need not find its process. It reads MQ_HOME, so it is not among
// the commands a key may run over SSH.
func clsStop() *cli.Command {
	return &cli.Command{
		Name:  "stop",
		Usage: "stop the CLS serving MQ_HOME, as SIGTERM to it does, and wait until it has stopped; jobs, queues and sites stay in MQ_HOME for the next cls serve",
		Flags: []cli.Flag{
			&cli.DurationFlag{Name: "timeout", Value: 2 * time.Minute, Usage: "give up waiting (exit 1) after this long; the CLS goes on stopping"},
			&cli.BoolFlag{Name: "keep-running", Usage: "leave its local placeholders running the jobs they have (an upgrade): they take no new ones, report them to the next cls serve on MQ_HOME and exit, or give up after 10 minutes without one (the CLS gets SIGUSR1, not SIGTERM)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return mqcli.Usagef("stop takes no arguments")
			}
			if c.Duration("timeout") <= 0 {
				return mqcli.Usagef("--timeout must be more than 0, not %s", c.Duration("timeout"))
			}
			home, err := client.Home()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(c.Context, c.Duration("timeout"))
			defer cancel()
			keep := c.Bool("keep-running")
			pid, err := cls.Stop(ctx, home, keep)
			if errors.Is(err, context.DeadlineExceeded) {
				if keep {
					// A CLS older than this command ignores the signal.
					return fmt.Errorf("the CLS (pid %d) has not stopped after %s: it may be stopping still, or be older than this cls and ignore --keep-running; kill -9 %d loses no job and leaves its local placeholders running too", pid, c.Duration("timeout"), pid)
				}
				return fmt.Errorf("the CLS (pid %d) has not stopped after %s; it goes on stopping (kill -9 %d loses no job)", pid, c.Duration("timeout"), pid)
			}
			if err != nil {
				return err
			}
			if keep {
				fmt.Fprintf(c.App.Writer, "cls: stopped the CLS (pid %d) serving %s; its local placeholders run on and report to the next cls serve\n", pid, home)
				return nil
			}
			fmt.Fprintf(c.App.Writer, "cls: stopped the CLS (pid %d) serving %s\n", pid, home)
			return nil
		},
	}
}
