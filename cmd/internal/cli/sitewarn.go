package cli

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/cmd/internal/sitewarn"
	"github.com/mq-hpc/mq/protocol"
)

// warnNoSite passes err on, after a listing or summary without error
// warns on stderr of what the sites keep from running (sitewarn.Lines):
// jobs then wait in Q with nothing in the listing to say why. --json is
// for programs and stays silent, as does --cat; -j warns for a queued job
// only (mqstatJob); a CLS that cannot list its sites gets no warning.
func warnNoSite(c *cli.Context, cl *client.Client, err error) error {
	if _, catSet, _ := parseCat(c); err != nil || c.Bool("json") || c.IsSet("j") || catSet {
		return err
	}
	targetHint(c, cl)
	warnSites(c, cl)
	return nil
}

// warnSites warns on stderr of what the sites keep from running.
func warnSites(c *cli.Context, cl *client.Client) {
	r, err := client.Do(c.Context, cl, protocol.OpSiteList, protocol.Empty{})
	if err != nil {
		return
	}
	for _, l := range sitewarn.Lines(r.Sites, time.Now()) {
		fmt.Fprintf(c.App.ErrWriter, "mqstat: warning: %s\n", l)
	}
}
