package placeholders

import (
	"context"
	"time"

	"github.com/mq-hpc/mq/internal/batchfail"
	"github.com/mq-hpc/mq/protocol"
)

// The placeholders that said their node cannot run jobs are kept per site
// (the site manager lists them: site/broken.go), so that a restarted CLS
// still warns of the node: the latest protocol.MaxBroken of each site,
// for protocol.BrokenKept after the CLS first heard each.

// NoteBroken stores that placeholder b.ID of site said its node cannot
// run jobs, and drops the site's records beyond its latest
// protocol.MaxBroken and every record older than protocol.BrokenKept
// before b.At. A site not stored gets no record (it was removed while the
// word was on its way) unless embedded (the CLS's own, never stored).
func NoteBroken(ctx context.Context, ex Execer, site string, b protocol.BrokenPlaceholder, embedded bool) error {
	if _, err := ex.ExecContext(ctx, brokenSQL.Get("InsertBroken"), b.ID, site, b.Host, b.Why, b.At.UnixMicro(), embedded); err != nil {
		return batchfail.Store{Err: err}
	}
	cutoff := b.At.Add(-protocol.BrokenKept).UnixMicro()
	if _, err := ex.ExecContext(ctx, brokenSQL.Get("TrimBroken"), cutoff, site, protocol.MaxBroken); err != nil {
		return batchfail.Store{Err: err}
	}
	return nil
}

// Broken lists the records heard at since or later by site, the latest
// first.
func Broken(ctx context.Context, ex Execer, since time.Time) (map[string][]protocol.BrokenPlaceholder, error) {
	rows, err := ex.QueryContext(ctx, brokenSQL.Get("ListBroken"), since.UnixMicro())
	if err != nil {
		return nil, batchfail.Store{Err: err}
	}
	defer rows.Close()
	out := map[string][]protocol.BrokenPlaceholder{}
	for rows.Next() {
		var site string
		var b protocol.BrokenPlaceholder
		var at int64
		if err := rows.Scan(&site, &b.ID, &b.Host, &b.Why, &at); err != nil {
			return nil, batchfail.Store{Err: err}
		}
		b.At = time.UnixMicro(at)
		out[site] = append(out[site], b)
	}
	if err := rows.Err(); err != nil {
		return nil, batchfail.Store{Err: err}
	}
	return out, nil
}
