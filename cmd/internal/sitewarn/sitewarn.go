// Package sitewarn says what mqstat warns of the sites after a listing:
// what keeps queued jobs waiting with nothing in the listing to say why.
package sitewarn

import (
	"fmt"
	"time"

	"github.com/mq-hpc/mq/cmd/internal/acct"
	"github.com/mq-hpc/mq/protocol"
)

// Lines are the warnings sites (cls site list's) call for at now, each a
// line without its "mqstat: warning: " and newline: placeholders that
// take no new jobs for their full output disk or because their node
// cannot run them, sites whose leases the CLS holds as they may be cut
// off, sites that wait for the user to log in, and every site degraded.
// Peer-supplied words are escaped.
func Lines(sites []protocol.SiteInfo, now time.Time) []string {
	var out []string
	if paused := pausedPlaceholders(sites); paused > 0 {
		out = append(out, fmt.Sprintf("%d placeholder(s) take no new jobs: their output disk is nearly full or refuses writes (a quota used up?): free space there (cls site list)", paused))
	}
	if n, latest := brokenPlaceholders(sites); n > 0 {
		out = append(out, fmt.Sprintf("%d placeholder(s) stopped taking jobs in the last day: their node cannot run them (latest: %s): drain the node (cls site list)", n, brokenText(latest)))
	}
	for _, s := range sites {
		if s.HeldLeases > 0 {
			// Its jobs show E but nothing is heard of them: they may run
			// on behind a network cut, and report when it heals.
			out = append(out, fmt.Sprintf("site %s may be cut off from the CLS (%s): its jobs stay E until it is back or the hold ends (cls site list)",
				protocol.Printable(s.Name), s.CutNote(func(t time.Time) string { return acct.TimeOf(t, now) })))
		}
	}
	for _, s := range sites {
		if s.NeedsLogin {
			// Nothing runs there until the user answers its login host.
			out = append(out, fmt.Sprintf("site %s waits for you to log in: cls site login %s", protocol.Printable(s.Name), protocol.Printable(s.Name)))
		}
	}
	for _, s := range sites {
		if s.State != "degraded" {
			return out
		}
	}
	if len(sites) > 0 {
		out = append(out, "every site is degraded, so no placeholder starts and queued jobs wait: cls site list says why")
	}
	return out
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
