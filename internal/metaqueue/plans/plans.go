// Package plans keeps the plans cls plan make records: a planner chose a
// site for some jobs ahead of running them. The CLS follows the plan where
// it can and binds late where it cannot:
//
//   - a placeholder at a job's planned site gets the site's planned ready
//     jobs first, in the plan's order, from any queue (At);
//   - a placeholder elsewhere skips a planned job while a placeholder at
//     the planned site has asked for work or heartbeated within Patience
//     and the job has been ready for less than that plus the wait the plan
//     itself predicts for it (from its prerequisites' end to its start,
//     queued behind the site's other planned jobs): the site is alive and
//     will take it (Keep);
//   - past that (the site slow, or no placeholder of it asking), the
//     queue's own policy hands the job to whoever asks: a deviation, shown
//     by mqstat -j as the planned site beside the one it ran at.
//
// A plan also says at which site each file is kept (FileSite); the core
// has the data stager copy a file there when its producer ran elsewhere.
//
// Plans is the writer's memory of the plans of live jobs, owned by the
// metaqueue's core goroutine. Its tables are written inside the core's
// open transaction through DB; the core hands it every fact (times, the
// job graph, sites), and decides what to do with what it answers.
package plans

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"iter"
	"sort"
	"time"

	"github.com/mq-hpc/mq/internal/sqlfile"
	"github.com/mq-hpc/mq/job"
)

//go:embed plans.sql
var plansSQL string

var queries = sqlfile.MustParse("plans.sql", plansSQL)

// DB is what the plans need of a connection: the core's writer (*sql.Conn,
// inside its open transaction) or its read pool (*sql.DB).
type DB interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

var (
	_ DB = (*sql.Conn)(nil)
	_ DB = (*sql.DB)(nil)
)

// Patience is how long a planned job waits for its site.
const Patience = 30 * time.Second

// Scan bounds how many entries of a site's plan one pick looks at.
const Scan = 1024

type entry struct {
	site string
	seq  int64
	// wait is how long the plan has the job wait for its site once ready
	// (its predicted start less its predicted ready time).
	wait time.Duration
}

// Plans is the memory of the plans of live jobs. Reset makes it ready.
type Plans struct {
	job      map[int64]entry
	bySite   map[string][]int64 // planned live jobs per site, in plan order (ended ones dropped lazily)
	readyAt  map[int64]time.Time
	lastSeen map[string]time.Time // site -> when a placeholder there last asked for work or heartbeated
	fileSite map[string]string    // path -> the site the plan keeps it at
	// seenPrune is how many sites in lastSeen make Seen drop those not
	// seen within Patience (Seen).
	seenPrune int
}

// Reset forgets every plan.
func (p *Plans) Reset() {
	*p = Plans{job: map[int64]entry{}, bySite: map[string][]int64{}, readyAt: map[int64]time.Time{},
		lastSeen: map[string]time.Time{}, fileSite: map[string]string{}}
}

// Active says whether some live job has a plan: the core skips every other
// call on its hot paths when none has.
func (p *Plans) Active() bool { return len(p.job) > 0 }

func (p *Plans) add(id int64, e entry) {
	if old, ok := p.job[id]; ok && old.site == e.site && old.seq == e.seq {
		p.job[id] = e
		return
	}
	p.job[id] = e
	p.bySite[e.site] = append(p.bySite[e.site], id)
}

// sortSite restores plan order after adds.
func (p *Plans) sortSite(site string) {
	ids := p.bySite[site]
	// Drop entries whose plan moved to another site or was replaced.
	kept := ids[:0]
	seen := map[int64]bool{}
	for _, id := range ids {
		if e, ok := p.job[id]; ok && e.site == site && !seen[id] {
			seen[id] = true
			kept = append(kept, id)
		}
	}
	sort.Slice(kept, func(i, j int) bool { return p.job[kept[i]].seq < p.job[kept[j]].seq })
	p.bySite[site] = kept
}

func (p *Plans) sortAll() {
	for site := range p.bySite {
		p.sortSite(site)
	}
}

// Ready notes that planned job id moved from state from to Queued at now:
// its patience counts from then, but a job released from a hold (mqalter's
// too) keeps the time it had, if it had one, as the database does
// (jobs.ready; Load). A requeued attempt gives it a fresh patience: its
// planned site may take it again.
func (p *Plans) Ready(id int64, from job.State, now time.Time) {
	if _, ok := p.job[id]; !ok {
		return
	}
	if _, ok := p.readyAt[id]; !ok || from != job.Held {
		p.readyAt[id] = now
	}
}

// Ended forgets an ended job's plan (its row stays for mqstat -j).
func (p *Plans) Ended(id int64) {
	if len(p.job) == 0 {
		return
	}
	delete(p.job, id)
	delete(p.readyAt, id)
}

// Seen notes that a placeholder at site asked for work or heartbeated at
// now: a site whose placeholders are all busy still takes its planned jobs
// when they free up. Sites are the names placeholders registered under:
// one not seen within Patience is as good as never seen (waiting), so
// those are dropped once the sites reach twice those the last drop kept,
// and a key heartbeating under endless names holds no growing memory.
func (p *Plans) Seen(site string, now time.Time) {
	p.lastSeen[site] = now
	if len(p.lastSeen) < p.seenPrune {
		return
	}
	for s, at := range p.lastSeen {
		if now.Sub(at) > Patience {
			delete(p.lastSeen, s)
		}
	}
	p.seenPrune = max(2*len(p.lastSeen), minSeenPrune)
}

// minSeenPrune is the fewest sites in lastSeen that make Seen drop
// those not seen within Patience.
const minSeenPrune = 64

// FileSite is the site the plan keeps path at, if it names one.
func (p *Plans) FileSite(path string) (string, bool) {
	site, ok := p.fileSite[path]
	return site, ok
}

// At yields the live jobs planned for site, in plan order, among the
// first Scan entries of the site's plan: ended ones are dropped from its
// front as it goes. The caller takes the first that is ready and fits; a
// planned job further on is still bound by its queue's own pick, which
// never leaves a job to another site than its planned one (Keep).
func (p *Plans) At(site string) iter.Seq[int64] {
	return func(yield func(int64) bool) {
		ids := p.bySite[site]
		for len(ids) > 0 {
			if e, ok := p.job[ids[0]]; ok && e.site == site {
				break
			}
			ids = ids[1:]
		}
		p.bySite[site] = ids
		for k, id := range ids {
			if k >= Scan {
				return
			}
			if e, ok := p.job[id]; !ok || e.site != site {
				continue // ended, or planned again elsewhere
			}
			if !yield(id) {
				return
			}
		}
	}
}

// Keep says whether a placeholder at site should leave job id to the site
// its plan names: that site was seen alive lately and the job has not
// waited for it much longer than the plan said it would. (With Patience
// alone, a job the plan queued at its site for more than Patience behind
// the site's other jobs went to whichever other site asked first: a
// deviation the plan had not asked for.)
func (p *Plans) Keep(id int64, site string, now time.Time) bool {
	e, ok := p.job[id]
	if !ok || e.site == site {
		return false
	}
	seen, ok := p.lastSeen[e.site]
	if !ok || now.Sub(seen) > Patience {
		return false
	}
	return now.Sub(p.readyAt[id]) < Patience+e.wait
}

// waitOf is a predicted wait in seconds as a duration, at least 0 and at
// most a day (a plan predicting more is not one to hold jobs for).
func waitOf(v float64) time.Duration {
	return time.Duration(min(max(v, 0), 86400) * float64(time.Second))
}

func closeRows(rows *sql.Rows) error {
	return errors.Join(rows.Err(), rows.Close())
}
