package placeholder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/diskroom"
	"github.com/mq-hpc/mq/internal/metaqueue"
	"github.com/mq-hpc/mq/internal/server"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// cls is an in-process CLS: a Store and a Server that agents reach over
// net.Pipe. cut closes every connection, as a network failure would.
type cls struct {
	t     *testing.T
	store *metaqueue.Store
	srv   *server.Server
	ctx   context.Context

	mu    sync.Mutex
	conns []*peerConn
	dials int
	seen  map[string]int // requests read, by op
	lost  map[string]int // requests that vanished into a silent connection, by op
	fail  int            // report requests still to answer with a storage failure
	// failUntil: report requests are answered so until then, too.
	failUntil time.Time
	// failCode, if set, is the code of those answers instead (a refusal).
	failCode string
	// refuseRegisterUntil: registrations are answered with a storage
	// failure until then (a CLS on a full disk).
	refuseRegisterUntil time.Time
	refusedRegisters    int
	// dropAfterRegisterUntil: until then a connection is closed at its
	// first request after hello and register (a middlebox that resets
	// each connection soon after it is made).
	dropAfterRegisterUntil time.Time
	busy                   int // replies refusing a request as busy
	// cutOnJobs, while above 0, cuts the connection instead of writing a
	// reply that hands out jobs, and counts down: the jobs are claimed
	// for the placeholder, which never hears of them.
	cutOnJobs int
	// loseOnJobs, while above 0, takes a reply that hands out jobs as
	// written and then cuts the connection, and counts down: the reply
	// was lost in the transport, unread.
	loseOnJobs int
	// grant, if set, adds a grant to each job the CLS hands out, as a
	// CLS that packs by resources does (nil: none for that job).
	grant func(protocol.Assignment) *protocol.Capacity
	// edit, if set, changes each job the CLS hands out as it leaves.
	edit func(*protocol.Assignment)
	// dropStarted: the starts requests name are taken out before the
	// store reads them, and answered as usual: a CLS that lost starts it
	// answered (restarted while it kept them in memory). dropped counts
	// the requests that named one.
	dropStarted bool
	dropped     int
}

func newCLS(t *testing.T) *cls { return newCLSLease(t, 5*time.Second) }

func newCLSLease(t *testing.T, lease time.Duration) *cls {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := metaqueue.Open(ctx, metaqueue.Options{Path: filepath.Join(t.TempDir(), "mq.db"), Sync: metaqueue.SyncNormal, Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	c := &cls{t: t, store: st, srv: &server.Server{Store: st}, ctx: ctx, seen: map[string]int{}, lost: map[string]int{}}
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
	p := &peerConn{Conn: b, c: c}
	c.mu.Lock()
	c.conns = append(c.conns, p)
	c.dials++
	c.mu.Unlock()
	go c.srv.ServeConn(c.ctx, p, protocol.RoleUser)
	return a, nil
}

// silence makes the CLS's end of every connection open now behave as a
// stopped CLS: requests vanish unanswered and nothing is written back.
// Connections dialled later are served.
func (c *cls) silence() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.conns {
		p.silent.Store(true)
	}
}

// count is how many requests of op were read (lost: vanished unanswered).
// carried counts requests that carried reports, whatever their op.
const carried = "(reports)"

// available counts next requests that said what the placeholder has free.
const available = "(available)"

func (c *cls) count(op string, lost bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if lost {
		return c.lost[op]
	}
	return c.seen[op]
}

// peerConn is the CLS's end of one agent connection.
type peerConn struct {
	net.Conn
	c      *cls
	silent atomic.Bool
}

// startedList is a request's list of starts (Next, ReportBatch,
// Heartbeat: Started), not empty; a report's own "started" is a time.
var startedList = regexp.MustCompile(`"started":\[\{[^\]]*\]`)

func (p *peerConn) Read(b []byte) (int, error) {
	for {
		n, err := p.Conn.Read(b)
		silent := p.silent.Load()
		p.c.mu.Lock()
		for _, op := range []string{protocol.OpNext.Name, protocol.OpReport.Name, protocol.OpHeartbeat.Name, protocol.OpOutputShip.Name} {
			k := strings.Count(string(b[:n]), `"op":"`+op+`"`)
			p.c.seen[op] += k
			if silent {
				p.c.lost[op] += k
			}
		}
		p.c.seen[available] += strings.Count(string(b[:n]), `"available":{`)
		// A report goes on its own, or on a next that does not wait
		// (when it may take the work it makes ready): both carry reports.
		reports := strings.Contains(string(b[:n]), `"op":"`+protocol.OpReport.Name+`"`) ||
			(strings.Contains(string(b[:n]), `"op":"`+protocol.OpNext.Name+`"`) && strings.Contains(string(b[:n]), `"reports":[{`))
		if reports {
			p.c.seen[carried]++
			if silent {
				p.c.lost[carried]++
			}
		}
		fail := (p.c.fail > 0 || time.Now().Before(p.c.failUntil)) && reports
		if fail && p.c.fail > 0 {
			p.c.fail--
		}
		if time.Now().Before(p.c.dropAfterRegisterUntil) && strings.Contains(string(b[:n]), `"op":"`) &&
			!strings.Contains(string(b[:n]), `"op":"`+protocol.OpRegister.Name+`"`) && !strings.Contains(string(b[:n]), `"op":"`+protocol.OpHello.Name+`"`) {
			p.c.mu.Unlock()
			p.Conn.Close()
			return 0, io.EOF
		}
		if p.c.dropStarted && startedList.Match(b[:n]) {
			p.c.dropped++
			n = copy(b, startedList.ReplaceAll(b[:n], []byte(`"started":[]`)))
		}
		if time.Now().Before(p.c.refuseRegisterUntil) && strings.Contains(string(b[:n]), `"op":"`+protocol.OpRegister.Name+`"`) {
			fail = true
			p.c.refusedRegisters++
		}
		p.c.mu.Unlock()
		if fail {
			// Answered as a CLS whose commit failed would, instead of the
			// store (a client writes one request per write).
			req, perr := protocol.ParseRequest(b[:n])
			if perr != nil {
				return 0, perr
			}
			e := protocol.Errorf(protocol.CodeInternal, "metaqueue storage failure: disk I/O error")
			if p.c.failCode != "" && req.Op != protocol.OpRegister.Name {
				e = protocol.Errorf(p.c.failCode, "job 1's missing input \"a\\nb\" has a control character")
			}
			resp, _ := json.Marshal(protocol.Response{ID: req.ID, Err: e})
			if _, err := p.Conn.Write(append(resp, '\n')); err != nil {
				return 0, err
			}
			continue
		}
		if err != nil || !silent {
			return n, err
		}
	}
}

func (p *peerConn) Write(b []byte) (int, error) {
	if p.silent.Load() {
		return len(b), nil
	}
	if k := strings.Count(string(b), `"code":"`+protocol.CodeBusy+`"`); k > 0 {
		p.c.mu.Lock()
		p.c.busy += k
		p.c.mu.Unlock()
	}
	p.c.mu.Lock()
	grant, edit := p.c.grant, p.c.edit
	cut := p.c.cutOnJobs > 0 && strings.Contains(string(b), `"jobs":[{`)
	if cut {
		p.c.cutOnJobs--
	}
	lose := !cut && p.c.loseOnJobs > 0 && strings.Contains(string(b), `"jobs":[{`)
	if lose {
		p.c.loseOnJobs--
	}
	p.c.mu.Unlock()
	if cut {
		p.Conn.Close()
		return 0, io.ErrClosedPipe
	}
	if lose {
		p.Conn.Close()
		return len(b), nil
	}
	if (grant != nil || edit != nil) && strings.Contains(string(b), `"jobs":[`) {
		if _, err := p.Conn.Write(withGrants(p.c.t, b, grant, edit)); err != nil {
			return 0, err
		}
		return len(b), nil
	}
	return p.Conn.Write(b)
}

// withGrants adds grants to the assignments in the next replies among
// frames b (grant, if not nil), and edits them (edit, if not nil).
func withGrants(t *testing.T, b []byte, grant func(protocol.Assignment) *protocol.Capacity, edit func(*protocol.Assignment)) []byte {
	var out []byte
	for _, line := range strings.SplitAfter(string(b), "\n") {
		var resp protocol.Response
		var reply protocol.NextReply
		if !strings.Contains(line, `"jobs":[`) || json.Unmarshal([]byte(line), &resp) != nil || json.Unmarshal(resp.Body, &reply) != nil {
			out = append(out, line...)
			continue
		}
		for i := range reply.Jobs {
			if grant != nil {
				reply.Jobs[i].Grant = grant(reply.Jobs[i])
			}
			if edit != nil {
				edit(&reply.Jobs[i])
			}
		}
		resp.Body, _ = json.Marshal(reply)
		frame, err := json.Marshal(resp)
		if err != nil {
			t.Error(err)
		}
		out = append(append(out, frame...), '\n')
	}
	return out
}

// busyReplies is how many requests the CLS refused as busy.
func (c *cls) busyReplies() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.busy
}

func (c *cls) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		conn.Close()
	}
	c.conns = nil
}

// ceiling makes queue name, whose jobs are killed after seconds.
func (c *cls) ceiling(name string, seconds float64) {
	c.t.Helper()
	if _, err := c.store.SetQueue(context.Background(), protocol.QueueSet{Name: name, Ceiling: &seconds}); err != nil {
		c.t.Fatal(err)
	}
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
	// Generous: hundreds of real jobs one after another, under the race
	// detector on a loaded machine, take well over 20 s.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
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

// agentConfig is an agent's config with slots at site test, host h.
func agentConfig(t *testing.T, slots int) Config {
	return Config{Site: "test", Host: "h", Slots: slots, OutDir: t.TempDir()}
}

// startAgent starts an agent with slots until the test ends, and
// returns it and its output directory.
func startAgent(t *testing.T, c *cls, slots int) (*Agent, string) {
	t.Helper()
	cfg := agentConfig(t, slots)
	return startAgentCfg(t, c, cfg), cfg.OutDir
}

// startAgentCfg starts an agent with cfg (its Dial c's unless set) until
// the test ends.
func startAgentCfg(t *testing.T, c *cls, cfg Config) *Agent {
	t.Helper()
	if cfg.Dial == nil {
		cfg.Dial = c.dial
	}
	a := New(cfg)
	runAgent(t, a)
	return a
}

// startWarmAgent starts an agent with cfg and has it run 20 jobs of
// nothing (in dir) first: it then takes jobs of seconds for short ones,
// and fetches one ahead.
func startWarmAgent(t *testing.T, c *cls, cfg Config, dir string) {
	t.Helper()
	ids := c.submit(slices.Repeat([]protocol.JobSpec{{Target: "warm", Command: "true", Cwd: dir}}, 20)...)
	startAgentCfg(t, c, cfg)
	c.wait(ids...)
}

// runAgent runs a until the test ends; it must then stop, without an
// error, within 10 s.
func runAgent(t *testing.T, a *Agent) {
	t.Helper()
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
}

func TestAgentRunsJobs(t *testing.T) {
	t.Parallel()
	c := newCLS(t)
	dir := t.TempDir()
	ids := c.submit(slices.Repeat([]protocol.JobSpec{{Target: "t", Command: `echo "$MQ_JOB_ID $MQ_ATTEMPT $MQ_TARGET"; echo err >&2; exit $((MQ_JOB_ID % 3 == 0 ? 3 : 0))`, Cwd: dir}}, 40)...)
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

// ranOnce checks that job id, which appends "ran" to dir/ran.txt, ended
// Done on its first attempt, having run once.
func ranOnce(t *testing.T, c *cls, id int64, dir string) {
	t.Helper()
	if e := c.wait(id)[id]; e.State != "D" {
		t.Fatalf("job ended %+v", e)
	}
	d, err := c.store.Inspect().Job(context.Background(), id)
	if err != nil || d.Attempts != 1 || len(d.History) != 0 {
		t.Fatalf("job %+v, %v: want one attempt and no history", d, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "ran.txt")); string(b) != "ran\n" {
		t.Fatalf("ran.txt = %q: the job ran other than once", b)
	}
}

// TestAgentSurvivesCut: the connection drops while a job runs; the job
// goes on, the agent reconnects and reports it once, and it ends Done on
// its first attempt. The cut comes once the job has started at the agent
// (it says so in a file) and before it ends (it waits for a release file):
// the job's state E says only that the CLS claimed it, and a cut between
// that claim and the reply reaching the agent is another case
// (TestAgentCutBeforeReply). A report lost for good fails it when the
// lease (30 s) runs out.
//
// In the other cases the CLS answers the agent's registrations with a
// storage failure (its disk is full) for ten times --reconnect, after the
// cut or from the agent's start: a CLS that answers is not unreachable,
// so the agent waits for it instead of giving up (and killing its job).
func TestAgentSurvivesCut(t *testing.T) {
	t.Parallel()
	const reconnect = 300 * time.Millisecond
	for _, tc := range []struct {
		name    string
		refused time.Duration // registrations refused for this long
		first   bool          // from the agent's start, not from the cut
	}{
		{"cut", 0, false},
		{"registrations refused", 10 * reconnect, false},
		{"first registration refused", 10 * reconnect, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCLSLease(t, 30*time.Second)
			refuse := func() {
				c.mu.Lock()
				c.refuseRegisterUntil = time.Now().Add(tc.refused)
				c.mu.Unlock()
			}
			dir := t.TempDir()
			ids := c.submit(protocol.JobSpec{Target: "t", Command: "touch started; while [ ! -e release ]; do sleep 0.02; done; echo ran >> ran.txt", Cwd: dir})
			cfg := agentConfig(t, 1)
			cfg.Reconnect = reconnect
			if tc.first {
				refuse()
			}
			startAgentCfg(t, c, cfg)
			waitStarted(t, dir)
			if !tc.first {
				refuse()
			}
			c.cut()
			if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			ranOnce(t, c, ids[0], dir)
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.dials < 2 {
				t.Fatalf("agent dialled %d times; it should have reconnected", c.dials)
			}
			if tc.refused > 0 && c.refusedRegisters < 3 {
				t.Fatalf("%d registrations refused; the test wants the agent to have asked through the refusal", c.refusedRegisters)
			}
		})
	}
}

// TestAgentSpacesReconnects: while every connection dies at its first
// request after registering, the agent reconnects with growing delays
// (up to 5 s), not at once: each connection costs the CLS a handshake and
// a registration's commit. Once connections live, it works as before.
func TestAgentSpacesReconnects(t *testing.T) {
	t.Parallel()
	c := newCLSLease(t, 30*time.Second)
	const churn = 3 * time.Second
	c.mu.Lock()
	c.dropAfterRegisterUntil = time.Now().Add(churn)
	c.mu.Unlock()
	dir := t.TempDir()
	ids := c.submit(protocol.JobSpec{Target: "t", Command: "echo ran >> ran.txt", Cwd: dir})
	startAgentCfg(t, c, agentConfig(t, 1))
	time.Sleep(churn) // the condition waited on is the window's end
	c.mu.Lock()
	dials := c.dials
	c.mu.Unlock()
	// 100 ms doubling to 5 s with jitter: at most 6 in 3 s; at once, hundreds.
	if dials > 10 {
		t.Fatalf("the agent connected %d times in %s of connections dying young", dials, churn)
	}
	ranOnce(t, c, ids[0], dir)
}

// TestAgentCutBeforeReply: the reply that hands out a job, claimed for
// the agent, never reaches it, and the job is handed back (not a lost
// attempt); the agent, on its next connection, takes it again and runs
// it once, long before the lease (an hour) would have requeued it.
//   - write failed: the connection drops just as the CLS writes the
//     reply, which hands the jobs back itself.
//   - lost in the transport: the transport takes the reply, and the
//     connection dies before the agent reads it. The agent registers
//     again listing what it holds (nothing), and the CLS hands back what
//     it does not list.
func TestAgentCutBeforeReply(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		set  func(c *cls) *int // arms the fault; what counts it down
	}{
		{"write failed", func(c *cls) *int { c.cutOnJobs = 1; return &c.cutOnJobs }},
		{"lost in the transport", func(c *cls) *int { c.loseOnJobs = 1; return &c.loseOnJobs }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCLSLease(t, time.Hour)
			dir := t.TempDir()
			c.mu.Lock()
			left := tc.set(c)
			c.mu.Unlock()
			id := c.submit(protocol.JobSpec{Target: "t", Command: "echo ran >> ran.txt", Cwd: dir})[0]
			startAgent(t, c, 1)
			waitUntil(t, 20*time.Second, func() error {
				if st := stateOf(t, c, id); st != "D" {
					return fmt.Errorf("job %s, not D: the jobs of a reply the agent never read wait for their lease", st)
				}
				return nil
			})
			d, err := c.store.Inspect().Job(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if len(d.History) != 0 || len(d.Unstarted) != 1 || d.Unstarted[0].Attempt != 1 || d.Unstarted[0].Reason != metaqueue.ReasonHandedBack {
				t.Fatalf("job %+v: want attempt 1 handed back unstarted, nothing lost", d)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "ran.txt")); string(b) != "ran\n" {
				t.Fatalf("ran.txt = %q: the job ran other than once", b)
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			if *left != 0 || c.dials < 2 {
				t.Fatalf("faults left %d, dials %d: the reply was not lost, or the agent did not reconnect", *left, c.dials)
			}
		})
	}
}

// TestAgentResendsReport: the agent keeps a job's report until the CLS
// acknowledges it, and sends it again, so the job ends Done on its first
// attempt, having run once, long before its lease (an hour) would have
// requeued it.
//   - unanswered: the CLS stops answering (as a stopped process does)
//     just as the job ends, for longer than an agent once waited for a
//     report's reply before dropping it, and then the connection breaks;
//     the report goes again on the next connection.
//   - refused: the CLS could not take the report (its batch's commit
//     failed).
func TestAgentResendsReport(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		silence bool // the CLS goes silent as the job ends, then the connection breaks
		fail    int  // report requests the CLS answers with a storage failure
		slots   int
	}{
		{name: "unanswered", silence: true, slots: 2},
		{name: "refused", fail: 1, slots: 2},
		{name: "refused on a poll", fail: 3, slots: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCLSLease(t, time.Hour) // about the report, not the lease
			dir := t.TempDir()
			id := c.submit(protocol.JobSpec{Target: "t", Command: "echo ran >> ran.txt; while [ ! -e release ]; do sleep 0.02; done", Cwd: dir})[0]
			c.mu.Lock()
			c.fail = tc.fail
			c.mu.Unlock()
			// Two slots: while the job runs, a poll for the idle one is
			// out, so the job's report goes on its own. One: the report
			// rides the poll for the slot the job frees.
			startAgent(t, c, tc.slots)
			deadline := time.Now().Add(20 * time.Second)
			for stateOf(t, c, id) != "E" || !exists(filepath.Join(dir, "ran.txt")) || c.count(protocol.OpNext.Name, false) < tc.slots {
				if time.Now().After(deadline) {
					t.Fatal("the job never started, or no poll went out for the idle slot")
				}
				time.Sleep(20 * time.Millisecond)
			}
			if tc.silence {
				c.silence()
			}
			if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if tc.silence {
				for c.count(carried, true) == 0 {
					if time.Now().After(deadline) {
						t.Fatal("the job's report never went out")
					}
					time.Sleep(20 * time.Millisecond)
				}
				// The CLS stays silent for longer than the agent once
				// waited (10 s).
				time.Sleep(11 * time.Second)
				if st := stateOf(t, c, id); st != "E" {
					t.Fatalf("job is %s while the CLS was silent", st)
				}
				c.cut()
			}
			ranOnce(t, c, id, dir)
			if tc.fail > 0 && c.count(carried, false) < tc.fail+1 {
				t.Fatalf("%d requests carried reports; want the %d refused and a resend", c.count(carried, false), tc.fail)
			}
		})
	}
}

// TestAgentReportOutlivesLease: a job ends, and the CLS cannot commit its
// report (a full disk) for longer than the lease. The attempt's lease
// holds (heartbeats name an attempt until its report is acknowledged),
// so the job ends Done on its first attempt, having run once, instead of
// lapsing and running again. With one slot the report rides the poll for
// the freed slot, which asks again; with two it goes on its own.
func TestAgentReportOutlivesLease(t *testing.T) {
	t.Parallel()
	for _, slots := range []int{1, 2} {
		t.Run(fmt.Sprintf("slots=%d", slots), func(t *testing.T) {
			t.Parallel()
			const lease = 4 * time.Second
			c := newCLSLease(t, lease)
			dir := t.TempDir()
			id := c.submit(protocol.JobSpec{Target: "t", Command: "echo ran >> ran.txt; while [ ! -e release ]; do sleep 0.02; done", Cwd: dir})[0]
			startAgent(t, c, slots)
			waitUntil(t, 20*time.Second, func() error {
				if stateOf(t, c, id) != "E" || !exists(filepath.Join(dir, "ran.txt")) {
					return errors.New("the job never started")
				}
				return nil
			})
			refused := 3 * lease
			c.mu.Lock()
			c.failUntil = time.Now().Add(refused)
			c.mu.Unlock()
			if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, 20*time.Second, func() error {
				if c.count(carried, false) == 0 {
					return errors.New("the job's report never went out")
				}
				return nil
			})
			ranOnce(t, c, id, dir)
			c.mu.Lock()
			defer c.mu.Unlock()
			if time.Now().Before(c.failUntil) {
				t.Fatal("the job ended while the CLS refused its report")
			}
		})
	}
}

// TestAgentSurvivesRefusedReports: a CLS that refuses a request for what
// one of its reports says (as one did for a path with control
// characters) costs the agent neither its life nor the other jobs: the
// reports go again on their own, the agent polls on, every job ends.
func TestAgentSurvivesRefusedReports(t *testing.T) {
	t.Parallel()
	c := newCLSLease(t, 3*time.Second)
	c.mu.Lock()
	c.fail, c.failCode = 1, protocol.CodeBadRequest
	c.mu.Unlock()
	var ids []int64
	for _, tg := range []string{"a", "b", "c", "d"} {
		ids = append(ids, c.submit(protocol.JobSpec{Target: tg, Command: "true"})...)
	}
	a := New(Config{Dial: c.dial, Site: "test", Host: "h", Slots: 1, OutDir: t.TempDir()})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	exited := make(chan error, 1)
	go func() { exited <- a.Run(ctx) }()
	wctx, wcancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer wcancel()
	go func() {
		select {
		case err := <-exited:
			t.Errorf("the agent exited: %v", err)
			wcancel()
		case <-wctx.Done():
		}
	}()
	r, err := c.store.Wait(wctx, ids, 0)
	if err != nil {
		t.Fatalf("waiting: %v", err)
	}
	for _, e := range r.Jobs {
		if e.State != "D" {
			t.Errorf("job %d ended %+v", e.ID, e)
		}
	}
	if c.count(carried, false) < 2 {
		t.Errorf("%d requests carried reports; want the refused one and more", c.count(carried, false))
	}
}

func stateOf(t *testing.T, c *cls, id int64) string {
	d, err := c.store.Inspect().Job(context.Background(), id)
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
	c.ceiling("short", 0.5)
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
	startWarmAgent(t, c, agentConfig(t, 1), dir)
	time.Sleep(200 * time.Millisecond) // parked again, asking for a slot and one ahead
	both := c.submit(protocol.JobSpec{Target: "long", Command: "sleep 6", Cwd: dir}, protocol.JobSpec{Target: "short", Command: "true", Cwd: dir})
	long, short := both[0], both[1]
	time.Sleep(500 * time.Millisecond) // the first placeholder runs the long job and holds the short one
	startAgent(t, c, 1)
	ends := c.wait(short)
	if ends[short].State != "D" {
		t.Fatalf("short job ended %+v", ends[short])
	}
	ls, _ := c.store.Inspect().Job(context.Background(), long)
	if ls.State == "D" {
		t.Fatalf("the short job waited for the long one: a held job was not given back")
	}
	d, _ := c.store.Inspect().Job(context.Background(), short)
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
			d, err := c.store.Inspect().Job(context.Background(), id)
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
	for _, op := range []string{protocol.OpNext.Name, protocol.OpReport.Name} {
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
	ids := c.submit(slices.Repeat([]protocol.JobSpec{{Target: "t", Command: "exit 1", Cwd: dir}}, n)...) // not run: no-op
	ops := runCounted(t, c, Config{Site: "test", Host: "h", Slots: slots, OutDir: t.TempDir(), NoOp: true}, ids)
	if ops[protocol.OpReport.Name] > 1 { // the last jobs may be reported as the agent stops
		t.Errorf("%d separate report requests; want the reports carried by polls", ops[protocol.OpReport.Name])
	}
	if max := n/slots + 5; ops[protocol.OpNext.Name] > max {
		t.Errorf("%d polls for %d jobs with %d slots; want at most %d", ops[protocol.OpNext.Name], n, slots, max)
	}
}

// Short jobs are fetched ahead and reported in batches: one round trip per
// job would cost the CLS and the agent more than the jobs themselves.
func TestAgentBatchesShortJobs(t *testing.T) {
	t.Parallel()
	c := newCLS(t)
	const n = 300
	dir := t.TempDir()
	ids := c.submit(slices.Repeat([]protocol.JobSpec{{Target: "t", Command: "true", Cwd: dir}}, n)...)
	// Short is relative to the prefetch window: the agent holds a window's
	// worth of jobs and refills at half, so polls number about
	// 2n·run/window. Under the race detector on a machine at load 30,
	// `true` takes 30-100 ms (and may spike past the default window's
	// 500 ms "long" mark); a window of 5 s keeps it short: at most 64 held,
	// and under 100 requests for 300 jobs unless they average over 300 ms.
	ops := runCounted(t, c, Config{Site: "test", Host: "h", Slots: 1, OutDir: t.TempDir(), prefetchWindow: 5 * time.Second}, ids)
	t.Logf("requests %v for %d jobs", ops, n)
	if reqs := ops[protocol.OpNext.Name] + ops[protocol.OpReport.Name]; reqs > n/3 {
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

// TestAgentOutputLost: a job whose output cannot be written (a failing
// disk: the stdout file fails with EIO after 4 KiB) still ends as it ran,
// but the loss is recorded on its attempt and the job's detail says it.
// The job is not blocked by its pipe, nor killed by it. (A write refused
// for want of room stops it to run again: TestAgentPausesForQuota.)
func TestAgentOutputLost(t *testing.T) {
	t.Parallel()
	c := newCLS(t)
	dir := t.TempDir()
	// Much more than a pipe holds, so a sink that stopped reading would
	// block the job.
	ids := c.submit(protocol.JobSpec{Target: "t", Command: "head -c 1000000 /dev/zero; echo ok >&2", Cwd: dir})
	out := t.TempDir()
	stdout, stderr := job.OutputPaths(out, ids[0], 1)
	a := New(Config{Dial: c.dial, Site: "test", Host: "h", Slots: 1, OutDir: out})
	a.create = func(path string) (io.WriteCloser, error) {
		f, err := createOutput(path)
		if err != nil || path != stdout {
			return f, err
		}
		return &fullDisk{f: f, room: 4096, err: syscall.EIO}, nil
	}
	runAgent(t, a)
	e := c.wait(ids...)[ids[0]]
	if e.State != "D" || e.Exit == nil || *e.Exit != 0 {
		t.Errorf("job ended %+v, want done, exit 0", e)
	}
	d, err := c.store.Inspect().Job(context.Background(), ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.OutputLost, "stdout: ") || !strings.Contains(d.OutputLost, "input/output error") {
		t.Errorf("output_lost %q, want the stdout's write error", d.OutputLost)
	}
	if b, err := os.ReadFile(stderr); err != nil || string(b) != "ok\n" {
		t.Errorf("stderr %q, %v; want ok", b, err)
	}
}

// TestAgentOutputCap: a job writing more than MaxOutput to stdout and
// stderr together is stopped at the cap and fails with the reason; what it
// wrote up to the cap is kept.
func TestAgentOutputCap(t *testing.T) {
	t.Parallel()
	c := newCLS(t)
	ids := c.submit(protocol.JobSpec{Target: "t", Command: "head -c 60000 /dev/zero >&2; head -c 100000 /dev/zero; sleep 600", Cwd: t.TempDir()})
	out := t.TempDir()
	startAgentCfg(t, c, Config{Site: "test", Host: "h", Slots: 1, OutDir: out, MaxOutput: 100000})
	e := c.wait(ids...)[ids[0]]
	if e.State != "F" || !strings.Contains(e.Reason, "cap of 100000 bytes") {
		t.Errorf("job ended %+v, want failed over the output cap", e)
	}
	stdout, stderr := job.OutputPaths(out, ids[0], 1)
	var total int64
	for _, p := range []string{stdout, stderr} {
		if fi, err := os.Stat(p); err == nil {
			total += fi.Size()
		}
	}
	if total != 100000 {
		t.Errorf("stdout and stderr hold %d bytes, want the cap, 100000", total)
	}
}

// TestOutputLimitReserve: the limit stops writing where the filesystem
// would keep less than the reserve free.
func TestOutputLimitReserve(t *testing.T) {
	t.Parallel()
	free := int64(10000)
	l := &outputLimit{reserve: 4000, statfs: func(string) (diskroom.Free, error) { return diskroom.Free{Bytes: free}, nil }, over: make(chan struct{})}
	if n := l.take(5000); n != 5000 {
		t.Fatalf("take(5000) with 10000 free = %d", n)
	}
	free -= 5000
	if n := l.take(5000); n != 1000 {
		t.Fatalf("take(5000) with 5000 free and 4000 kept = %d, want 1000", n)
	}
	select {
	case <-l.over:
	default:
		t.Fatal("the limit was reached but not said")
	}
	if !strings.Contains(l.why(), "nearly full") {
		t.Errorf("reason %q", l.why())
	}
	if n := l.take(1); n != 0 {
		t.Errorf("take after the limit = %d", n)
	}
}

// fullDisk is a file on a disk with room bytes left; past them writes
// fail with err.
type fullDisk struct {
	f    io.WriteCloser
	room int
	err  syscall.Errno
}

func (d *fullDisk) Write(p []byte) (int, error) {
	if len(p) > d.room {
		n, _ := d.f.Write(p[:d.room])
		d.room = 0
		return n, &os.PathError{Op: "write", Path: "out", Err: d.err}
	}
	d.room -= len(p)
	return d.f.Write(p)
}

func (d *fullDisk) Close() error { return d.f.Close() }

// TestAgentStagedOutputLost: the CLS cannot keep a remote job's output
// (writing its copy fails); the loss is recorded on the attempt, by the CLS and
// in the agent's report.
func TestAgentStagedOutputLost(t *testing.T) {
	t.Parallel()
	c := newCLS(t)
	c.srv.OutputDir = t.TempDir()
	ids := c.submit(protocol.JobSpec{Target: "t", Command: "echo hello", Cwd: t.TempDir()})
	// A file where the copy's directory should be: every write fails.
	copyPath, _ := job.OutputPaths(c.srv.OutputDir, ids[0], 1)
	if err := os.WriteFile(filepath.Dir(copyPath), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	startAgentCfg(t, c, Config{Site: "test", Host: "h", Slots: 1, OutDir: t.TempDir(), StageOutput: true})
	if e := c.wait(ids...)[ids[0]]; e.State != "D" {
		t.Errorf("job ended %+v, want done", e)
	}
	d, err := c.store.Inspect().Job(context.Background(), ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.OutputLost, "stdout not copied to the CLS") || !strings.Contains(d.OutputLost, "not a directory") {
		t.Errorf("output_lost %q, want the CLS's write error", d.OutputLost)
	}
}

// TestWhenToReport: reports go at once when the long poll out has parked
// (the CLS had no work for it, and a report may make some: a dependent
// job), or will park because the reply before it found the CLS dry, or
// when nothing else runs; a poll that may still return carries them; with
// no long poll out, the refill does.
func TestWhenToReport(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		longPollOut bool
		age         time.Duration
		afterDry    bool
		running     int
		want        reportTiming
	}{
		{"nothing runs, poll out", true, 0, false, 0, reportNow},
		{"nothing runs, parked", true, time.Second, false, 0, reportNow},
		{"parked, others run", true, parkedAfter, false, 3, reportNow},
		{"parked long ago, others run", true, 29 * time.Second, false, 1, reportNow},
		{"just sent, others run", true, parkedAfter / 5, false, 2, reportSoon},
		// Two pipelines: the first stage's dependent came back on the
		// parked poll, alone; the next poll has just gone out and the
		// second stage ends. Its dependent must not wait for reportHold.
		{"just sent after a dry reply, others run", true, 0, true, 1, reportNow},
		{"no poll out", false, 0, false, 2, reportWithRefill},
		{"no poll out after a dry reply", false, 0, true, 2, reportWithRefill},
		{"no poll out, nothing runs", false, 0, false, 0, reportWithRefill},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := whenToReport(tc.longPollOut, tc.age, tc.afterDry, tc.running); got != tc.want {
				t.Errorf("whenToReport(%v, %v, %v, %d) = %d, want %d", tc.longPollOut, tc.age, tc.afterDry, tc.running, got, tc.want)
			}
		})
	}
}

// TestSlotsUncovered: a report goes out asking for work (a next that does
// not wait) only for free slots that no request out asks for already, so
// the dependent a report makes ready can come back on its answer when the
// long poll that would have taken it was answered already.
func TestSlotsUncovered(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                                 string
		longPollOut                          bool
		free, held, pollCovers, taking, want int
	}{
		// Two pipelines on 8 slots: the poll went out for the 6 free
		// slots; a stage ends: its slot is nobody's.
		{"a stage ended under a long poll", true, 7, 0, 6, 0, 1},
		{"two ended", true, 8, 0, 6, 0, 2},
		{"a report out asks for it already", true, 7, 0, 6, 1, 0},
		{"a held job fills it", true, 7, 1, 6, 0, 0},
		{"the poll covers every free slot", true, 6, 0, 6, 0, 0},
		{"more covered than free", true, 2, 1, 6, 3, 0},
		{"no long poll out: the next poll asks", false, 7, 0, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := slotsUncovered(tc.longPollOut, tc.free, tc.held, tc.pollCovers, tc.taking); got != tc.want {
				t.Errorf("slotsUncovered = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestReportTake: reports ask for work only while the long poll, they and
// a margin stay within the CLS's bound on next requests per connection.
func TestReportTake(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ take, asking, want int }{
		{0, 0, 0},
		{1, 0, 1},
		{2, protocol.NextsPerConn - 3, 2},
		{1, protocol.NextsPerConn - 2, 0},
		{1, protocol.NextsPerConn, 0},
	} {
		if got := reportTake(tc.take, tc.asking); got != tc.want {
			t.Errorf("reportTake(%d, %d) = %d, want %d", tc.take, tc.asking, got, tc.want)
		}
	}
	if !resend(protocol.Errorf(protocol.CodeBusy, "busy")) {
		t.Error("a report refused as busy is dropped; it must go again")
	}
}

// TestAgentStaggeredPipelinesStayWithinBound: eight pipelines whose first
// stages end a few milliseconds apart, each report asking for its
// dependent while the others are out. Their requests once outnumbered the
// CLS's bound on next requests per connection; it refused the extra ones
// as busy, and the agent dropped those reports, so their jobs waited for
// the lease (here an hour) and ran twice. Every report must be taken and
// nothing refused.
func TestAgentStaggeredPipelinesStayWithinBound(t *testing.T) {
	t.Parallel()
	c := newCLSLease(t, time.Hour)
	dir := t.TempDir()
	var ids []int64
	for round := 0; round < 5; round++ {
		var specs []protocol.JobSpec
		for i := 0; i < 8; i++ {
			a := fmt.Sprintf("r%da%d", round, i)
			specs = append(specs,
				protocol.JobSpec{Target: a, Command: fmt.Sprintf("sleep 0.0%d", i+1), Cwd: dir},
				protocol.JobSpec{Target: fmt.Sprintf("r%db%d", round, i), Prereqs: []string{a}, Command: "true", Cwd: dir})
		}
		ids = append(ids, c.submit(specs...)...)
		if round == 0 {
			startAgent(t, c, 8)
		}
		for id, e := range c.wait(ids...) {
			if e.State != "D" {
				t.Fatalf("job %d ended %+v", id, e)
			}
		}
	}
	if n := c.busyReplies(); n != 0 {
		t.Fatalf("the CLS refused %d requests as busy", n)
	}
	for _, id := range ids {
		if d, err := c.store.Inspect().Job(context.Background(), id); err != nil || d.Attempts != 1 {
			t.Fatalf("job %d: %+v, %v: want one attempt", id, d, err)
		}
	}
}

// TestDecide: the work loop's policy, case by case. (When gathered reports
// go, a parked poll sending them at once after parkedAfter, is
// TestWhenToReport's.)
func TestDecide(t *testing.T) {
	t.Parallel()
	const long = 30 * time.Second
	for _, tc := range []struct {
		name string
		s    loopState
		want move
	}{
		// Idle, free slots: one long poll for the free slots (plus one ahead
		// when jobs are short).
		{"idle, 4 free", loopState{Free: 4}, move{Poll: true, Want: 4, Wait: long}},
		{"idle, short jobs: a slot and one ahead", loopState{Free: 1, Depth: 3}, move{Poll: true, Want: 2, Wait: long}},
		{"idle, no-op: the whole prefetch", loopState{Free: 1, Depth: 3, NoOp: true}, move{Poll: true, Want: 4, Wait: long}},
		{"idle timeout bounds the wait", loopState{Free: 2, IdleTimeout: time.Minute, IdleFor: 50 * time.Second}, move{Poll: true, Want: 2, Wait: 10 * time.Second}},
		{"idle timeout nearly up: 10 ms at least", loopState{Free: 2, IdleTimeout: time.Minute, IdleFor: time.Minute - time.Millisecond}, move{Poll: true, Want: 2, Wait: 10 * time.Millisecond}},
		{"orphanable: looks every 5 s", loopState{Free: 2, Orphanable: true}, move{Poll: true, Want: 2, Wait: 5 * time.Second}},
		{"a free slot, a held job for it: nothing", loopState{Free: 1, Running: 1, Held: 1}, move{}},
		{"a poll out: no second", loopState{Free: 4, PollOut: true}, move{}},
		{"reports pending, long poll out: whenToReport sends them", loopState{Free: 1, Running: 1, PollOut: true, ReportsDue: true}, move{}},

		// All slots busy.
		{"busy, long jobs: nothing", loopState{Running: 4}, move{}},
		{"busy, short jobs: prefetch", loopState{Running: 4, Depth: 8}, move{Poll: true, Want: 8, Prefetch: true}},
		{"busy, prefetch half used: refill", loopState{Running: 4, Depth: 8, Held: 3}, move{Poll: true, Want: 5, Prefetch: true}},
		{"busy, prefetch mostly there: nothing", loopState{Running: 4, Depth: 8, Held: 5}, move{}},
		{"busy, prefetch found nothing: wait for a job to end", loopState{Running: 4, Depth: 8, PrefetchDry: true}, move{}},
		{"busy, reports due: a prefetch carries them", loopState{Running: 4, Depth: 8, Held: 5, ReportsDue: true}, move{Poll: true, Want: 3, Prefetch: true}},
		{"busy, reports due, nothing to ask: alone", loopState{Running: 4, Depth: 2, Held: 2, ReportsDue: true}, move{ReportAlone: true}},
		{"busy, reports due, poll out: the poll has them", loopState{Running: 4, Depth: 2, Held: 2, ReportsDue: true, PollOut: true}, move{}},

		// Draining and stopping.
		{"cancelled, nothing out: finish", loopState{Free: 2, Cancelled: true}, move{Exiting: true, Finish: true}},
		{"cancelled, held jobs given back", loopState{Running: 1, Held: 2, Cancelled: true}, move{Exiting: true, GiveBack: true}},
		{"cancelled, held jobs given back, then finish", loopState{Free: 1, Held: 2, Cancelled: true}, move{Exiting: true, GiveBack: true, Finish: true}},
		{"exiting, a job runs: wait for it", loopState{Free: 1, Running: 1, Exiting: true}, move{Exiting: true}},
		{"exiting, a poll out: wait for it", loopState{Free: 2, PollOut: true, Exiting: true}, move{Exiting: true}},
		{"exiting, reports out: wait for them", loopState{Free: 2, Sending: 1, Exiting: true}, move{Exiting: true}},
		{"exiting, reports due, no slot free: alone", loopState{Running: 1, Exiting: true, ReportsDue: true}, move{Exiting: true, ReportAlone: true}},
		{"orphaned", loopState{Free: 2, Orphaned: true}, move{Exiting: true, Finish: true}},
		{"idle timeout", loopState{Free: 2, IdleTimeout: time.Minute, IdleFor: time.Minute}, move{Exiting: true, Finish: true}},
		{"idle timeout, but a job runs", loopState{Free: 1, Running: 1, IdleTimeout: time.Minute, IdleFor: time.Hour}, move{Poll: true, Want: 1, Wait: 10 * time.Millisecond}},
		{"idle timeout, but a job is held", loopState{Running: 1, Held: 1, IdleTimeout: time.Minute, IdleFor: time.Hour}, move{}},
		{"walltime over, jobs run: stop them, give back the held", loopState{Running: 2, Held: 1, WalltimeOver: true}, move{Exiting: true, StopJobs: true, GiveBack: true}},
		{"walltime over, nothing runs: finish", loopState{Free: 2, WalltimeOver: true}, move{Exiting: true, Finish: true}},
		{"node broken, a job runs: held ones back, none asked", loopState{Free: 1, Running: 1, Held: 1, Broken: true}, move{Exiting: true, GiveBack: true}},
		{"node broken, nothing runs: finish", loopState{Free: 2, Broken: true}, move{Exiting: true, Finish: true}},

		// Errors from next.
		{"next failed: abort", loopState{Free: 1, Running: 1, NextFailed: true}, move{Exiting: true, Abort: true}},
		{"next failed while orphaned: abort", loopState{Free: 1, Orphaned: true, Exiting: true, NextFailed: true}, move{Exiting: true, Abort: true}},
		{"CLS unreachable, jobs running: drain", loopState{Free: 1, Running: 1, NextFailed: true, Unreachable: true}, move{Exiting: true}},
		{"CLS unreachable, jobs running and held: drain, give back", loopState{Free: 1, Running: 1, Held: 1, NextFailed: true, Unreachable: true}, move{Exiting: true, GiveBack: true}},
		{"CLS unreachable, nothing running: abort", loopState{Free: 1, Held: 1, NextFailed: true, Unreachable: true}, move{Exiting: true, Abort: true}},
		{"next failed as the agent stops: drain", loopState{Free: 1, Running: 1, Cancelled: true, NextFailed: true}, move{Exiting: true}},
		{"next failed as the agent stops, nothing out: finish", loopState{Free: 2, Cancelled: true, NextFailed: true}, move{Exiting: true, Finish: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decide(tc.s); got != tc.want {
				t.Errorf("decide(%+v) =\n\t%+v, want\n\t%+v", tc.s, got, tc.want)
			}
		})
	}
}

// fakeClock is an agent's clock that moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// An agent gives up on an unreachable CLS after Reconnect by its clock: a
// clock moved 4 minutes per failed dial ends a 10-minute Reconnect at the
// third, without waiting 10 minutes.
func TestAgentReconnectDeadlineByClock(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	var dials atomic.Int32
	a := New(Config{Site: "test", Host: "h", OutDir: t.TempDir(), Reconnect: 10 * time.Minute, Now: clock.Now,
		Dial: func(context.Context) (io.ReadWriteCloser, error) {
			dials.Add(1)
			clock.advance(4 * time.Minute)
			return nil, fmt.Errorf("dial unix /nowhere: %w", syscall.ECONNREFUSED)
		}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := a.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "unreachable for 10m0s") {
		t.Fatalf("Run: %v, want the CLS unreachable for 10m0s", err)
	}
	if n := dials.Load(); n != 3 {
		t.Errorf("%d dials, want 3 (at 4, 8 and 12 minutes by the clock)", n)
	}
}

// The walltime an agent says it has left follows its clock: with 59.5 of
// its 60 minutes gone by the clock (moved as it dials), a job expected to
// take 10 minutes no longer fits it and stays queued, while a 10-second one
// runs.
func TestAgentWalltimeByClock(t *testing.T) {
	t.Parallel()
	c := newCLS(t)
	dir := t.TempDir()
	ids := c.submit(protocol.JobSpec{Target: "big", Command: "true", Cwd: dir, Est: 600},
		protocol.JobSpec{Target: "small", Command: "true", Cwd: dir, Est: 10})
	big, small := ids[0], ids[1]
	clock := &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	var once sync.Once
	dial := func(ctx context.Context) (io.ReadWriteCloser, error) {
		once.Do(func() { clock.advance(59*time.Minute + 30*time.Second) })
		return c.dial(ctx)
	}
	startAgentCfg(t, c, Config{Dial: dial, Site: "test", Host: "h", Slots: 1, OutDir: t.TempDir(), Walltime: time.Hour, Now: clock.Now})
	if e := c.wait(small)[small]; e.State != "D" {
		t.Fatalf("small job ended %+v", e)
	}
	if st := stateOf(t, c, big); st != "Q" {
		t.Errorf("the 10-minute job is %s, want Q: it does not fit the 30 s the agent has left by its clock", st)
	}
}

// TestAgentStopsJobsAtWalltime: a job with no estimate still runs when
// its placeholder's walltime is over by the agent's clock; the agent stops
// it (before the batch system kills both, SGE without a word), reports it
// interrupted for the walltime, with words that say what to do, and exits.
// The job is queued again, its attempt counted.
func TestAgentStopsJobsAtWalltime(t *testing.T) {
	t.Parallel()
	c := newCLS(t)
	dir := t.TempDir()
	id := c.submit(protocol.JobSpec{Target: "long", Command: "touch started && exec sleep 600", Cwd: dir})[0]
	clock := &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	a := New(Config{Dial: c.dial, Site: "test", Host: "h", Slots: 1, OutDir: t.TempDir(), Walltime: time.Hour, Now: clock.Now})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	for !exists(filepath.Join(dir, "started")) {
		if ctx.Err() != nil {
			t.Fatal("the job did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	clock.advance(time.Hour)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("agent: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the agent neither stopped its job nor exited after its walltime")
	}
	d, err := c.store.Inspect().Job(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if d.State != "Q" || len(d.History) != 1 || d.History[0].Reason != protocol.WalltimeReason(time.Hour) {
		t.Fatalf("job %s, history %+v; want Q with attempt 1 stopped for the walltime", d.State, d.History)
	}
}

// TestAgentOrphanedWhilePolling: an agent that exits when orphaned
// (--orphan-exit, a local placeholder) and is orphaned while its poll is
// parked at the CLS does not start the job that poll brings back (after
// cls stop --keep-running its poll is sent again to the next CLS): it
// gives the job back and exits.
func TestAgentOrphanedWhilePolling(t *testing.T) {
	t.Parallel()
	c := newCLS(t)
	dir := t.TempDir()
	cfg := agentConfig(t, 1)
	cfg.Dial = c.dial
	cfg.ExitWhenOrphaned = true
	a := New(cfg)
	var ppid atomic.Int64
	ppid.Store(100)
	a.getppid = func() int { return int(ppid.Load()) }
	done := make(chan error, 1)
	go func() { done <- a.Run(context.Background()) }()
	deadline := time.Now().Add(time.Minute)
	for c.count(protocol.OpNext.Name, false) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no poll in a minute")
		}
		time.Sleep(time.Millisecond)
	}
	ppid.Store(1) // the parent is gone; the poll is parked for 5 s at most
	ran := filepath.Join(dir, "ran")
	id := c.submit(protocol.JobSpec{Target: "t", Command: "touch " + ran, Cwd: dir})[0]
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("agent: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the orphaned agent did not exit in a minute")
	}
	if exists(ran) {
		t.Error("the orphaned agent ran a job its parked poll brought")
	}
	if s := stateOf(t, c, id); s == "E" || s == "D" || s == "F" {
		t.Errorf("job state %s after the orphaned agent exited; want it given back", s)
	}
}

// TestAgentStoppedByCLS: an agent whose context ends with the cause
// ErrCLSStopped (its CLS stopping sent it protocol.CLSStopSignal) reports
// the jobs it stops as stopped by the CLS, so they run again without the
// attempt counted; one stopped otherwise reports them interrupted.
func TestAgentStoppedByCLS(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cause error
		want  string
	}{
		{ErrCLSStopped, protocol.ReasonCLSStopped},
		{context.Canceled, "interrupted: its placeholder was stopped"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			t.Parallel()
			c := newCLS(t)
			dir := t.TempDir()
			cfg := agentConfig(t, 1)
			cfg.Dial = c.dial
			a := New(cfg)
			ctx, cancel := context.WithCancelCause(context.Background())
			done := make(chan error, 1)
			go func() { done <- a.Run(ctx) }()
			id := c.submit(protocol.JobSpec{Target: "t", Command: "touch started; sleep 600", Cwd: dir})[0]
			waitUntil(t, 2*time.Minute, func() error {
				_, err := os.Stat(filepath.Join(dir, "started"))
				return err
			})
			cancel(tc.cause)
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Fatal("the agent did not stop in a minute")
			}
			info, err := c.store.Inspect().Job(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if info.State != "Q" || len(info.History) != 1 || info.History[0].Reason != tc.want {
				t.Errorf("job %s, history %+v; want it queued again, its attempt stopped %q", info.State, info.History, tc.want)
			}
		})
	}
}
