package protocol

import (
	"fmt"
	"time"
)

// Roles a connection may hold, each allowed less than the one before:
// admin (the CLS owner) may do anything; user may submit and manage jobs
// and queues; placeholder may only pull work and report it. The
// transport decides the most a peer may have (the Unix socket is the
// owner: admin; an SSH key has the role it was added with); a hello may
// only narrow it.
const (
	RoleAdmin       = "admin"
	RoleUser        = "user"
	RolePlaceholder = "placeholder"
)

// RoleAllows reports whether a peer allowed have may take role want.
func RoleAllows(have, want string) bool {
	return roleRank(want) > 0 && roleRank(have) >= roleRank(want)
}

func roleRank(role string) int {
	switch role {
	case RolePlaceholder:
		return 1
	case RoleUser:
		return 2
	case RoleAdmin:
		return 3
	}
	return 0
}

// Hello opens a session.
type Hello struct {
	Proto  int    `json:"proto"`
	Role   string `json:"role,omitempty"`
	Client string `json:"client,omitempty"`
}

// HelloReply answers Hello.
type HelloReply struct {
	Proto  int    `json:"proto"`
	Server string `json:"server"`
	Role   string `json:"role"`
}

// JobSpec describes one job to add. It is also the line format of
// `mqsub -f`.
type JobSpec struct {
	Queue   string   `json:"queue,omitempty"`
	Target  string   `json:"target"`
	Prereqs []string `json:"prereqs,omitempty"`
	Command string   `json:"command"`
	// CommandBytes carries a command that is not valid UTF-8 (a Latin-1
	// file name), which a JSON string cannot: base64 of the exact bytes,
	// with Command empty. See EncodeCommand; ValidateSpec moves it back.
	CommandBytes []byte  `json:"command_bytes,omitempty"`
	Cwd          string  `json:"cwd,omitempty"`
	Est          float64 `json:"est,omitempty"` // expected runtime, seconds; 0 = unknown
	// Inputs and Outputs declare files the job reads and writes, for the
	// data-conscious policy: the CLS records where each output was
	// produced and prefers placeholders near a job's inputs.
	Inputs  []File `json:"inputs,omitempty"`
	Outputs []File `json:"outputs,omitempty"`
}

// File is a file a job reads or writes. Path is absolute once validated
// (a relative one is resolved against the job's working directory).
type File struct {
	Path string `json:"path"`
	Size *int64 `json:"size,omitempty"` // bytes; absent = unknown
	// Rel says the path was declared relative (to the job's working
	// directory): the file may be moved between sites. An absolute path
	// is site-local (DESIGN.md, "Data staging"). Set by ValidateSpec.
	Rel bool `json:"rel,omitempty"`
	// MTime is an input's modification time on the CLS host at submit
	// (Unix nanoseconds; 0 = not there or not looked at): FillSizes sets it.
	MTime int64 `json:"mtime_ns,omitempty"`
}

// FileInfo is a declared file as mqstat shows it, with where the metaqueue
// last saw it produced (empty when no job of it has produced it).
type FileInfo struct {
	Path string `json:"path"`
	Size *int64 `json:"size,omitempty"`
	Site string `json:"site,omitempty"`
	Host string `json:"host,omitempty"`
	Job  int64  `json:"job,omitempty"` // the job that produced it there
	// SHA256 and Replicas are the catalog's (data staging).
	SHA256   string    `json:"sha256,omitempty"`
	Replicas []Replica `json:"replicas,omitempty"`
}

// Submit adds jobs in one transaction.
type Submit struct {
	Jobs []JobSpec `json:"jobs"`
	// Bundle makes the request's jobs one bundle: one placeholder runs them
	// one after another in this order, each keeping its own id, state, exit
	// status and output (see docs/protocol.md).
	Bundle bool `json:"bundle,omitempty"`
	// Token, if set, makes the request idempotent: a submit repeating a
	// token the metaqueue has already committed adds nothing and returns
	// the ids of the first. A client that lost a reply resends with the
	// same token. At most 128 bytes.
	Token string `json:"token,omitempty"`
}

// SubmitReply lists the new job ids in the order given.
type SubmitReply struct {
	IDs []int64 `json:"ids,omitempty"`
	// For bulk commits, ids are contiguous: First..First+Count-1.
	First int64 `json:"first,omitempty"`
	Count int   `json:"count,omitempty"`
}

// BulkAdd spools one chunk of a bulk submission on the server: either Jobs,
// or Data, raw job-file lines (see ReadJobFile) that the server parses, so
// a large file is parsed once. Line is the 1-based input line of the
// chunk's first job or line, used in error messages; Queue and Cwd fill
// lines of Data that name none.
type BulkAdd struct {
	Line  int       `json:"line"`
	Jobs  []JobSpec `json:"jobs,omitempty"`
	Data  []byte    `json:"data,omitempty"`
	Queue string    `json:"queue,omitempty"`
	Cwd   string    `json:"cwd,omitempty"`
}

// BulkCommit commits the jobs spooled on the connection. Token, if set
// (at most 128 bytes), is recorded with the commit: a commit repeating a
// committed token adds nothing and returns the first one's ids, and a
// commit with a token on a connection that spooled nothing asks what
// became of that token's commit (not_found: it was not committed), so a
// client whose connection died during a commit learns the truth on a new
// connection without uploading again.
type BulkCommit struct {
	Token string `json:"token,omitempty"`
}

// Stat selects jobs to list.
type Stat struct {
	Queue  string  `json:"queue,omitempty"`
	Target string  `json:"target,omitempty"`
	States string  `json:"states,omitempty"` // letters; empty = all but X
	IDs    []int64 `json:"ids,omitempty"`
	Limit  int     `json:"limit,omitempty"`
	// Earlier asks for each job's earlier attempts too (mqstat --acct).
	Earlier bool `json:"earlier,omitempty"`
}

// StatReply is one frame of a streamed job listing.
type StatReply struct {
	Jobs []JobInfo `json:"jobs"`
}

// JobInfo is one job as mqstat shows it. Times are RFC 3339 with
// sub-second precision, empty when not yet.
type JobInfo struct {
	ID        int64    `json:"id"`
	Queue     string   `json:"queue"`
	Target    string   `json:"target"`
	Prereqs   []string `json:"prereqs"`
	State     string   `json:"state"`
	Attempts  int      `json:"attempts"`
	Exit      *int     `json:"exit"`
	Site      string   `json:"site"`
	Host      string   `json:"host"`
	Submitted string   `json:"submitted"`
	Started   string   `json:"started"`
	Finished  string   `json:"finished"`
	Command   string   `json:"command"`
	// CommandBytes is the exact command when it is not valid UTF-8
	// (Command is then empty): use CommandOf.
	CommandBytes []byte  `json:"command_bytes,omitempty"`
	Cwd          string  `json:"cwd,omitempty"`
	Est          float64 `json:"est,omitempty"`
	Reason       string  `json:"reason,omitempty"`
	Accounting
	// Earlier are the job's earlier attempts, oldest first, when the
	// listing asked for them (Stat.Attempts).
	Earlier []AttemptInfo `json:"earlier,omitempty"`
}

// Accounting is what an attempt that ended took: wall-clock seconds from
// start to end, and the rusage figures its placeholder measured (absent
// for an attempt that did not run to an exit, like a lost one).
type Accounting struct {
	Elapsed float64 `json:"elapsed,omitempty"` // seconds
	Usage
}

// JobQuery names one job.
type JobQuery struct {
	ID int64 `json:"id"`
}

// JobDetail is everything known about one job.
type JobDetail struct {
	JobInfo
	Placeholder int64  `json:"placeholder,omitempty"`
	Stdout      string `json:"stdout,omitempty"` // on the placeholder's host
	Stderr      string `json:"stderr,omitempty"`
	// StdoutCopy and StderrCopy are the CLS's copies of output a remote
	// placeholder staged (absent file: no output, or not staged yet).
	StdoutCopy string `json:"stdout_copy,omitempty"`
	StderrCopy string `json:"stderr_copy,omitempty"`
	// OutputLost says why the current attempt's output was not (wholly)
	// kept: where the placeholder writes it or in the CLS's copy.
	OutputLost string         `json:"output_lost,omitempty"`
	WaitingOn  []TargetStatus `json:"waiting_on,omitempty"`
	// BlockedBy is, for a blocked job, the failed or deleted job that
	// blocks it (through other blocked jobs, maybe).
	BlockedBy *JobRefState   `json:"blocked_by,omitempty"`
	History   []AttemptInfo  `json:"history,omitempty"`
	Inputs    []FileInfo     `json:"inputs,omitempty"`
	Outputs   []FileInfo     `json:"outputs,omitempty"`
	Transfers []TransferInfo `json:"transfers,omitempty"` // data staging for this job
	Plan      *JobPlan       `json:"plan,omitempty"`      // where a plan (cls plan make) put it
}

// JobRefState names a job with its target and state letter.
type JobRefState struct {
	Job    int64  `json:"job"`
	Target string `json:"target"`
	State  string `json:"state"`
}

// JobPlan is where a plan placed a job: its site, its place in the plan's
// order and the planner. The attempts' sites show whether it ran there.
type JobPlan struct {
	Site    string `json:"site"`
	Seq     int64  `json:"seq"`
	Planner string `json:"planner"`
}

// TargetStatus describes a prerequisite target of a job.
type TargetStatus struct {
	Target   string         `json:"target"`
	Complete bool           `json:"complete"`
	Counts   map[string]int `json:"counts"` // state letter -> jobs
}

// AttemptInfo is an earlier attempt of a job: requeued (lost, interrupted,
// retried) or replaced by a rerun.
type AttemptInfo struct {
	Attempt    int    `json:"attempt"`
	Site       string `json:"site"`
	Host       string `json:"host"`
	Started    string `json:"started"`
	Finished   string `json:"finished"`
	Exit       *int   `json:"exit"`
	Reason     string `json:"reason"`
	Stdout     string `json:"stdout,omitempty"`
	Stderr     string `json:"stderr,omitempty"`
	StdoutCopy string `json:"stdout_copy,omitempty"`
	StderrCopy string `json:"stderr_copy,omitempty"`
	OutputLost string `json:"output_lost,omitempty"`
	Accounting
}

// SummaryReply counts jobs per queue and state.
type SummaryReply struct {
	Queues []QueueCounts `json:"queues"`
	// Moved totals the data staging transfers (nil when none were made).
	Moved *MovedTotals `json:"moved,omitempty"`
}

// QueueCounts is one queue's row in a summary.
type QueueCounts struct {
	Queue  string         `json:"queue"`
	Policy string         `json:"policy,omitempty"`
	Counts map[string]int `json:"counts"`
}

// Select names jobs for delete or rerun: by ids (optionally checked against
// Queue) or by Target.
type Select struct {
	IDs    []int64 `json:"ids,omitempty"`
	Queue  string  `json:"queue,omitempty"`
	Target string  `json:"target,omitempty"`
}

// ActionReply lists what a delete or rerun did, and one error line per job
// it could not act on.
type ActionReply struct {
	IDs    []int64  `json:"ids"`
	Errors []string `json:"errors,omitempty"`
}

// Wait blocks until every listed job has ended (Done, Failed, Deleted) or is
// Blocked, or until TimeoutMS passes.
type Wait struct {
	IDs       []int64 `json:"ids"`
	TimeoutMS int     `json:"timeout_ms,omitempty"`
	// Any returns as soon as at least one listed job has ended, with every
	// listed job that has ended by then; Pending lists the others.
	Any bool `json:"any,omitempty"`
}

// WaitReply reports the listed jobs' states; Pending lists those still
// unfinished when the wait timed out.
type WaitReply struct {
	Jobs    []JobEnd `json:"jobs"`
	Pending []int64  `json:"pending,omitempty"`
}

// JobEnd is how a job ended.
type JobEnd struct {
	ID     int64  `json:"id"`
	State  string `json:"state"`
	Exit   *int   `json:"exit"`
	Reason string `json:"reason,omitempty"`
}

// QueueInfo is a queue's properties.
type QueueInfo struct {
	Name        string  `json:"name"`
	Ceiling     float64 `json:"ceiling_s"` // longest job allowed, seconds; 0 = none
	MaxAttempts int     `json:"max_attempts"`
	RetryFailed bool    `json:"retry_failed"`
	Policy      string  `json:"policy"`
}

// QueueList lists queues.
type QueueList struct {
	Queues []QueueInfo `json:"queues"`
}

// QueueSet creates a queue or changes its properties; nil fields stay.
type QueueSet struct {
	Name        string   `json:"name"`
	Ceiling     *float64 `json:"ceiling_s,omitempty"`
	MaxAttempts *int     `json:"max_attempts,omitempty"`
	RetryFailed *bool    `json:"retry_failed,omitempty"`
	Policy      *string  `json:"policy,omitempty"`
}

// Register introduces a placeholder. A placeholder reconnecting after a
// dropped connection sends its earlier ID to keep its leases.
type Register struct {
	ID       int64   `json:"id,omitempty"`
	Site     string  `json:"site"`
	Host     string  `json:"host"`
	PID      int     `json:"pid"`
	Slots    int     `json:"slots"`
	OutDir   string  `json:"out_dir"`
	Walltime float64 `json:"walltime_s,omitempty"` // 0 = unlimited
	// Batch is the placeholder's batch job id where a batch system runs
	// it: how the CLS knows which of a site's jobs have connected.
	Batch string `json:"batch,omitempty"`
}

// RegisterReply gives the placeholder its id and timing.
type RegisterReply struct {
	ID          int64   `json:"id"`
	LeaseS      float64 `json:"lease_s"`
	HeartbeatS  float64 `json:"heartbeat_s"`
	IdleTimeout float64 `json:"idle_timeout_s,omitempty"` // 0 = never exit when idle
}

// Next reports finished jobs and asks for up to Free more, waiting up to
// WaitMS for work.
type Next struct {
	Placeholder  int64    `json:"placeholder"`
	Reports      []Report `json:"reports,omitempty"`
	Free         int      `json:"free"`
	WalltimeLeft float64  `json:"walltime_left_s,omitempty"` // 0 = unlimited
	WaitMS       int      `json:"wait_ms,omitempty"`
}

// NextReply hands out jobs. Exit asks the placeholder to finish what it runs
// and stop.
type NextReply struct {
	Jobs []Assignment `json:"jobs,omitempty"`
	Exit bool         `json:"exit,omitempty"`
}

// Assignment is one job handed to a placeholder.
type Assignment struct {
	ID      int64  `json:"id"`
	Attempt int    `json:"attempt"`
	Command string `json:"command"`
	// CommandBytes is the exact command when it is not valid UTF-8
	// (Command is then empty): run CommandOf(Command, CommandBytes).
	CommandBytes []byte  `json:"command_bytes,omitempty"`
	Cwd          string  `json:"cwd"`
	Target       string  `json:"target"`
	Queue        string  `json:"queue"`
	Ceiling      float64 `json:"ceiling_s,omitempty"` // kill after this many seconds; 0 = none
	// Bundle is the bundle's id (its first job's id) for a job of a bundle,
	// 0 otherwise. A bundle's jobs come together, in order, and share one
	// slot: run them one after another. Seq is the job's place in it.
	Bundle int64 `json:"bundle,omitempty"`
	Seq    int   `json:"seq,omitempty"`
	// Inputs and Outputs are the job's declared files (data staging): the
	// agent checks the inputs are there before it starts the command, and
	// hashes the outputs after it, reporting them (Report.Outputs).
	Inputs  []AssignedFile `json:"inputs,omitempty"`
	Outputs []AssignedFile `json:"outputs,omitempty"`
}

// Report says how one job attempt ended.
type Report struct {
	ID       int64     `json:"id"`
	Attempt  int       `json:"attempt"`
	Exit     int       `json:"exit"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Reason explains an abnormal end: "ceiling" (killed for running past
	// the queue's ceiling), "killed" (by mqdel), or a start failure.
	Reason string `json:"reason,omitempty"`
	// OutputLost, if set, says why the attempt's output could not be
	// (wholly) written or copied to the CLS: "stdout: write ...: no space
	// left on device". The job's outcome is its own; this is recorded
	// beside it and shown by mqstat.
	OutputLost string `json:"output_lost,omitempty"`
	// Outputs are the declared outputs the job created, as the agent saw
	// them (size, SHA-256): they become replicas at its place.
	Outputs []FileSum `json:"outputs,omitempty"`
	// Usage is what the job's process used (its rusage), when it ran.
	Usage
}

// Usage is an attempt's resource use as the placeholder measured it from
// the process's rusage (the shell and every descendant it waited for).
// MaxRSS 0 means not measured (the job did not run, or a no-op agent):
// the CLS then stores nothing.
type Usage struct {
	CPUUser float64 `json:"cpu_user,omitempty"` // user CPU seconds
	CPUSys  float64 `json:"cpu_sys,omitempty"`  // system CPU seconds
	MaxRSS  int64   `json:"max_rss,omitempty"`  // largest resident set, bytes
}

// Measured reports whether u holds figures.
func (u Usage) Measured() bool { return u.MaxRSS > 0 }

// CheckUsage refuses figures no process can have (negative, NaN, infinite,
// or beyond a century of CPU).
func CheckUsage(u Usage) error {
	const most = 100 * 366 * 24 * 3600
	for _, v := range []float64{u.CPUUser, u.CPUSys} {
		if !(v >= 0 && v <= most) {
			return fmt.Errorf("CPU seconds must be 0..%d, not %v", most, v)
		}
	}
	if u.MaxRSS < 0 {
		return fmt.Errorf("max_rss must not be negative, not %d", u.MaxRSS)
	}
	return nil
}

// OutputChunk copies part of a job's stdout or stderr from a remote
// placeholder to the CLS, so users read it from the CLS host wherever the
// job ran. Only the placeholder holding the attempt may stage it, before it
// reports the job; a chunk at offset 0 starts the file anew.
type OutputChunk struct {
	Placeholder int64  `json:"placeholder"`
	ID          int64  `json:"id"`
	Attempt     int    `json:"attempt"`
	Stream      string `json:"stream"` // "stdout" or "stderr"
	Offset      int64  `json:"offset"`
	Data        []byte `json:"data"` // base64 in JSON
}

// MaxStaged is how much of each stream a placeholder copies to the CLS;
// past it the copy ends with a note saying where the whole file is.
const MaxStaged = 64 << 20

// ReportBatch reports without asking for work.
type ReportBatch struct {
	Placeholder int64    `json:"placeholder"`
	Reports     []Report `json:"reports"`
}

// JobRef names one attempt of a job.
type JobRef struct {
	ID      int64 `json:"id"`
	Attempt int   `json:"attempt"`
}

// Heartbeat renews the leases of the jobs a placeholder runs.
type Heartbeat struct {
	Placeholder int64    `json:"placeholder"`
	Running     []JobRef `json:"running"`
}

// HeartbeatReply lists jobs the placeholder must kill (deleted by the user).
type HeartbeatReply struct {
	Kill []JobRef `json:"kill,omitempty"`
	Exit bool     `json:"exit,omitempty"`
}

// Reasons a report or the CLS gives for an abnormal end.
const (
	ReasonCeiling = "ceiling"
	ReasonKilled  = "killed"
	ReasonLost    = "lost"
)

// ReasonReturned reports a job handed back unstarted (a placeholder that
// fetched it ahead of a free slot and then could not start it soon): it is
// requeued and the attempt is not counted.
const ReasonReturned = "returned"

// ReasonInterrupted reports a job killed because its placeholder was told
// to stop (batch-system preemption, CLS shutdown): like a lost lease, not
// the job's fault, so it is requeued while attempts remain.
const ReasonInterrupted = "interrupted"
