package cli

import (
	"os/user"

	"github.com/urfave/cli/v2"
)

// squeue -u $USER, qstat -u $USER, scancel -u $USER: habits of a batch
// system shared by many users. A CLS holds one user's jobs, its owner's
// (this process's user: over SSH the commands run as the CLS's owner).

// userFlag is -u USER of mqstat, and of mqdel and the other commands
// that select jobs, which answer it (selectFlags).
func userFlag(usage string, hidden bool) cli.Flag {
	return &cli.StringFlag{Name: "u", Aliases: []string{"user"}, Usage: usage, Hidden: hidden}
}

// checkOwnUser accepts -u naming the user this command runs as (name or
// uid) and refuses another user's, whose jobs are in their own CLS.
func checkOwnUser(c *cli.Context) error {
	if !c.IsSet("u") {
		return nil
	}
	name := c.String("u")
	if name == "" { // -u "$USER" where USER is unset (cron, a container)
		return Usagef("-u: the user name is empty (a CLS holds only its owner's jobs: -u is not needed)")
	}
	me, err := user.Current()
	if err != nil || name == me.Username || name == me.Uid {
		return nil
	}
	return Usagef("-u %s: a CLS holds one user's jobs, and this one is %s's; %s's jobs are in their own CLS (their mqstat)", name, me.Username, name)
}

// selectUserError answers -u in a command that acts on a selection: as
// scancel -u $USER means every job of yours, it is --all here.
func selectUserError(c *cli.Context) error {
	if err := checkOwnUser(c); err != nil {
		return err
	}
	if c.IsSet("u") {
		return Usagef("-u %s: a CLS holds only its owner's jobs, so every one of them is --all (%s --all; narrow it with -q, -t, -s)", c.String("u"), c.App.Name)
	}
	return nil
}
