package clscmd

import (
	"cmp"
	"context"
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
			name, cfg, err := openSSHSite(c, env, "login")
			if err != nil {
				return err
			}
			if sshControl(c.Context, cfg, "check") == nil {
				fmt.Fprintf(c.App.Writer, "already logged in to site %s (cls site logout %s ends it)\n", protocol.Printable(name), protocol.Printable(name))
				return nil
			}
			if err := login.PrivateControlDir(cfg.ControlDir); err != nil {
				return err
			}
			cmd := exec.CommandContext(c.Context, sshProgram(), cfg.LoginArgs()...)
			cmd.Stdin, cmd.Stdout, cmd.Stderr = env.Stdin, c.App.Writer, c.App.ErrWriter
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("ssh %s: %w", protocol.Printable(cfg.Dest), err)
			}
			if err := sshControl(c.Context, cfg, "check"); err != nil {
				return fmt.Errorf("ssh %s logged in, but its connection did not stay open for the CLS: %w", protocol.Printable(cfg.Dest), err)
			}
			fmt.Fprintf(c.App.Writer, "logged in to site %s: the CLS's connections there ride on this one until it ends\n", protocol.Printable(name))
			return nil
		},
	}
}

// siteLogout ends the master connection of a site added with --openssh
// (the user's login, or one the CLS opened): the CLS's connections there
// end with it.
func siteLogout(env mqcli.Env) *cli.Command {
	return &cli.Command{
		Name:      "logout",
		Usage:     "end the login that a site added with --openssh rides on (ssh -O exit); the CLS's connections there end with it",
		ArgsUsage: "NAME",
		Action: func(c *cli.Context) error {
			name, cfg, err := openSSHSite(c, env, "logout")
			if err != nil {
				return err
			}
			if sshControl(c.Context, cfg, "check") != nil {
				return fmt.Errorf("not logged in to site %s", protocol.Printable(name))
			}
			if err := sshControl(c.Context, cfg, "exit"); err != nil {
				return fmt.Errorf("ssh -O exit %s: %w", protocol.Printable(cfg.Dest), err)
			}
			fmt.Fprintf(c.App.Writer, "logged out of site %s\n", protocol.Printable(name))
			return nil
		},
	}
}

// openSSHSite is the site NAME that cls site login or logout (verb)
// names, and how the system's ssh reaches it; an error unless it was
// added with --openssh.
func openSSHSite(c *cli.Context, env mqcli.Env, verb string) (string, login.OpenSSHConfig, error) {
	if c.NArg() != 1 {
		return "", login.OpenSSHConfig{}, mqcli.Usagef("site %s takes one NAME", verb)
	}
	if env.InCLS {
		return "", login.OpenSSHConfig{}, mqcli.Usagef("site %s runs ssh on the CLS's host: run it there", verb)
	}
	name := c.Args().First()
	cl, err := mqcli.Dial(c.Context, env, "cls")
	if err != nil {
		return "", login.OpenSSHConfig{}, err
	}
	sl, err := client.Do(c.Context, cl, protocol.OpSiteList, protocol.Empty{})
	cl.Close()
	if err != nil {
		return "", login.OpenSSHConfig{}, err
	}
	var spec *protocol.SiteSpec
	for i := range sl.Sites {
		if sl.Sites[i].Name == name {
			spec = &sl.Sites[i].SiteSpec
		}
	}
	switch {
	case spec == nil:
		return "", login.OpenSSHConfig{}, mqcli.Usagef("no site %s (cls site list shows them)", protocol.Quote(name))
	case !spec.OpenSSH:
		return "", login.OpenSSHConfig{}, mqcli.Usagef("site %s was not added with --openssh: the CLS logs in to it itself", protocol.Quote(name))
	}
	home, err := client.Home()
	if err != nil {
		return "", login.OpenSSHConfig{}, err
	}
	return name, site.OpenSSHFor(*spec, login.ControlDir(home)), nil
}

// sshControl asks the master connection of cfg's login host to do op.
func sshControl(ctx context.Context, cfg login.OpenSSHConfig, op string) error {
	out, err := exec.CommandContext(ctx, sshProgram(), cfg.ControlArgs(op)...).CombinedOutput()
	if err != nil && len(out) > 0 {
		return fmt.Errorf("%s", protocol.ClipText(string(out), 300))
	}
	return err
}

// sshProgram is the ssh command the CLS runs for --openssh sites.
func sshProgram() string { return cmp.Or(os.Getenv("MQ_SSH"), "ssh") }
