package clscmd

import (
	"cmp"
	"fmt"
	"os"
	"os/exec"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/client"
	mqcli "github.com/mq-hpc/mq/cmd/internal/cli"
	"github.com/mq-hpc/mq/internal/site"
	"github.com/mq-hpc/mq/internal/site/login"
	"github.com/mq-hpc/mq/protocol"
)

// siteLogin opens, in the user's terminal, the master connection that a
// site added with --openssh rides on: ssh asks what the login host asks
// (a password, a one-time code) and then stays in the background.
func siteLogin(env mqcli.Env) *cli.Command {
	return &cli.Command{
		Name:      "login",
		Usage:     "log in to a site added with --openssh, answering what its login host asks (a password, a one-time code); the CLS's connections there ride on this one until it ends",
		ArgsUsage: "NAME",
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return mqcli.Usagef("site login takes one NAME")
			}
			if env.InCLS {
				return mqcli.Usagef("site login runs ssh in your terminal: run it on the CLS's host")
			}
			name := c.Args().First()
			cl, err := mqcli.Dial(c.Context, env, "cls")
			if err != nil {
				return err
			}
			sl, err := client.Do(c.Context, cl, protocol.OpSiteList, protocol.Empty{})
			cl.Close()
			if err != nil {
				return err
			}
			var spec *protocol.SiteSpec
			for i := range sl.Sites {
				if sl.Sites[i].Name == name {
					spec = &sl.Sites[i].SiteSpec
				}
			}
			switch {
			case spec == nil:
				return mqcli.Usagef("no site %s (cls site list shows them)", protocol.Quote(name))
			case !spec.OpenSSH:
				return mqcli.Usagef("site %s was not added with --openssh: the CLS logs in to it itself", protocol.Quote(name))
			}
			home, err := client.Home()
			if err != nil {
				return err
			}
			cfg := site.OpenSSHFor(*spec, login.ControlDir(home))
			if err := login.PrivateControlDir(cfg.ControlDir); err != nil {
				return err
			}
			cmd := exec.CommandContext(c.Context, cmp.Or(os.Getenv("MQ_SSH"), "ssh"), cfg.LoginArgs()...)
			cmd.Stdin, cmd.Stdout, cmd.Stderr = env.Stdin, c.App.Writer, c.App.ErrWriter
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("ssh %s: %w", protocol.Printable(cfg.Dest), err)
			}
			fmt.Fprintf(c.App.Writer, "logged in to site %s: the CLS's connections there ride on this one until it ends\n", protocol.Printable(name))
			return nil
		},
	}
}
