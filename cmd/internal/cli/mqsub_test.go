package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue"
	"github.com/mq-hpc/mq/internal/server"
	"github.com/mq-hpc/mq/protocol"
)

// testBundle is a metaqueue served in-process and an Env whose Dial reaches
// it over net.Pipe, optionally through a cut that breaks a connection.
type testBundle struct {
	t     *testing.T
	store *metaqueue.Store
	srv   *server.Server
	ctx   context.Context // ends the served connections
	conns sync.WaitGroup
	mu    sync.Mutex
	dials int
	// cut, if set, wraps the server's end of the dial'th connection (from 1).
	cut func(dial int, c net.Conn) net.Conn
	// refuse makes every dial from the refuse'th on fail (0: none).
	refuse int
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	st, err := metaqueue.Open(context.Background(), metaqueue.Options{
		Path: filepath.Join(t.TempDir(), "mq.db"), Sync: metaqueue.SyncNormal, Lease: 30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	tb := &testBundle{t: t, store: st, srv: &server.Server{Store: st}}
	ctx, cancel := context.WithCancel(context.Background())
	tb.ctx = ctx
	t.Cleanup(func() {
		cancel()
		tb.conns.Wait()
		st.Close()
	})
	return tb
}

func (tb *testBundle) env(stdout, stderr io.Writer) Env {
	return Env{
		Stdin: strings.NewReader(""), Stdout: stdout, Stderr: stderr,
		Getwd: func() (string, error) { return "/tmp", nil },
		Dial: func(ctx context.Context) (io.ReadWriteCloser, error) {
			tb.mu.Lock()
			tb.dials++
			n := tb.dials
			tb.mu.Unlock()
			if tb.refuse > 0 && n >= tb.refuse {
				return nil, errors.New("connection refused")
			}
			cl, sc := net.Pipe()
			if tb.cut != nil {
				sc = tb.cut(n, sc)
			}
			tb.conns.Add(1)
			go func() {
				defer tb.conns.Done()
				tb.srv.ServeConn(tb.ctx, sc, protocol.RoleUser)
			}()
			return cl, nil
		},
	}
}

func (tb *testBundle) jobs() int {
	tb.t.Helper()
	qs, err := tb.store.Summary(context.Background())
	if err != nil {
		tb.t.Fatal(err)
	}
	n := 0
	for _, q := range qs {
		for _, c := range q.Counts {
			n += c
		}
	}
	return n
}

// cutConn closes the connection instead of passing on the first frame
// (read from the client, or written to it) that contains match.
type cutConn struct {
	net.Conn
	match    []byte
	onRead   bool
	cutOnce  sync.Once
	received chan struct{} // closed when the cut happened
}

func (c *cutConn) cut() {
	c.cutOnce.Do(func() {
		c.Conn.Close()
		close(c.received)
	})
}

func (c *cutConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.onRead && bytes.Contains(p[:n], c.match) {
		c.cut()
		return 0, io.EOF
	}
	return n, err
}

func (c *cutConn) Write(p []byte) (int, error) {
	if !c.onRead && bytes.Contains(p, c.match) {
		c.cut()
		return 0, net.ErrClosed
	}
	return c.Conn.Write(p)
}

func writeJobFile(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "{\"target\":\"t%d\",\"command\":\"true\"}\n", i%7)
	}
	path := filepath.Join(t.TempDir(), "jobs")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A bulk submit whose connection dies during the commit tells the truth:
// the jobs' ids if the commit happened, "nothing was added" if the CLS has
// no record of it, "outcome unknown" if the CLS cannot be asked; and it
// never adds the jobs twice.
func TestMqsubFileConnectionLostDuringCommit(t *testing.T) {
	t.Parallel()
	const n = 3000
	tests := []struct {
		name      string
		onRead    bool   // cut the client's request (else the server's reply)
		match     string // what the cut frame contains
		refuse    int
		wantJobs  int
		wantExit  int
		wantOut   int // ids printed
		wantError string
	}{
		{name: "reply lost", match: `"first":`, wantJobs: n, wantOut: n},
		{name: "commit lost", onRead: true, match: `"bulk.commit"`, wantExit: ExitFailed, wantError: "the CLS has no record of it: nothing was added"},
		{name: "reply lost, CLS gone", match: `"first":`, refuse: 2, wantJobs: n, wantExit: ExitFailed, wantError: "outcome unknown: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tb := setup(t)
			tb.refuse = tt.refuse
			tb.cut = func(dial int, c net.Conn) net.Conn {
				if dial != 1 {
					return c
				}
				return &cutConn{Conn: c, match: []byte(tt.match), onRead: tt.onRead, received: make(chan struct{})}
			}
			path := writeJobFile(t, n)
			var stdout, stderr bytes.Buffer
			code := Run(context.Background(), Mqsub(tb.env(&stdout, &stderr)), []string{"mqsub", "-f", path})
			if code != tt.wantExit {
				t.Errorf("exit %d, want %d; stderr %q", code, tt.wantExit, stderr.String())
			}
			if got := strings.Count(stdout.String(), "\n"); got != tt.wantOut {
				t.Errorf("printed %d ids, want %d", got, tt.wantOut)
			}
			if !strings.Contains(stderr.String(), tt.wantError) {
				t.Errorf("stderr %q does not say %q", stderr.String(), tt.wantError)
			}
			if tt.wantError == "" && stderr.Len() > 0 {
				t.Errorf("stderr %q, want nothing", stderr.String())
			}
			if got := tb.jobs(); got != tt.wantJobs {
				t.Errorf("%d jobs in the metaqueue, want %d", got, tt.wantJobs)
			}
		})
	}
}

// mqsub keeps a command's exact bytes when they are not UTF-8 (a Latin-1
// file name), given on the command line or as command_bytes in a job file;
// a job file with raw non-UTF-8 bytes is refused naming the line.
func TestMqsubCommandBytes(t *testing.T) {
	t.Parallel()
	const cmd = "touch caf\xe9"
	tb := setup(t)
	ctx := context.Background()
	run := func(stdin string, args ...string) (string, string, int) {
		var o, e bytes.Buffer
		env := tb.env(&o, &e)
		env.Stdin = strings.NewReader(stdin)
		code := Run(ctx, Mqsub(env), append([]string{"mqsub"}, args...))
		return o.String(), e.String(), code
	}
	check := func(what, out string) {
		t.Helper()
		var id int64
		if _, err := fmt.Sscan(out, &id); err != nil {
			t.Fatalf("%s printed %q", what, out)
		}
		d, err := tb.store.Inspect().Job(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if got := protocol.CommandOf(d.Command, d.CommandBytes); got != cmd {
			t.Errorf("%s: job %d's command is %q, want %q", what, id, got, cmd)
		}
	}
	o, e, code := run("", "t", cmd)
	if code != 0 {
		t.Fatalf("mqsub t %q: exit %d, %s", cmd, code, e)
	}
	check("mqsub", o)
	o, e, code = run(`{"target":"t","command_bytes":"`+base64.StdEncoding.EncodeToString([]byte(cmd))+`"}`+"\n", "-f", "-")
	if code != 0 {
		t.Fatalf("mqsub -f with command_bytes: exit %d, %s", code, e)
	}
	check("mqsub -f", o)
	_, e, code = run("{\"target\":\"t\",\"command\":\"true\"}\n{\"target\":\"t\",\"command\":\""+cmd+"\"}\n", "-f", "-")
	if code != ExitFailed || !strings.Contains(e, "line 2: byte 0xe9 at column") || strings.Count(e, "\n") != 1 {
		t.Errorf("mqsub -f with a raw Latin-1 line: exit %d, stderr %q; want exit 1 naming line 2", code, e)
	}
	_, e, code = run("", "caf\xe9", "true")
	if code != ExitUsage || !strings.Contains(e, `target name "caf\xe9" is not valid UTF-8`) {
		t.Errorf("mqsub with a Latin-1 target: exit %d, stderr %q", code, e)
	}
}

// TestMqsubFiles: -i/-o and their long names declare each file once, in
// order (urfave/cli copies a set flag to its aliases; that adds nothing),
// and a file named twice is refused.
func TestMqsubFiles(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	dir := t.TempDir()
	for _, tc := range []struct {
		args    []string
		in, out []string
	}{
		{[]string{"--in", "a", "--out", "b"}, []string{"a"}, []string{"b"}},
		{[]string{"--input", "a", "--input", "c", "--out", "b"}, []string{"a", "c"}, []string{"b"}},
		{[]string{"--in", "a:10", "--in", "c"}, []string{"a", "c"}, nil},
	} {
		var o, e bytes.Buffer
		args := append(append([]string{"mqsub", "-d", dir}, tc.args...), "t", "true")
		if code := Run(ctx, Mqsub(tb.env(&o, &e)), args); code != 0 {
			t.Fatalf("%v: exit %d, %s", tc.args, code, e.String())
		}
		var id int64
		fmt.Sscan(o.String(), &id)
		d, err := tb.store.Inspect().Job(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var in, out []string
		for _, f := range d.Inputs {
			in = append(in, strings.TrimPrefix(f.Path, dir+"/"))
		}
		for _, f := range d.Outputs {
			out = append(out, strings.TrimPrefix(f.Path, dir+"/"))
		}
		if !slices.Equal(in, tc.in) || !slices.Equal(out, tc.out) {
			t.Errorf("%v: inputs %v outputs %v, want %v %v", tc.args, in, out, tc.in, tc.out)
		}
	}
	var o, e bytes.Buffer
	if code := Run(ctx, Mqsub(tb.env(&o, &e)), []string{"mqsub", "-d", dir, "--in", "a", "--in", "b", "--in", "a", "t", "true"}); code != ExitUsage || !strings.Contains(e.String(), "listed twice") {
		t.Errorf("a file named twice: exit %d, %q", code, e.String())
	}
}

// TestMqsubEnvFlags: -v and its long name --env set each variable once,
// values with spaces and '=' kept whole (urfave/cli copies a set flag to
// its aliases; that must add or change nothing).
func TestMqsubEnvFlags(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	dir := t.TempDir()
	reg, err := tb.store.RegisterAs(ctx, protocol.Register{Site: "s", Host: "h", Slots: 1, OutDir: t.TempDir()}, "socket")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"-v", "A=1"}, []string{"A=1"}},
		{[]string{"-v", "A=1", "-v", "B=x y=z"}, []string{"A=1", "B=x y=z"}},
		{[]string{"--env", "A=1 B=2", "--env", "C=3"}, []string{"A=1 B=2", "C=3"}},
		{[]string{"--env", "A=1", "--env", "A=2"}, []string{"A=2"}},
	} {
		var o, e bytes.Buffer
		args := append(append([]string{"mqsub", "-d", dir}, tc.args...), "t", "true")
		if code := Run(ctx, Mqsub(tb.env(&o, &e)), args); code != 0 {
			t.Fatalf("%v: exit %d, %s", tc.args, code, e.String())
		}
		var id int64
		fmt.Sscan(o.String(), &id)
		// The environment is what the placeholder gets with the job.
		nr, err := tb.store.Next(ctx, protocol.Next{Placeholder: reg.ID, Free: 1})
		if err != nil || len(nr.Jobs) != 1 || nr.Jobs[0].ID != id {
			t.Fatalf("%v: next %+v, %v; want job %d", tc.args, nr, err, id)
		}
		if got := nr.Jobs[0].Env; !slices.Equal(got, tc.want) {
			t.Errorf("%v: env %q, want %q", tc.args, got, tc.want)
		}
	}
	var o, e bytes.Buffer
	if code := Run(ctx, Mqsub(tb.env(&o, &e)), []string{"mqsub", "--env", "noequals", "t", "true"}); code != ExitUsage || !strings.Contains(e.String(), "not NAME=VALUE") {
		t.Errorf("--env noequals: exit %d, %q", code, e.String())
	}
}

// TestMqsubFileErrorTexts: the exact one-line errors of mqsub -f on files
// with no jobs ("nothing was added" once, never twice).
func TestMqsubFileErrorTexts(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	for _, tc := range []struct {
		name, content, want string
	}{
		{"empty", "", "mqsub: %s: no jobs to submit\n"},
		{"blank lines", "\n\n", "mqsub: %s: no jobs to submit; nothing was added\n"},
		{"comments", "# nothing yet\n", "mqsub: %s: no jobs to submit; nothing was added\n"},
		{"bad line", "{\"target\": \"t\"}\n", "mqsub: %s: line 1: missing command; nothing was added\n"},
	} {
		path := filepath.Join(t.TempDir(), "jobs")
		if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		code := Run(context.Background(), Mqsub(tb.env(&stdout, &stderr)), []string{"mqsub", "-f", path})
		if want := fmt.Sprintf(tc.want, path); code != ExitFailed || stderr.String() != want || stdout.Len() > 0 {
			t.Errorf("%s: exit %d, stderr %q, stdout %q; want exit %d, %q", tc.name, code, stderr.String(), stdout.String(), ExitFailed, want)
		}
	}
}
