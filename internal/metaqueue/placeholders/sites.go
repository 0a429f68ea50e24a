package placeholders

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mq-hpc/mq/internal/batchfail"
	"github.com/mq-hpc/mq/protocol"
)

// The sites (cls site add) are stored as JSON specs, one row each. The
// core tells the other features what a change means (prices, shapes,
// node-local storage) once the row is written.

// AddSite stores a new site at now; a site of that name already stored is
// refused.
func AddSite(ctx context.Context, ex Execer, spec protocol.SiteSpec, now time.Time) error {
	raw, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	var n int
	if err := ex.QueryRowContext(ctx, sitesSQL.Get("CountSites"), spec.Name).Scan(&n); err != nil {
		return batchfail.Store{Err: err}
	}
	if n > 0 {
		return protocol.Errorf(protocol.CodeBadRequest, "site %s already exists", spec.Name)
	}
	if _, err := ex.ExecContext(ctx, sitesSQL.Get("InsertSite"), spec.Name, string(raw), now.UnixMicro()); err != nil {
		return batchfail.Store{Err: err}
	}
	return nil
}

// UpdateSite stores a site's changed settings; a site not stored is
// refused.
func UpdateSite(ctx context.Context, ex Execer, spec protocol.SiteSpec) error {
	raw, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	res, err := ex.ExecContext(ctx, sitesSQL.Get("UpdateSite"), string(raw), spec.Name)
	if err != nil {
		return batchfail.Store{Err: err}
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return protocol.Errorf(protocol.CodeNotFound, "no site %s", spec.Name)
	}
	return nil
}

// RemoveSite deletes a site, with its broken placeholders; a site not
// stored is refused.
func RemoveSite(ctx context.Context, ex Execer, name string) error {
	res, err := ex.ExecContext(ctx, sitesSQL.Get("DeleteSite"), name)
	if err != nil {
		return batchfail.Store{Err: err}
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return protocol.Errorf(protocol.CodeNotFound, "no site %s", name)
	}
	if _, err := ex.ExecContext(ctx, brokenSQL.Get("DeleteSiteBroken"), name); err != nil {
		return batchfail.Store{Err: err}
	}
	return nil
}

// Sites lists the stored sites by name. A spec that does not parse is an
// error naming its site.
func Sites(ctx context.Context, ex Execer) ([]protocol.SiteSpec, error) {
	rows, err := ex.QueryContext(ctx, sitesSQL.Get("ListSites"))
	if err != nil {
		return nil, batchfail.Store{Err: err}
	}
	defer rows.Close()
	var out []protocol.SiteSpec
	for rows.Next() {
		var name, raw string
		if err := rows.Scan(&name, &raw); err != nil {
			return nil, batchfail.Store{Err: err}
		}
		var spec protocol.SiteSpec
		if err := json.Unmarshal([]byte(raw), &spec); err != nil {
			return nil, fmt.Errorf("site %s: stored settings unreadable: %w", name, err)
		}
		out = append(out, spec)
	}
	if err := rows.Err(); err != nil {
		return nil, batchfail.Store{Err: err}
	}
	return out, nil
}

// EachSite calls f with every stored site's spec (loading); a spec that
// does not parse is skipped, as the site manager refuses it too.
func EachSite(ctx context.Context, ex Execer, f func(name string, spec protocol.SiteSpec)) error {
	rows, err := ex.QueryContext(ctx, sitesSQL.Get("SiteSpecs"))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var name, raw string
		if err := rows.Scan(&name, &raw); err != nil {
			return err
		}
		var spec protocol.SiteSpec
		if json.Unmarshal([]byte(raw), &spec) == nil {
			f(name, spec)
		}
	}
	return rows.Err()
}
