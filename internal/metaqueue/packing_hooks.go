package metaqueue

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/metaqueue/packing"
	"github.com/mq-hpc/mq/internal/resource"
	"github.com/mq-hpc/mq/internal/wire"
	"github.com/mq-hpc/mq/protocol"
)

// The core's side of resources per job (internal/metaqueue/packing): a
// job's request is stored at submit with its queue's defaults applied and
// loaded at open; a placeholder's registered capacity is its pool; the
// dispatch decision asks packing whether a job fits (the fitsResources
// check) and claiming takes the grant the assignment carries; every way
// an attempt stops gives it back.

// KeepsResources reports that the store keeps and honours jobs' resource
// requests (the server then warns of none).
func (s *Store) KeepsResources() bool { return true }

// keepRequest stores the request of new job id (spec js of queue q), its
// queue's defaults applied, when it asks for anything.
func (s *Store) keepRequest(id int64, q *queue, js *protocol.JobSpec) error {
	r := js.Resources.WithDefaults(q.Defaults)
	if !r.Asks() {
		return nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if _, err := s.stmts.insResources.Exec(id, string(b)); err != nil {
		return fatalError{err}
	}
	s.pack.Job(id, wire.Request(r), resource.Category{Queue: q.Name, Target: js.Target})
	return nil
}

// loadRequests gives packing the requests of the jobs not ended, and
// takes again the grants of the attempts running on placeholders it
// knows (after a reload; after a restart, when they register).
func (s *Store) loadRequests(ctx context.Context) error {
	s.pack.Reload()
	rows, err := s.w.QueryContext(ctx, jobsSQL.Get("LoadResources"))
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
		var r protocol.Resources
		if err := json.Unmarshal([]byte(text), &r); err != nil {
			rows.Close()
			return fmt.Errorf("job %d: stored request: %w", id, err)
		}
		j, ok := s.g.Node(id)
		if !ok {
			continue
		}
		c := resource.Category{Target: s.g.Name(j.Target)}
		if q := s.queueIDs[j.Queue]; q != nil {
			c.Queue = q.Name
		}
		s.pack.Job(id, wire.Request(r), c)
	}
	if err := closeRows(rows); err != nil {
		return err
	}
	for id, ru := range s.running {
		if s.pack.Has(ru.placeholder) {
			s.pack.Start(packing.Run{Job: id, Attempt: ru.attempt}, ru.placeholder)
		}
	}
	if err := s.eachSiteSpec(ctx, func(name string, spec protocol.SiteSpec) {
		s.pack.Site(name, wire.SiteCapacity(spec))
	}); err != nil {
		return err
	}
	return s.loadUsage(ctx)
}

// learnedAtOpen bounds the finished attempts read back into the learner.
const learnedAtOpen = 10000

// loadUsage teaches the learner what the newest Done jobs of the
// categories still asking for auto sizes used.
func (s *Store) loadUsage(ctx context.Context) error {
	rows, err := s.w.QueryContext(ctx, jobsSQL.Get("LoadUsage"), learnedAtOpen)
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
		s.pack.Observe(c, rss, time.Duration(cpu*float64(time.Second)), time.Duration(elapsed)*time.Microsecond)
	}
	return closeRows(rows)
}

// phCapacity makes what placeholder ph registered its pool. A placeholder
// registering again keeps its pool; one new to this CLS (after a restart)
// takes again what its running attempts hold. One that says nothing of
// its capacity (an agent from before resources) has no pool: it runs
// jobs that ask for nothing in the slots it asks for, as before.
func (s *Store) phCapacity(ph int64, r protocol.Register) {
	if s.pack.Has(ph) || r.Capacity == nil {
		return
	}
	if err := s.pack.Placeholder(ph, wire.CapacityOf(r.Capacity, r.Slots)); err != nil {
		s.log.Warn("placeholder's capacity refused; it runs one-core jobs as slots", "placeholder", ph, "err", err)
		return
	}
	for id, ru := range s.running {
		if ru.placeholder == ph {
			s.pack.Start(packing.Run{Job: id, Attempt: ru.attempt}, ph)
		}
	}
}

// packStop gives back what attempt ru of job id holds.
func (s *Store) packStop(id int64, ru *run) {
	s.pack.Stop(packing.Run{Job: id, Attempt: ru.attempt})
}

// packFits is the fitsResources check: job id fits what p's placeholder
// has free now (the decision dispatch began with packing.Begin).
func (s *Store) packFits(id int64, p *parkedNext) bool {
	if s.pack == nil {
		return true // a bare store: the chains' own tests
	}
	return s.pack.FitsNow(id, p.req.Placeholder)
}

// loadRequest gives packing the stored request of job id again (rerun).
func (s *Store) loadRequest(id int64) error {
	var text string
	err := s.w.QueryRowContext(context.Background(), jobsSQL.Get("JobResources"), id).Scan(&text)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	var r protocol.Resources
	if err := json.Unmarshal([]byte(text), &r); err != nil {
		return fmt.Errorf("job %d: stored request: %w", id, err)
	}
	c := resource.Category{}
	if j, ok := s.g.Node(id); ok {
		c.Target = s.g.Name(j.Target)
		if q := s.queueIDs[j.Queue]; q != nil {
			c.Queue = q.Name
		}
	}
	s.pack.Job(id, wire.Request(r), c)
	return nil
}

// packStart takes claimed job id's grant from placeholder ph's pool, as
// its assignment carries it: nil for a job that asks for nothing (one
// core, which the agent takes itself, as before resources).
func (s *Store) packStart(id, ph int64) *protocol.Capacity {
	return s.packStartAttempt(id, 0, ph)
}

// packStartAttempt is packStart for an attempt whose number is known (a
// copy).
func (s *Store) packStartAttempt(id int64, attempt int, ph int64) *protocol.Capacity {
	g, ok := s.pack.Start(packing.Run{Job: id, Attempt: attempt}, ph)
	if !ok {
		// Fits said it fits: the pool changed in between, which the core
		// alone does. The job runs as before, in one core.
		s.log.Warn("a claimed job's grant does not fit its placeholder", "job", id, "placeholder", ph)
		return nil
	}
	if !s.pack.Asks(id) {
		return nil
	}
	return wire.Grant(g)
}

// packEnded tells packing how attempt ru of job id (j, of queue q) ended,
// before its grant is given back: a Done attempt's usage teaches its
// category's auto sizes; one killed over its memory may run once more at
// twice the memory (retry), its raised request stored.
func (s *Store) packEnded(id int64, j dag.Node, q *queue, ru *run, out outcome, e attemptEnd) (retry bool, err error) {
	if !e.started.IsZero() {
		s.pack.Ran(e.finished.Sub(e.started))
	}
	switch {
	case out == succeeded && e.usage.Measured():
		c := resource.Category{Queue: q.Name, Target: s.g.Name(j.Target)}
		if s.pack.Learns(c) {
			cpu := time.Duration((e.usage.CPUUser + e.usage.CPUSys) * float64(time.Second))
			s.pack.Observe(c, e.usage.MaxRSS, cpu, e.finished.Sub(e.started))
		}
	case out == failed && protocol.IsMemoryReason(e.reason):
		if !s.pack.KilledForMemory(packing.Run{Job: id, Attempt: ru.attempt}) {
			return false, nil
		}
		b, err := json.Marshal(wire.Resources(s.pack.Request(id)))
		if err != nil {
			return false, err
		}
		if _, err := s.w.ExecContext(context.Background(), jobsSQL.Get("SetResources"), id, string(b)); err != nil {
			return false, fatalError{err}
		}
		s.log.Info("job killed over its memory runs again with more", "job", id, "attempt", ru.attempt, "reason", e.reason)
		return true, nil
	}
	return false, nil
}

// maxUnholdableLines bounds the warnings of one submission.
const maxUnholdableLines = 5

// Unholdable says, for the jobs first..first+n-1 just submitted, which ask
// for more than any placeholder registered or site declared can ever hold,
// and why: one line per reason ("jobs 5-7 wait: needs 4 GPUs; the largest
// placeholder or site holds 2"). They wait: a site may be added.
func (s *Store) Unholdable(ctx context.Context, first int64, n int) ([]string, error) {
	var out []string
	err := s.do(ctx, func() error {
		type span struct{ lo, hi, n int64 }
		spans := map[string]*span{}
		var order []string
		for id := first; id < first+int64(n); id++ {
			if !s.pack.Asks(id) {
				continue
			}
			why := s.pack.Why(id)
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
		return nil
	})
	return out, err
}
