package sshserver

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/internal/metaqueue"
	"github.com/mq-hpc/mq/internal/placeholder"
	"github.com/mq-hpc/mq/internal/server"
	"github.com/mq-hpc/mq/internal/sshkey"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// cls is an in-process CLS with its SSH endpoint on loopback.
type cls struct {
	t       testing.TB
	store   *metaqueue.Store
	addr    string
	hostKey ssh.PublicKey
	keys    *KeyFile
	outDir  string
	proto   *server.Server
	ssh     *Server
	ctx     context.Context

	mu    sync.Mutex
	execs [][]string // commands user keys ran
}

// newCLS starts a CLS; opts adjust its SSH server before it serves.
func newCLS(t testing.TB, opts ...func(*Server)) *cls {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := metaqueue.Open(ctx, metaqueue.Options{Path: filepath.Join(dir, "mq.db"), Sync: metaqueue.SyncNormal,
		Lease: 5 * time.Second, OutputDir: filepath.Join(dir, "output")})
	if err != nil {
		t.Fatal(err)
	}
	hk, err := LoadOrCreateHostKey(filepath.Join(dir, HostKeyFileName))
	if err != nil {
		t.Fatal(err)
	}
	c := &cls{t: t, store: st, hostKey: hk.PublicKey(), keys: NewKeyFile(filepath.Join(dir, KeyFileName)), outDir: filepath.Join(dir, "output")}
	proto := &server.Server{Store: st, OutputDir: c.outDir}
	c.proto, c.ctx = proto, ctx
	ss := &Server{HostKey: hk, Keys: c.keys, Proto: proto,
		Exec: func(ctx context.Context, _ server.Peer, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
			c.mu.Lock()
			c.execs = append(c.execs, args)
			c.mu.Unlock()
			io.WriteString(stdout, "ran "+strings.Join(args, "|")+"\n")
			if args[0] == "fail" {
				return 3
			}
			return 0
		}}
	for _, o := range opts {
		o(ss)
	}
	c.ssh = ss
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.addr = ln.Addr().String()
	done := make(chan struct{})
	go func() {
		defer close(done)
		ss.Serve(ctx, ln)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		ss.Wait()
		proto.Wait()
		st.Close()
	})
	return c
}

// pipe connects to the CLS as the Unix socket's owner would.
func (c *cls) pipe() io.ReadWriteCloser {
	a, b := net.Pipe()
	go c.proto.ServeConn(c.ctx, b, protocol.RoleUser)
	return a
}

// key makes a key pair accepted with role; role "" makes an unknown key.
func (c *cls) key(role string) (ssh.Signer, string) {
	c.t.Helper()
	path := filepath.Join(c.t.TempDir(), "key")
	pk, err := sshkey.NewKeyPair(path, "test-"+role)
	if err != nil {
		c.t.Fatal(err)
	}
	if role != "" {
		if _, err := c.keys.Add(role, pk, "test-"+role); err != nil {
			c.t.Fatal(err)
		}
	}
	signer, err := sshkey.LoadSigner(path)
	if err != nil {
		c.t.Fatal(err)
	}
	return signer, path
}

func (c *cls) sshConfig(signer ssh.Signer) client.SSH {
	pin, err := sshkey.Pin(ssh.FingerprintSHA256(c.hostKey))
	if err != nil {
		c.t.Fatal(err)
	}
	return client.SSH{Addr: c.addr, Signer: signer, HostKey: pin}
}

// connect opens the request protocol over SSH with signer's key.
func (c *cls) connect(signer ssh.Signer, role string) (*client.Client, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rwc, err := client.DialSSH(ctx, c.sshConfig(signer))
	if err != nil {
		return nil, err
	}
	cl, err := client.New(ctx, rwc, role, "test")
	if err != nil {
		rwc.Close()
		return nil, err
	}
	c.t.Cleanup(func() { cl.Close() })
	return cl, nil
}

func code(err error) string {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func TestAgentOverSSHRunsJobsAndStagesOutput(t *testing.T) {
	c := newCLS(t)
	signer, _ := c.key("placeholder")
	cfg := c.sshConfig(signer)
	out := t.TempDir()
	a := placeholder.New(placeholder.Config{
		Dial: func(ctx context.Context) (io.ReadWriteCloser, error) { return client.DialSSH(ctx, cfg) },
		Site: "remote", Host: "node1", Slots: 2, OutDir: out, StageOutput: true,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	}()
	dir := t.TempDir()
	ids, err := c.store.Submit(context.Background(), []protocol.JobSpec{
		{Target: "t", Command: "echo out-$MQ_JOB_ID; echo err >&2", Cwd: dir},
		{Target: "t", Command: "head -c 2500000 /dev/zero | tr '\\0' x", Cwd: dir}, // > 2 chunks
		{Target: "t", Command: "exit 4", Cwd: dir},
	})
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	w, err := c.store.Wait(wctx, ids, 0)
	if err != nil {
		t.Fatal(err)
	}
	exits := map[int64]int{}
	for _, e := range w.Jobs {
		exits[e.ID] = *e.Exit
	}
	if exits[ids[0]] != 0 || exits[ids[1]] != 0 || exits[ids[2]] != 4 {
		t.Fatalf("exits = %v", exits)
	}
	read := func(id int64, stderr bool) string {
		o, e := job.OutputPaths(c.outDir, id, 1)
		p := o
		if stderr {
			p = e
		}
		b, err := os.ReadFile(p)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := read(ids[0], false); got != "out-1\n" {
		t.Errorf("staged stdout = %q", got)
	}
	if got := read(ids[0], true); got != "err\n" {
		t.Errorf("staged stderr = %q", got)
	}
	if got := read(ids[1], false); got != strings.Repeat("x", 2500000) {
		t.Errorf("staged big stdout: %d bytes, want 2500000 x", len(got))
	}
	if got := read(ids[2], false); got != "" {
		t.Errorf("empty output staged as %q", got)
	}
	d, err := c.store.Inspect().Job(context.Background(), ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(d.Stdout, out) || !strings.HasPrefix(d.StdoutCopy, c.outDir) {
		t.Errorf("job detail: stdout %q (want under %s), copy %q (want under %s)", d.Stdout, out, d.StdoutCopy, c.outDir)
	}
}

func TestUnknownKeyIsRefused(t *testing.T) {
	c := newCLS(t)
	stranger, _ := c.key("")
	_, err := c.connect(stranger, "")
	if !errors.Is(err, client.ErrAuthRefused) || !client.Permanent(err) {
		t.Fatalf("unknown key: %v, want ErrAuthRefused", err)
	}
	// A removed key is refused on the next connection.
	signer, _ := c.key("user")
	if _, err := c.connect(signer, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.keys.Remove("test-user"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.connect(signer, ""); !errors.Is(err, client.ErrAuthRefused) {
		t.Fatalf("removed key: %v, want ErrAuthRefused", err)
	}
}

func TestOnlyPublicKeyAuthIsOffered(t *testing.T) {
	c := newCLS(t)
	for name, auth := range map[string]ssh.AuthMethod{
		"password": ssh.Password("secret"),
		"keyboard-interactive": ssh.KeyboardInteractive(func(string, string, []string, []bool) ([]string, error) {
			return []string{"secret"}, nil
		}),
	} {
		_, err := ssh.Dial("tcp", c.addr, &ssh.ClientConfig{User: "u", Auth: []ssh.AuthMethod{auth},
			HostKeyCallback: ssh.FixedHostKey(c.hostKey), Timeout: 5 * time.Second})
		if err == nil || !strings.Contains(err.Error(), "unable to authenticate") {
			t.Errorf("%s auth: %v; want refused", name, err)
		}
	}
}

func TestAgentRefusesWrongHostKey(t *testing.T) {
	c := newCLS(t)
	signer, _ := c.key("placeholder")
	other, _ := newPub(t)
	pin, err := sshkey.Pin(ssh.FingerprintSHA256(other))
	if err != nil {
		t.Fatal(err)
	}
	cfg := client.SSH{Addr: c.addr, Signer: signer, HostKey: pin}
	a := placeholder.New(placeholder.Config{
		Dial: func(ctx context.Context) (io.ReadWriteCloser, error) { return client.DialSSH(ctx, cfg) },
		Site: "remote", Host: "node1", OutDir: t.TempDir(),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	err = a.Run(ctx)
	if !errors.Is(err, sshkey.ErrHostKeyMismatch) {
		t.Fatalf("agent against an impostor: %v; want ErrHostKeyMismatch", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("the agent retried an impostor for %v", time.Since(start))
	}
}

// A placeholder key's peer is a placeholder whatever its hello says: it
// cannot submit, list, delete or take the user role.
func TestPlaceholderKeyCannotActAsUser(t *testing.T) {
	c := newCLS(t)
	signer, _ := c.key("placeholder")
	if _, err := c.connect(signer, protocol.RoleUser); code(err) != protocol.CodeForbidden {
		t.Fatalf("hello as user with a placeholder key: %v; want forbidden", err)
	}
	cl, err := c.connect(signer, "")
	if err != nil {
		t.Fatal(err)
	}
	if cl.Role != protocol.RolePlaceholder {
		t.Fatalf("granted role %q", cl.Role)
	}
	ctx := context.Background()
	for _, op := range []struct {
		name string
		call func() error
	}{
		{protocol.OpSubmit.Name, func() error {
			_, err := client.Do(ctx, cl, protocol.OpSubmit, protocol.Submit{Jobs: []protocol.JobSpec{{Target: "t", Command: "id", Cwd: "/"}}})
			return err
		}},
		{protocol.OpDelete.Name, func() error {
			_, err := client.Do(ctx, cl, protocol.OpDelete, protocol.Select{IDs: []int64{1}})
			return err
		}},
		{protocol.OpJob.Name, func() error {
			_, err := client.Do(ctx, cl, protocol.OpJob, protocol.JobQuery{ID: 1})
			return err
		}},
		{protocol.OpQueueSet.Name, func() error {
			_, err := client.Do(ctx, cl, protocol.OpQueueSet, protocol.QueueSet{Name: "q"})
			return err
		}},
		{protocol.OpBulkAdd.Name, func() error {
			_, err := client.Do(ctx, cl, protocol.OpBulkAdd, protocol.BulkAdd{Line: 1, Jobs: []protocol.JobSpec{{Target: "t", Command: "id"}}})
			return err
		}},
	} {
		if err := op.call(); code(err) != protocol.CodeForbidden {
			t.Errorf("%s with a placeholder key: %v; want forbidden", op.name, err)
		}
	}
	if n, _ := c.store.Summary(ctx); len(n) != 0 {
		t.Errorf("something was submitted: %+v", n)
	}
}

// Output may be staged only for an attempt the placeholder holds.
func TestStagingOnlyForHeldAttempts(t *testing.T) {
	c := newCLS(t)
	signer, _ := c.key("placeholder")
	cl, err := c.connect(signer, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ids, err := c.store.Submit(ctx, []protocol.JobSpec{{Target: "t", Command: "true", Cwd: "/"}, {Target: "t", Command: "true", Cwd: "/"}})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := client.Do(ctx, cl, protocol.OpRegister, protocol.Register{Site: "s", Host: "h", Slots: 1, OutDir: "/x"})
	if err != nil {
		t.Fatal(err)
	}
	next, err := client.Do(ctx, cl, protocol.OpNext, protocol.Next{Placeholder: reg.ID, Free: 1})
	if err != nil || len(next.Jobs) != 1 {
		t.Fatalf("next: %+v %v", next, err)
	}
	held := next.Jobs[0]
	other := ids[0] + ids[1] - held.ID
	stage := func(id int64, attempt int, data string) error {
		_, err := client.Do(ctx, cl, protocol.OpOutput, protocol.OutputChunk{Placeholder: reg.ID, ID: id, Attempt: attempt, Stream: "stdout", Data: []byte(data)})
		return err
	}
	if err := stage(held.ID, held.Attempt, "mine"); err != nil {
		t.Fatalf("staging a held attempt: %v", err)
	}
	if err := stage(other, 1, "not mine"); code(err) != protocol.CodeForbidden {
		t.Errorf("staging a job not held: %v; want forbidden", err)
	}
	if err := stage(held.ID, held.Attempt+1, "wrong attempt"); code(err) != protocol.CodeForbidden {
		t.Errorf("staging another attempt: %v; want forbidden", err)
	}
	if _, err := client.Do(ctx, cl, protocol.OpOutput, protocol.OutputChunk{Placeholder: reg.ID, ID: held.ID, Attempt: held.Attempt, Stream: "../../etc/passwd"}); code(err) != protocol.CodeBadRequest {
		t.Errorf("a made-up stream: %v; want bad_request", err)
	}
	if _, err := client.Do(ctx, cl, protocol.OpOutput, protocol.OutputChunk{Placeholder: reg.ID, ID: held.ID, Attempt: held.Attempt, Stream: "stdout", Offset: protocol.MaxStaged + 1<<20}); code(err) != protocol.CodeBadRequest {
		t.Errorf("staging past the limit: %v; want bad_request", err)
	}
	o, _ := job.OutputPaths(c.outDir, held.ID, held.Attempt)
	if b, err := os.ReadFile(o); err != nil || string(b) != "mine" {
		t.Errorf("staged file = %q, %v", b, err)
	}
	if _, err := client.Do(ctx, cl, protocol.OpReport, protocol.ReportBatch{Placeholder: reg.ID, Reports: []protocol.Report{{ID: held.ID, Attempt: held.Attempt}}}); err != nil {
		t.Fatal(err)
	}
	if err := stage(held.ID, held.Attempt, "after the end"); code(err) != protocol.CodeForbidden {
		t.Errorf("staging after the report: %v; want forbidden", err)
	}
}

// A placeholder id is reclaimed after a reconnect only with the key that
// registered it: another placeholder key cannot take over its jobs.
func TestPlaceholderIDBoundToKey(t *testing.T) {
	c := newCLS(t)
	k1, _ := c.key("placeholder")
	k2, _ := c.key("placeholder")
	ctx := context.Background()
	reg := protocol.Register{Site: "s", Host: "h", Slots: 1, OutDir: "/x"}
	register := func(k ssh.Signer, id int64) int64 {
		t.Helper()
		cl, err := c.connect(k, "")
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		r := reg
		r.ID = id
		rr, err := client.Do(ctx, cl, protocol.OpRegister, r)
		if err != nil {
			t.Fatal(err)
		}
		return rr.ID
	}
	id := register(k1, 0)
	if got := register(k1, id); got != id {
		t.Errorf("the same key reclaiming %d got %d", id, got)
	}
	if got := register(k2, id); got == id {
		t.Errorf("another key reclaimed placeholder %d", id)
	}
}

func TestExecRolesAndWords(t *testing.T) {
	c := newCLS(t)
	run := func(signer ssh.Signer, cmd string) (string, string, int) {
		t.Helper()
		conn, err := ssh.Dial("tcp", c.addr, &ssh.ClientConfig{User: "u", Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
			HostKeyCallback: ssh.FixedHostKey(c.hostKey), Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		s, err := conn.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		s.Stdout, s.Stderr = &stdout, &stderr
		err = s.Run(cmd)
		var ee *ssh.ExitError
		switch {
		case err == nil:
			return stdout.String(), stderr.String(), 0
		case errors.As(err, &ee):
			return stdout.String(), stderr.String(), ee.ExitStatus()
		}
		t.Fatalf("%s: %v", cmd, err)
		return "", "", 0
	}
	user, _ := c.key("user")
	ph, _ := c.key("placeholder")
	if out, _, code := run(user, `mqsub -q q T "echo hi > f"`); code != 0 || out != "ran mqsub|-q|q|T|echo hi > f\n" {
		t.Errorf("user exec: %q exit %d", out, code)
	}
	if _, _, code := run(user, "fail now"); code != 3 {
		t.Errorf("exit status did not pass through: %d", code)
	}
	if _, stderr, code := run(user, `mqsub "unterminated`); code != 2 || !strings.Contains(stderr, "unterminated") {
		t.Errorf("bad quoting: exit %d, %q", code, stderr)
	}
	if _, stderr, code := run(ph, "mqsub T id"); code != 1 || !strings.Contains(stderr, "placeholder keys may not run commands") {
		t.Errorf("placeholder exec: exit %d, %q", code, stderr)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if slices.ContainsFunc(c.execs, func(a []string) bool { return slices.Contains(a, "id") }) {
		t.Errorf("a placeholder key's command ran: %q", c.execs)
	}
}
