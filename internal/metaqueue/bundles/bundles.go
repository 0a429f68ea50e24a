// Package bundles keeps bundles: the jobs of one submit request with
// "bundle": true, ordinary jobs (own ids, rows, states, attempts and output
// files) that share a bundle id, the id of the first. Dispatch hands a
// bundle's Queued jobs together, in id order, to one placeholder, which
// runs them one after another in one slot. The rule, kept simple:
//
//   - A bundle is held back while any of its live jobs is Waiting (or
//     Held).
//   - Otherwise it goes with every job of it that is Queued; jobs still
//     Executing elsewhere (a partial requeue), Blocked or ended stay out.
//     A job requeued later (lost placeholder, rerun) runs with whatever of
//     its bundle is Queued then, possibly alone.
//   - A job of a bundle may not name a target of the same bundle as a
//     prerequisite (it would wait for a job that runs after it).
//
// Only live jobs' bundles are kept in memory. The metaqueue's core owns the
// state (its goroutine), tells Bundles when jobs are submitted as one and
// when one ends, and asks Expand what goes with a job it picked; it writes
// jobs.bundle inside the core's write transaction, through an Execer.
package bundles

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"maps"
	"slices"

	"github.com/mq-hpc/mq/internal/runs"
	"github.com/mq-hpc/mq/internal/sqlfile"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

//go:embed bundles.sql
var bundlesSQL string

var queries = sqlfile.MustParse("bundles.sql", bundlesSQL)

// Execer is the connection the module reads and writes through: the
// core's writer (*sql.Conn, *sql.Tx).
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Jobs is what Expand asks the core about a bundle's jobs.
type Jobs interface {
	// State is live job id's state; false if the core has no such job.
	State(id int64) (job.State, bool)
	// Need is the time job id is expected to take against a placeholder's
	// walltime.
	Need(id int64) float64
}

// MaxJobs is the most jobs one bundle may hold (the driver's largest
// buffer).
const MaxJobs = 10000

// Bundles is the live bundles, owned by the core goroutine.
type Bundles struct {
	members map[int64][]int64 // bundle id -> its live jobs, in order
	of      map[int64]int64   // job id -> bundle id
}

// New returns no bundles.
func New() *Bundles {
	b := &Bundles{}
	b.Reset()
	return b
}

// Reset forgets every bundle (before a load).
func (b *Bundles) Reset() { b.members, b.of = map[int64][]int64{}, map[int64]int64{} }

// Check validates a submit request's bundle: its size, and no job of it
// waiting on a target of the same bundle.
func Check(req protocol.Submit) error {
	if !req.Bundle {
		return nil
	}
	if len(req.Jobs) > MaxJobs {
		return protocol.Errorf(protocol.CodeBadRequest, "a bundle of %d jobs; the limit is %d", len(req.Jobs), MaxJobs)
	}
	targets := map[string]bool{}
	for _, js := range req.Jobs {
		targets[js.Target] = true
	}
	for i, js := range req.Jobs {
		// An after-any edge orders jobs too: inside a bundle it could
		// only wait on the bundle's own run.
		for _, p := range slices.Concat(js.Prereqs, js.AfterAny) {
			if targets[p] {
				return protocol.Errorf(protocol.CodeBadRequest,
					"job %d: a job of a bundle cannot wait on target %s of the same bundle (the bundle runs in order anyway)", i+1, p)
			}
		}
	}
	if n := len(envelopeNames(req.Jobs)); n > protocol.MaxNamed {
		return protocol.Errorf(protocol.CodeBadRequest,
			"a bundle's jobs ask for %d named resources together, and its first job's grant holds them all: at most %d", n, protocol.MaxNamed)
	}
	return nil
}

// Add records jobs first..first+n-1 as one bundle, in the submit's
// transaction.
func (b *Bundles) Add(ctx context.Context, ex Execer, first int64, n int) error {
	if _, err := ex.ExecContext(ctx, queries.Get("SetBundle"), first, first+int64(n)-1); err != nil {
		return err
	}
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = first + int64(i)
		b.of[ids[i]] = first
	}
	b.members[first] = ids
	return nil
}

// Load reads the bundles of live jobs.
func (b *Bundles) Load(ctx context.Context, ex Execer) error {
	b.Reset()
	rows, err := ex.QueryContext(ctx, queries.Get("LiveBundles"))
	if err != nil {
		return err
	}
	for rows.Next() {
		var id, bid int64
		if err := rows.Scan(&id, &bid); err != nil {
			rows.Close()
			return err
		}
		b.of[id] = bid
		b.members[bid] = append(b.members[bid], id)
	}
	return errors.Join(rows.Err(), rows.Close())
}

// Drop forgets a job that reached a terminal state.
func (b *Bundles) Drop(id int64) {
	bid, ok := b.of[id]
	if !ok {
		return
	}
	delete(b.of, id)
	m := slices.DeleteFunc(b.members[bid], func(x int64) bool { return x == id })
	if len(m) == 0 {
		delete(b.members, bid)
	} else {
		b.members[bid] = m
	}
}

// Of is the bundle of live job id, if it is in one.
func (b *Bundles) Of(id int64) (bundle int64, ok bool) {
	bundle, ok = b.of[id]
	return bundle, ok
}

// Members is bundle's live jobs, in order. The caller must not change it.
func (b *Bundles) Members(bundle int64) []int64 { return b.members[bundle] }

// Heir is the member of job id's bundle, id aside, that runs on
// placeholder ph (running says), and its attempt: a bundle runs its jobs
// in turn in its first job's grant, which goes back to the pool only with
// the last of them. nil when id is in no bundle or no other member runs
// there.
func (b *Bundles) Heir(id, ph int64, running runs.Rows) (job int64, attempt *runs.Run) {
	bid, ok := b.of[id]
	if !ok {
		return 0, nil
	}
	for _, m := range b.members[bid] {
		if o := running[m]; m != id && o != nil && o.Placeholder == ph {
			return m, o
		}
	}
	return 0, nil
}

// Len counts what is kept in memory: bundles and their jobs.
func (b *Bundles) Len() int { return len(b.members) + len(b.of) }

// Expand expands a job picked for dispatch to what goes with it: the job
// alone if it is in no bundle, every Queued job of its bundle in order, or
// nothing if the bundle is held back (a job of it is Waiting or Held; the
// job is pushed again when its state changes, so nothing is lost by
// dropping its heap entry). A bundle runs its jobs one after another, so
// with a placeholder walltime (> 0) it takes only as many as fit in it
// together: the picked job (which fits alone), then the others in order
// while they fit. Those left out stay Queued and go with a later request.
func (b *Bundles) Expand(id int64, walltime float64, jobs Jobs) (ids []int64, bundle int64) {
	bid, ok := b.of[id]
	if !ok {
		return []int64{id}, 0
	}
	members := b.members[bid]
	for _, m := range members {
		if st, ok := jobs.State(m); ok && (st == job.Waiting || st == job.Held) {
			return nil, bid
		}
	}
	budget := walltime - jobs.Need(id)
	for _, m := range members {
		if st, ok := jobs.State(m); !ok || st != job.Queued {
			continue
		}
		if m != id && walltime > 0 {
			n := jobs.Need(m)
			if n > budget {
				continue
			}
			budget -= n
		}
		ids = append(ids, m)
	}
	return ids, bid
}

// Seq is job id's place in bundle, as its assignment carries it: the
// bundle's first job (whose id is the bundle's) is 0; a job in no bundle
// (bundle 0) is 0.
func Seq(bundle, id int64) int {
	if bundle == 0 {
		return 0
	}
	return int(id - bundle)
}

// SlotsUsed counts the slots a list of assignments fills: one per job, one
// per bundle.
func SlotsUsed(jobs []protocol.Assignment) int {
	n := 0
	for i, a := range jobs {
		if a.Bundle == 0 || i == 0 || jobs[i-1].Bundle != a.Bundle {
			n++
		}
	}
	return n
}

// Envelope makes each of a bundle's jobs ask for the most any of them
// asks for of each resource (cores, memory, GPUs, each named amount), and
// returns that. The bundle runs its jobs in turn in one grant, taken for
// whichever of them dispatch picks, which must hold each of them. Where
// some ask a number and others auto, the number is taken.
func Envelope(jobs []protocol.JobSpec) protocol.Resources {
	var e protocol.Resources
	for _, js := range jobs {
		r := js.Resources
		e.CPUs, e.Mem, e.GPUs = max(e.CPUs, r.CPUs), max(e.Mem, r.Mem), max(e.GPUs, r.GPUs)
		e.CPUsAuto, e.MemAuto = e.CPUsAuto || r.CPUsAuto, e.MemAuto || r.MemAuto
		for n, v := range r.Named {
			if e.Named == nil {
				e.Named = map[string]int{}
			}
			e.Named[n] = max(e.Named[n], v)
		}
	}
	e.CPUsAuto = e.CPUsAuto && e.CPUs == 0
	e.MemAuto = e.MemAuto && e.Mem == 0
	for i := range jobs {
		jobs[i].Resources = e
		jobs[i].Resources.Named = maps.Clone(e.Named)
	}
	return e
}

// envelopeNames is the named resources a bundle's jobs ask for together.
func envelopeNames(jobs []protocol.JobSpec) map[string]bool {
	names := map[string]bool{}
	for _, js := range jobs {
		for n := range js.Resources.Named {
			names[n] = true
		}
	}
	return names
}
