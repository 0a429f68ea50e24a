package clscmd

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/client"
	mqcli "github.com/mq-hpc/mq/cmd/internal/cli"
	"github.com/mq-hpc/mq/internal/cls"
)

// clsDashboard prints the dashboard's address with its token, as cls
// serve did when it started. It reads MQ_HOME, so it is not among the
// commands a key may run over SSH: the token is the owner's.
func clsDashboard() *cli.Command {
	return &cli.Command{
		Name:  "dashboard",
		Usage: "the dashboard of the running CLS (cls serve --http)",
		Subcommands: []*cli.Command{{
			Name:  "url",
			Usage: "print the dashboard's address with its token (http://127.0.0.1:PORT/?token=...): open it once in a browser, which then keeps a session cookie",
			Action: func(c *cli.Context) error {
				if c.NArg() > 0 {
					return mqcli.Usagef("dashboard url takes no arguments")
				}
				home, err := client.Home()
				if err != nil {
					return err
				}
				u, err := cls.DashboardURL(home)
				if err != nil {
					return err
				}
				fmt.Fprintln(c.App.Writer, u)
				return nil
			},
		}},
		Action: func(c *cli.Context) error {
			return mqcli.Usagef("missing command (url)")
		},
	}
}
