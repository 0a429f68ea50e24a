package driver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue"
	"github.com/mq-hpc/mq/internal/placeholder"
	"github.com/mq-hpc/mq/internal/server"
	"github.com/mq-hpc/mq/protocol"
)

// testCLS is an in-process CLS (Store and Server over net.Pipe) with
// in-process placeholder agents; cut closes every connection, as a network
// failure or a CLS restart would.
type testCLS struct {
	t     *testing.T
	store *metaqueue.Store
	srv   *server.Server
	ctx   context.Context

	mu      sync.Mutex
	conns   []net.Conn   // the driver's connections (agents' are not cut)
	replies atomic.Int64 // replies on the driver's connections but hellos: progress
}

// replyCounter counts the replies the CLS writes to the driver after its
// hello: a reconnection alone is no progress.
type replyCounter struct {
	net.Conn
	n       *atomic.Int64
	greeted bool
}

func (r *replyCounter) Write(p []byte) (int, error) {
	n, err := r.Conn.Write(p)
	if err == nil {
		if r.greeted {
			r.n.Add(1)
		}
		r.greeted = true
	}
	return n, err
}

func newTestCLS(t *testing.T, agents, slots int) *testCLS {
	t.Helper()
	return newTestCLSStaging(t, agents, slots, false)
}

// newTestCLSStaging is newTestCLS whose placeholders, if staged, act as
// remote ones: they write output elsewhere and copy it to the CLS's
// output directory (op output) when each job ends.
func newTestCLSStaging(t *testing.T, agents, slots int, staged bool) *testCLS {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	outDir := ""
	if staged {
		outDir = t.TempDir()
	}
	st, err := metaqueue.Open(ctx, metaqueue.Options{Path: filepath.Join(t.TempDir(), "mq.db"), Sync: metaqueue.SyncNormal, Lease: 5 * time.Second, OutputDir: outDir})
	if err != nil {
		t.Fatal(err)
	}
	c := &testCLS{t: t, store: st, srv: &server.Server{Store: st, OutputDir: outDir}, ctx: ctx}
	var wg sync.WaitGroup
	actx, stopAgents := context.WithCancel(ctx)
	for i := 0; i < agents; i++ {
		a := placeholder.New(placeholder.Config{Dial: c.agentDial, Site: "test", Host: fmt.Sprint("h", i), Slots: slots, OutDir: t.TempDir(), StageOutput: staged})
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.Run(actx)
		}()
	}
	t.Cleanup(func() {
		stopAgents() // first, so their last reports reach the server
		wg.Wait()
		cancel()
		c.cut()
		c.srv.Wait()
		st.Close()
	})
	return c
}

func (c *testCLS) agentDial(ctx context.Context) (io.ReadWriteCloser, error) {
	a, b := net.Pipe()
	go c.srv.ServeConn(c.ctx, b, protocol.RoleUser)
	return a, nil
}

func (c *testCLS) dial(ctx context.Context) (io.ReadWriteCloser, error) {
	a, b := net.Pipe()
	c.mu.Lock()
	c.conns = append(c.conns, b)
	c.mu.Unlock()
	go c.srv.ServeConn(c.ctx, &replyCounter{Conn: b, n: &c.replies}, protocol.RoleUser)
	return a, nil
}

func (c *testCLS) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		conn.Close()
	}
	c.conns = nil
}

func startCLSDriver(t *testing.T, c *testCLS, cfg Config) *Driver {
	t.Helper()
	cfg.Dial = c.dial
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if d.Local() {
		t.Fatal("local with a Dial")
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		d.Stop(ctx)
	})
	return d
}

func TestCLSExitCodes(t *testing.T) {
	t.Parallel()
	c := newTestCLS(t, 2, 2)
	d := startCLSDriver(t, c, Config{Dir: t.TempDir()})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, exit := range []int{0, 1, 7, 137} {
		code, err := d.ExecSync(ctx, fmt.Sprintf("exit %d", exit))
		if err != nil || code != exit {
			t.Errorf("exit %d: got %d, %v", exit, code, err)
		}
	}
	var keys []Key
	for i := 0; i < 300; i++ {
		k, err := d.Exec(ctx, fmt.Sprintf("exit %d", i%5))
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	rs, err := d.WaitForAll(ctx)
	if err != nil || len(rs) != len(keys) {
		t.Fatalf("%d results, %v", len(rs), err)
	}
	for i, r := range rs {
		if r.Key != keys[i] || r.Exit != i%5 || r.ID == 0 {
			t.Errorf("result %d: %+v, want exit %d", i, r, i%5)
		}
	}
}

func TestCLSDeletedAndBlocked(t *testing.T) {
	t.Parallel()
	c := newTestCLS(t, 1, 1)
	d := startCLSDriver(t, c, Config{Dir: t.TempDir()})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// A job waiting on a target that never completes, deleted by the user.
	k, err := d.Exec(ctx, "true", Target("late"), Prereqs("never"))
	if err != nil {
		t.Fatal(err)
	}
	kb, err := d.Exec(ctx, "true", Target("after"), Prereqs("bad"))
	if err != nil {
		t.Fatal(err)
	}
	if code, err := d.ExecSync(ctx, "exit 2", Target("bad")); err != nil || code != 2 {
		t.Fatalf("failing prerequisite: %d %v", code, err)
	}
	// The job's id, found by its target: the driver pipelines its
	// submissions, so ids need not follow the order of Exec.
	var id int64
	waitUntil(t, func() bool {
		err := c.store.Inspect().Stat(ctx, protocol.Stat{Target: "late", States: "W"}, 0, func(js []protocol.JobInfo) error {
			for _, j := range js {
				id = j.ID
			}
			return nil
		})
		return err == nil && id != 0
	})
	if _, err := c.store.Delete(ctx, protocol.Select{IDs: []int64{id}}); err != nil {
		t.Fatal(err)
	}
	r, err := d.WaitForOne(ctx, k)
	var je *JobError
	if !errors.As(err, &je) || je.State != "X" || r.Exit != -1 {
		t.Errorf("deleted job: %+v, %v", r, err)
	}
	r, err = d.WaitForOne(ctx, kb)
	if !errors.As(err, &je) || je.State != "B" {
		t.Errorf("blocked job: %+v, %v", r, err)
	}
}

// TestCLSReconnect: connections cut while jobs run and while the driver
// submits; every job still gets its exit code, and none is submitted twice.
func TestCLSReconnect(t *testing.T) {
	t.Parallel()
	c := newTestCLS(t, 2, 4)
	d := startCLSDriver(t, c, Config{Dir: t.TempDir(), Buffer: 100})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	start, cuts := time.Now(), 0
	go func() {
		defer wg.Done()
		// A cut every 30 ms, but only once the CLS has answered a request
		// of the driver's (not just its hello) since the last one: on a
		// loaded machine a round trip can take longer than 30 ms, and
		// cutting every one (or every hello, which backs the driver's
		// reconnection off up to 1 s) starves the driver rather than
		// tests its resending.
		var answered int64
		defer func() { t.Logf("%d cuts", cuts) }()
		for {
			select {
			case <-stop:
				return
			case <-time.After(30 * time.Millisecond):
				if n := c.replies.Load(); n > answered {
					answered = n
					cuts++
					c.cut()
				}
			}
		}
	}()
	const n = 400
	for i := 0; i < n; i++ {
		if _, err := d.Exec(ctx, fmt.Sprintf("sleep 0.00%d; exit %d", i%10, i%7)); err != nil {
			sum, _ := c.store.Summary(context.Background())
			t.Fatalf("exec %d: %v (driver pending %d; metaqueue %+v)", i, err, d.Pending(), sum)
		}
	}
	rs, err := d.WaitForAll(ctx)
	close(stop)
	wg.Wait()
	t.Logf("%d jobs in %v", n, time.Since(start))
	if err != nil || len(rs) != n {
		t.Fatalf("%d results, %v", len(rs), err)
	}
	for i, r := range rs {
		if r.Exit != i%7 {
			t.Errorf("job %d: %+v, want exit %d", i, r, i%7)
		}
	}
	sum, err := c.store.Summary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, q := range sum {
		for _, v := range q.Counts {
			total += v
		}
	}
	if total != n {
		t.Errorf("the metaqueue holds %d jobs for %d Exec calls (a resent submit added jobs twice)", total, n)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCLSGroupsAndPipelinesRunAsBundles: a group's bundles and a pipeline
// each run on one placeholder, in issue order, one job after another, each
// job with its own exit status.
func TestCLSGroupsAndPipelinesRunAsBundles(t *testing.T) {
	t.Parallel()
	c := newTestCLS(t, 4, 1)
	d := startCLSDriver(t, c, Config{Dir: t.TempDir(), GroupTimeout: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := d.SetGroup("g", 3); err != nil {
		t.Fatal(err)
	}
	if err := d.CreatePipeline("p", 2); err != nil {
		t.Fatal(err)
	}
	var keys []Key
	for i := 0; i < 7; i++ { // bundles of 3, 3 and (after the timeout) 1
		k, err := d.Exec(ctx, fmt.Sprintf("sleep 0.02; exit %d", i), Group("g"))
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	kp1, _ := d.Exec(ctx, "echo x > f; exit 5", Group("p"))
	kp2, _ := d.Exec(ctx, "test -s f", Group("p"))
	rs, err := d.WaitForAll(ctx)
	if err != nil || len(rs) != 9 {
		t.Fatalf("%d results, %v", len(rs), err)
	}
	byKey := map[Key]Result{}
	for _, r := range rs {
		byKey[r.Key] = r
	}
	for i, k := range keys {
		if byKey[k].Exit != i {
			t.Errorf("group job %d: %+v", i, byKey[k])
		}
	}
	if byKey[kp1].Exit != 5 || byKey[kp2].Exit != 0 {
		t.Errorf("pipeline: %+v %+v", byKey[kp1], byKey[kp2])
	}
	var ids []int64
	for _, r := range rs {
		ids = append(ids, r.ID)
	}
	var infos []protocol.JobInfo
	c.store.Inspect().Stat(ctx, protocol.Stat{IDs: ids, States: "DF"}, 0, func(js []protocol.JobInfo) error {
		infos = append(infos, js...)
		return nil
	})
	info := map[int64]protocol.JobInfo{}
	for _, j := range infos {
		info[j.ID] = j
	}
	for _, bundle := range [][]Key{keys[0:3], keys[3:6], {kp1, kp2}} {
		for i := 1; i < len(bundle); i++ {
			prev, cur := info[byKey[bundle[i-1]].ID], info[byKey[bundle[i]].ID]
			if prev.Host != cur.Host {
				t.Errorf("bundle jobs %d and %d ran on %s and %s", prev.ID, cur.ID, prev.Host, cur.Host)
			}
			if cur.Started < prev.Finished {
				t.Errorf("bundle job %d started %s before job %d finished %s", cur.ID, cur.Started, prev.ID, prev.Finished)
			}
		}
	}
}

// A command that is not UTF-8 (a Latin-1 file name) runs exactly as
// given, through the CLS and its placeholders as in local mode: JSON would
// have turned the byte into U+FFFD and made another file.
func TestCommandBytesExact(t *testing.T) {
	t.Parallel()
	const name = "caf\xe9" // café in Latin-1
	for _, mode := range []string{"cls", "local"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			var d *Driver
			if mode == "cls" {
				d = startCLSDriver(t, newTestCLS(t, 1, 1), Config{Dir: dir})
			} else {
				d = startLocal(t, Config{Dir: dir})
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			code, err := d.ExecSync(ctx, "printf x > "+name+" && test -f "+name)
			if err != nil || code != 0 {
				t.Fatalf("exit %d, %v", code, err)
			}
			ents, err := os.ReadDir(dir)
			if err != nil || len(ents) != 1 || ents[0].Name() != name {
				t.Fatalf("the job made %v (%v), want exactly %q", ents, err, name)
			}
		})
	}
}

// TestCLSGoneForGood: when the CLS stays unreachable past Config.Reconnect,
// a waiter returns a *JobError saying the job stays in the metaqueue and
// may run yet (the driver cannot delete it), and the job is there.
func TestCLSGoneForGood(t *testing.T) {
	t.Parallel()
	c := newTestCLS(t, 1, 1)
	var down atomic.Bool
	d, err := New(Config{Dir: t.TempDir(), Reconnect: 300 * time.Millisecond, Dial: func(ctx context.Context) (io.ReadWriteCloser, error) {
		if down.Load() {
			return nil, errors.New("connection refused")
		}
		return c.dial(ctx)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer d.Stop(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := d.CommandContext(ctx, "sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	states := func(st protocol.Stat) (s string) {
		c.store.Inspect().Stat(ctx, st, 0, func(js []protocol.JobInfo) error {
			for _, j := range js {
				s += j.State
			}
			return nil
		})
		return s
	}
	waitUntil(t, func() bool { return states(protocol.Stat{States: "E"}) == "E" })
	// The job can run before its submission's reply reaches the driver
	// (a busy machine): this test is of a job whose id the driver knows.
	waitUntil(t, func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		r := d.records[cmd.Key]
		return r != nil && r.id != 0
	})
	down.Store(true)
	c.cut()
	err = cmd.Wait()
	var je *JobError
	if !errors.As(err, &je) || je.ID == 0 || !strings.Contains(err.Error(), "stays in the metaqueue and may run yet") || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("Wait: %v; want a *JobError saying the job stays in the metaqueue", err)
	}
	if s := states(protocol.Stat{IDs: []int64{je.ID}, States: "WQHPEDFBX"}); s != "E" {
		t.Errorf("job %d in the metaqueue: states %q; want it still executing", je.ID, s)
	}
}

// replyDropper passes the CLS's hello to the driver, then, at the CLS's
// first reply, closes the connection in its place and marks the CLS down:
// a reply lost with the CLS.
type replyDropper struct {
	net.Conn
	down    *atomic.Bool
	greeted bool
}

func (r *replyDropper) Write(p []byte) (int, error) {
	if !r.greeted {
		r.greeted = true
		return r.Conn.Write(p)
	}
	r.down.Store(true)
	r.Conn.Close()
	return 0, net.ErrClosed
}

// TestSubmitReplyLost: a submission the CLS took, whose reply was lost
// with the CLS, gone for good: the job's error says it may be in the
// metaqueue and run yet (it is), not that it could not be submitted.
func TestSubmitReplyLost(t *testing.T) {
	t.Parallel()
	c := newTestCLS(t, 0, 1)
	var down atomic.Bool
	d, err := New(Config{Dir: t.TempDir(), Reconnect: 300 * time.Millisecond, Dial: func(ctx context.Context) (io.ReadWriteCloser, error) {
		if down.Load() {
			return nil, errors.New("connection refused")
		}
		a, b := net.Pipe()
		go c.srv.ServeConn(c.ctx, &replyDropper{Conn: b, down: &down}, protocol.RoleUser)
		return a, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer d.Stop(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := d.CommandContext(ctx, "true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var je *JobError
	if !errors.As(err, &je) || !strings.Contains(err.Error(), "may be in the metaqueue and run yet") {
		t.Fatalf("Wait: %v; want a *JobError saying the job may be in the metaqueue", err)
	}
	n := 0
	c.store.Inspect().Stat(ctx, protocol.Stat{States: "WQHPEDFBX"}, 0, func(js []protocol.JobInfo) error {
		n += len(js)
		return nil
	})
	if n != 1 {
		t.Errorf("%d jobs in the metaqueue, want the one submitted", n)
	}
}
