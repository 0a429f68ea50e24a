package cli

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/cmd/internal/acct"
	"github.com/mq-hpc/mq/protocol"
)

// warnNoSite passes err on, after a listing or summary without error
// warns on stderr when placeholders take no new jobs for their full
// output disk or because their node cannot run them, when the CLS holds
// the leases of a site that may be cut off from it, when a site waits for
// the user to log in to it, and when sites there are and every one is degraded: jobs
// then wait in Q with nothing in the listing to say why. --json is for
// programs and stays silent, as do -j and --cat; a CLS that cannot list
// its sites gets no warning.
func warnNoSite(c *cli.Context, cl *client.Client, err error) error {
	if _, catSet, _ := parseCat(c); err != nil || c.Bool("json") || c.IsSet("j") || catSet {
		return err
	}
	targetHint(c, cl)
	r, lerr := client.Do(c.Context, cl, protocol.OpSiteList, protocol.Empty{})
	if lerr != nil || len(r.Sites) == 0 {
		return nil
	}
	if paused := pausedPlaceholders(r.Sites); paused > 0 {
		fmt.Fprintf(c.App.ErrWriter, "mqstat: warning: %d placeholder(s) take no new jobs: their output disk is nearly full or refuses writes (a quota used up?): free space there (cls site list)\n", paused)
	}
	if n, latest := brokenPlaceholders(r.Sites); n > 0 {
		fmt.Fprintf(c.App.ErrWriter, "mqstat: warning: %d placeholder(s) stopped taking jobs in the last day: their node cannot run them (latest: %s): drain the node (cls site list)\n", n, brokenText(latest))
	}
	now := time.Now()
	for _, s := range r.Sites {
		if s.HeldLeases > 0 {
			// Its jobs show E but nothing is heard of them: they may run
			// on behind a network cut, and report when it heals.
			fmt.Fprintf(c.App.ErrWriter, "mqstat: warning: site %s may be cut off from the CLS (%s): its jobs stay E until it is back or the hold ends (cls site list)\n",
				protocol.Printable(s.Name), s.CutNote(func(t time.Time) string { return acct.TimeOf(t, now) }))
		}
	}
	for _, s := range r.Sites {
		if s.NeedsLogin {
			// Nothing runs there until the user answers its login host.
			fmt.Fprintf(c.App.ErrWriter, "mqstat: warning: site %s waits for you to log in: cls site login %s\n", protocol.Printable(s.Name), protocol.Printable(s.Name))
		}
	}
	for _, s := range r.Sites {
		if s.State != "degraded" {
			return nil
		}
	}
	fmt.Fprintf(c.App.ErrWriter, "mqstat: warning: every site is degraded, so no placeholder starts and queued jobs wait: cls site list says why\n")
	return nil
}

// pausedPlaceholders counts the placeholders of sites that take no new
// jobs for their full output disk.
func pausedPlaceholders(sites []protocol.SiteInfo) int {
	n := 0
	for _, s := range sites {
		n += s.Paused
	}
	return n
}

// brokenPlaceholders counts the placeholders of sites that said their
// node cannot run jobs, and gives the latest.
func brokenPlaceholders(sites []protocol.SiteInfo) (n int, latest protocol.BrokenPlaceholder) {
	for _, s := range sites {
		n += len(s.Broken)
		for _, b := range s.Broken {
			if b.At.After(latest.At) {
				latest = b
			}
		}
	}
	return n, latest
}

// brokenText says which placeholder broke, where and why, escaped: the
// words come from the cluster.
func brokenText(b protocol.BrokenPlaceholder) string {
	where := ""
	if b.Host != "" {
		where = " on " + b.Host
	}
	return protocol.Printable(fmt.Sprintf("placeholder %d%s: %s", b.ID, where, b.Why))
}
