package protocol

import (
	"fmt"
	"strings"
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
	// AfterAny names targets whose jobs must all have ended, in any state
	// (done, failed, deleted or blocked), before this job runs: sbatch's
	// afterany (mqsub --after-any). It orders jobs but never blocks one.
	AfterAny []string `json:"after_any,omitempty"`
	Command  string   `json:"command"`
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
	// Env adds variables to the job's environment (mqsub -v NAME=VALUE),
	// after the placeholder's own and before the MQ_ ones it sets.
	Env map[string]string `json:"env,omitempty"`
	// Stdout and Stderr name files the job's stdout and stderr are also
	// written to, on the host it runs on (mqsub -o, -e: sbatch's patterns,
	// see ExpandStdio); a Stderr left empty goes with Stdout. ValidateSpec
	// moves them into Env (EnvStdout, EnvStderr), where they travel.
	Stdout string `json:"stdout,omitempty"`
	Stderr string `json:"stderr,omitempty"`
	// Time is the job's time limit in seconds (mqsub --time): the agent
	// kills it then, and it fails; a queue's ceiling still caps it. It is
	// the estimate when Est is 0. ValidateSpec moves it into Env
	// (EnvTimeLimit).
	Time float64 `json:"time,omitempty"`
	// NoReplicate keeps the job from running as more than one attempt at
	// once in a queue that copies running jobs (sa, wqr, --max-copies):
	// for a command that is not idempotent.
	NoReplicate bool `json:"no_replicate,omitempty"`
	// Hold submits the job held (mqsub -H): it never runs until released
	// (OpRelease), and its dependents wait for it.
	Hold bool `json:"hold,omitempty"`
	// Priority orders the job among its queue's ready jobs (mqsub --priority):
	// higher first, MinPriority..MaxPriority, 0 by default. Every ordered
	// policy takes it as its first key.
	Priority int `json:"priority,omitempty"`
	// Resources is what the job asks of a placeholder (mqsub -c, --mem,
	// --gpus, --resource); its keys sit at the top level of the object.
	Resources
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
	// status and output (see docs/reference/protocol.md).
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
	// Warnings are things the submitter should know about jobs that were
	// added (a request no site can hold, one the CLS does not honour), one
	// line each.
	Warnings []string `json:"warnings,omitempty"`
}

// BulkAdd spools one chunk of a bulk submission on the server: either Jobs,
// or Data, raw job-file lines (see ReadJobFile) that the server parses, so
// a large file is parsed once. Line is the 1-based input line of the
// chunk's first job or line, used in error messages; Queue and Cwd fill
// lines of Data that name none, and Env (mqsub -f -v) is added to every
// line's environment, the line's own "env" winning for the same name.
// Defaults likewise fills the resources a line leaves unset.
type BulkAdd struct {
	Line  int               `json:"line"`
	Jobs  []JobSpec         `json:"jobs,omitempty"`
	Data  []byte            `json:"data,omitempty"`
	Queue string            `json:"queue,omitempty"`
	Cwd   string            `json:"cwd,omitempty"`
	Env   map[string]string `json:"env,omitempty"`
	// Defaults is what lines of Data that ask for no resources of a kind
	// ask for (mqsub -f --cpus ...).
	Defaults Resources `json:"defaults,omitzero"`
}

// BulkCommit commits the jobs spooled on the connection. Token, if set
// (at most 128 bytes), is recorded with the commit: a commit repeating a
// committed token adds nothing and returns the first one's ids, and a
// commit with a token on a connection that spooled nothing asks what
// became of that token's commit (not_found: it was not committed), so a
// client whose connection died during a commit learns the truth on a new
// connection without uploading again.
//
// Array, when set, makes the commit a job array (its --array text, at most
// 100 bytes); ArrayLimit caps how many of its members execute at once (0 =
// no cap).
type BulkCommit struct {
	Token string `json:"token,omitempty"`
	Array string `json:"array,omitempty"`
	// Env is an environment every job of the commit gets, under its own
	// (mqsub -V with --array or -f): stored once for the commit, bounded
	// as a job's (MaxEnvBytes).
	Env        map[string]string `json:"env,omitempty"`
	ArrayLimit int               `json:"array_limit,omitempty"`
}

// Stat selects jobs to list.
type Stat struct {
	Queue  string `json:"queue,omitempty"`
	Target string `json:"target,omitempty"`
	// TargetPrefix keeps the jobs whose target starts with it: one request
	// answers for every job of a workflow run (Snakemake's mq-status).
	TargetPrefix string  `json:"target_prefix,omitempty"`
	States       string  `json:"states,omitempty"` // letters; empty = all but X
	IDs          []int64 `json:"ids,omitempty"`
	Limit        int     `json:"limit,omitempty"`
	// Last keeps only the Last matching jobs of highest ids (the latest),
	// still listed in id order; Limit then applies to those.
	Last int `json:"last,omitempty"`
	// Earlier asks for each job's earlier attempts too (mqstat --acct).
	Earlier bool `json:"earlier,omitempty"`
	// Collapse leaves out the members of job arrays (op arrays counts
	// them); From..To, when To > 0, keeps only those ids.
	Collapse bool  `json:"collapse,omitempty"`
	From     int64 `json:"from,omitempty"`
	To       int64 `json:"to,omitempty"`
}

// ArrayQuery selects job arrays: those with a member in States (empty: all
// but X) of Queue and Target, or (Job > 0) the one holding that job.
type ArrayQuery struct {
	Queue  string `json:"queue,omitempty"`
	Target string `json:"target,omitempty"`
	States string `json:"states,omitempty"`
	Job    int64  `json:"job,omitempty"`
}

// ArrayInfo is one job array: its member ids First..Last, the --array text
// it was submitted with (Spec), its cap on executing members (Limit, 0 =
// none), and its members counted by state letter.
type ArrayInfo struct {
	First  int64          `json:"first"`
	Last   int64          `json:"last"`
	Spec   string         `json:"spec"`
	Limit  int            `json:"limit,omitempty"`
	Queue  string         `json:"queue"`
	Target string         `json:"target"`
	Counts map[string]int `json:"counts"`
}

// ArraysReply lists job arrays by first id.
type ArraysReply struct {
	Arrays []ArrayInfo `json:"arrays"`
}

// StatReply is one frame of a streamed job listing.
type StatReply struct {
	Jobs []JobInfo `json:"jobs"`
}

// JobInfo is one job as mqstat shows it. Times are RFC 3339 with
// sub-second precision, empty when not yet.
type JobInfo struct {
	ID      int64    `json:"id"`
	Queue   string   `json:"queue"`
	Target  string   `json:"target"`
	Prereqs []string `json:"prereqs"`
	// AfterAny are the targets whose jobs must all end, in any state.
	AfterAny  []string `json:"after_any,omitempty"`
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
	Priority     int     `json:"priority,omitempty"`
	// Resources is what the job asked for, its queue's defaults applied.
	Resources
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
	// Cost is what the attempt was charged (its site's price x elapsed
	// hours), absent when it was not costed (a free site, a queue
	// without a deadline or budget).
	Cost *float64 `json:"cost,omitempty"`
	Usage
}

// JobQuery names one job. With Output, the detail holds only what reading
// the job's output needs (its row, attempts, where their outputs lie and
// what was lost of them): no array counts, prerequisites, copies, plan or
// files, so it stays cheap for a member of an array of a million.
type JobQuery struct {
	ID     int64 `json:"id"`
	Output bool  `json:"output,omitempty"`
}

// JobDetail is everything known about one job.
type JobDetail struct {
	JobInfo
	// Array is the job array the job is a member of, if any.
	Array       *ArrayInfo `json:"array,omitempty"`
	Placeholder int64      `json:"placeholder,omitempty"`
	Stdout      string     `json:"stdout,omitempty"` // on the placeholder's host
	Stderr      string     `json:"stderr,omitempty"`
	// StdoutCopy and StderrCopy are the CLS's copies of output a remote
	// placeholder staged (absent file: no output, or not staged yet).
	StdoutCopy string `json:"stdout_copy,omitempty"`
	StderrCopy string `json:"stderr_copy,omitempty"`
	// StdoutStream and StderrStream say where the current attempt's
	// output lies when its placeholder wrote it to a stream file
	// (cls serve --output streams): read it there, not at Stdout.
	StdoutStream *StreamExtent `json:"stdout_stream,omitempty"`
	StderrStream *StreamExtent `json:"stderr_stream,omitempty"`
	// Streaming says the current attempt, not ended, writes its output
	// into its placeholder's stream files, as the CLS asked (its site's
	// and queue's output mode): Stdout and Stderr name no file, and the
	// streams' extents are known when it ends.
	Streaming bool `json:"streaming,omitempty"`
	// OutputLost says why the current attempt's output was not (wholly)
	// kept: where the placeholder writes it or in the CLS's copy.
	OutputLost string         `json:"output_lost,omitempty"`
	WaitingOn  []TargetStatus `json:"waiting_on,omitempty"`
	// BlockedBy is, for a blocked job, the failed or deleted job that
	// blocks it (through other blocked jobs, maybe).
	BlockedBy *JobRefState  `json:"blocked_by,omitempty"`
	History   []AttemptInfo `json:"history,omitempty"`
	// Unstarted are attempts handed back before they started (fetched
	// ahead, then given back): their numbers are taken, nothing ran.
	Unstarted []AttemptInfo `json:"unstarted,omitempty"`
	// Copies are the attempts running now beside the job's own (job
	// replication); they have no Finished yet.
	Copies    []AttemptInfo  `json:"copies,omitempty"`
	Inputs    []FileInfo     `json:"inputs,omitempty"`
	Outputs   []FileInfo     `json:"outputs,omitempty"`
	Transfers []TransferInfo `json:"transfers,omitempty"` // data staging for this job
	Plan      *JobPlan       `json:"plan,omitempty"`      // where a plan (cls plan make) put it
	// Infeasible says why a job not started (ready, or waiting on
	// prerequisites) cannot end by its queue's deadline at any known site
	// (it waits; docs/policies/dbc.md); OverBudget, for a job not started,
	// that its queue's budget left cannot pay for all such jobs.
	Infeasible string `json:"infeasible,omitempty"`
	OverBudget string `json:"over_budget,omitempty"`
	// Unfit says why a job not started asks for more than any placeholder
	// or site holds ("needs 4 GPUs; the largest placeholder or site holds
	// 2"), or is expected to take longer than any runs a job: it waits
	// for one that can.
	Unfit string `json:"unfit,omitempty"`
	// Granted is what the current attempt, executing, was given of its
	// placeholder for a job that asks for resources: an auto size as
	// learned from the runs before it, a memory retry's raised size.
	Granted *Capacity `json:"granted,omitempty"`
	// TimeLimit is the job's time limit in seconds (mqsub --time, or
	// mqalter --time since), 0 for none.
	TimeLimit float64 `json:"time_limit,omitempty"`
}

// JobRefState names a job with its target and state letter. As what
// blocks a job, Job 0 is target Target, whose failed or deleted jobs
// were purged.
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
	// AfterAny marks an after-any prerequisite: the job waits until the
	// target has Ended (every job done, failed, deleted or blocked).
	AfterAny bool `json:"after_any,omitempty"`
	Ended    bool `json:"ended,omitempty"`
	// PurgedDone and PurgedBad count the target's purged jobs that were
	// done, and failed or deleted: they count for it still (cls purge).
	PurgedDone int `json:"purged_done,omitempty"`
	PurgedBad  int `json:"purged_bad,omitempty"`
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
	// StdoutStream, StderrStream: as JobDetail's, for this attempt.
	StdoutStream *StreamExtent `json:"stdout_stream,omitempty"`
	StderrStream *StreamExtent `json:"stderr_stream,omitempty"`
	OutputLost   string        `json:"output_lost,omitempty"`
	// Command is the command the attempt ran when a rerun gave the job
	// another since (mqsub --rerun ID --command); "" when it is the job's.
	Command string `json:"command,omitempty"`
	Accounting
}

// SummaryReply counts jobs per queue and state.
type SummaryReply struct {
	Queues []QueueCounts `json:"queues"`
	// Moved totals the data staging transfers (nil when none were made).
	Moved *MovedTotals `json:"moved,omitempty"`
	// Waste totals what job replication spent on copies that lost (nil
	// when no copy was ever killed).
	Waste *WasteTotals `json:"waste,omitempty"`
}

// WasteTotals are seed 000's two waste measures of job replication:
// what the copies killed because another copy of their job won used.
type WasteTotals struct {
	Killed int `json:"killed"` // copies killed
	// CPUSeconds is their user+system CPU as measured; WallSeconds their
	// time from start to kill (what a host was held for).
	CPUSeconds  float64 `json:"cpu_s"`
	WallSeconds float64 `json:"wall_s"`
	// Bytes were staged for the job to a losing copy's site and not to
	// the winner's (the network waste).
	Bytes int64 `json:"bytes"`
}

// QueueCounts is one queue's row in a summary.
type QueueCounts struct {
	Queue  string         `json:"queue"`
	Target string         `json:"target,omitempty"` // mqstat --summary -t: the target's jobs only`
	Policy string         `json:"policy,omitempty"`
	Counts map[string]int `json:"counts"`
	// Economics (seed 002), for a queue with a deadline or a budget or
	// that spent anything: what every attempt of its jobs cost (first
	// runs, retries and copies, killed ones too), in all and per site,
	// its budget and deadline, how many jobs not started cannot end by
	// the deadline at any site and how many its budget left cannot pay
	// for. A target's row (mqstat --summary -t) has what its jobs'
	// attempts cost.
	Spent       float64            `json:"spent,omitempty"`
	SpentBySite map[string]float64 `json:"spent_by_site,omitempty"`
	Budget      float64            `json:"budget,omitempty"`
	Deadline    float64            `json:"deadline,omitempty"`
	Infeasible  int                `json:"infeasible,omitempty"`
	OverBudget  int                `json:"over_budget,omitempty"`
}

// Select names jobs for delete or rerun: by ids (optionally checked against
// Queue), or every job (All) or those of Target, Queue, a range of ids
// (First..Last: a job array) and States (letters), all that are given.
// A selection takes the jobs the action applies to (delete: W Q E B;
// rerun: D F X) and States narrows them.
type Select struct {
	IDs    []int64 `json:"ids,omitempty"`
	Queue  string  `json:"queue,omitempty"`
	Target string  `json:"target,omitempty"`
	States string  `json:"states,omitempty"`
	First  int64   `json:"first,omitempty"`
	Last   int64   `json:"last,omitempty"`
	All    bool    `json:"all,omitempty"`
	// Atomic acts on every job named or on none: if any cannot be acted
	// on, the reply lists why (Errors) and nothing changes. Without it, a
	// selection by query (not IDs) is acted on 10,000 jobs a batch, each
	// committed before the next; a job that left the action's states
	// meanwhile is passed over.
	Atomic bool `json:"atomic,omitempty"`
}

// ActionReply lists what a delete, rerun, hold or release did, and one error line per job
// it could not act on. Both lists are bounded so that the reply fits in a
// frame however many jobs were named: IDs holds the first MaxActionIDs
// jobs acted on and Count all of them; Errors the first MaxActionErrors
// refusals and ErrorCount all of them. A Count or ErrorCount of 0 means
// the list is whole (as older servers sent it).
type ActionReply struct {
	IDs        []int64  `json:"ids"`
	Count      int      `json:"count,omitempty"`
	Errors     []string `json:"errors,omitempty"`
	ErrorCount int      `json:"error_count,omitempty"`
	// Warnings (mqalter) say which jobs changed now ask for more than any
	// placeholder or site holds: they wait, as a submission's would.
	Warnings []string `json:"warnings,omitempty"`
}

// Bounds of an ActionReply's lists: 100,000 ids of up to 19 digits and
// 1,000 error lines stay well under MaxFrame.
const (
	MaxActionIDs    = 100_000
	MaxActionErrors = 1_000
)

// Acted is how many jobs the reply says were acted on.
func (r ActionReply) Acted() int { return max(r.Count, len(r.IDs)) }

// Refused is how many jobs the reply says were refused.
func (r ActionReply) Refused() int { return max(r.ErrorCount, len(r.Errors)) }

// AddID records a job acted on, keeping IDs within MaxActionIDs.
func (r *ActionReply) AddID(id int64) {
	r.Count = r.Acted() + 1
	if len(r.IDs) < MaxActionIDs {
		r.IDs = append(r.IDs, id)
	}
}

// AddError records a refusal, keeping Errors within MaxActionErrors.
func (r *ActionReply) AddError(msg string) {
	r.ErrorCount = r.Refused() + 1
	if len(r.Errors) < MaxActionErrors {
		r.Errors = append(r.Errors, msg)
	}
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

// JobEnd is how a job ended, and, for a job that ran, its last attempt's
// number, place and times (as JobInfo gives them), so that a waiter
// learns where and when its jobs ran without a stat request per reply.
type JobEnd struct {
	ID       int64  `json:"id"`
	State    string `json:"state"`
	Exit     *int   `json:"exit"`
	Reason   string `json:"reason,omitempty"`
	Attempt  int    `json:"attempt,omitempty"`
	Site     string `json:"site,omitempty"`
	Host     string `json:"host,omitempty"`
	Started  string `json:"started,omitempty"`
	Finished string `json:"finished,omitempty"`
	// Usage is what that attempt used, where measured (as mqstat --acct
	// shows it); absent when not.
	Usage *Usage `json:"usage,omitempty"`
}

// QueueInfo is a queue's properties.
type QueueInfo struct {
	Name        string  `json:"name"`
	Ceiling     float64 `json:"ceiling_s"` // longest job allowed, seconds; 0 = none
	MaxAttempts int     `json:"max_attempts"`
	RetryFailed bool    `json:"retry_failed"`
	Policy      string  `json:"policy"`
	// Deadline is when the queue's jobs should all have ended, Unix
	// seconds; Budget what they may cost, in the sites' price unit. 0:
	// none. Sites that follow a deadline-and-budget planner provision for
	// them, and dispatch never starts a job the budget left cannot pay
	// for (docs/policies/dbc.md).
	Deadline float64 `json:"deadline,omitempty"`
	Budget   float64 `json:"budget,omitempty"`
	// Spent is what the queue's ended attempts cost (site price x
	// elapsed hours), in all and per site; Reserved what its running
	// attempts may cost at most; Unfinishable how many ready jobs the
	// planner last found no site can end within the deadline and budget;
	// Infeasible how many jobs not started (ready, or waiting on
	// prerequisites) no known site can end by the deadline at its
	// estimated runtime there (they wait); OverBudget how many jobs not
	// started the budget left, less reservations, cannot pay for even at
	// their cheapest site's expected cost.
	Spent        float64            `json:"spent,omitempty"`
	SpentBySite  map[string]float64 `json:"spent_by_site,omitempty"`
	Reserved     float64            `json:"reserved,omitempty"`
	Unfinishable int                `json:"unfinishable,omitempty"`
	Infeasible   int                `json:"infeasible,omitempty"`
	OverBudget   int                `json:"over_budget,omitempty"`
	// MaxCopies bounds the attempts of one job running at once, the
	// original included (job replication, seed 000). 0: the policy's
	// default (sa and wqr copy without bound, others never); 1: never
	// copy; 2 or more also makes an fcfs, sjf or cp queue copy running
	// jobs for idle placeholders when nothing is ready.
	MaxCopies int `json:"max_copies,omitempty"`
	// MaxOutput caps what one attempt of a job of the queue may write to
	// stdout and stderr together, in bytes, below the placeholder's own
	// cap (cls serve --max-output, 1 GiB by default): a job that writes
	// more is stopped and fails with the reason. 0: none but the
	// placeholder's.
	MaxOutput int64 `json:"max_output,omitempty"`
	// Output is OutputModeFiles when the queue's jobs keep a file per
	// stdout and stderr wherever they run, for tools that expect them (cls
	// queue set --output files); "": as their placeholder does.
	Output string `json:"output,omitempty"`
	// Defaults is what a job of the queue asks for where it asks for
	// nothing itself (cls queue set --cpus, --mem, --gpus, --resource).
	Defaults Resources `json:"defaults,omitzero"`
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
	Deadline    *float64 `json:"deadline,omitempty"` // Unix seconds; 0 clears
	Budget      *float64 `json:"budget,omitempty"`   // 0 clears
	MaxCopies   *int     `json:"max_copies,omitempty"`
	MaxOutput   *int64   `json:"max_output,omitempty"` // 0..MaxQueueOutput bytes; 0 clears
	Output      *string  `json:"output,omitempty"`     // OutputModeFiles, or "" to clear
	// Defaults, when set, replaces the queue's defaults as a whole (the
	// zero Resources clears them).
	Defaults *Resources `json:"defaults,omitempty"`
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
	// Capacity is what the placeholder offers its jobs: the smaller of
	// what its site asked for (Asked) and what it found it was given
	// (the batch system's variables, its cgroup, the machine), in each
	// dimension; CapacityNote says where asked and given differ ("asked
	// 16 cpus, given 8 (SLURM_CPUS_ON_NODE)"). Nil: Slots cores, nothing
	// else known (an agent from before resources).
	Capacity     *Capacity `json:"capacity,omitempty"`
	Asked        *Capacity `json:"asked,omitempty"`
	CapacityNote string    `json:"capacity_note,omitempty"`
	// Holding, on a reconnect (ID set), lists every attempt the CLS handed
	// this placeholder whose end it has not had acknowledged: running,
	// held ahead, or ended with its report on the way. The CLS hands back
	// the placeholder's executing attempts it does not list, as returned
	// unstarted: the replies that handed them out were lost with an
	// earlier connection before the placeholder read them. Null: not
	// known (an agent from before it, or one holding more than
	// MaxHolding), and nothing is handed back; [] holds nothing.
	Holding []JobRef `json:"holding"`
}

// MaxHolding bounds Register.Holding (an agent holding more lists none).
const MaxHolding = 1 << 16

// RegisterReply gives the placeholder its id and timing.
type RegisterReply struct {
	ID          int64   `json:"id"`
	LeaseS      float64 `json:"lease_s"`
	HeartbeatS  float64 `json:"heartbeat_s"`
	IdleTimeout float64 `json:"idle_timeout_s,omitempty"` // 0 = never exit when idle
	// OutputFiles asks for a file per job's output, not stream files
	// (cls serve --output files).
	OutputFiles bool `json:"output_files,omitempty"`
	// Clock is the CLS's wall clock as it replies (zero: not said), as
	// in NextReply and HeartbeatReply: the agent keeps how far it is
	// from its own, and writes it beside the reports it spools, whose
	// times the CLS cannot compare with its clock when it reads them.
	Clock time.Time `json:"clock,omitzero"`
}

// Next reports finished jobs and asks for up to Free more, waiting up to
// WaitMS for work.
type Next struct {
	Placeholder  int64    `json:"placeholder"`
	Reports      []Report `json:"reports,omitempty"`
	Free         int      `json:"free"`
	WalltimeLeft float64  `json:"walltime_left_s,omitempty"` // 0 = unlimited
	WaitMS       int      `json:"wait_ms,omitempty"`
	// Available is what the placeholder has free now, when it holds
	// more than cores (memory, GPUs, named resources). Nil: Free cores.
	// It is informational: the CLS packs from its own pool of the
	// placeholder's registered capacity, and the placeholder admits each
	// job by its own, holding one whose grant does not fit what is free
	// (docs/design/resources.md, "What the agent's free amounts are for").
	Available *Capacity `json:"available,omitempty"`
	// Ahead is how many of the Free jobs asked for go beyond the free
	// slots, to be held until one frees (prefetch): the jobs handed out
	// in those last slots come marked Assignment.Ahead.
	Ahead int `json:"ahead,omitempty"`
	// Started lists the attempts handed out Ahead whose process the
	// placeholder has started since it last said (CheckStarted).
	Started []JobRef `json:"started,omitempty"`
	// Clock is the placeholder's wall clock as it sends (zero: not
	// said): the CLS moves the times of Reports onto its own clock when
	// the two differ by more than MaxClockSkew.
	Clock time.Time `json:"clock,omitzero"`
}

// MaxClockSkew is how far a placeholder's clock (Next.Clock,
// ReportBatch.Clock; for spooled reports, the offset the agent measured
// from the CLS's RegisterReply.Clock and the like) may be from the CLS's
// before the times its reports carry are moved by the difference: a
// compute node whose clock is hours off (no NTP) must not record jobs as
// finished in the future, or purge them early, or push a plan's start
// hours away. Less is left alone: the time a request takes to arrive
// counts in the difference.
const MaxClockSkew = 10 * time.Second

// OnClock moves the times of reps sent at the placeholder's clock onto
// now, the CLS's, when they differ by more than MaxClockSkew, and returns
// the difference moved (0: none).
func OnClock(reps []Report, clock, now time.Time) time.Duration {
	off := now.Sub(clock)
	if clock.IsZero() || (off <= MaxClockSkew && off >= -MaxClockSkew) {
		return 0
	}
	for i := range reps {
		if !reps[i].Started.IsZero() {
			reps[i].Started = reps[i].Started.Add(off)
		}
		if !reps[i].Finished.IsZero() {
			reps[i].Finished = reps[i].Finished.Add(off)
		}
	}
	return off
}

// NextReply hands out jobs. Exit asks the placeholder to finish what it runs
// and stop.
type NextReply struct {
	Jobs []Assignment `json:"jobs,omitempty"`
	Exit bool         `json:"exit,omitempty"`
	// Clock is the CLS's wall clock as it replies (RegisterReply.Clock).
	Clock time.Time `json:"clock,omitzero"`
}

// Assignment is one job handed to a placeholder.
type Assignment struct {
	ID      int64 `json:"id"`
	Attempt int   `json:"attempt"`
	// Ahead: handed out in a slot Next.Ahead asked for, so shown
	// prefetched (P) until the placeholder lists it in Started.
	Ahead   bool   `json:"ahead,omitempty"`
	Command string `json:"command"`
	// CommandBytes is the exact command when it is not valid UTF-8
	// (Command is then empty): run CommandOf(Command, CommandBytes).
	CommandBytes []byte  `json:"command_bytes,omitempty"`
	Cwd          string  `json:"cwd"`
	Target       string  `json:"target"`
	Queue        string  `json:"queue"`
	Ceiling      float64 `json:"ceiling_s,omitempty"` // kill after this many seconds; 0 = none
	// MaxOutput is the queue's cap on what the attempt may write to
	// stdout and stderr together (cls queue set --max-output); 0: none.
	// The agent applies the smaller of it and its own cap; a value out
	// of 0..MaxQueueOutput is taken as none.
	MaxOutput int64 `json:"max_output,omitempty"`
	// OutputFiles asks for the attempt's stdout and stderr as a file
	// each, not chunks of a stream file, whatever the placeholder's mode
	// (its queue's cls queue set --output files).
	OutputFiles bool `json:"output_files,omitempty"`
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
	// Env is the job's own environment (JobSpec.Env) as NAME=VALUE.
	Env []string `json:"env,omitempty"`
	// Scratch says other attempts of the job may run at the same time
	// (job replication): the agent runs it in a directory of its own
	// (holding links to the working directory's entries) so that its
	// declared outputs are made there, and after exit 0 claims the win
	// (Heartbeat.Claim) before it moves them into place. A loser's
	// outputs are removed with its directory.
	Scratch bool `json:"scratch,omitempty"`
	// Grant is what the job may use of the placeholder: its cores (and
	// which, for pinning), memory (enforced: over it the job is killed
	// with a ReasonMemory reason), GPUs (which: the only ones it sees)
	// and named amounts. Nil: one core, as before resources.
	Grant *Capacity `json:"grant,omitempty"`
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
	// Missing names the declared movable inputs the agent did not find
	// whole at its place (absent, not a regular file, or of another size)
	// when it did not start the command for them. The CLS forgets its
	// replicas of them there and hands the job back unstarted, to be
	// staged again (at most MaxStaleReturns times a job).
	Missing []string `json:"missing,omitempty"`
	// Streamed says where the attempt's non-empty outputs lie in the
	// placeholder's stream files, when it writes them there (at most
	// MaxStreamed; the CLS keeps only entries naming the placeholder's
	// own files).
	Streamed []Streamed `json:"streamed,omitempty"`
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

// Kept is what a metaqueue keeps of report r's figures, checked once
// before any is used: usage no process can have (CheckUsage) is dropped.
// Its streamed extents are checked where they are saved, one by one.
// CleanReport, where a server reads a report, does this and more.
func (r Report) Kept() Report {
	if CheckUsage(r.Usage) != nil {
		r.Usage = Usage{}
	}
	return r
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

// OutputQuery asks for one stream of a job's output (op output.stream):
// what its latest attempt has written so far and, with Follow, what it
// writes until the job ends.
type OutputQuery struct {
	ID     int64  `json:"id"`
	Stream string `json:"stream,omitempty"` // "stdout" (default) or "stderr"
	Follow bool   `json:"follow,omitempty"`
}

// MaxOutputFrame is the most output one OutputFrame carries.
const MaxOutputFrame = 64 << 10

// OutputFrame is a piece of a job's output, or the end of the stream. The
// bytes are the job's own: whoever shows them to a person decides how.
type OutputFrame struct {
	// Attempt is the attempt that wrote Data. Its output starts at Offset
	// 0; a new attempt (the job was requeued) starts again there.
	Attempt int    `json:"attempt,omitempty"`
	Offset  int64  `json:"offset"`
	Data    []byte `json:"data,omitempty"` // base64 in JSON
	// End, in the last frame of a followed stream, is how the job ended;
	// a stream that was not followed ends without it if the job runs on.
	End *JobEnd `json:"end,omitempty"`
	// Lost, with End, says why the stream was not (wholly) kept.
	Lost string `json:"lost,omitempty"`
}

// LostFor picks from an attempt's lost-output record ("stdout: ...;
// stderr not copied ...") the causes that concern stream; a cause naming
// no stream concerns both.
func LostFor(lost, stream string) string {
	if lost == "" {
		return ""
	}
	other := "stderr"
	if stream == "stderr" {
		other = "stdout"
	}
	var out []string
	for _, part := range strings.Split(lost, "; ") {
		if !strings.HasPrefix(part, other) {
			out = append(out, part)
		}
	}
	return strings.Join(out, "; ")
}

// MaxStaged is how much of each stream a placeholder copies to the CLS;
// past it the copy ends with a note saying where the whole file is.
const MaxStaged = 64 << 20

// OutputRead asks for part of one attempt's stdout or stderr, wherever the
// CLS keeps it: written on the CLS host by a local placeholder, or staged
// there by a remote one (OutputChunk). Readers ask for consecutive pieces.
type OutputRead struct {
	ID      int64  `json:"id"`
	Attempt int    `json:"attempt,omitempty"` // 0: the job's latest attempt
	Stream  string `json:"stream"`            // "stdout" or "stderr"
	Offset  int64  `json:"offset,omitempty"`
	Max     int    `json:"max,omitempty"` // bytes wanted; 0 or over MaxOutputRead: MaxOutputRead
}

// OutputData is a piece of a job's output.
type OutputData struct {
	Attempt int    `json:"attempt"`        // the attempt read
	Data    []byte `json:"data,omitempty"` // base64 in JSON
	Size    int64  `json:"size"`           // the stream's whole size when read
	EOF     bool   `json:"eof,omitempty"`  // Data reaches the end of what there is
	// Lost says why the stream is not whole (the attempt's output_lost
	// causes that concern it): the bytes read are all that was kept.
	Lost string `json:"lost,omitempty"`
}

// MaxOutputRead is the most one output.read reply carries.
const MaxOutputRead = 1 << 20

// MaxOutput is the largest stream output.read serves: MaxStaged, the cap
// of a staged copy (a longer copy holds the placeholder's cut note). A
// larger one is refused with CodeTooLarge; read it on its host.
const MaxOutput = MaxStaged

// ReportBatch reports without asking for work.
type ReportBatch struct {
	Placeholder int64     `json:"placeholder"`
	Reports     []Report  `json:"reports"`
	Started     []JobRef  `json:"started,omitempty"` // as Next's
	Clock       time.Time `json:"clock,omitzero"`    // as Next's
}

// JobRef names one attempt of a job.
type JobRef struct {
	ID      int64 `json:"id"`
	Attempt int   `json:"attempt"`
}

// Heartbeat renews the leases of the jobs a placeholder runs, and of
// those that ended whose reports the CLS has not acknowledged.
type Heartbeat struct {
	Placeholder int64    `json:"placeholder"`
	Running     []JobRef `json:"running"`
	// Claim asks to win the race for these attempts (Assignment.Scratch,
	// each also listed in Running): the first copy of a job to claim wins,
	// and only a winner may move its outputs into place and report Done.
	Claim []JobRef `json:"claim,omitempty"`
	// Started is as Next's: a job that starts while no request goes
	// says so here at the latest.
	Started []JobRef `json:"started,omitempty"`
	// Paused says the placeholder takes no new jobs: its output disk has
	// less free than its output reserve. The first heartbeat after the
	// pause ends says so too (false).
	Paused bool `json:"paused,omitempty"`
	// Broken says why the placeholder takes no more jobs: its node
	// cannot run them (the processes of a job that did not end after
	// SIGKILL, a data root it cannot write, no process left to start).
	// It exits once its running jobs end, for the site to drain the node;
	// its last heartbeat says it too.
	Broken string `json:"broken,omitempty"`
}

// HeartbeatReply lists jobs the placeholder must kill (deleted by the user).
type HeartbeatReply struct {
	Kill []JobRef `json:"kill,omitempty"`
	Exit bool     `json:"exit,omitempty"`
	// Follow lists the listed attempts whose output someone follows
	// (output.read): a placeholder that stages output sends it while they
	// run, not only when they end.
	Follow []JobRef `json:"follow,omitempty"`
	// Won lists the claimed attempts that won; a claimed attempt that
	// lost is in Kill.
	Won []JobRef `json:"won,omitempty"`
	// Clock is the CLS's wall clock as it replies (RegisterReply.Clock).
	Clock time.Time `json:"clock,omitzero"`
}

// Reasons a report or the CLS gives for an abnormal end.
const (
	ReasonCeiling = "ceiling"
	ReasonKilled  = "killed"
	ReasonLost    = "lost"
)

// MaxStaleReturns is how many times a job is handed back for inputs its
// agent found missing where the CLS had replicas of them
// (Report.Missing) before it fails for them: a data root the CLS and the
// agent see differently would otherwise stage and hand back forever.
const MaxStaleReturns = 3

// ReasonReturned reports a job handed back unstarted (a placeholder that
// fetched it ahead of a free slot and then could not start it soon): it is
// requeued and the attempt is not counted.
const ReasonReturned = "returned"

// ReasonInterrupted reports a job killed because its placeholder was told
// to stop (batch-system preemption, CLS shutdown): like a lost lease, not
// the job's fault, so it is requeued while attempts remain.
const ReasonInterrupted = "interrupted"

// Progress selects jobs to follow until they have all ended: a range of
// ids (First..Last, as a bulk commit or a job array returns them), listed
// IDs, or every job of a queue and/or target (neither: every job). Deleted
// jobs do not count in a queue, target or everything (as mqstat does not
// list them); named ones that end deleted count as not done.
type Progress struct {
	First int64   `json:"first,omitempty"`
	Last  int64   `json:"last,omitempty"`
	IDs   []int64 `json:"ids,omitempty"`
	Queue string  `json:"queue,omitempty"`
	// Target selects the jobs of one target (with Queue, of that queue only).
	Target string `json:"target,omitempty"`
	// TargetPrefix, instead of Target, selects the jobs of every target
	// whose name starts with it, those made while the stream runs too
	// (mqwait --target-prefix; a --wfformat replay's).
	TargetPrefix string `json:"target_prefix,omitempty"`
	// IntervalMS is the time between frames (default 1000, at least 100).
	IntervalMS int `json:"interval_ms,omitempty"`
	// Once sends one frame (the counts now) and ends.
	Once bool `json:"once,omitempty"`
	// Spending, with Once, adds what the selected jobs' attempts cost
	// (mqstat --summary -t), read from the charges.
	Spending bool `json:"spending,omitempty"`
}

// ProgressReply is one frame of a progress stream: the selected jobs'
// counts by state letter, Executing jobs whose placeholder has not said it
// started them counted as P rather than E (as QueueCounts). The CLS keeps
// them up to date as jobs change state, so a frame costs the same for ten
// jobs as for a million. The last frame has Ended set (no selected job is
// W, Q, H, P or E any more) and lists up to MaxNotDone of the jobs that
// did not end done.
type ProgressReply struct {
	Total   int            `json:"total"`
	Counts  map[string]int `json:"counts"`
	Ended   bool           `json:"ended,omitempty"`
	NotDone []JobEnd       `json:"not_done,omitempty"`
	// MoreNotDone counts the jobs that did not end done beyond NotDone.
	MoreNotDone int `json:"more_not_done,omitempty"`
	// Spent and SpentBySite, if Spending was asked: what every attempt
	// of the selected jobs cost, in all and per site.
	Spent       float64            `json:"spent,omitempty"`
	SpentBySite map[string]float64 `json:"spent_by_site,omitempty"`
}

// MaxNotDone bounds ProgressReply.NotDone.
const MaxNotDone = 20
