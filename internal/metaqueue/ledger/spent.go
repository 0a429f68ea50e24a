package ledger

import (
	"context"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// Spent ends attempt ref, which ran beside others, at now: its
// reservation is kept (Dying) until its late report or a lease from now
// when kept, else released.
func (l *Ledger) Spent(ref protocol.JobRef, ph int64, started, now time.Time, lease time.Duration, kept bool) {
	if kept {
		l.Dying(ref, ph, started, now, now.Add(lease))
		return
	}
	l.Stop(ref)
}

// LateEnd is a killed attempt's late report: charged up to when its
// placeholder says it ended (ExtendCharge), its reservation released
// (Died) whether or not the charge is written.
func (l *Ledger) LateEnd(ctx context.Context, x Execer, ref protocol.JobRef, finished, now time.Time, lease time.Duration) error {
	err := l.ExtendCharge(ctx, x, ref, finished, now, lease)
	l.Died(ref)
	return err
}
