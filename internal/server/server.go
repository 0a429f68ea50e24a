// Package server serves the request protocol: it reads frames from a
// connection (the Unix socket, or an SSH channel of the mq subsystem),
// checks each against the connection's role, and routes it to the
// metaqueue. Requests on one connection run concurrently, so clients may
// pipeline; replies carry the request's id.
package server

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/mq-hpc/mq/internal/logguard"
	"github.com/mq-hpc/mq/internal/metaqueue"
	"github.com/mq-hpc/mq/protocol"
)

// Server routes protocol requests to a Store.
type Server struct {
	Store   *metaqueue.Store
	Log     *slog.Logger
	Version string // reported in hello replies

	// OutputDir receives the output that remote placeholders stage
	// (op output), at the same paths local placeholders write.
	OutputDir string
	// OutputReserve is the free space staged output leaves on OutputDir's
	// filesystem, for the database beside it (0: none).
	OutputReserve int64
	// statfs reads OutputDir's filesystem for roomFor (nil:
	// syscall.Statfs); tests stand in for a full one.
	statfs func(path string, st *syscall.Statfs_t) error

	// SyncStreams syncs each piece of a remote placeholder's stream file
	// into the CLS's copy before answering it (cls serve --sync full), so
	// the reports after it name bytes on disk. OutputFiles tells
	// placeholders to write a file per output rather than stream files
	// (cls serve --output files; RegisterReply), unless SiteOutputFiles
	// says otherwise for the placeholder's site (cls site add --output).
	SyncStreams     bool
	OutputFiles     bool
	SiteOutputFiles func(site string) (files, ok bool)
	// shipped holds the names of the stream copies written since start
	// (output.ship): the first piece of each checks the copy's tail.
	shipped shippedSet

	// OnPlaceholder, if set, is told when a placeholder registers on a
	// connection and when that connection closes.
	OnPlaceholder func(id int64, reg protocol.Register, connected bool)
	// OnPaused, if set, is told at each heartbeat whether the placeholder
	// takes no new jobs for its full output disk (Heartbeat.Paused).
	OnPaused func(id int64, paused bool)
	// OnBroken, if set, is told at each heartbeat that says the
	// placeholder's node cannot run jobs (Heartbeat.Broken), and why.
	OnBroken func(id int64, why string)

	// OnOutput, if set, is told when a placeholder has staged output of
	// job id (op output), so that whoever follows it reads on at once.
	OnOutput func(id int64)
	// Followed, if set, picks from a heartbeat's attempts those whose
	// output someone follows; the reply asks the placeholder to send
	// their output while they run.
	Followed func(running []protocol.JobRef) []protocol.JobRef
	// Files, if set, serves the agents' file transfers (files.* ops);
	// without it they are answered unsupported.
	Files AgentFiles

	// routed serves declared ops beyond the metaqueue's (site.add, ...):
	// see Route.
	routed map[string]*route

	// Limits bound what one connection may hold; Gate bounds the socket's
	// connections that have not said hello yet.
	Limits Limits
	Gate   Gate

	wg sync.WaitGroup

	// phConn is each placeholder's latest connection (reconnect.go).
	phConnMu sync.Mutex
	phConn   map[int64]*conn

	// refusals aggregates the log lines of refused requests, per peer and
	// kind: a key that sends 100,000 refused requests gets one line and
	// then one count a minute, not 100,000 lines.
	refusalsOnce sync.Once
	refusals     *logguard.Limiter

	// committing lists, per token, the bulk commits under way, so that a
	// question about a token's outcome (from a client whose connection
	// died during the commit) waits for the answer.
	commitMu   sync.Mutex
	committing map[string][]chan struct{}
}

// startCommit notes a bulk commit with token under way; finish ends it.
func (s *Server) startCommit(token string) (finish func()) {
	done := make(chan struct{})
	s.commitMu.Lock()
	if s.committing == nil {
		s.committing = map[string][]chan struct{}{}
	}
	s.committing[token] = append(s.committing[token], done)
	s.commitMu.Unlock()
	return func() {
		s.commitMu.Lock()
		l := s.committing[token]
		for i, ch := range l {
			if ch == done {
				l = append(l[:i:i], l[i+1:]...)
				break
			}
		}
		if len(l) == 0 {
			delete(s.committing, token)
		} else {
			s.committing[token] = l
		}
		s.commitMu.Unlock()
		close(done)
	}
}

// awaitCommits waits until no bulk commit with token is under way.
func (s *Server) awaitCommits(ctx context.Context, token string) error {
	s.commitMu.Lock()
	l := append([]chan struct{}(nil), s.committing[token]...)
	s.commitMu.Unlock()
	for _, ch := range l {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// FlushLog logs the counts of refusals not yet logged (at shutdown).
func (s *Server) FlushLog() {
	s.refusalsOnce.Do(func() {})
	s.refusals.Flush()
}

// Limits bound what one connection may hold. Zero fields take the
// defaults (DefaultHelloTimeout, ...).
type Limits struct {
	HelloTimeout time.Duration // from connecting to hello
	// Idle closes a connection that said hello and then sent nothing
	// while none of its requests was in progress for this long.
	Idle time.Duration
	// Registrations bounds the placeholders registered on one connection
	// (an agent registers one); one more is refused with busy.
	Registrations int
	// LogWindow is how long like refusals from one peer are counted
	// before their number is logged (0: logguard.DefaultWindow).
	LogWindow time.Duration
	// InFlight and PlaceholderInFlight bound the requests served at once
	// on a user and a placeholder connection: at the bound the server
	// stops reading the connection until one ends (backpressure).
	InFlight, PlaceholderInFlight int
	// Nexts bounds the next requests in progress on a connection; one
	// more is refused with code busy.
	Nexts int
}

func orDefault[T int | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// Serve accepts connections until ctx ends or ln fails for good. Every
// peer gets maxRole (the Unix socket is only reachable by its owner:
// RoleAdmin).
func (s *Server) Serve(ctx context.Context, ln net.Listener, maxRole string) error {
	return Accept(ctx, ln, &s.Gate, s.Log, &s.wg, func(c net.Conn, t *Ticket) {
		s.ServePeer(ctx, c, Peer{MaxRole: maxRole, Identity: "socket", Admission: t})
	})
}

// Wait waits for connections' handlers to return.
func (s *Server) Wait() { s.wg.Wait() }

// Peer is what the transport knows about the other end of a connection.
type Peer struct {
	// MaxRole is the most the peer may do (protocol.RoleAdmin, RoleUser
	// or RolePlaceholder); its hello may only narrow it.
	MaxRole string
	// Identity names the credential the peer proved ("socket" for the
	// Unix socket's owner, "ssh-key:SHA256:..." over SSH). A placeholder
	// may reclaim its id after a reconnect only with the same identity.
	Identity string
	// Admission, if set, is the connection's place in its listener's
	// Gate, given up once the peer says hello.
	Admission *Ticket
	// NoPlaceholder refuses the placeholder role to the peer: the
	// placeholder ops (register, next, report, heartbeat, output, files.*)
	// and a hello asking for it. SSH user and admin keys are so: a
	// placeholder is handed files from the CLS host (files.pull), jobs
	// and their commands, which no one but site placeholders should get.
	NoPlaceholder bool
	// Site, if set, is the one site the peer may register placeholders
	// of (a site's own placeholder key, mq-site-NAME).
	Site string
}

// checkRegister refuses a registration whose strings are too long or hold
// control characters: they are stored and shown by mqstat.
func checkRegister(r protocol.Register) error {
	if err := protocol.CheckText("site", r.Site, protocol.MaxSiteBytes); err != nil {
		return err
	}
	if err := protocol.CheckText("host", r.Host, protocol.MaxHostBytes); err != nil {
		return err
	}
	if err := protocol.CheckText("batch", r.Batch, protocol.MaxHostBytes); err != nil {
		return err // kept in the site manager's memory and logged
	}
	for what, c := range map[string]*protocol.Capacity{"capacity": r.Capacity, "asked": r.Asked} {
		if c != nil {
			if err := protocol.CheckCapacity(what, *c); err != nil {
				return protocol.Errorf(protocol.CodeBadRequest, "%v", err) // not internal: the agent would retry it for ever
			}
		}
	}
	if err := protocol.CheckText("capacity_note", r.CapacityNote, protocol.MaxReasonBytes); err != nil {
		return err // kept in the site manager's memory and shown by cls site list
	}
	return protocol.CheckText("out_dir", r.OutDir, protocol.MaxPathBytes)
}
