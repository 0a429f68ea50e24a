package packing

import (
	"context"
	"database/sql"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/mq-hpc/mq/internal/resource"
	"github.com/mq-hpc/mq/internal/sqlfile"
	"github.com/mq-hpc/mq/internal/wire"
	"github.com/mq-hpc/mq/protocol"
)

// What packing keeps in the database (job_resources) and reads back: a
// job's request stored at submit, raised by a memory retry, loaded at open;
// the Done attempts' usage that teaches auto sizes.

//go:embed packing.sql
var packingSQL string

var queries = sqlfile.MustParse("packing.sql", packingSQL)

// Execer is the core's writer connection, or its open transaction:
// *sql.Conn and *sql.Tx both satisfy it.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Jobs is what packing reads of the core's jobs.
type Jobs interface {
	// Category is job id's queue and target names (ok false: not in
	// memory).
	Category(id int64) (c resource.Category, ok bool)
	// Running is every attempt running now (not copies), with its
	// placeholder.
	Running() []Held
}

// Held is an attempt running on a placeholder.
type Held struct {
	Run         Run
	Placeholder int64
}

// learnedAtOpen bounds the finished attempts read back into the learner.
const learnedAtOpen = 10000

// Inserter runs InsertQuery: the core prepares it once on its writer (a
// *sql.Stmt), since submit inserts one row per job that asks.
type Inserter interface {
	ExecContext(ctx context.Context, args ...any) (sql.Result, error)
}

// InsertQuery is the statement Keep runs through its Inserter.
func InsertQuery() string { return queries.Get("InsertResources") }

// Keep stores new job id's request r (its queue's defaults applied), of
// category c, in the core's transaction, when it asks for anything.
func (p *Packing) Keep(ctx context.Context, ins Inserter, id int64, r protocol.Resources, c resource.Category) error {
	if !r.Asks() {
		return nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if _, err := ins.ExecContext(ctx, id, string(b)); err != nil {
		return fmt.Errorf("packing: job %d's request: %w", id, err)
	}
	p.Job(id, wire.Request(r), c)
	return nil
}

// Alter replaces, in live job id's request, the cores, memory, GPUs and
// named amounts that r gives (mqalter), and drops those drop names
// (protocol.Alter.Drop), storing it in the core's transaction; what r
// leaves unset stays. The job waits afresh: a reservation or a wait for
// its old request is forgotten, and a memory retry's count starts again.
func (p *Packing) Alter(ctx context.Context, x Execer, id int64, r protocol.Resources, drop []string, jobs Jobs) error {
	old, err := stored(ctx, x, id)
	if err != nil {
		return err
	}
	if r.CPUs > 0 || r.CPUsAuto {
		old.CPUs, old.CPUsAuto = r.CPUs, r.CPUsAuto
	}
	if r.Mem > 0 || r.MemAuto {
		old.Mem, old.MemAuto = r.Mem, r.MemAuto
	}
	if r.GPUs > 0 {
		old.GPUs = r.GPUs
	}
	old.Named = alterNamed(old.Named, r.Named, drop)
	if slices.Contains(drop, protocol.DropGPUs) {
		old.GPUs = 0
	}
	if len(old.Named) > protocol.MaxNamed {
		return fmt.Errorf("job %d would ask for %d named resources; at most %d", id, len(old.Named), protocol.MaxNamed)
	}
	b, err := json.Marshal(old)
	if err != nil {
		return err
	}
	if _, err := x.ExecContext(ctx, queries.Get("SetResources"), id, string(b)); err != nil {
		return fmt.Errorf("packing: job %d's changed request: %w", id, err)
	}
	c, _ := jobs.Category(id)
	p.Forget(id)
	p.Job(id, wire.Request(old), c)
	return nil
}

// AlterRefusal says why live job id's request cannot take the named
// amounts r gives (mqalter): with its own, more names than a request may
// hold. "" when it can.
func AlterRefusal(ctx context.Context, x Execer, id int64, r protocol.Resources, drop []string) (string, error) {
	if len(r.Named) == 0 {
		return "", nil
	}
	old, err := stored(ctx, x, id)
	n := len(alterNamed(old.Named, r.Named, drop))
	if err != nil || n <= protocol.MaxNamed {
		return "", err
	}
	return fmt.Sprintf("job %d would ask for %d named resources; at most %d (drop some: --resource NAME=0)", id, n, protocol.MaxNamed), nil
}

// stored is job id's stored request (the zero request: none stored).
func stored(ctx context.Context, x Execer, id int64) (protocol.Resources, error) {
	var r protocol.Resources
	var text string
	err := x.QueryRowContext(ctx, queries.Get("JobResources"), id).Scan(&text)
	switch {
	case err == nil:
		if err := json.Unmarshal([]byte(text), &r); err != nil {
			return r, fmt.Errorf("job %d: stored request: %w", id, err)
		}
	case !errors.Is(err, sql.ErrNoRows):
		return r, err
	}
	return r, nil
}

// alterNamed is the named amounts old with those of set replaced or
// added and those drop names removed (nil when none is left).
func alterNamed(old, set map[string]int, drop []string) map[string]int {
	out := make(map[string]int, len(old)+len(set))
	maps.Copy(out, old)
	maps.Copy(out, set)
	for _, name := range drop {
		delete(out, name)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Load reads the requests of the jobs not ended, takes again the grants
// of the attempts running on placeholders it knows (after a reload; after
// a restart, when they register: Register), records what each site's
// placeholders are asked to hold, and teaches the learner what the newest
// Done jobs of the categories still asking for auto sizes used.
func (p *Packing) Load(ctx context.Context, x Execer, jobs Jobs, sites []protocol.SiteSpec) error {
	p.Reload()
	rows, err := x.QueryContext(ctx, queries.Get("LoadResources"))
	if err != nil {
		return err
	}
	for rows.Next() {
		var id int64
		var text string
		if err := rows.Scan(&id, &text); err != nil {
			rows.Close()
			return err
		}
		r, err := decode(id, text)
		if err != nil {
			rows.Close()
			return err
		}
		if c, ok := jobs.Category(id); ok {
			p.Job(id, r, c)
		}
	}
	if err := closeRows(rows); err != nil {
		return err
	}
	for _, h := range jobs.Running() {
		if p.Has(h.Placeholder) {
			p.Start(h.Run, h.Placeholder)
		}
	}
	for _, spec := range sites {
		p.Site(spec)
	}
	if len(p.autos) == 0 {
		return nil // no category learns: its query would scan every Done job
	}
	return p.loadUsage(ctx, x)
}

func (p *Packing) loadUsage(ctx context.Context, x Execer) error {
	rows, err := x.QueryContext(ctx, queries.Get("LoadUsage"), learnedAtOpen)
	if err != nil {
		return err
	}
	for rows.Next() {
		var c resource.Category
		var rss, elapsed int64
		var cpu float64
		if err := rows.Scan(&c.Queue, &c.Target, &rss, &cpu, &elapsed); err != nil {
			rows.Close()
			return err
		}
		p.Observe(c, rss, time.Duration(cpu*float64(time.Second)), time.Duration(elapsed)*time.Microsecond)
	}
	return closeRows(rows)
}

// LoadJob reads job id's stored request again (it is rerun).
func (p *Packing) LoadJob(ctx context.Context, x Execer, id int64, jobs Jobs) error {
	var text string
	err := x.QueryRowContext(ctx, queries.Get("JobResources"), id).Scan(&text)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	r, err := decode(id, text)
	if err != nil {
		return err
	}
	c, _ := jobs.Category(id)
	p.Job(id, r, c)
	return nil
}

func decode(id int64, text string) (resource.Request, error) {
	var r protocol.Resources
	if err := json.Unmarshal([]byte(text), &r); err != nil {
		return resource.Request{}, fmt.Errorf("job %d: stored request: %w", id, err)
	}
	return wire.Request(r), nil
}

func closeRows(rows *sql.Rows) error {
	err := rows.Err()
	return errors.Join(err, rows.Close())
}

// Register makes what placeholder ph registered (c, with slots) its pool.
// A placeholder registering again keeps its pool; one new to this CLS
// (after a restart) takes again what its running attempts hold. One that
// says nothing of its capacity (an agent from before resources) has no
// pool: it runs jobs that ask for nothing in its slots, as before. An
// error says its capacity was refused (it then has no pool either).
func (p *Packing) Register(ph int64, c *protocol.Capacity, slots int, jobs Jobs) error {
	if p.Has(ph) || c == nil {
		return nil
	}
	if err := p.Placeholder(ph, wire.CapacityOf(c, slots)); err != nil {
		return err
	}
	for _, h := range jobs.Running() {
		if h.Placeholder == ph {
			p.Start(h.Run, ph)
		}
	}
	return nil
}

// Grant takes claimed attempt ru's grant from placeholder ph's pool, as
// its assignment carries it: nil for a job that asks for nothing (one
// core, which the agent takes itself, as before resources). ok false: it
// does not fit (the pool changed since Fits said it fits).
func (p *Packing) Grant(ru Run, ph int64) (g *protocol.Capacity, ok bool) {
	taken, ok := p.Start(ru, ph)
	if !ok {
		return nil, false
	}
	if !p.Asks(ru.Job) {
		return nil, true
	}
	return wire.Grant(taken), true
}

// Fit is what a job's detail shows of job id: why it cannot run for lack
// of resources (Why) or of any placeholder's time (TooLong, by what jobs
// says it needs), and what its running attempt (attempt; 0: none) was
// granted, as its assignment carried it (nil: no grant, or the job asks
// for nothing).
func (p *Packing) Fit(id int64, attempt int, jobs Needs) (why string, grant *protocol.Capacity) {
	if gr, ok := p.grants[Run{Job: id, Attempt: attempt}]; ok && p.Asks(id) {
		grant = wire.Grant(gr.g)
	}
	if why = p.Why(id); why == "" {
		why = p.TooLong(jobs.Need(id))
	}
	return why, grant
}

// End is how an attempt ended, as packing needs it.
type End struct {
	Run      Run
	Category resource.Category // the job's queue and target
	// Succeeded: the attempt's usage (when measured) teaches its
	// category's auto sizes.
	Succeeded bool
	// Failed and Reason: a memory kill may raise the request.
	Failed  bool
	Reason  string
	Usage   protocol.Usage
	Elapsed time.Duration // 0: the attempt did not run
	// Heir: a member of the attempt's bundle running on in the same
	// grant (nil: none), which takes the grant instead of the pool.
	Heir *Run
}

// Ended is the attempt's end, one call: a Done attempt's usage teaches
// its category's auto sizes; one killed over its memory may run once
// more at twice the memory (retry), its raised request stored in the
// core's transaction. Its grant is then given back, or passed to its
// bundle's heir.
func (p *Packing) Ended(ctx context.Context, x Execer, e End) (retry bool, err error) {
	if e.Heir != nil {
		p.Pass(e.Run, *e.Heir)
	}
	defer p.Stop(e.Run)
	p.Ran(e.Elapsed) // the starvation bound follows the runs (0: it did not run)
	switch {
	case e.Succeeded && e.Usage.Measured():
		if p.Learns(e.Category) {
			cpu := time.Duration((e.Usage.CPUUser + e.Usage.CPUSys) * float64(time.Second))
			p.Observe(e.Category, e.Usage.MaxRSS, cpu, e.Elapsed)
		}
	case e.Failed && protocol.IsMemoryReason(e.Reason):
		if !p.KilledForMemory(e.Run) {
			return false, nil
		}
		b, err := json.Marshal(wire.Resources(p.Request(e.Run.Job)))
		if err != nil {
			return false, err
		}
		if _, err := x.ExecContext(ctx, queries.Get("SetResources"), e.Run.Job, string(b)); err != nil {
			return false, fmt.Errorf("packing: job %d's raised request: %w", e.Run.Job, err)
		}
		return true, nil
	}
	return false, nil
}

// maxUnholdableLines bounds the warnings of one submission.
const maxUnholdableLines = 5

// Unholdables says, for jobs first..first+n-1 just submitted, which ask
// for more than any placeholder registered or site declared can ever
// hold, or are expected to take (jobs.Need) longer than any can run, and
// why: one line per reason ("jobs 5-7 wait: needs 4 GPUs; the largest
// placeholder or site holds 2"). They wait: a site may be added.
func (p *Packing) Unholdables(first int64, n int, jobs Needs) []string {
	type span struct{ lo, hi, n int64 }
	spans := map[string]*span{}
	var order []string
	// The longest walltime once, not per job: a million-member array
	// would look at every placeholder a million times.
	w, site := p.longest()
	limited := w > 0 && !math.IsInf(w, 1)
	tooLongs := map[float64]string{} // by need: jobs alike share a reason
	for id := first; id < first+int64(n); id++ {
		why := ""
		if p.Asks(id) {
			why = p.Why(id)
		}
		if why == "" && limited {
			need := jobs.Need(id)
			var ok bool
			if why, ok = tooLongs[need]; !ok {
				why = tooLong(need, w, site)
				tooLongs[need] = why
			}
		}
		if why == "" {
			continue
		}
		sp := spans[why]
		if sp == nil {
			sp = &span{lo: id}
			spans[why] = sp
			order = append(order, why)
		}
		sp.hi = id
		sp.n++
	}
	var out []string
	for i, why := range order {
		if i == maxUnholdableLines {
			out = append(out, fmt.Sprintf("and %d more reasons jobs wait for a placeholder that can hold them", len(order)-i))
			break
		}
		sp := spans[why]
		who := fmt.Sprintf("job %d waits", sp.lo)
		switch {
		case sp.n == sp.hi-sp.lo+1 && sp.n > 1:
			who = fmt.Sprintf("jobs %d-%d wait", sp.lo, sp.hi)
		case sp.n > 1:
			who = fmt.Sprintf("%d jobs from %d to %d wait", sp.n, sp.lo, sp.hi)
		}
		out = append(out, who+": "+why+" (a site that holds it may be added)")
	}
	return out
}
