package protocol

import (
	"fmt"
	"reflect"
	"slices"
)

// An operation is declared once, below, as a typed value: its wire name,
// the least role that may send it, whether its reply waits for a durable
// commit, and a line of documentation, with the request and reply body
// types as type parameters. The server's routes and role checks, the typed
// client calls (client.Do, client.Stream, client.Go) and the table in
// docs/reference/protocol.md all derive from these declarations, so a request sent
// with the wrong body or read into the wrong reply type does not compile.

// Spec is what an operation declares besides its body types.
type Spec struct {
	Name string // on the wire: Request.Op
	// Role is the least role that may send the op (roles rank admin >
	// user > placeholder): RolePlaceholder ops are open to every
	// connection, RoleUser ops to user and admin, RoleAdmin ops to admin.
	Role string
	// Durable ops change users' work and reply only after the change is
	// committed, fsync'd even under --sync submit.
	Durable bool
	// Waits marks a long poll: its reply rightly takes as long as the
	// request lets it (a client says nothing of its wait).
	Waits bool
	Doc   string // one line, for docs/reference/protocol.md
}

// Op is an operation whose reply is one Resp.
type Op[Req, Resp any] struct{ Spec }

// StreamOp is an operation whose reply is a stream of Item frames (each
// with More set), ended by an empty final frame.
type StreamOp[Req, Item any] struct{ Spec }

// OpInfo describes a declared operation: the metadata of its declaration
// and the names of its body types.
type OpInfo struct {
	Spec
	Request string // the request body's type, in package protocol
	Reply   string // the reply body's type (of each frame, if Streams)
	Streams bool
}

// Allows reports whether a connection with role may send the op.
func (i OpInfo) Allows(role string) bool { return RoleAllows(role, i.Role) }

// Roles lists the roles that may send the op, most powerful first.
func (i OpInfo) Roles() []string {
	var rs []string
	for _, r := range []string{RoleAdmin, RoleUser, RolePlaceholder} {
		if i.Allows(r) {
			rs = append(rs, r)
		}
	}
	return rs
}

// Empty is a body with nothing in it: {}.
type Empty struct{}

// ops lists the declarations in order; filled while the package's
// variables are initialised and never changed after.
var ops []OpInfo

// declare adds an op to the list, refusing a name taken or a declaration
// without a role or a doc.
func declare(info OpInfo) {
	if roleRank(info.Role) == 0 || info.Name == "" || info.Doc == "" {
		panic(fmt.Sprintf("protocol: op %q declared without a role or a doc", info.Name))
	}
	if _, dup := Lookup(info.Name); dup {
		panic(fmt.Sprintf("protocol: op %q declared twice", info.Name))
	}
	ops = append(ops, info)
}

func typeName[T any]() string {
	t := reflect.TypeFor[T]()
	if t.Name() == "" {
		return t.String()
	}
	return t.Name()
}

func op[Req, Resp any](s Spec) Op[Req, Resp] {
	o := Op[Req, Resp]{s}
	declare(o.Info())
	return o
}

func streamOp[Req, Item any](s Spec) StreamOp[Req, Item] {
	o := StreamOp[Req, Item]{s}
	declare(o.Info())
	return o
}

// Ops lists every declared operation, in declaration order.
func Ops() []OpInfo { return slices.Clone(ops) }

// Lookup returns the declared operation named name.
func Lookup(name string) (OpInfo, bool) {
	for _, i := range ops {
		if i.Name == name {
			return i, true
		}
	}
	return OpInfo{}, false
}

// bulkAddName is OpBulkAdd's name as a constant, for FastBulkAdd.
const bulkAddName = "bulk.add"

// The operations. The session's first request must be OpHello.
var (
	OpHello = op[Hello, HelloReply](Spec{Name: "hello", Role: RolePlaceholder,
		Doc: "opens the session: must be the first request, and only the first"})

	// User role.
	OpSubmit = op[Submit, SubmitReply](Spec{Name: "submit", Role: RoleUser, Durable: true,
		Doc: "adds jobs in one transaction (idempotent with a token)"})
	OpBulkAdd = op[BulkAdd, Empty](Spec{Name: bulkAddName, Role: RoleUser,
		Doc: "validates a chunk of jobs and spools it on the connection"})
	OpBulkCommit = op[BulkCommit, SubmitReply](Spec{Name: "bulk.commit", Role: RoleUser, Durable: true,
		Doc: "adds every spooled job in one transaction, or asks what became of a token's commit"})
	OpBulkAbort = op[Empty, Empty](Spec{Name: "bulk.abort", Role: RoleUser,
		Doc: "drops the jobs spooled on the connection"})
	OpStat = streamOp[Stat, StatReply](Spec{Name: "stat", Role: RoleUser,
		Doc: "lists the selected jobs"})
	OpArrays = op[ArrayQuery, ArraysReply](Spec{Name: "arrays", Role: RoleUser,
		Doc: "lists job arrays with their members counted by state"})
	OpJob = op[JobQuery, JobDetail](Spec{Name: "job", Role: RoleUser,
		Doc: "everything known about one job"})
	OpSummary = op[Empty, SummaryReply](Spec{Name: "summary", Role: RoleUser,
		Doc: "counts jobs per queue and state"})
	OpDelete = op[Select, ActionReply](Spec{Name: "delete", Role: RoleUser, Durable: true,
		Doc: "deletes jobs (running ones are killed)"})
	OpRerun = op[Rerun, ActionReply](Spec{Name: "rerun", Role: RoleUser, Durable: true,
		Doc: "runs ended jobs again (one of them with a new command)"})
	OpHold = op[Select, ActionReply](Spec{Name: "hold", Role: RoleUser, Durable: true,
		Doc: "holds waiting or queued jobs: they do not run until released"})
	OpRelease = op[Select, ActionReply](Spec{Name: "release", Role: RoleUser, Durable: true,
		Doc: "releases held jobs to the state their prerequisites give them"})
	OpAlter = op[Alter, ActionReply](Spec{Name: "alter", Role: RoleUser, Durable: true,
		Doc: "changes the priority, time limit, estimate or resources of jobs not started"})
	OpWait = op[Wait, WaitReply](Spec{Name: "wait", Role: RoleUser, Waits: true,
		Doc: "long poll until the jobs have ended (or any has), or a timeout"})
	OpProgress = streamOp[Progress, ProgressReply](Spec{Name: "progress", Role: RoleUser, Waits: true,
		Doc: "streams the counts by state of a set of jobs until all have ended"})
	OpOutputRead = op[OutputRead, OutputData](Spec{Name: "output.read", Role: RoleUser,
		Doc: "reads part of a job's stdout or stderr (at most MaxOutput of either)"})
	OpOutputStream = streamOp[OutputQuery, OutputFrame](Spec{Name: "output.stream", Role: RoleUser, Waits: true,
		Doc: "streams a job's stdout or stderr; with follow, until the job ends"})
	OpPurge = op[Purge, PurgeReply](Spec{Name: "purge", Role: RoleUser, Durable: true,
		Doc: "removes ended jobs, their rows and output files, in batches (cls purge)"})
	OpQueueList = op[Empty, QueueList](Spec{Name: "queue.list", Role: RoleUser,
		Doc: "lists the queues"})
	OpQueueSet = op[QueueSet, QueueInfo](Spec{Name: "queue.set", Role: RoleUser, Durable: true,
		Doc: "creates a queue or changes its settings"})

	// Placeholder role (open to every role).
	OpRegister = op[Register, RegisterReply](Spec{Name: "register", Role: RolePlaceholder,
		Doc: "introduces a placeholder, or reclaims its id after a reconnect"})
	OpNext = op[Next, NextReply](Spec{Name: "next", Role: RolePlaceholder, Waits: true,
		Doc: "commits reports, then hands out jobs (long poll)"})
	OpReport = op[ReportBatch, Empty](Spec{Name: "report", Role: RolePlaceholder,
		Doc: "commits reports without asking for work"})
	OpHeartbeat = op[Heartbeat, HeartbeatReply](Spec{Name: "heartbeat", Role: RolePlaceholder,
		Doc: "renews the leases of running jobs and of ended ones not yet reported; lists those to kill"})
	OpOutput = op[OutputChunk, Empty](Spec{Name: "output", Role: RolePlaceholder,
		Doc: "stages part of a job's output on the CLS"})
	OpOutputShip = op[StreamPiece, StreamPieceReply](Spec{Name: "output.ship", Role: RolePlaceholder,
		Doc: "appends the next bytes of a remote placeholder's stream file to the CLS's copy"})

	// The agent's file transfers (agentfiles.go).
	OpFilesPoll = op[FilePoll, FileOrder](Spec{Name: "files.poll", Role: RolePlaceholder, Waits: true,
		Doc: "waits for a file to move to or from the placeholder's host (long poll)"})
	OpFilesPull = op[FilePull, FileData](Spec{Name: "files.pull", Role: RolePlaceholder,
		Doc: "reads the next chunk of a file the CLS sends to the placeholder's host"})
	OpFilesPush = op[FileChunk, Empty](Spec{Name: "files.push", Role: RolePlaceholder,
		Doc: "sends the next chunk of a file the CLS reads from the placeholder's host"})
	OpFilesDone = op[FileDone, Empty](Spec{Name: "files.done", Role: RolePlaceholder,
		Doc: "ends a file order with the size and SHA-256 moved, or an error (`missing`: no such file; `no_space`: the host's disk full)"})

	// Sites: the places placeholders run, kept in the metaqueue database
	// and provisioned by the running CLS. Adding and removing one needs
	// admin: it makes the CLS start processes (a local site) or log in
	// elsewhere with its owner's SSH keys (a batch site).
	OpSiteAdd = op[SiteSpec, SiteInfo](Spec{Name: "site.add", Role: RoleAdmin, Durable: true,
		Doc: "adds a site and starts provisioning it"})
	OpSiteList = op[Empty, SiteList](Spec{Name: "site.list", Role: RoleUser,
		Doc: "lists the sites with their provisioners' state"})
	OpSiteRemove = op[SiteRemove, SiteInfo](Spec{Name: "site.remove", Role: RoleAdmin, Durable: true,
		Doc: "removes a site, cancelling its placeholders; replies with its last state"})
	OpSiteSet = op[SiteSet, SiteInfo](Spec{Name: "site.set", Role: RoleAdmin, Durable: true,
		Doc: "changes a site's price, slots, memory, GPUs, named resources, min, max, provisioning, walltime, idle timeout, output mode, queue, submit arguments or `cls_addr`; placeholders keep running"})
)

// Info describes the op as Ops lists it.
func (o Op[Req, Resp]) Info() OpInfo {
	return OpInfo{Spec: o.Spec, Request: typeName[Req](), Reply: typeName[Resp]()}
}

// Info describes the op as Ops lists it.
func (o StreamOp[Req, Item]) Info() OpInfo {
	return OpInfo{Spec: o.Spec, Request: typeName[Req](), Reply: typeName[Item](), Streams: true}
}
