package placeholder

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/metaqueue"
	"github.com/mq-hpc/mq/protocol"
	"github.com/mq-hpc/mq/server"
)

// cls is an in-process CLS: a Store and a Server that agents reach over
// net.Pipe. cut closes every connection, as a network failure would.
type cls struct {
	t     *testing.T
	store *metaqueue.Store
	srv   *server.Server
	ctx   context.Context

	mu    sync.Mutex
	conns []net.Conn
	dials int
}

func newCLS(t *testing.T) *cls {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := metaqueue.Open(ctx, metaqueue.Options{Path: filepath.Join(t.TempDir(), "mq.db"), Sync: metaqueue.SyncNormal, Lease: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c := &cls{t: t, store: st, srv: &server.Server{Store: st}, ctx: ctx}
	t.Cleanup(func() {
		cancel()
		c.cut()
		c.srv.Wait()
		st.Close()
	})
	return c
}

func (c *cls) dial(ctx context.Context) (io.ReadWriteCloser, error) {
	a, b := net.Pipe()
	c.mu.Lock()
	c.conns = append(c.conns, b)
	c.dials++
	c.mu.Unlock()
	go c.srv.ServeConn(c.ctx, b, protocol.RoleUser)
	return a, nil
}

func (c *cls) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		conn.Close()
	}
	c.conns = nil
}

func (c *cls) submit(jobs ...protocol.JobSpec) []int64 {
	c.t.Helper()
	ids, err := c.store.Submit(context.Background(), jobs)
	if err != nil {
		c.t.Fatal(err)
	}
	return ids
}

// wait waits for the jobs to end and returns how.
func (c *cls) wait(ids ...int64) map[int64]protocol.JobEnd {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := c.store.Wait(ctx, ids, 0)
	if err != nil {
		c.t.Fatalf("waiting for %v: %v", ids, err)
	}
	out := map[int64]protocol.JobEnd{}
	for _, e := range r.Jobs {
		out[e.ID] = e
	}
	return out
}

func startAgent(t *testing.T, c *cls, slots int) (*Agent, string) {
	t.Helper()
	out := t.TempDir()
	a := New(Config{Dial: c.dial, Site: "test", Host: "h", Slots: slots, OutDir: out})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("agent: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("agent did not stop")
		}
	})
	return a, out
}

func TestAgentRunsJobs(t *testing.T) {
	t.Parallel()
	c := newCLS(t)
	dir := t.TempDir()
	var specs []protocol.JobSpec
	for i := 0; i < 40; i++ {
		specs = append(specs, protocol.JobSpec{Target: "t", Command: `echo "$MQ_JOB_ID $MQ_ATTEMPT $MQ_TARGET"; echo err >&2; exit $((MQ_JOB_ID % 3 == 0 ? 3 : 0))`, Cwd: dir})
	}
	ids := c.submit(specs...)
	_, out := startAgent(t, c, 4)
	ends := c.wait(ids...)
	for _, id := range ids {
		e := ends[id]
		want, wantExit := "D", 0
		if id%3 == 0 {
			want, wantExit = "F", 3
		}
		if e.State != want || e.Exit == nil || *e.Exit != wantExit {
			t.Errorf("job %d ended %+v, want %s exit %d", id, e, want, wantExit)
		}
		stdout, _ := job.OutputPaths(out, id, 1)
		b, err := os.ReadFile(stdout)
		if err != nil || strings.TrimSpace(string(b)) != strconv.FormatInt(id, 10)+" 1 t" {
			t.Errorf("job %d stdout %q, %v", id, b, err)
		}
	}
}

// TestAgentSurvivesCut: the connection drops while a job runs; the job
// goes on, the agent reconnects and reports it once, and it ends Done on
// its first attempt.
func TestAgentSurvivesCut(t *testing.T) {
	t.Parallel()
	c := newCLS(t)
	dir := t.TempDir()
	ids := c.submit(protocol.JobSpec{Target: "t", Command: "sleep 1; echo ran >> ran.txt", Cwd: dir})
	startAgent(t, c, 1)
	deadline := time.Now().Add(10 * time.Second)
	for stateOf(t, c, ids[0]) != "E" {
		if time.Now().After(deadline) {
			t.Fatal("job never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.cut()
	e := c.wait(ids[0])[ids[0]]
	if e.State != "D" {
		t.Fatalf("job ended %+v", e)
	}
	d, err := c.store.Job(context.Background(), ids[0])
	if err != nil || d.Attempts != 1 || len(d.History) != 0 {
		t.Fatalf("job %+v, %v: want one attempt and no history", d, err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "ran.txt"))
	if string(b) != "ran\n" {
		t.Fatalf("ran.txt = %q: the job ran other than once", b)
	}
	c.mu.Lock()
	dials := c.dials
	c.mu.Unlock()
	if dials < 2 {
		t.Fatalf("agent dialled %d times; it should have reconnected", dials)
	}
}

func stateOf(t *testing.T, c *cls, id int64) string {
	d, err := c.store.Job(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return d.State
}

// TestAgentKills: a job past its queue's ceiling is killed and fails with
// that reason; a deleted job's process group is killed at the next
// heartbeat, background children included.
func TestAgentKills(t *testing.T) {
	t.Parallel()
	c := newCLS(t)
	ctx := context.Background()
	ceiling := 0.5
	if _, err := c.store.SetQueue(ctx, protocol.QueueSet{Name: "short", Ceiling: &ceiling}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	over := c.submit(protocol.JobSpec{Queue: "short", Target: "a", Command: "sleep 30", Cwd: dir})[0]
	del := c.submit(protocol.JobSpec{Target: "b", Command: "sleep 300 & echo $! > child.pid; wait", Cwd: dir})[0]
	startAgent(t, c, 2)
	start := time.Now()
	if e := c.wait(over)[over]; e.State != "F" || !strings.Contains(e.Reason, "ceiling") {
		t.Fatalf("over-ceiling job ended %+v", e)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("ceiling kill took %v", d)
	}
	deadline := time.Now().Add(10 * time.Second)
	for stateOf(t, c, del) != "E" || !exists(filepath.Join(dir, "child.pid")) {
		if time.Now().After(deadline) {
			t.Fatal("job never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := c.store.Delete(ctx, protocol.Select{IDs: []int64{del}}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "child.pid"))
	pid := strings.TrimSpace(string(b))
	deadline = time.Now().Add(4 * time.Second)
	for exists("/proc/" + pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the deleted job's child %s still runs", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestAgentGivesBackHeldJob: while jobs are short a placeholder fetches one
// job ahead; when the job it runs turns out long, the held job is handed
// back (not counted as an attempt) and another placeholder runs it.
func TestAgentGivesBackHeldJob(t *testing.T) {
	t.Parallel()
	c := newCLS(t)
	dir := t.TempDir()
	var warm []protocol.JobSpec
	for i := 0; i < 20; i++ {
		warm = append(warm, protocol.JobSpec{Target: "warm", Command: "true", Cwd: dir})
	}
	ids := c.submit(warm...)
	startAgent(t, c, 1)
	c.wait(ids...)
	time.Sleep(200 * time.Millisecond) // parked again, asking for a slot and one ahead
	both := c.submit(protocol.JobSpec{Target: "long", Command: "sleep 6", Cwd: dir}, protocol.JobSpec{Target: "short", Command: "true", Cwd: dir})
	long, short := both[0], both[1]
	time.Sleep(500 * time.Millisecond) // the first placeholder runs the long job and holds the short one
	startAgent(t, c, 1)
	ends := c.wait(short)
	if ends[short].State != "D" {
		t.Fatalf("short job ended %+v", ends[short])
	}
	ls, _ := c.store.Job(context.Background(), long)
	if ls.State == "D" {
		t.Fatalf("the short job waited for the long one: a held job was not given back")
	}
	d, _ := c.store.Job(context.Background(), short)
	if d.Attempts != 2 || len(d.History) != 0 {
		t.Fatalf("short job: attempts %d, history %+v; want it handed back once (attempt 1) and run on attempt 2, with no history", d.Attempts, d.History)
	}
	if e := c.wait(long)[long]; e.State != "D" {
		t.Fatalf("long job ended %+v", e)
	}
}

// TestAgentStoppedByBatchSystem: a batch system stopping a placeholder
// (scancel, qdel) signals the job and the agent at once; the job dying of
// that signal is the placeholder being stopped, so it is requeued, not
// failed. PBS signals the process tree child first: the job's shell may
// see its child die of SIGTERM and exit 143 before its own signal lands.
func TestAgentStoppedByBatchSystem(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, command, kill string // kill: the file holding the pid whose group the batch system signals first
	}{
		{"the job's group", "echo $$ > pid; exec sleep 30", "pid"},
		{"the job's child first", "echo $$ > pid; sleep 30 & echo $! > child; wait $!; exit $?", "child"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCLS(t)
			dir := t.TempDir()
			a := New(Config{Dial: c.dial, Site: "test", Host: "h", Slots: 1, OutDir: t.TempDir()})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- a.Run(ctx) }()
			id := c.submit(protocol.JobSpec{Target: "t", Command: tc.command, Cwd: dir})[0]
			pidFile := filepath.Join(dir, tc.kill)
			for deadline := time.Now().Add(10 * time.Second); !exists(pidFile); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the job did not start")
				}
			}
			time.Sleep(50 * time.Millisecond)
			b, _ := os.ReadFile(pidFile)
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			// The job hears SIGTERM first; the agent a moment later.
			if tc.kill == "pid" {
				pid = -pid
			}
			syscall.Kill(pid, syscall.SIGTERM)
			time.Sleep(100 * time.Millisecond)
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("agent: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("agent did not stop")
			}
			d, err := c.store.Job(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if d.State != "Q" || len(d.History) != 1 || !strings.HasPrefix(d.History[0].Reason, protocol.ReasonInterrupted) {
				t.Fatalf("job %s after its placeholder was stopped, history %+v; want Q with attempt 1 interrupted", d.State, d.History)
			}
		})
	}
}

// opCounter counts the requests an agent writes, by op.
type opCounter struct {
	io.ReadWriteCloser
	mu  *sync.Mutex
	ops map[string]int
}

func (o opCounter) Write(p []byte) (int, error) {
	o.mu.Lock()
	for _, op := range []string{protocol.OpNext, protocol.OpReport} {
		o.ops[op] += strings.Count(string(p), `"op":"`+op+`"`)
	}
	o.mu.Unlock()
	return o.ReadWriteCloser.Write(p)
}

// runCounted runs an agent with cfg (its Dial counting requests) until the
// jobs end, stops it, and returns the requests it made, by op.
func runCounted(t *testing.T, c *cls, cfg Config, ids []int64) map[string]int {
	t.Helper()
	var mu sync.Mutex
	ops := map[string]int{}
	cfg.Dial = func(ctx context.Context) (io.ReadWriteCloser, error) {
		rwc, err := c.dial(ctx)
		return opCounter{rwc, &mu, ops}, err
	}
	a := New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	for id, e := range c.wait(ids...) {
		if e.State != "D" {
			t.Errorf("job %d ended %+v, want D", id, e)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return maps.Clone(ops)
}

// The no-op executor ends a job as it starts: its report rides on the next
// poll, and one poll serves a slot-full of jobs. Separate reports, or a poll
// per job, would mean it measures the agent's slot machinery instead of the
// scheduling path.
func TestAgentNoOpReportsRideOnPolls(t *testing.T) {
	t.Parallel()
	c := newCLS(t)
	const n, slots = 400, 8
	dir := t.TempDir()
	var specs []protocol.JobSpec
	for i := 0; i < n; i++ {
		specs = append(specs, protocol.JobSpec{Target: "t", Command: "exit 1", Cwd: dir}) // not run: no-op
	}
	ids := c.submit(specs...)
	ops := runCounted(t, c, Config{Site: "test", Host: "h", Slots: slots, OutDir: t.TempDir(), NoOp: true}, ids)
	if ops[protocol.OpReport] > 1 { // the last jobs may be reported as the agent stops
		t.Errorf("%d separate report requests; want the reports carried by polls", ops[protocol.OpReport])
	}
	if max := n/slots + 5; ops[protocol.OpNext] > max {
		t.Errorf("%d polls for %d jobs with %d slots; want at most %d", ops[protocol.OpNext], n, slots, max)
	}
}

// Short jobs are fetched ahead and reported in batches: one round trip per
// job would cost the CLS and the agent more than the jobs themselves.
func TestAgentBatchesShortJobs(t *testing.T) {
	t.Parallel()
	c := newCLS(t)
	const n = 300
	dir := t.TempDir()
	var specs []protocol.JobSpec
	for i := 0; i < n; i++ {
		specs = append(specs, protocol.JobSpec{Target: "t", Command: "true", Cwd: dir})
	}
	ids := c.submit(specs...)
	// A window of 1 s: under the race detector on a loaded machine `true`
	// can take longer than the default 20 ms and would count as long.
	ops := runCounted(t, c, Config{Site: "test", Host: "h", Slots: 1, OutDir: t.TempDir(), prefetchWindow: time.Second}, ids)
	if reqs := ops[protocol.OpNext] + ops[protocol.OpReport]; reqs > n/3 {
		t.Errorf("%d requests (%v) for %d short jobs on one slot; want batches (at most %d)", reqs, ops, n, n/3)
	}
}

// OneProc gives the agent one scheduler thread, unless GOMAXPROCS says
// otherwise. Checked in a child process: it changes the whole runtime.
func TestOneProc(t *testing.T) {
	if os.Getenv("MQ_TEST_ONEPROC") == "1" {
		OneProc()
		fmt.Print(runtime.GOMAXPROCS(0))
		os.Exit(0)
	}
	for _, c := range []struct{ env, want string }{{"", "1"}, {"3", "3"}} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestOneProc$")
		cmd.Env = append(os.Environ(), "MQ_TEST_ONEPROC=1", "GOMAXPROCS="+c.env)
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != c.want {
			t.Errorf("GOMAXPROCS=%q: agent runs with %s scheduler threads, want %s", c.env, out, c.want)
		}
	}
}
