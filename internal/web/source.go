package web

import (
	"context"

	"github.com/mq-hpc/mq/internal/metaqueue/inspect"

	"github.com/mq-hpc/mq/protocol"
)

// Source is what the dashboard reads. Every method is cheap at a million
// jobs except JobsPage, which reads one page, and Job, which reads one
// job. The CLS implements it over its store and site manager; tests fake it.
type Source interface {
	Summary(ctx context.Context) ([]protocol.QueueCounts, error)
	Moved(ctx context.Context) (*protocol.MovedTotals, error)
	Sites(ctx context.Context) ([]Site, error)
	JobsPage(ctx context.Context, st protocol.Stat, after int64, limit int) ([]protocol.JobInfo, error)
	Job(ctx context.Context, id int64) (protocol.JobDetail, error)
	TargetGraph(ctx context.Context, name string, limit int) ([]inspect.TargetNode, bool, error)
}

// Site is a site as the dashboard shows it: no login, key or data-root
// settings, only what runs there.
type Site struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	State string `json:"state"` // starting, ok, throttled, degraded
	Error string `json:"error,omitempty"`
	Min   int    `json:"min"`
	Max   int    `json:"max"`
	// Placeholders: waiting in the site's batch queue, running (started),
	// idle (connected, running no job), busy (connected, running jobs).
	Queued  int `json:"queued"`
	Running int `json:"running"`
	Idle    int `json:"idle"`
	Busy    int `json:"busy"`
	// Slots of connected placeholders, and how many run a job now.
	Slots     int `json:"slots"`
	SlotsBusy int `json:"slots_busy"`
	// Paused: connected placeholders that take no new jobs, their output
	// disk nearly full.
	Paused int `json:"paused,omitempty"`
	// Broken: placeholders that said in the last day that their node
	// cannot run jobs (a job's processes survived SIGKILL), how many and
	// the latest's host and why ("" when none).
	Broken string `json:"broken,omitempty"`
	// Unreachable: a remote site whose last listing failed (a network cut
	// may part it from the CLS); HeldLeases: the attempts of its silent
	// placeholders whose lapsed leases the CLS holds meanwhile, their jobs
	// still Running; Cut says both, and since and until when ("" when
	// neither).
	Unreachable bool   `json:"unreachable,omitempty"`
	HeldLeases  int    `json:"held_leases,omitempty"`
	Cut         string `json:"cut,omitempty"`
}

// Follow streams a job's output as it is written: chunks of stdout (or
// stderr) from its last OutputTail bytes so far (or its start) until the
// job ends or ctx ends, when the channel closes (the page replaces what it
// was served with). Nil: the job page
// shows output as the CLS has it when the page is loaded.
type Follow func(ctx context.Context, id int64, stderr bool) (<-chan []byte, error)
