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

// mqsub runs mqsub with args (after its name) reading stdin, and returns
// what it printed and its exit code.
func (tb *testBundle) mqsub(stdin string, args ...string) (stdout, stderr string, code int) {
	var o, e bytes.Buffer
	env := tb.env(&o, &e)
	env.Stdin = strings.NewReader(stdin)
	code = Run(context.Background(), Mqsub(env), append([]string{"mqsub"}, args...))
	return o.String(), e.String(), code
}

// job is what the store says of job id, which must exist.
func (tb *testBundle) job(t *testing.T, id int64) protocol.JobDetail {
	t.Helper()
	d, err := tb.store.Inspect().Job(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// submitted runs mqsub with args, which must succeed, and returns the id
// it printed first.
func (tb *testBundle) submitted(t *testing.T, args ...string) int64 {
	t.Helper()
	o, e, code := tb.mqsub("", args...)
	if code != 0 {
		t.Fatalf("%q: exit %d, %s", args, code, e)
	}
	var id int64
	fmt.Sscan(o, &id)
	return id
}

// placeholder registers a placeholder of slots, to take the submitted
// jobs with Next and see what it would be given.
func (tb *testBundle) placeholder(t *testing.T, slots int) int64 {
	t.Helper()
	reg, err := tb.store.RegisterAs(context.Background(), protocol.Register{Site: "s", Host: "h", Slots: slots, OutDir: t.TempDir()}, "socket")
	if err != nil {
		t.Fatal(err)
	}
	return reg.ID
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
	o, e, code := tb.mqsub("", "t", cmd)
	if code != 0 {
		t.Fatalf("mqsub t %q: exit %d, %s", cmd, code, e)
	}
	check("mqsub", o)
	o, e, code = tb.mqsub(`{"target":"t","command_bytes":"`+base64.StdEncoding.EncodeToString([]byte(cmd))+`"}`+"\n", "-f", "-")
	if code != 0 {
		t.Fatalf("mqsub -f with command_bytes: exit %d, %s", code, e)
	}
	check("mqsub -f", o)
	_, e, code = tb.mqsub("{\"target\":\"t\",\"command\":\"true\"}\n{\"target\":\"t\",\"command\":\""+cmd+"\"}\n", "-f", "-")
	if code != ExitFailed || !strings.Contains(e, "line 2: byte 0xe9 at column") || strings.Count(e, "\n") != 1 {
		t.Errorf("mqsub -f with a raw Latin-1 line: exit %d, stderr %q; want exit 1 naming line 2", code, e)
	}
	_, e, code = tb.mqsub("", "caf\xe9", "true")
	if code != ExitUsage || !strings.Contains(e, `target name "caf\xe9" is not valid UTF-8`) {
		t.Errorf("mqsub with a Latin-1 target: exit %d, stderr %q", code, e)
	}
}

// TestMqsubFiles: --in/--out and their long names declare each file once,
// in order (urfave/cli copies a set flag to its aliases; that adds
// nothing, even when a path with a space reads as the others joined).
// Colons belong to the name unless a size follows the last one, and a
// file of the job's directory is named whole. A file named twice is
// TestMqsubRefused's.
func TestMqsubFiles(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	dir := t.TempDir()
	for _, f := range []string{"img:10K", "a b"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		args    []string
		in, out []string
	}{
		{[]string{"--in", "a", "--out", "b"}, []string{"a"}, []string{"b"}},
		{[]string{"--input", "a", "--input", "c", "--out", "b"}, []string{"a", "c"}, []string{"b"}},
		{[]string{"--in", "a:10", "--in", "c"}, []string{"a", "c"}, nil},
		{[]string{"--in", "a", "--in", "b", "--in", "a b"}, []string{"a", "b", "a b"}, nil},
		{[]string{"--in", "a:b.log", "--out", "sample:1.fastq", "--out", "chr1:100-200.bed"}, []string{"a:b.log"}, []string{"sample:1.fastq", "chr1:100-200.bed"}},
		{[]string{"--in", "img:10K", "--in", "run:12:30", "--out", "o:x:5M"}, []string{"img:10K", "run:12"}, []string{"o:x"}},
		{[]string{"--in", "a:b.log:0"}, []string{"a:b.log"}, nil},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			id := tb.submitted(t, append(append([]string{"-d", dir}, tc.args...), "t", "true")...)
			d, err := tb.store.Inspect().Job(context.Background(), id)
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
				t.Errorf("inputs %v outputs %v, want %v %v", in, out, tc.in, tc.out)
			}
		})
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
		{"empty", "", "mqsub: %s: no jobs to submit; nothing was added\n"},
		{"blank lines", "\n\n", "mqsub: %s: no jobs to submit; nothing was added\n"},
		{"comments", "# nothing yet\n", "mqsub: %s: no jobs to submit; nothing was added\n"},
		{"bad line", "{\"target\": \"t\"}\n", "mqsub: %s: line 1: missing command; nothing was added\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "jobs")
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			stdout, stderr, code := tb.mqsub("", "-f", path)
			if want := fmt.Sprintf(tc.want, path); code != ExitFailed || stderr != want || stdout != "" {
				t.Errorf("exit %d, stderr %q, stdout %q; want exit %d, %q", code, stderr, stdout, ExitFailed, want)
			}
		})
	}
}

// TestMqsubEmptyPrereqWarned: a job that waits for a target with no jobs
// (Slurm's -p PARTITION typed out of habit, or a target not submitted
// yet) is warned of at submit, once per submission, naming the targets;
// a target with jobs, in the same file or before, is not named.
func TestMqsubEmptyPrereqWarned(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	const hint = "(-p names a prerequisite target; Slurm's -p PARTITION is mq's -q QUEUE)"
	file := "{\"target\":\"b\",\"prereqs\":[\"a\"],\"command\":\"true\"}\n{\"target\":\"a\",\"command\":\"true\"}\n{\"target\":\"c\",\"prereqs\":[\"b\",\"zz\"],\"command\":\"true\"}\n"
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		want  string // the warning, "" for none
	}{
		{"partition", "", []string{"-p", "gpu", "t", "true"}, "mqsub: warning: job 1 waits for target gpu, which has no jobs yet " + hint + "\n"},
		{"has jobs", "", []string{"-p", "t", "u", "true"}, ""},
		{"two missing", "", []string{"-p", "x1,x2", "--after-any", "t", "v", "true"}, "mqsub: warning: job 3 waits for targets x1, x2, which have no jobs yet " + hint + "\n"},
		{"array", "", []string{"--array", "1-3", "-p", "later", "w", "true"}, "mqsub: warning: some of jobs 4-6 wait for target later, which has no jobs yet " + hint + "\n"},
		{"file, producer in it", file, []string{"-f", "-"}, "mqsub: warning: some of jobs 7-9 wait for target zz, which has no jobs yet " + hint + "\n"},
		{"none named", "", []string{"y", "true"}, ""},
		{"many per member", "", []string{"--array", "1-20", "-p", "s{}", "z", "true"}, "mqsub: warning: some of jobs 11-30 wait for targets s1, s10, s11, s12, s13, s14, s15, s16, ..., which have no jobs yet " + hint + "\n"},
		{"many named", "", []string{"-p", "m1,m2,m3,m4,m5,m6,m7,m8,m9", "z", "true"}, "mqsub: warning: job 31 waits for targets m1, m2, m3, m4, m5, m6, m7, m8, ..., which have no jobs yet " + hint + "\n"},
		{"eight named", "", []string{"-p", "m1,m2,m3,m4,m5,m6,m7,m8", "z", "true"}, "mqsub: warning: job 32 waits for targets m1, m2, m3, m4, m5, m6, m7, m8, which have no jobs yet " + hint + "\n"},
		// --after-any alone: no word of Slurm's -p, which was not typed.
		{"after-any", "", []string{"--after-any", "tidy", "z", "true"}, "mqsub: warning: job 33 waits for target tidy, which has no jobs yet\n"},
	} {
		_, stderr, code := tb.mqsub(tc.stdin, tc.args...)
		if code != 0 || stderr != tc.want {
			t.Errorf("%s: mqsub %q: exit %d, stderr %q; want 0 and %q", tc.name, tc.args, code, stderr, tc.want)
		}
	}
	// A target whose jobs were all done and purged has had jobs.
	ctx := context.Background()
	tb = setup(t)
	id := tb.submitted(t, "gone", "true")
	ph := tb.placeholder(t, 1)
	if nr, err := tb.store.Next(ctx, protocol.Next{Placeholder: ph, Free: 1}); err != nil || len(nr.Jobs) != 1 || nr.Jobs[0].ID != id {
		t.Fatalf("next: %+v, %v", nr, err)
	}
	now := time.Now()
	if err := tb.store.Report(ctx, ph, []protocol.Report{{ID: id, Attempt: 1, Started: now, Finished: now}}); err != nil {
		t.Fatal(err)
	}
	if r, err := tb.store.Purger().Run(ctx, protocol.Purge{Select: protocol.Select{IDs: []int64{id}}}); err != nil || r.Purged != 1 {
		t.Fatalf("purge: %+v, %v", r, err)
	}
	if _, stderr, code := tb.mqsub("", "-p", "gone", "after-purge", "true"); code != 0 || stderr != "" {
		t.Errorf("after its prerequisite's jobs were purged: exit %d, stderr %q", code, stderr)
	}
}

// A bulk submission prints one id a line for a script, and to a terminal
// the range they make: a million lines would hold it for minutes.
func TestPrintIDs(t *testing.T) {
	for _, tc := range []struct {
		first int64
		count int
		tty   bool
		want  string
	}{
		{7, 3, false, "7\n8\n9\n"},
		{7, 3, true, "7-9\n"},
		{7, 1, true, "7\n"},
		{1, 1_000_000, true, "1-1000000\n"},
		{5, 0, false, ""},
	} {
		var b strings.Builder
		if err := printIDs(&b, tc.first, tc.count, tc.tty); err != nil {
			t.Fatal(err)
		}
		if b.String() != tc.want {
			t.Errorf("printIDs(%d, %d, tty %v) = %q, want %q", tc.first, tc.count, tc.tty, b.String(), tc.want)
		}
	}
}
