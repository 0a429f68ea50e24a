package metaqueue

import (
	"context"

	"github.com/mq-hpc/mq/internal/sqlfile"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// Agents fetch jobs ahead of their free slots (prefetch), so "handed
// out" overstates what runs. A request says how many of the jobs it asks
// for are ahead (Next.Ahead); the jobs handed out in those last slots are
// Executing in the graph but prefetched (shown P), marked so in their
// rows as they are claimed (the same UPDATE), until the placeholder says
// it started them. That word comes on a message the placeholder sends
// anyway (Next, ReportBatch, Heartbeat: Started), never on one of its
// own, and a report of the attempt says it too: one UPDATE per message,
// only for held jobs that started and outlived the next message (short
// ones report their end on it instead). A restart loads the mark with
// the job.

// markStarted records that placeholder ph started the listed attempts:
// those still marked leave P for E. An attempt not (or no longer) ph's,
// a copy, or one known started already changes nothing.
func (s *Store) markStarted(ph int64, refs []protocol.JobRef) error {
	if len(refs) == 0 {
		return nil
	}
	if err := s.beginFresh(); err != nil { // before the marks change
		return err
	}
	ids := s.running.MarkStarted(ph, refs)
	if len(ids) == 0 {
		return nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	_, err := s.w.ExecContext(context.Background(), sqlfile.InList(jobsSQL.Get("Started"), "ids", len(ids)), args...)
	return storeErr(err)
}

// aheadOf says which of the jobs picked for p are in the slots it asked
// for ahead of its free ones (the last Ahead of Free): a bundle fills one
// slot, its jobs alike.
func aheadOf(p *parkedNext, picks []picked) []bool {
	out := make([]bool, len(picks))
	if p.req.Ahead <= 0 {
		return out
	}
	free := p.req.Free - p.req.Ahead
	slot := -1
	for i, pk := range picks {
		if pk.bundle == 0 || i == 0 || picks[i-1].bundle != pk.bundle {
			slot++
		}
		out[i] = slot >= free
	}
	return out
}

// executingIn is job id's queue, and whether it executes (E, or P until
// it starts: runs.Rows.Prefetched, Unstarted).
func (s *Store) executingIn(id int64) (int32, bool) {
	j, ok := s.g.Node(id)
	return j.Queue, ok && j.State == job.Executing
}
