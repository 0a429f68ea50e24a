// Package observe is what the metaqueue's core tells of what it does,
// for metrics (cls serve --http): the Observer a store is given.
package observe

import (
	"time"

	"github.com/mq-hpc/mq/job"
)

// Observer is told what the core does, for metrics. Its
// methods run on the core goroutine, between a batch's calls and its
// commit: they must be quick and never block or call back into the store.
// A batch a storage failure rolls back has been observed all the same.
type Observer interface {
	// Dispatched: a placeholder's request for work got a job; latency is
	// how long the request waited for it (its long poll included), wait
	// how long the job waited since it was submitted.
	Dispatched(latency, wait time.Duration)
	// Ended: an attempt ended (reported by its placeholder, or its lease
	// expired) and its job went to this state: job.Done, job.Failed, or
	// job.Queued when it goes back to the queue (lost, returned, retried).
	Ended(to job.State)
	// Committed: a batch's transaction committed in d; durable says
	// whether it was fsync'd.
	Committed(d time.Duration, durable bool)
}
