package cls

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/mq-hpc/mq/internal/placeholder/spool"
	"github.com/mq-hpc/mq/internal/site"
)

// spoolEvery is how often the CLS looks at the local placeholders' spool
// again after its start: an agent may give up on its CLS (its reconnect
// time over) just as this one starts, too late for the first look.
const spoolEvery = 10 * time.Second

// deliverSpool applies the reports local placeholders spooled when they
// lost their CLS (package spool; they share MQ_HOME/output), at once and
// then every spoolEvery until ctx ends, when the channel it returns is
// closed. The first look is before anything is served: the jobs those
// reports end were loaded executing with a fresh lease, which must not
// lapse first (they would run again, the attempt counted).
func (c *CLS) deliverSpool(ctx context.Context) <-chan struct{} {
	dir := filepath.Join(c.outputDir(), spool.Dir)
	said := ""
	deliver := func() {
		// Only local placeholders write here: any site but a remote one is
		// taken (one removed since, the CLS's own under --local 0; "": a
		// placeholder the store forgot, whose reports are late). Looked
		// up here, not by the store's core, which the site manager may
		// wait for holding its lock (cls site add).
		remote := map[string]bool{}
		for _, si := range c.sites.mgr.List() {
			remote[si.Name] = si.Type != site.Local
		}
		local := func(name string) bool { return !remote[name] }
		if c.spoolCheck != nil {
			local = c.spoolCheck(local)
		}
		n, err := spool.Deliver(spool.OS{}, dir, os.Getuid(), func(f spool.File) error {
			return spool.CheckRefused(c.store.ReportSpooled(ctx, f.Placeholder, f.Reports, local))
		}, c.log)
		if n > 0 {
			c.log.Info("applied the reports local placeholders spooled when they lost their CLS", "reports", n, "dir", dir)
		}
		switch { // a line when the error changes, not every spoolEvery
		case err == nil:
			said = ""
		case err.Error() != said && ctx.Err() == nil:
			c.log.Warn("cannot apply the reports local placeholders spooled; their jobs run again when their leases run out", "err", err)
			said = err.Error()
		}
	}
	deliver()
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(spoolEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				deliver()
			}
		}
	}()
	return done
}
