//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Helpers for the SSH suites: a CLS with an SSH endpoint on a free
// loopback port, keys made with `cls key new`, the system OpenSSH client,
// remote placeholder agents (`cls agent --cls`) and a TCP proxy that can cut
// their connections.

// requireSSH skips a test that needs the OpenSSH client when it is absent.
func requireSSH(t *testing.T) {
	t.Helper()
	for _, p := range []string{"ssh", "ssh-keygen"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s (Debian package openssh-client) is not installed; scripts/setup.sh installs it when run as root", p)
		}
	}
}

// freePort returns a loopback TCP port that was free a moment ago. Tests
// that restart the CLS need the port before the first start, so that the
// restart can take the same one.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// sshCLS is the SSH side of the harness's CLS.
type sshCLS struct {
	h          *harness
	addr       string // 127.0.0.1:PORT
	port       string
	hostFP     string // SHA256:... as `cls key host` prints it
	knownHosts string // known_hosts file for the OpenSSH client
	args       []string
}

// startSSHCLS runs `cls serve --ssh 127.0.0.1:PORT ARGS...` on a free port.
// The host key is made first with `cls key host`, as an administrator
// would, so the test knows what to pin.
func (h *harness) startSSHCLS(args ...string) *sshCLS {
	h.t.Helper()
	addr := "127.0.0.1:" + freePort(h.t)
	hk := strings.Split(strings.TrimSpace(h.ok("cls", "key", "host")), "\n")
	if len(hk) != 2 || !strings.HasPrefix(hk[0], "SHA256:") || !strings.HasPrefix(hk[1], "ssh-ed25519 ") {
		h.t.Fatalf("cls key host printed %q; want a SHA256 fingerprint line and an ssh-ed25519 key line", hk)
	}
	kh := filepath.Join(h.home, "known_hosts")
	line := h.ok("cls", "key", "host", "--known-hosts", addr)
	if err := os.WriteFile(kh, []byte(line), 0o600); err != nil {
		h.t.Fatal(err)
	}
	s := &sshCLS{h: h, addr: addr, hostFP: hk[0], knownHosts: kh, args: append([]string{"--ssh", addr}, args...)}
	_, s.port, _ = net.SplitHostPort(addr)
	s.start()
	return s
}

// start (re)starts the CLS with the same arguments and waits until its SSH
// port accepts connections.
func (s *sshCLS) start() {
	h := s.h
	h.t.Helper()
	c := h.startCLS(s.args...)
	waitFor(h.t, time.Minute, func() error {
		if c.exited() {
			h.t.Fatalf("cls exited: %s", c.stderr.String())
		}
		if want := "cls: SSH on " + s.addr + ", host key " + s.hostFP; !strings.Contains(c.stderr.String(), want) {
			return fmt.Errorf("cls serve has not announced %q; stderr: %s", want, c.stderr.String())
		}
		conn, err := net.DialTimeout("tcp", s.addr, time.Second)
		if err != nil {
			return fmt.Errorf("SSH port not ready: %v", err)
		}
		conn.Close()
		return nil
	})
}

// newKey runs `cls key new --role ROLE --name NAME` and returns the private
// key's path.
func (h *harness) newKey(role, name string) string {
	h.t.Helper()
	dir := filepath.Join(h.home, "keys")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		h.t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	out := h.ok("cls", "key", "new", "--role", role, "--name", name, path)
	if !strings.Contains(out, "added "+role+" key SHA256:") {
		h.t.Fatalf("cls key new printed %q", out)
	}
	return path
}

// exec runs any program (ssh, ssh-keygen, runuser...) with the harness's
// environment and job directory, and stdin.
func (h *harness) exec(timeout time.Duration, stdin io.Reader, prog string, args ...string) result {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Env = h.env()
	cmd.Dir = h.dir
	cmd.Stdin = stdin
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
		if ctx.Err() != nil {
			h.t.Fatalf("%s %s: timed out after %v: %s", prog, shortArgs(args), timeout, r)
		}
	default:
		h.t.Fatalf("%s: %v", prog, err)
	}
	return r
}

// sshArgs are the OpenSSH options of every test connection: this key only,
// no prompts, the CLS's host key pinned in our own known_hosts, and no
// user or system configuration.
func (s *sshCLS) sshArgs(key string, opts ...string) []string {
	args := []string{"-F", "/dev/null", "-p", s.port, "-i", key,
		"-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
		"-o", "UserKnownHostsFile=" + s.knownHosts, "-o", "GlobalKnownHostsFile=/dev/null",
		"-o", "ConnectTimeout=60"}
	return append(args, opts...)
}

// ssh runs `ssh ... 127.0.0.1 REMOTE...` with a key, as a user would: the
// remote words are joined with spaces by ssh itself, so quoting inside them
// is the user's.
func (s *sshCLS) ssh(key string, remote ...string) result {
	s.h.t.Helper()
	return s.sshIn(key, nil, nil, remote...)
}

// sshIn is ssh with extra options and stdin.
func (s *sshCLS) sshIn(key string, opts []string, stdin io.Reader, remote ...string) result {
	s.h.t.Helper()
	args := append(s.sshArgs(key, opts...), "127.0.0.1")
	return s.h.exec(60*time.Second, stdin, "ssh", append(args, remote...)...)
}

// subsystem sends JSON-line requests over `ssh -s 127.0.0.1 mq` and returns
// the replies by request id.
func (s *sshCLS) subsystem(key string, reqs ...string) (map[uint64]json.RawMessage, result) {
	s.h.t.Helper()
	r := s.sshIn(key, []string{"-s"}, strings.NewReader(strings.Join(reqs, "\n")+"\n"), "mq")
	replies := map[uint64]json.RawMessage{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if line == "" {
			continue
		}
		var resp struct {
			ID uint64 `json:"id"`
		}
		if err := json.Unmarshal([]byte(line), &resp); err != nil {
			s.h.t.Fatalf("ssh -s mq: reply %q is not JSON: %v", clip(line), err)
		}
		replies[resp.ID] = json.RawMessage(line)
	}
	return replies, r
}

// agentProc is a running `cls agent --cls ...`.
type agentProc struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{}
	out    string // --out
	site   string
}

func (a *agentProc) exited() bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

// wait waits up to timeout for the agent to exit and returns its status.
func (a *agentProc) wait(t *testing.T, timeout time.Duration) *os.ProcessState {
	t.Helper()
	select {
	case <-a.done:
		return a.cmd.ProcessState
	case <-time.After(timeout):
		t.Fatalf("agent (pid %d) still running after %v; stderr: %s", a.cmd.Process.Pid, timeout, a.stderr.String())
		return nil
	}
}

// kill9 SIGKILLs the agent (its jobs, in their own process groups, live on).
func (a *agentProc) kill9(t *testing.T) {
	t.Helper()
	a.cmd.Process.Kill()
	a.wait(t, time.Minute)
}

// agentOpts says how to start an agent; zero fields get defaults.
type agentOpts struct {
	key     string // placeholder key (required)
	site    string // default "remote"
	out     string // default $MQ_HOME/agent-<site>-<n>
	addr    string // default the CLS's SSH address
	hostKey string // default the CLS's fingerprint
	args    []string
	dir     string // working directory; default the harness's job directory
	// prefix runs the agent through another program (runuser -u USER --);
	// bin is then the cls binary to run (one that user can execute).
	prefix []string
	bin    string
}

var agentSeq atomic.Int32

// startAgent starts a remote placeholder agent against the CLS. It runs
// with the harness's MQ_HOME in its environment, so the harness's cleanup
// also kills it and its jobs; on failure its stderr goes to the test log.
func (s *sshCLS) startAgent(o agentOpts) *agentProc {
	h := s.h
	h.t.Helper()
	if o.site == "" {
		o.site = "remote"
	}
	if o.out == "" {
		o.out = filepath.Join(h.home, fmt.Sprintf("agent-%s-%d", o.site, agentSeq.Add(1)))
	}
	if o.addr == "" {
		o.addr = s.addr
	}
	if o.hostKey == "" {
		o.hostKey = s.hostFP
	}
	if o.bin == "" {
		o.bin = filepath.Join(binDir, "cls")
	}
	args := append([]string{o.bin, "agent", "--cls", o.addr, "--host-key", o.hostKey, "--key", o.key,
		"--site", o.site, "--out", o.out, "--log-level", "info"}, o.args...)
	args = append(o.prefix, args...)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = h.env()
	cmd.Dir = h.dir
	if o.dir != "" {
		cmd.Dir = o.dir
	}
	a := &agentProc{cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{}), out: o.out, site: o.site}
	cmd.Stdout, cmd.Stderr = a.stderr, a.stderr
	if err := cmd.Start(); err != nil {
		h.t.Fatalf("start agent: %v", err)
	}
	go func() {
		cmd.Wait()
		close(a.done)
	}()
	h.t.Cleanup(func() {
		if h.t.Failed() {
			h.t.Logf("agent %s (pid %d) stderr:\n%s", o.site, cmd.Process.Pid, clip(a.stderr.String()))
		}
		cmd.Process.Kill()
		select {
		case <-a.done:
		case <-time.After(5 * time.Second):
		}
	})
	return a
}

// connects counts the agent's "connected to the CLS" log lines (it logs
// at info level, which startAgent sets).
func (a *agentProc) connects() int { return strings.Count(a.stderr.String(), "connected to the CLS") }

// waitConnected waits until the agent has connected and registered n times.
func (a *agentProc) waitConnected(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, func() error {
		if a.exited() {
			t.Fatalf("agent %s exited (%v): %s", a.site, a.cmd.ProcessState, a.stderr.String())
		}
		if got := a.connects(); got < n {
			return fmt.Errorf("agent %s connected %d times, want %d", a.site, got, n)
		}
		return nil
	})
}

// sshJob is `mqstat -j ID --json` with the fields of staged output.
type sshJob struct {
	jobDetail
	StdoutCopy string `json:"stdout_copy"`
	StderrCopy string `json:"stderr_copy"`
}

func (h *harness) sshJob(id int64) sshJob {
	h.t.Helper()
	out := h.ok("mqstat", "-j", strconv.FormatInt(id, 10), "--json")
	var d sshJob
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		h.t.Fatalf("mqstat -j %d --json: %v in %q", id, err, clip(out))
	}
	return d
}

// runCount reads a job's run log: every attempt of the jobs that use it
// appends "$MQ_ATTEMPT" to runs/<id>.
func runLog(t *testing.T, dir string, id int64) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "runs", strconv.FormatInt(id, 10)))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// tcpProxy forwards loopback connections to the CLS's SSH port, and can cut
// every connection it carries (both sides) while still accepting new ones.
type tcpProxy struct {
	ln       net.Listener
	target   string
	accepted atomic.Int32
	down     atomic.Bool // refuse (close at once) new connections

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func startProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() {
		ln.Close()
		p.cut()
	})
	go p.serve()
	return p
}

func (p *tcpProxy) addr() string { return p.ln.Addr().String() }

func (p *tcpProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.down.Load() {
			c.Close()
			continue
		}
		p.accepted.Add(1)
		go p.pipe(c)
	}
}

func (p *tcpProxy) pipe(c net.Conn) {
	u, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[u] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { io.Copy(u, c); done <- struct{}{} }()
	go func() { io.Copy(c, u); done <- struct{}{} }()
	<-done
	c.Close()
	u.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, u)
	p.mu.Unlock()
}

// cut closes every connection the proxy carries and returns how many
// (client-side) connections it cut.
func (p *tcpProxy) cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		// RST rather than FIN: the peers see the connection die, as when a
		// router or a server host goes away.
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		c.Close()
	}
	n := len(p.conns) / 2
	clear(p.conns)
	return n
}

// signalGroup is kill(-pgid, sig) for a process group we recorded.
func signalGroup(pgid int, sig syscall.Signal) error { return syscall.Kill(-pgid, sig) }
