// Package placeholders keeps the metaqueue's registry of placeholders and
// the sites they run at: who registered (identity, site, host, slots, out
// dir, last seen), which are known to this run, which connections they are
// on, the rows of those gone for good, the lease decisions (which attempts'
// leases lapsed, whether the CLS itself stalled), the sites' specs and
// the placeholders that said their node cannot run jobs (broken.go).
//
// The core calls it where the event happens (a registration, a connection
// closed, a placeholder handed work or gone, the tick, open) and applies
// what it answers: the attempts whose lease lapsed are ended by the core's
// lifecycle, the placeholders deleted are forgotten by the other features.
// The module reads and writes its tables through the core's writer, inside
// the core's open transaction, and takes the time from the core.
package placeholders

import (
	"context"
	"database/sql"
	_ "embed"
	"time"

	"github.com/mq-hpc/mq/internal/batchfail"
	"github.com/mq-hpc/mq/internal/sqlfile"
	"github.com/mq-hpc/mq/protocol"
)

var (
	//go:embed placeholders.sql
	placeholdersFile string
	//go:embed sites.sql
	sitesFile string
	//go:embed broken.sql
	brokenFile string

	placeholdersSQL = sqlfile.MustParse("placeholders.sql", placeholdersFile)
	sitesSQL        = sqlfile.MustParse("sites.sql", sitesFile)
	brokenSQL       = sqlfile.MustParse("broken.sql", brokenFile)
)

// Query returns the placeholders.sql query called name, for the core to
// prepare the registration's statements at open (Stmts).
func Query(name string) string { return placeholdersSQL.Get(name) }

// Queries are the module's SQL files by name, for the core's tests to
// prepare against the schema.
func Queries() map[string]sqlfile.Queries {
	return map[string]sqlfile.Queries{"placeholders.sql": placeholdersSQL, "sites.sql": sitesSQL, "broken.sql": brokenSQL}
}

// Execer is the connection the module writes through: the core's writer
// (*sql.Conn, *sql.Tx).
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Stmts are the registration's statements, prepared once by the core on its
// writer (Query("InsertPlaceholder"), Query("TouchPlaceholder")): a
// registration is on every placeholder's start.
type Stmts struct {
	Insert, Touch *sql.Stmt
}

// Registry is what the core knows of placeholders in this run. Its zero
// value is ready; the core goroutine owns it.
//
// Placeholder rows are kept for what mqstat shows of the jobs they ran
// (site and host of every attempt). A placeholder that never ran anything
// needs no row once it is gone for good, and a key that registers in a
// loop would otherwise add rows forever (20,000 registrations on one
// connection added 20,000 rows, 90 MB). Gone for good means: registered on
// no open connection for longer than a lease (a reconnect within a lease
// reclaims its id), with no job, attempt or copy naming it, and no poll
// parked. They are swept on the core's tick, at most once a lease; rows of
// earlier runs that ran nothing count as disconnected when the store opens.
type Registry struct {
	known   map[int64]bool      // registered, or holding jobs at load
	conns   map[int64]int       // registered on open connections: how many
	fresh   map[int64]time.Time // registered in this run and never handed work: when last seen on a connection (zero: on one now)
	swept   time.Time
	checked time.Time // when leases were last checked (Stalled)
	// slept is the time the host had spent suspended then, as suspended
	// (suspend.Total unless a test's) reads it.
	slept     time.Duration
	suspended func() time.Duration
	// starts are the attempts placeholders said they started while the
	// database had no room to record it, by placeholder, until a
	// heartbeat with room (Started); kept is how many.
	starts map[int64][]protocol.JobRef
	kept   int
	// sites are the sites placeholders registered at in this run, and
	// retired those of a site since removed (Retire).
	sites   map[int64]string
	retired map[int64]bool
	// reach holds the leases of placeholders at a site cut off from the
	// CLS (SiteReached, HoldLapsed).
	reach Reach
	// last is the highest id a registration was given in this run: a new
	// one is above it (InsertPlaceholder), and above meta's
	// placeholder_last, the highest of every run (schema version 33),
	// so no id names two placeholders. Given again, an id of one swept
	// (Sweep) would inherit what the server and the core's modules keep
	// of it by id (a stale pool, its stream copies).
	last int64
}

// MaxKeptStarts bounds the starts kept while there is no room: past it
// they are dropped, and those jobs show P until their reports.
const MaxKeptStarts = 1 << 20

// MaxSlots is the most slots a placeholder may offer.
const MaxSlots = 4096

// Check validates a registration before it reaches the core.
func Check(r protocol.Register) error {
	if r.Site == "" || r.Host == "" {
		return protocol.Errorf(protocol.CodeBadRequest, "register needs a site and a host")
	}
	if r.Slots < 1 || r.Slots > MaxSlots {
		return protocol.Errorf(protocol.CodeBadRequest, "slots must be 1..%d, not %d", MaxSlots, r.Slots)
	}
	if err := protocol.CheckSeconds("walltime_s", r.Walltime); err != nil {
		return protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	if len(r.Holding) > protocol.MaxHolding {
		return protocol.Errorf(protocol.CodeBadRequest, "holding lists %d attempts, at most %d", len(r.Holding), protocol.MaxHolding)
	}
	return nil
}

// Register records a placeholder, or renews one reconnecting with its id
// when site, host and identity match (so one key cannot take over the jobs
// of a placeholder another key started), at now, and returns its id.
func (g *Registry) Register(st Stmts, r protocol.Register, identity string, now time.Time) (int64, error) {
	var id int64
	at := now.UnixMicro()
	if r.ID > 0 {
		res, err := st.Touch.Exec(r.PID, r.Slots, at, r.ID, r.Site, r.Host, identity)
		if err != nil {
			return 0, batchfail.Store{Err: err}
		}
		if n, _ := res.RowsAffected(); n == 1 {
			id = r.ID
		}
	}
	isNew := id == 0
	if isNew {
		if err := st.Insert.QueryRow(g.last, r.Site, r.Host, r.PID, r.OutDir, r.Slots, at, at, identity).Scan(&id); err != nil {
			return 0, batchfail.Store{Err: err}
		}
	}
	g.last = max(g.last, id)
	g.registered(id, isNew)
	if g.sites == nil {
		g.sites = map[int64]string{}
	}
	g.sites[id] = r.Site
	return id, nil
}

// Retire notes that site was removed: the placeholders registered at it
// get no more work (Retired), also through a reconnection with their
// ids. Until their batch system ends them they still ask, and the
// site's name, configured no more, would pass for one sharing the CLS
// host's filesystem: they were handed jobs whose inputs were never
// brought there. Placeholders registering at a site of that name
// later are new ones, and work.
func (g *Registry) Retire(site string) {
	g.reach.Forget(site)
	for id, s := range g.sites {
		if s != site {
			continue
		}
		if g.retired == nil {
			g.retired = map[int64]bool{}
		}
		g.retired[id] = true
	}
}

// Retired says whether placeholder id is of a site removed (Retire).
func (g *Registry) Retired(id int64) bool { return g.retired[id] }

// registered notes a registration on a connection; isNew is a new row.
func (g *Registry) registered(id int64, isNew bool) {
	if g.conns == nil {
		g.conns, g.fresh = map[int64]int{}, map[int64]time.Time{}
	}
	g.conns[id]++
	if _, old := g.fresh[id]; isNew || old {
		g.fresh[id] = time.Time{}
	}
	g.Know(id)
}

// Reset forgets which placeholders are known, before a load; what the
// sweep knows of connections stays (they are still open).
func (g *Registry) Reset() { g.known = map[int64]bool{} }

// Know makes placeholder id known: it may heartbeat, ask and report.
func (g *Registry) Know(id int64) {
	if g.known == nil {
		g.known = map[int64]bool{}
	}
	g.known[id] = true
}

// Known says whether placeholder id registered (or held jobs at load).
func (g *Registry) Known(id int64) bool { return g.known[id] }

// Forget drops a placeholder known to have ended.
func (g *Registry) Forget(id int64) { delete(g.known, id) }

// Started returns, by placeholder, the starts to record now: refs,
// attempts placeholder ph said it started, with those kept before. While
// the database has no room (short) it keeps refs instead and returns
// none: the agent sends a start once, and its heartbeat is answered. The
// kept starts of every placeholder go with the first heartbeat that has
// room, so none wait on one that never heartbeats again.
func (g *Registry) Started(ph int64, refs []protocol.JobRef, short bool) map[int64][]protocol.JobRef {
	switch {
	case short:
		if g.kept+len(refs) <= MaxKeptStarts && len(refs) > 0 {
			if g.starts == nil {
				g.starts = map[int64][]protocol.JobRef{}
			}
			g.starts[ph] = append(g.starts[ph], refs...)
			g.kept += len(refs)
		}
		return nil
	case len(g.starts) > 0:
		out := g.starts
		out[ph] = append(out[ph], refs...)
		g.starts, g.kept = nil, 0
		return out
	case len(refs) > 0:
		return map[int64][]protocol.JobRef{ph: refs}
	}
	return nil
}

// Worked notes that a placeholder was handed a job: its row stays.
func (g *Registry) Worked(id int64) { delete(g.fresh, id) }

// Disconnected notes that a connection placeholder id registered on closed
// at now.
func (g *Registry) Disconnected(id int64, now time.Time) {
	if n := g.conns[id] - 1; n > 0 {
		g.conns[id] = n
		return
	}
	delete(g.conns, id)
	if _, ok := g.fresh[id]; ok {
		g.fresh[id] = now
	}
}

// Due says whether to look for placeholders gone at now: some of this
// run's never worked, and the last look is a lease ago. It counts now as
// the last look.
func (g *Registry) Due(now time.Time, lease time.Duration) bool {
	if len(g.fresh) == 0 || now.Sub(g.swept) < lease {
		return false
	}
	g.swept = now
	return true
}

// Gone returns the placeholders of this run gone for good at now (see
// Registry); parked are those with a poll waiting. Delete removes their
// rows.
func (g *Registry) Gone(now time.Time, lease time.Duration, parked map[int64]bool) []int64 {
	var gone []int64
	for id, left := range g.fresh {
		if left.IsZero() || g.conns[id] > 0 || parked[id] || now.Sub(left) < lease {
			continue
		}
		gone = append(gone, id)
	}
	return gone
}

// Delete deletes the rows of placeholders gone, in the core's transaction,
// and forgets them.
func (g *Registry) Delete(ctx context.Context, ex Execer, gone []int64) error {
	for _, id := range gone {
		if _, err := ex.ExecContext(ctx, placeholdersSQL.Get("DeletePlaceholder"), id); err != nil {
			return batchfail.Store{Err: err}
		}
		delete(g.fresh, id)
		delete(g.known, id)
		delete(g.sites, id)
		delete(g.retired, id)
	}
	return nil
}

// Sweep deletes, when due (Due), the rows of this run's placeholders gone
// for good (Gone; parked is asked only then) and returns them; begin
// opens the core's transaction before the first delete.
func (g *Registry) Sweep(ctx context.Context, ex Execer, now time.Time, lease time.Duration, parked func() map[int64]bool, begin func() error) ([]int64, error) {
	if !g.Due(now, lease) {
		return nil, nil
	}
	gone := g.Gone(now, lease, parked())
	if len(gone) == 0 {
		return nil, nil
	}
	if err := begin(); err != nil {
		return nil, err
	}
	return gone, g.Delete(ctx, ex, gone)
}

// LoadOld notes, when the store opens at now, the rows of earlier runs'
// placeholders that ran nothing: unless one registers again within a lease
// (a placeholder connected when the CLS stopped), Gone names them.
func (g *Registry) LoadOld(ctx context.Context, ex Execer, now time.Time) error {
	rows, err := ex.QueryContext(ctx, placeholdersSQL.Get("Unreferenced"))
	if err != nil {
		return err
	}
	defer rows.Close()
	g.conns, g.fresh = map[int64]int{}, map[int64]time.Time{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return err
		}
		g.fresh[id] = now
	}
	return rows.Err()
}

// MaxFree bounds the slots one request for work may offer.
const MaxFree = 4096

// CheckNext refuses a placeholder's request for work that no placeholder
// sends: slots out of 0..MaxFree, times out of range, more slots ahead
// than free.
func CheckNext(req protocol.Next) error {
	if req.Free < 0 || req.Free > MaxFree {
		return protocol.Errorf(protocol.CodeBadRequest, "free slots must be 0..%d, not %d", MaxFree, req.Free)
	}
	if err := protocol.CheckMillis("wait_ms", int64(req.WaitMS)); err != nil {
		return protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	if err := protocol.CheckSeconds("walltime_left_s", req.WalltimeLeft); err != nil {
		return protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	if err := protocol.CheckStarted(req.Started); err != nil {
		return protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	if req.Ahead < 0 || req.Ahead > req.Free {
		return protocol.Errorf(protocol.CodeBadRequest, "ahead must be 0..free (%d), not %d", req.Free, req.Ahead)
	}
	return nil
}

// RaiseLast keeps placeholder ids at or below id from being given again
// (InsertPlaceholder), on a database at schema version 33 or later.
func RaiseLast(ctx context.Context, db interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, id int64) error {
	_, err := db.ExecContext(ctx, placeholdersSQL.Get("RaiseLast"), id)
	return err
}
