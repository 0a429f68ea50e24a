package site

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pkg/sftp"

	"github.com/mq-hpc/mq/internal/placeholder/spool"
	"github.com/mq-hpc/mq/internal/site/batch"
	"github.com/mq-hpc/mq/internal/site/login"
	"github.com/mq-hpc/mq/internal/wire"
	"github.com/mq-hpc/mq/protocol"
)

// Remote is a site whose placeholders are batch jobs on a cluster reached
// over SSH. The first call connects and prepares the login host: it finds
// the platform (uname -sm), uploads the agent for it, the placeholder's key
// and the batch script (each only if changed), and in tunnel mode opens
// the reverse forward. A lost connection is re-made, and the preparation
// redone (cheaply: unchanged files are not sent), at the next call.
type Remote struct {
	Spec  protocol.SiteSpec
	Batch batch.System
	// Dial connects to the login host (login.DialSSH, or login.DialOpenSSH
	// for a site added with --openssh).
	Dial func(ctx context.Context) (login.Runner, error)
	// Agent returns the path of an agent binary for a platform.
	Agent func(goos, goarch string) (string, error)
	// Key is the placeholders' private key (OpenSSH PEM).
	Key []byte
	// HostKey is the CLS's host key fingerprint, pinned by placeholders.
	HostKey string
	// CLSAddr is where placeholders reach the CLS in direct mode, unless
	// the site's spec says otherwise (Spec.CLSAddr, CLSAddrFor).
	CLSAddr string
	// DialCLS connects to the CLS's SSH endpoint (the far end of a tunnel).
	DialCLS func() (net.Conn, error)
	// Dir is this CLS's directory on the login host, relative to the
	// home directory ("" = .mq-sites/ID); JobName the placeholders' name.
	Dir, JobName string
	Log          *slog.Logger
	// Reports applies the reports the site's placeholders spooled when
	// they lost the CLS (package spool), as each one's own report: they
	// are read from the login host each time a connection to it is made
	// (deliverSpool). Nil: none are read.
	Reports func(ctx context.Context, f spool.File) error

	// platform is "linux/amd64" and so on once connected. Not under mu,
	// which a dial and the login host's preparation hold (an agent upload
	// over a slow link: minutes): cls site list reads it under the
	// Manager's lock, which every placeholder's registration takes too.
	platform atomic.Value // string

	// files is the connection whose SFTP client Files gave last, for
	// CutFiles: not under mu, which a dial holds.
	files atomic.Pointer[filesConn]
	// spooling: a delivery of the spool runs (deliverSpool); spooled:
	// when the last began (under mu); spoolEvery: how often to look
	// again on a connection kept (0: SpoolEvery).
	spooling   atomic.Bool
	spooled    time.Time
	spoolEvery time.Duration

	mu       sync.Mutex
	r        login.Runner
	base     string // absolute: the site's directory on the login host
	script   string
	dataRoot string // absolute: where staged files live on the login host; "" with SharedFS
	tunnel   int    // port of the reverse forward on the login host
	addr     string // where placeholders dial the CLS (through the login host in tunnel mode)
	// agentBin and via are the agent's path on the login host and its
	// tunnel arguments, for the batch script; rescript asks for the
	// script anew on the open connection (Retarget).
	agentBin string
	via      []string
	rescript bool
}

var _ Site = (*Remote)(nil)

// log is s.Log, or a logger that drops what it is told.
func (s *Remote) log() *slog.Logger {
	if s.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Log
}

// Platform is "linux/amd64" and so on once connected.
func (s *Remote) Platform() string {
	p, _ := s.platform.Load().(string)
	return p
}

// runner returns a prepared connection, making one if needed.
func (s *Remote) runner(ctx context.Context) (login.Runner, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.r != nil {
		if d, ok := s.r.(interface{ Done() <-chan struct{} }); ok {
			select {
			case <-d.Done():
				s.r.Close()
				s.r = nil
			default:
			}
		}
	}
	if s.r != nil && s.rescript {
		if err := s.writeScript(ctx, s.r); err != nil {
			return nil, err
		}
		s.rescript = false
	}
	if s.r != nil {
		s.spoolLocked(s.r, false)
		return s.r, nil
	}
	r, err := s.Dial(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.prepare(ctx, r); err != nil {
		r.Close()
		return nil, err
	}
	s.r, s.rescript = r, false
	s.spoolLocked(r, true)
	return r, nil
}

// Retarget makes the placeholders submitted from now on run as next's
// would (cls site set changed their slots, walltime, resources...): its
// spec and batch system are taken and the batch script is written anew
// at the next call, on the open connection to the login host, so a
// tunnel's forward stays where the running placeholders reach the CLS.
// It reports whether next is a cluster site too.
func (s *Remote) Retarget(next Site) bool {
	n, ok := next.(*Remote)
	if !ok {
		return false
	}
	s.mu.Lock()
	s.Spec, s.Batch, s.rescript = n.Spec, n.Batch, true
	s.mu.Unlock()
	return true
}

// drop forgets a connection that failed, so the next call reconnects.
func (s *Remote) drop(r login.Runner, err error) {
	var ce *login.ConnError
	if !errors.As(err, &ce) {
		return
	}
	s.mu.Lock()
	if s.r == r {
		s.r = nil
	}
	s.mu.Unlock()
	r.Close()
}

// Platforms maps `uname -sm` to Go's names.
func Platforms(uname string) (goos, goarch string, err error) {
	f := strings.Fields(uname)
	if len(f) != 2 {
		return "", "", fmt.Errorf("uname -sm printed %q", protocol.ClipText(uname, 100))
	}
	switch strings.ToLower(f[0]) {
	case "linux":
		goos = "linux"
	case "darwin":
		goos = "darwin"
	case "freebsd":
		goos = "freebsd"
	default:
		return "", "", fmt.Errorf("unsupported system %q (uname -s)", f[0])
	}
	switch f[1] {
	case "x86_64", "amd64":
		goarch = "amd64"
	case "aarch64", "arm64":
		goarch = "arm64"
	case "ppc64le":
		goarch = "ppc64le"
	case "s390x":
		goarch = "s390x"
	case "riscv64":
		goarch = "riscv64"
	default:
		return "", "", fmt.Errorf("unsupported machine %q (uname -m)", f[1])
	}
	return goos, goarch, nil
}

func (s *Remote) prepare(ctx context.Context, r login.Runner) error {
	out, err := r.Run(ctx, `uname -sm; printf '%s\n' "$HOME"`)
	if err != nil {
		return fmt.Errorf("platform: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[1], "/") {
		return fmt.Errorf("platform: uname -sm and $HOME printed %q", protocol.ClipText(string(out), 200))
	}
	goos, goarch, err := Platforms(lines[0])
	if err != nil {
		return err
	}
	s.platform.Store(goos + "/" + goarch)
	dir := s.Dir
	if dir == "" {
		dir = ".mq-sites"
	}
	root := path.Join(lines[1], dir)
	s.base = path.Join(root, s.Spec.Name)
	s.dataRoot = DataRoot(s.Spec, lines[1])
	// umask 077: the parents mkdir -p makes (the data root's .mq-data)
	// are private too; the agent refuses a data root or --out that others
	// could write or rename away.
	mkdir := "umask 077 && mkdir -p -m 700 " + Quote(root) + " " + Quote(s.base+"/log") + " " + Quote(s.base+"/out")
	if s.dataRoot != "" {
		mkdir += " " + Quote(s.dataRoot)
	}
	if _, err := r.Run(ctx, mkdir); err != nil {
		return err
	}
	agentPath, err := s.Agent(goos, goarch)
	if err != nil {
		return err
	}
	bin, err := os.ReadFile(agentPath)
	if err != nil {
		return fmt.Errorf("agent for %s: %w", goos+"/"+goarch, err)
	}
	remoteBin := path.Join(root, "bin", "mqagent-"+goos+"-"+goarch)
	if _, err := r.Put(ctx, remoteBin, bin, 0o755); err != nil {
		return err
	}
	if _, err := r.Put(ctx, path.Join(s.base, "key"), s.Key, 0o600); err != nil {
		return err
	}
	addr := CLSAddrFor(s.Spec, s.CLSAddr)
	s.agentBin, s.via = remoteBin, nil
	if s.Spec.Connect == Tunnel {
		if s.via, err = s.openTunnel(ctx, r); err != nil {
			return err
		}
		addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.tunnel))
	}
	if addr == "" {
		return ErrNoEndpoint
	}
	s.addr = addr
	return s.writeScript(ctx, r)
}

// writeScript writes the placeholders' batch script for the site's spec
// on the login host prepared.
func (s *Remote) writeScript(ctx context.Context, r login.Runner) error {
	if s.Spec.Connect != Tunnel && s.addr != "" {
		s.addr = CLSAddrFor(s.Spec, s.CLSAddr) // cls site set --cls-addr
	}
	wall := protocol.Duration(s.Spec.Walltime)
	args := []string{
		"--cls", s.addr, "--host-key", s.HostKey, "--key", path.Join(s.base, "key"),
		"--site", s.Spec.Name,
	}
	args = append(args, AgentArgs(s.Spec, s.Spec.Mem)...)
	args = append(args,
		"--walltime", wire.AgentWalltime(wall).String(),
		"--idle", protocol.Duration(s.Spec.Idle).String(),
		"--out", path.Join(s.base, "out"),
	)
	if s.dataRoot != "" {
		args = append(args, "--data-root", s.dataRoot)
	}
	args = append(args, s.via...)
	req := batch.Request{Name: s.JobName, Queue: s.Spec.Queue, Walltime: wall, Slots: s.Spec.Slots, Mem: s.Spec.Mem, GPUs: s.Spec.GPUs, PE: s.Spec.PE, LogDir: path.Join(s.base, "log")}
	s.script = path.Join(s.base, "placeholder.sh")
	if _, err := r.Put(ctx, s.script, []byte(batch.Script(s.Batch, req, s.agentBin, args)), 0o700); err != nil {
		return err
	}
	return nil
}

// DefaultDataRoot is the data root of a site without --data-root or
// --shared-fs, relative to the login home; the CLS adds its id
// (.mq-data/CLSID) so that two CLSs never share one.
const DefaultDataRoot = ".mq-data"

// DataRoot is the absolute data root of a site on its login host whose
// home is home: spec.DataRoot, relative to home unless absolute
// (DefaultDataRoot when empty); "" for a site that shares the CLS host's
// filesystem.
func DataRoot(spec protocol.SiteSpec, home string) string {
	if spec.SharedFS || spec.Type == Local {
		return ""
	}
	root := spec.DataRoot
	if root == "" {
		root = DefaultDataRoot
	}
	if !path.IsAbs(root) {
		root = path.Join(home, root)
	}
	return path.Clean(root)
}

// Files returns the SFTP session of the connection to the login host and
// the site's data root there (absolute; "" when the site shares the CLS
// host's filesystem), connecting and preparing the login host first if
// needed: data staging moves files through it (package stage).
func (s *Remote) Files(ctx context.Context) (*sftp.Client, string, error) {
	for try := 0; ; try++ {
		r, err := s.runner(ctx)
		if err != nil {
			return nil, "", err
		}
		f, ok := r.(interface{ SFTP() (*sftp.Client, error) })
		if !ok {
			return nil, "", fmt.Errorf("site %s: the connection to the login host has no SFTP", s.Spec.Name)
		}
		c, err := f.SFTP()
		if err != nil {
			s.drop(r, err)
			var ce *login.ConnError
			if errors.As(err, &ce) && try == 0 {
				// A connection cut a moment ago, before the SSH
				// client noticed: one new connection is tried.
				continue
			}
			return nil, "", err
		}
		if f := s.files.Load(); f == nil || f.c != c {
			s.files.Store(&filesConn{c: c, r: r})
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		return c, s.dataRoot, nil
	}
}

type filesConn struct {
	c *sftp.Client
	r login.Runner
	// once ends c, the first transfer stalled on it waiting for its
	// probe (EndSFTP) and the others for its outcome: conn.
	once sync.Once
	conn bool
}

// CutFiles ends at once the SFTP session c (Files gave it), if it is the
// one Files gives now, once: a transfer or a call through it stalled
// (stage.Cutter; the stage workers share the session, and stall
// together). The connection under it is kept where it still answers
// (SSH.EndSFTP), for the tunnel and the site's commands; else it is
// cut, and the site dials anew at its next use. It reports whether the
// connection was cut.
func (s *Remote) CutFiles(c *sftp.Client) (conn bool) {
	f := s.files.Load()
	if f == nil || f.c != c {
		return false
	}
	f.once.Do(func() {
		switch x := f.r.(type) {
		case interface{ EndSFTP(*sftp.Client) bool }:
			f.conn = x.EndSFTP(c)
		case interface{ Cut() }:
			x.Cut()
			f.conn = true
		default:
			go f.r.Close()
			f.conn = true
		}
	})
	return f.conn
}

// ErrNoEndpoint: a remote site's placeholders reach the CLS over SSH, in
// either connect mode, and the CLS was started without an SSH endpoint.
var ErrNoEndpoint = errors.New("the CLS has no SSH endpoint for placeholders to reach (direct or through a tunnel): restart it with cls serve --ssh ADDR (e.g. --ssh 127.0.0.1:0 for --connect tunnel)")

// Retire undoes what the site set up on the login host that would outlive
// it: a tunnel site's authorized_keys line. Called when the site is removed.
func (s *Remote) Retire(ctx context.Context) error {
	if s.Spec.Connect != Tunnel {
		return nil
	}
	r, err := s.runner(ctx)
	if err != nil {
		return err
	}
	_, err = r.Run(ctx, unauthorizeCommand(s.JobName))
	s.drop(r, err)
	return err
}

// Diagnose says why a placeholder that runs may not have connected: the
// end of its log on the login host (where the batch system writes the
// agent's warnings, e.g. "cannot reach the CLS ...: connection refused")
// and what its way to the CLS depends on.
func (s *Remote) Diagnose(ctx context.Context, id string) string {
	r, rerr := s.runner(ctx) // prepared: base and addr are known
	s.mu.Lock()
	logDir, spec, addr := path.Join(s.base, "log"), s.Spec, s.addr
	s.mu.Unlock()
	var hint string
	if spec.Connect == Tunnel {
		_, at := loginOf(r, spec)
		hint = fmt.Sprintf("placeholders reach the CLS through the login host's sshd at %s (a forward to %s there): check that compute nodes can reach %s and that its sshd allows TCP forwarding (AllowTcpForwarding)", at, addr, at)
	} else {
		from := "cls serve --ssh"
		if spec.CLSAddr != "" {
			from = "the site's --cls-addr"
		}
		hint = fmt.Sprintf("placeholders dial the CLS at %s (%s): check that compute nodes can reach it; if they reach it by another name or port, cls site set %s --cls-addr HOST[:PORT]; or use --connect tunnel", addr, from, spec.Name)
	}
	if rerr != nil {
		return hint
	}
	out, err := r.Run(ctx, logTailCommand(logDir, id))
	if err != nil {
		s.drop(r, err)
		return hint
	}
	file, last := parseLogTail(out)
	if file == "" {
		return fmt.Sprintf("no log of placeholder %s in %s; %s", id, logDir, hint)
	}
	if last == "" {
		return fmt.Sprintf("its log %s is empty; %s", file, hint)
	}
	return fmt.Sprintf("its log %s ends: %s; %s", file, protocol.ClipText(last, 300), hint)
}

// loginOf is whom r logged in as, and where (host:port): as ssh resolved
// the destination for a site reached with --openssh, else as --ssh says.
func loginOf(r login.Runner, spec protocol.SiteSpec) (user, addr string) {
	if l, ok := r.(login.Resolved); ok {
		return l.Login()
	}
	user, addr, err := ParseSSH(spec.SSH)
	if err != nil {
		return "", spec.SSH
	}
	return user, addr
}

// logTailCommand prints the path of a placeholder's batch log in dir
// (whatever the batch system named it: SGE NAME.oID, Slurm NAME-ID.out,
// PBS ID.OU...) and its last lines.
func logTailCommand(dir, id string) string {
	q := Quote(id)
	// The last 8 KiB at most: the log is the batch job's, and a line of it
	// could be as long as the job liked.
	show := `) printf '%s\n' "$PWD/$f"; tail -c 8192 "$f" | tail -n 5; exit 0;; esac; done; `
	// The names we know first: a loose match could hit a job name's digits.
	return `cd ` + Quote(dir) + ` 2>/dev/null || exit 0; ` +
		`for f in *; do case "$f" in *.o` + q + `|*-` + q + `.out|` + q + `.*` + show +
		`for f in *; do case "$f" in *[!0-9]` + q + `|*[!0-9]` + q + `[!0-9]*|` + q + `[!0-9]*` + show
}

// parseLogTail reads logTailCommand's output: the file, and its last line
// that says something (a warning, preferably).
func parseLogTail(out []byte) (file, last string) {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) == 0 || lines[0] == "" {
		return "", ""
	}
	file = lines[0]
	for i := len(lines) - 1; i >= 1; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			if last == "" {
				last = l
			}
			if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") || strings.Contains(l, "mqagent:") {
				return file, l
			}
		}
	}
	return file, last
}

// Submit submits n placeholders in one round trip.
func (s *Remote) Submit(ctx context.Context, n int) ([]string, error) {
	if n <= 0 {
		return nil, nil
	}
	r, err := s.runner(ctx)
	if err != nil {
		return nil, err
	}
	words, err := SplitArgs(s.Spec.SubmitArgs)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	cmd := s.Batch.SubmitCommand(s.script, words)
	s.mu.Unlock()
	out, err := r.Run(ctx, submitLoop(cmd, n))
	var ids []string
	for _, chunk := range strings.Split(string(out), "\n\n") {
		if strings.TrimSpace(chunk) == "" {
			continue
		}
		id, perr := s.Batch.ParseSubmit([]byte(chunk))
		if perr != nil {
			return ids, perr
		}
		ids = append(ids, id)
	}
	if err != nil {
		s.drop(r, err)
		return ids, err
	}
	if len(ids) != n {
		return ids, fmt.Errorf("submitted %d placeholders, the batch system printed %d ids", n, len(ids))
	}
	return ids, nil
}

// submitLoop runs cmd n times, each submission's output followed by an
// empty line, stopping at the first failure. It starts with cmd itself: a
// failure is named by the command that failed (a Runner's errors name the
// command's first word; "i=0;" said nothing of sbatch refusing a partition).
func submitLoop(cmd string, n int) string {
	return cmd + " || exit $?; echo; i=1; while [ $i -lt " + strconv.Itoa(n) + " ]; do " + cmd + " || exit $?; echo; i=$((i+1)); done"
}

// List lists this site's placeholders that have not ended. Its error is
// an answered one when the login host ran the listing and it failed, or
// printed what cannot be read: the site was reached all the same.
func (s *Remote) List(ctx context.Context) ([]batch.Placeholder, error) {
	r, err := s.runner(ctx)
	if err != nil {
		return nil, err
	}
	out, err := r.Run(ctx, s.Batch.ListCommand(s.JobName))
	if err != nil {
		s.drop(r, err)
		if errors.As(err, new(*login.ConnError)) || ctx.Err() != nil {
			return nil, err
		}
		return nil, answered{err}
	}
	ps, err := s.Batch.ParseList(out, s.JobName)
	if err != nil {
		return nil, answered{err}
	}
	return ps, nil
}

// answered is the error of a listing the login host gave: the batch
// command failed, or printed what cannot be read. Unlike a connection's
// error it says the site is reached (Manager.step, Store.SiteReached): a
// user of the cluster who makes our listing fail must not hold the leases
// of our placeholders that died.
type answered struct{ error }

func (e answered) Unwrap() error { return e.error }

// Cancel cancels placeholders.
func (s *Remote) Cancel(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	r, err := s.runner(ctx)
	if err != nil {
		return err
	}
	_, err = r.Run(ctx, s.Batch.CancelCommand(ids))
	s.drop(r, err)
	return err
}

// maxExplain bounds what a site's batch system says of a placeholder in
// its error state, as the site's error carries it.
const maxExplain = 300

// Explain says why the batch system put placeholder id in its error
// state, bounded and printable; "" when it does not say, or has no
// command to ask (batch.Explainer).
func (s *Remote) Explain(ctx context.Context, id string) string {
	ex, ok := s.Batch.(batch.Explainer)
	if !ok {
		return ""
	}
	r, err := s.runner(ctx)
	if err != nil {
		return ""
	}
	out, err := r.Run(ctx, ex.ExplainCommand(id))
	if err != nil {
		s.drop(r, err)
		return ""
	}
	return protocol.ClipText(ex.ParseExplain(out), maxExplain)
}

// Close closes the connection; placeholders keep running.
func (s *Remote) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.r != nil {
		s.r.Close()
		s.r = nil
	}
	return nil
}
