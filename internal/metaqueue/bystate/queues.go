package bystate

// Spans is, for each queue, a few runs of job ids that hold every job
// ever counted in it (since the load): a listing of one queue's jobs
// (the dashboard's /jobs?queue=, mqstat -q) reads those runs instead of
// every job to find a small queue's few (there is no index on the
// queue: one would cost every submission, BENCHMARKS.md). Ids come in
// increasing order (one below its queue's last run makes every queue's
// runs unknown), so a job extends its queue's last run or opens one;
// past maxRuns, the two runs with the least between them are joined (a
// run may then hold other queues' jobs, which the listing's query leaves
// out). A queue costs at most maxRuns x 16 bytes. Its zero value is
// empty and ready to use.
type Spans struct {
	runs [][]Run // by queue id
	// over says a job was counted in a queue whose id is past maxQueue:
	// its runs are not kept (Of says false).
	over bool
	// disordered says a job came below its queue's last run: no queue's
	// runs are trusted (Of says false), and listings read every job.
	disordered bool
}

// Run is the ids First..Last.
type Run struct{ First, Last int64 }

// maxRuns is how many runs a queue keeps; maxQueue the highest queue id
// kept (ids are small: queues are few).
const (
	maxRuns  = 16
	maxQueue = 1 << 16
)

// Add counts job id, the newest yet, in queue q.
func (s *Spans) Add(q int32, id int64) {
	if q < 0 || q >= maxQueue {
		s.over = true
		return
	}
	if int(q) >= len(s.runs) {
		s.runs = append(s.runs, make([][]Run, int(q)+1-len(s.runs))...)
	}
	rs := s.runs[q]
	if n := len(rs); n > 0 && id < rs[n-1].First {
		s.disordered = true // which the core never does: nothing is known
		return
	}
	if n := len(rs); n > 0 && id <= rs[n-1].Last+1 {
		rs[n-1].Last = max(rs[n-1].Last, id)
		return
	}
	rs = append(rs, Run{id, id})
	if len(rs) > maxRuns {
		k := 0 // the run that ends nearest the next one's start
		for i := 1; i < len(rs)-1; i++ {
			if rs[i+1].First-rs[i].Last < rs[k+1].First-rs[k].Last {
				k = i
			}
		}
		rs[k].Last = rs[k+1].Last
		rs = append(rs[:k+1], rs[k+2:]...)
	}
	s.runs[q] = rs
}

// Of is queue q's runs in id order, and false when they are not kept.
func (s *Spans) Of(q int32) ([]Run, bool) {
	if s.disordered {
		return nil, false
	}
	if q < 0 || q >= maxQueue {
		return nil, !s.over
	}
	if int(q) >= len(s.runs) {
		return nil, true
	}
	return s.runs[q], true
}
